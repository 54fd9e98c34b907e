/* Training and serving jobs as their metrics show them, and jobs.json:
 * strings from outside (a board's id and stall message in its metrics, a
 * re-plan's reason) are JSON-escaped, so the file stays one valid document
 * whose values are exactly what was sent. */
#include "sky_test.h"

#include "sky_jobstat.h"
#include "sky_json.h"

#include <stdio.h>
#include <string.h>

static sky_jobstat g_t;
static char g_out[1 << 16];

SKY_TEST(hostile_strings_in_metrics_stay_inside_their_json_values)
{
	memset(&g_t, 0, sizeof g_t);
	/* a board id that would close its value and forge members, a stall
	 * message with a newline, a terminal escape and a "<3>" */
	const char *m = "{\"v\":1,\"stage\":0,\"board\":\"b1\\\",\\\"done\\\":true,\\\"x\\\":\\\"\","
			"\"step\":3,\"epoch\":2,\"steps\":9,\"stall\":{\"mb\":0},"
			"\"message\":\"line\\n<3>forged\\u001b[2J \\\"q\\\" \\\\\"}";
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", m, strlen(m), 1.0), 0);
	sky_jobstat_replan rp = {.job = "j1", .generation = 2, .epoch = 3, .replayed = -1};
	snprintf(rp.reason, sizeof rp.reason, "board \"b2\"\n offline\x07");
	sky_jobstat_add_replan(&g_t, &rp);
	int n = sky_jobstat_to_json(&g_t, g_out, sizeof g_out);
	SKY_EXPECT(n > 0);
	/* one line: the only newline ends the document */
	SKY_EXPECT_MSG(strchr(g_out, '\n') == g_out + n - 1, "%s", g_out);
	for (int i = 0; i < n - 1; i++)
		SKY_EXPECT_MSG((unsigned char)g_out[i] >= 0x20, "byte %d of %s", i, g_out);
	cJSON *doc = sky_json_parse(g_out, (size_t)n, NULL);
	SKY_EXPECT_MSG(doc != NULL, "not JSON: %s", g_out);
	if (!doc)
		return;
	const cJSON *job = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "jobs"), 0);
	const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(job, "stages"), 0);
	const cJSON *re = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(job, "replans"), 0);
	const cJSON *board = cJSON_GetObjectItemCaseSensitive(st, "board");
	const cJSON *stall = cJSON_GetObjectItemCaseSensitive(st, "stall");
	const cJSON *reason = cJSON_GetObjectItemCaseSensitive(re, "reason");
	SKY_EXPECT(cJSON_IsString(board) && !strcmp(board->valuestring, "b1\",\"done\":true,\"x\":\""));
	SKY_EXPECT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(st, "done")));
	SKY_EXPECT(cJSON_GetObjectItemCaseSensitive(st, "x") == NULL);
	SKY_EXPECT(cJSON_IsString(stall) &&
		   !strcmp(stall->valuestring, "line\n<3>forged\x1b[2J \"q\" \\"));
	SKY_EXPECT(cJSON_IsString(reason) && !strcmp(reason->valuestring, rp.reason));
	sky_json_free(doc);
}
