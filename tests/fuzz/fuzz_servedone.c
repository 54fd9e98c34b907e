/* libFuzzer harness: a serving stage's done report, its ready and its
 * replay window.
 *
 * The input, first as a done report (runtime/sky_servebatch.h): parsed or
 * refused, never a crash; a parsed one is within its bounds and, fed to a
 * flight table of batches in flight, removes at most one entry (counted
 * done, or stray). Then as a ready (sky_infer_ready_parse, which
 * the first stage and skyplan share): parsed within its bounds, or refused
 * with a reason and no epoch. Then as a stream of frames to the replay window
 * (runtime/sky_servewin.h): each 9 bytes a sender (one of three) and a
 * batch number; a frame is expected only when its batch is above what that
 * sender's window last took, the step expected is the batch itself, and a
 * frame taken once is refused ever after. The JSON pool is empty
 * afterwards. */
#include "sky_infermsg.h"
#include "sky_json.h"
#include "sky_servebatch.h"
#include "sky_servewin.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_servebatch_flight f;
	static sky_servewin w;
	int64_t ep = 0;
	uint64_t batch = 0;
	int n = 0;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_servebatch_done_parse(data, size, &ep, &batch, &n, &d);
	if (rc == 0) {
		if (ep < 0 || batch > (1ull << 53) || n < 0 || n > 65535 || size > SKY_SERVE_DONE_MAX_BYTES)
			abort();
		sky_servebatch_init(&f);
		for (uint64_t i = 0; i < 70; i++) /* past the table: the oldest go */
			sky_servebatch_sent(&f, batch + i - 3, (double)i);
		int was = f.n;
		int hit = sky_servebatch_done(&f, batch);
		if (f.n != was - hit || f.done + f.stray != 1 || f.n > SKY_SERVEBATCH_MAX)
			abort();
	} else if (rc != SKY_EFORMAT || !d.msg[0] || ep || batch || n) {
		abort();
	}
	/* the same bytes as a serving stage's ready (both readers' parse) */
	sky_diag_clear(&d);
	rc = sky_infer_ready_parse(data, size, &ep, &d);
	if (rc == 0 ? (ep < 0 || ep > SKY_JSON_INT_MAX || size > SKY_SERVE_READY_MAX_BYTES)
		    : (rc != SKY_EFORMAT || !d.msg[0] || ep))
		abort();
	static const char *const who[3] = {"b1", "b2", ""};
	uint64_t last[3] = {0, 0, 0};
	int any[3] = {0, 0, 0};
	sky_servewin_init(&w, 7);
	for (size_t at = 0; at + 9 <= size; at += 9) {
		int s = data[at] % 3;
		uint64_t b = 0;
		for (int i = 0; i < 8; i++)
			b = b << 8 | data[at + 1 + i];
		int64_t want = 0;
		int e = sky_servewin_expect(&w, who[s], data[at] & 0x80 ? 6 : 7, b, &want, NULL);
		int ok = !(data[at] & 0x80) && b <= (uint64_t)INT64_MAX && (!any[s] || b > last[s]);
		if ((e == 0) != ok || (e == 0 && want != (int64_t)b) || (e != 0 && want != -1))
			abort();
		if (e == 0 && !(data[at] & 0x40)) { /* the frame verified */
			if (sky_servewin_take(&w, who[s], b) != 0)
				abort();
			last[s] = b, any[s] = 1;
			if (sky_servewin_expect(&w, who[s], 7, b, &want, NULL) == 0)
				abort();
		}
	}
	if (sky_json_pool_used() != 0)
		abort();
	return 0;
}
