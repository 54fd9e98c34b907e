/* libFuzzer harness: readiness and answers of a serving job as skyplan
 * takes them (planner/servefault.c), whose sender is the topic's last
 * level.
 *
 * The input is a list of messages, each a 1-byte op, a 1-byte length and
 * that many bytes of payload (the last one takes what is left). The op's
 * low 2 bits pick the sender (the plan's boards b0, b1, b2 or bx, a board
 * outside the plan), the next 2 a stage (3 is out of range) and bit 7
 * makes it an answer to a client instead of a ready. Whatever comes:
 *   - a ready counts only from stage k's own board, for the job's epoch,
 *     once per stage; from any other sender it is refused (SKY_EAUTH) and
 *     counted, before its payload is read; n_ready is the number of stages
 *     that said ready and never exceeds the stages;
 *   - an answer from bx or from the middle stage is refused before it is
 *     parsed (only the last stage answers with logits, the first stage or
 *     the planner with errors);
 * and the JSON pool is empty afterwards. */
#include "sky_json.h"
#include "sky_servefault.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_servefault f;
	static const char *const boards[3] = {"b0", "b1", "b2"};
	static const char *const who[4] = {"b0", "b1", "b2", "bx"};
	sky_servefault_init(&f);
	if (sky_servefault_follow(&f, "j", 7, 3, 8, 0, 0) != 0 ||
	    sky_servefault_boards(&f, "j", boards, 3) != 0)
		abort();
	sky_sf_job *j = sky_servefault_job(&f, "j");
	if (!j)
		abort();
	for (size_t at = 0; at + 2 <= size;) {
		uint8_t op = data[at];
		size_t len = data[at + 1];
		at += 2;
		if (len > size - at)
			len = size - at;
		const uint8_t *p = data + at;
		at += len;
		int s = op & 3, k = (op >> 2) & 3;
		long refused = j->refused_sender;
		if (op & 0x80) {
			double lost = 0;
			int rc = sky_servefault_on_resp(&f, "j", "c", who[s], p, len, 1.0, &lost);
			if ((s == 1 || s == 3) && (rc != SKY_EAUTH || j->refused_sender != refused + 1))
				abort();
			if (rc != SKY_EAUTH && j->refused_sender != refused)
				abort();
			continue;
		}
		int was = k < 3 ? j->ready[k] : 0, n = j->n_ready;
		int rc = sky_servefault_on_ready(&f, "j", k, who[s], p, len);
		if (k == 3) {
			if (rc != 0 || j->n_ready != n || j->refused_sender != refused)
				abort();
			continue;
		}
		if (s != k) { /* not stage k's board: refused unread, counted */
			if (rc != SKY_EAUTH || j->refused_sender != refused + 1 || j->n_ready != n)
				abort();
			continue;
		}
		if (rc == 1 && (was || j->n_ready != n + 1 || !j->ready[k]))
			abort();
		if (rc == 0 && j->n_ready != n)
			abort();
		if (rc != 0 && rc != 1)
			abort();
	}
	int sum = 0;
	for (int k = 0; k < 3; k++)
		sum += j->ready[k] != 0;
	if (j->n_ready != sum || j->n_ready > 3 || sky_json_pool_used() != 0)
		abort();
	return 0;
}
