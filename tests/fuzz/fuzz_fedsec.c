/* libFuzzer harness: the messages of a secure federated round
 * (runtime/wire/sky_fedsecmsg.h), as skyplan reads an owner's fedshr and
 * an owner reads the planner's fedrelay.
 *
 * Whatever the input: it decodes or is refused with SKY_EFORMAT or
 * SKY_ERANGE and a reason. A decoded message is within its bounds (a
 * known phase, at most SKY_FED_MAX_OWNERS entries in every list, blobs of
 * the size their phase needs, ids that are topic segments and distinct
 * within a list), encodes again, and that encoding decodes to the same
 * message. The JSON pool is empty afterwards. */
#include "sky_fedsecmsg.h"
#include "sky_json.h"
#include "sky_topics.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_ids(const char (*ids)[SKY_FED_ID_CAP], int n)
{
	if (n < 0 || n > SKY_FED_MAX_OWNERS)
		abort();
	for (int i = 0; i < n; i++) {
		if (!sky_topic_segment_ok(ids[i]))
			abort();
		for (int j = 0; j < i; j++)
			if (strcmp(ids[i], ids[j]) == 0)
				abort();
	}
}

static void check_items(const sky_fedsec_item *it, int n)
{
	if (n < 0 || n > SKY_FED_MAX_OWNERS)
		abort();
	for (int i = 0; i < n; i++) {
		if (!sky_topic_segment_ok(it[i].id) || it[i].len > SKY_FEDSEC_BLOB_MAX)
			abort();
		for (int j = 0; j < i; j++)
			if (strcmp(it[i].id, it[j].id) == 0 || it[i].len != it[j].len)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_fedsec_msg m, m2;
	static char buf[2 * SKY_FEDSEC_MAX_BYTES];
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_fedsec_msg_decode((const char *)data, size, &m, &d);
	if (rc != 0) {
		if ((rc != SKY_EFORMAT && rc != SKY_ERANGE) || !d.msg[0])
			abort();
	} else {
		if (m.phase < SKY_FEDSEC_SHARES || m.phase > SKY_FEDSEC_OPEN ||
		    !sky_topic_segment_ok(m.job))
			abort();
		check_items(m.items, m.nitems);
		check_items(m.seeds, m.nseeds);
		check_ids((const char(*)[SKY_FED_ID_CAP])m.u1, m.nu1);
		check_ids((const char(*)[SKY_FED_ID_CAP])m.u2, m.nu2);
		check_ids((const char(*)[SKY_FED_ID_CAP])m.dropped, m.ndropped);
		int n = sky_fedsec_msg_encode(&m, buf, sizeof buf);
		if (n <= 0 || sky_fedsec_msg_decode(buf, (size_t)n, &m2, NULL) != 0 ||
		    memcmp(&m, &m2, sizeof m) != 0)
			abort();
	}
	if (sky_json_pool_used() != 0)
		abort();
	return 0;
}
