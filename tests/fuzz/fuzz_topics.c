/* libFuzzer harness: the parsers of received topics (sky_topics.h), whose
 * identity levels decide who sent a message. Whatever the bytes, a parser
 * reads only inside them; what it accepts has only legal segments and
 * builds back to the very same topic (so no two topics parse alike and a
 * sender level cannot be smuggled in another segment); the size class of
 * an accepted stage topic is its leaf's. */
#include "sky_topics.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *t = malloc(size + 1);
	char buf[SKY_TOPIC_BUF];
	if (!t)
		return 0;
	memcpy(t, data, size);
	t[size] = '\0';
	sky_topic_stage_msg m;
	if (sky_topic_parse_stage(t, size, &m) == 0) {
		int rc = m.site[0] ? sky_topic_site_stage(buf, sizeof buf, m.site, m.job, m.stage,
							  m.leaf, m.sender)
				   : sky_topic_stage_leaf(buf, sizeof buf, m.job, m.stage, m.leaf,
							  m.sender);
		if (rc != 0 || strlen(buf) != size || memcmp(buf, t, size) != 0 ||
		    !sky_topic_segment_ok(m.sender) || !sky_topic_segment_ok(m.job))
			abort();
		if (!strcmp(m.leaf, SKY_TOPIC_DONE) && sky_topic_max_bytes(t) != SKY_SERVE_DONE_MAX_BYTES)
			abort();
	}
	static const char *const pairs[] = {SKY_TOPIC_REQ, SKY_TOPIC_RESP, SKY_TOPIC_REPLAY};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		char job[SKY_TOPIC_SEGMENT_MAX + 1], a[SKY_TOPIC_SEGMENT_MAX + 1],
			b[SKY_TOPIC_SEGMENT_MAX + 1];
		if (sky_topic_parse_job_pair(t, size, pairs[i], job, sizeof job, a, sizeof a, b,
					     sizeof b) != 0)
			continue;
		if (sky_topic_job_pair(buf, sizeof buf, job, pairs[i], a, b) != 0 ||
		    strlen(buf) != size || memcmp(buf, t, size) != 0 || sky_topic_max_bytes(t) == 0)
			abort();
	}
	char job[SKY_TOPIC_SEGMENT_MAX + 1], who[SKY_TOPIC_SEGMENT_MAX + 1];
	if (sky_topic_parse_job_to(t, size, SKY_TOPIC_METRICS, job, sizeof job, who, sizeof who) == 0 &&
	    (sky_topic_job_to(buf, sizeof buf, job, SKY_TOPIC_METRICS, who) != 0 ||
	     strlen(buf) != size || memcmp(buf, t, size) != 0 ||
	     sky_topic_max_bytes(t) != SKY_METRICS_MAX_BYTES))
		abort();
	(void)sky_topic_max_bytes(t);
	free(t);
	return 0;
}
