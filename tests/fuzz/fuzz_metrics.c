/* libFuzzer harness: the planner's metrics parser (planner/jobstat.c) and
 * jobs.json. Any bytes as a stage's metrics: taken or refused, never a
 * crash; the table stays within its bounds, and jobs.json written after it
 * is one line of valid JSON whose board and stall values are exactly the
 * row's (nothing from outside escapes its string). The JSON pool is empty
 * afterwards. */
#include "sky_jobstat.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_jobstat t;
	static char out[1 << 16];
	memset(&t, 0, sizeof t);
	int rc = sky_jobstat_on_metrics(&t, "j1", "b1", 0, 1, (const char *)data, size, 1.0);
	if (rc != 0 && rc != SKY_EFORMAT)
		abort();
	if (t.n < 0 || t.n > SKY_JOBSTAT_MAX || (rc == 0 && t.n != 1) || (rc != 0 && t.n != 0))
		abort();
	int n = sky_jobstat_to_json(&t, out, sizeof out);
	if (n <= 0 || memchr(out, '\n', (size_t)n - 1) != NULL)
		abort();
	cJSON *doc = sky_json_parse(out, (size_t)n, NULL);
	if (!doc)
		abort();
	if (rc == 0) {
		const cJSON *job = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "jobs"), 0);
		const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(job, "stages"), 0);
		const cJSON *b = cJSON_GetObjectItemCaseSensitive(st, "board");
		const cJSON *sl = cJSON_GetObjectItemCaseSensitive(st, "stall");
		if (!cJSON_IsString(b) || !cJSON_IsString(sl))
			abort();
		/* exact unless the row held bytes that are not UTF-8 (shown as U+FFFD) */
		int utf8 = 1;
		for (const unsigned char *c = (const unsigned char *)t.row[0].board; *c; c++)
			utf8 &= *c < 0x80;
		for (const unsigned char *c = (const unsigned char *)t.row[0].stall; *c; c++)
			utf8 &= *c < 0x80;
		if (utf8 && (strcmp(b->valuestring, t.row[0].board) || strcmp(sl->valuestring, t.row[0].stall)))
			abort();
	}
	sky_json_free(doc);
	if (sky_json_pool_used() != 0)
		abort();
	return 0;
}
