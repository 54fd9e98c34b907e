/* The planner's job table (planner/jobstat.c): a metrics row takes its
 * board, stage and epoch from the caller (the topic and the plan), never
 * from the payload; refusals are counted per job and reason and written
 * into jobs.json, for a job without metrics too; strings from outside (a
 * stall message, a re-plan's reason) are JSON-escaped, so the file stays
 * one valid document whose values are exactly what was sent. */
#include "sky_jobstat.h"
#include "sky_json.h"
#include "sky_test.h"

#include <stdio.h>
#include <string.h>

static sky_jobstat g_t;
static char g_out[1 << 16];

SKY_TEST(a_metrics_row_takes_board_stage_and_epoch_from_the_caller)
{
	memset(&g_t, 0, sizeof g_t);
	const char *m = "{\"v\":1,\"stage\":0,\"board\":\"evil\\n<3>x\",\"epoch\":99,\"step\":4,"
			"\"steps\":9,\"done\":true}";
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", "b2", 1, 7, m, strlen(m), 1.0), 0);
	SKY_EXPECT_EQ(g_t.n, 1);
	SKY_EXPECT(!strcmp(g_t.row[0].board, "b2") && g_t.row[0].stage == 1 && g_t.row[0].epoch == 7 &&
		   g_t.row[0].step == 4);
	/* a board id that is not a topic segment, or no stage: not taken */
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", "a/b", 1, 7, m, strlen(m), 1.0), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", "b2", -1, 7, m, strlen(m), 1.0), SKY_EFORMAT);
	static char out[1 << 16];
	SKY_EXPECT(sky_jobstat_to_json(&g_t, out, sizeof out) > 0);
	SKY_EXPECT(strstr(out, "evil") == NULL);
}

SKY_TEST(refusals_are_counted_per_job_and_reason_in_jobs_json)
{
	memset(&g_t, 0, sizeof g_t);
	const char *m = "{\"v\":1,\"step\":1}";
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", "b1", 0, 1, m, strlen(m), 1.0), 0);
	for (int i = 0; i < 3; i++)
		sky_jobstat_refuse(&g_t, "j1", "metrics_not_stage", 2.0);
	sky_jobstat_refuse(&g_t, "j1", "ckpt_not_holder", 2.0);
	sky_jobstat_refuse(&g_t, "j2", "answer_not_stage", 2.0); /* no metrics of j2 */
	SKY_EXPECT_EQ(sky_jobstat_refused_n(&g_t, "j1", "metrics_not_stage"), 3);
	SKY_EXPECT_EQ(sky_jobstat_refused_n(&g_t, "j1", "answer_not_stage"), 0);
	static char out[1 << 16];
	int n = sky_jobstat_to_json(&g_t, out, sizeof out);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_MSG(strstr(out, "\"refused\":{\"metrics_not_stage\":3,\"ckpt_not_holder\":1}") != NULL,
		       "%s", out);
	SKY_EXPECT_MSG(strstr(out, "{\"job\":\"j2\",") && strstr(out, "\"refused\":{\"answer_not_stage\":1}"),
		       "%s", out);
	sky_diag d;
	cJSON *doc = sky_json_parse(out, (size_t)n, &d);
	SKY_EXPECT_MSG(doc != NULL, "jobs.json does not parse: %s", out);
	sky_json_free(doc);
	/* a job id that is not a segment is not counted */
	sky_jobstat_refuse(&g_t, "a\"b", "metrics_not_stage", 3.0);
	SKY_EXPECT_EQ(g_t.n_refused, 2);
}

SKY_TEST(hostile_strings_in_metrics_stay_inside_their_json_values)
{
	memset(&g_t, 0, sizeof g_t);
	/* a stall message with a newline, a terminal escape and a "<3>", a
	 * board member the table must ignore (the board is the topic's) */
	const char *m = "{\"v\":1,\"stage\":0,\"board\":\"b1\\\",\\\"done\\\":true,\\\"x\\\":\\\"\","
			"\"step\":3,\"epoch\":2,\"steps\":9,\"stall\":{\"mb\":0},"
			"\"message\":\"line\\n<3>forged\\u001b[2J \\\"q\\\" \\\\\"}";
	SKY_EXPECT_EQ(sky_jobstat_on_metrics(&g_t, "j1", "b1", 0, 2, m, strlen(m), 1.0), 0);
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
	SKY_EXPECT(cJSON_IsString(board) && !strcmp(board->valuestring, "b1"));
	SKY_EXPECT(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(st, "done")));
	SKY_EXPECT(cJSON_GetObjectItemCaseSensitive(st, "x") == NULL);
	SKY_EXPECT(cJSON_IsString(stall) &&
		   !strcmp(stall->valuestring, "line\n<3>forged\x1b[2J \"q\" \\"));
	SKY_EXPECT(cJSON_IsString(reason) && !strcmp(reason->valuestring, rp.reason));
	sky_json_free(doc);
}
