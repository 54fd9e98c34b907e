/* The planner's job table (planner/jobstat.c): a metrics row takes its
 * board, stage and epoch from the caller (the topic and the plan), never
 * from the payload; refusals are counted per job and reason and written
 * into jobs.json, for a job without metrics too. */
#include "sky_jobstat.h"
#include "sky_json.h"
#include "sky_test.h"

#include <string.h>

static sky_jobstat g_t;

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
