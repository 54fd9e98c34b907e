/* The followed jobs' state files (planner/jobstate.c): a round trip keeps
 * everything a restarted planner needs; a damaged, foreign or missing file
 * is an error naming it, never a crash. */
#include "sky_test.h"

#include "sky_chunk.h"
#include "sky_file.h"
#include "sky_jobstate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_dir[600];
static sky_jobstate g_a, g_b;

static void fresh(const char *name)
{
	snprintf(g_dir, sizeof g_dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(g_dir, 0700);
}

static void sample(sky_jobstate *js, const char *job)
{
	static const char *req =
		"{\"job\":\"%s\",\"model\":\"tiny\",\"layers\":4,\"micro_batches\":2,\"algo\":\"even\","
		"\"min_boards\":3,\"task\":\"train\",\"steps\":40,\"optim\":\"adamw\",\"lr\":0.001,"
		"\"seed\":7,\"checkpoint_every\":4,\"plaintext_frames\":true,\"link_blind\":true}";
	char buf[512];
	snprintf(buf, sizeof buf, req, job);
	memset(js, 0, sizeof *js);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, strlen(buf), &js->req, NULL), 0);
	js->epoch = 9;
	js->generation = 3;
	js->predicted_s = 0.125;
	js->paused = 1;
	snprintf(js->pause_why, sizeof js->pause_why, "resuming after board \"b2\" offline");
	js->n_stages = 2;
	snprintf(js->board[0], sizeof js->board[0], "b1");
	snprintf(js->board[1], sizeof js->board[1], "b3");
	js->first[0] = 0, js->last[0] = 4, js->first[1] = 5, js->last[1] = 7;
}

SKY_TEST(a_round_trip_keeps_what_a_restart_needs)
{
	char path[700];
	fresh("rt");
	sample(&g_a, "j1");
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	SKY_EXPECT_EQ(sky_jobstate_path(g_dir, "j1", path, sizeof path), 0);
	SKY_EXPECT_EQ(sky_file_mode(path), 0600);
	SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, NULL), 0);
	SKY_EXPECT(strcmp(g_b.req.job, "j1") == 0 && g_b.req.train && g_b.req.steps == 40 &&
		   g_b.req.ckpt_every == 4 && g_b.req.seed == 7 && g_b.req.min_boards == 3 &&
		   g_b.req.plaintext && g_b.req.link_blind && g_b.req.micro_batches == 2 &&
		   strcmp(g_b.req.algo, "even") == 0 && g_b.req.lr == 0.001);
	SKY_EXPECT_EQ(g_b.epoch, 9);
	SKY_EXPECT_EQ(g_b.generation, 3);
	SKY_EXPECT_EQ(g_b.paused, 1);
	SKY_EXPECT(strcmp(g_b.pause_why, g_a.pause_why) == 0);
	SKY_EXPECT_NEAR(g_b.predicted_s, 0.125, 1e-12);
	SKY_EXPECT_EQ(g_b.n_stages, 2);
	SKY_EXPECT(strcmp(g_b.board[1], "b3") == 0 && g_b.first[1] == 5 && g_b.last[1] == 7);
}

static int g_seen;
static int count(void *ctx, const char *path)
{
	(void)ctx;
	g_seen += strstr(path, SKY_JOBSTATE_SUFFIX) != NULL;
	return 0;
}

SKY_TEST(every_state_file_is_listed_and_a_done_job_removed)
{
	fresh("list");
	g_seen = 0;
	SKY_EXPECT_EQ(sky_jobstate_list(g_dir, count, NULL), 0); /* no jobs/ yet: none */
	SKY_EXPECT_EQ(g_seen, 0);
	sample(&g_a, "ja");
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	sample(&g_a, "jb");
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	char other[700];
	snprintf(other, sizeof other, "%s/jobs/ja.log.jsonl", g_dir);
	sky_file_write(other, "{}\n", 3, 0644);
	SKY_EXPECT_EQ(sky_jobstate_list(g_dir, count, NULL), 0);
	SKY_EXPECT_EQ(g_seen, 2);
	SKY_EXPECT_EQ(sky_jobstate_remove(g_dir, "ja"), 0);
	g_seen = 0;
	SKY_EXPECT_EQ(sky_jobstate_list(g_dir, count, NULL), 0);
	SKY_EXPECT_EQ(g_seen, 1);
}

SKY_TEST(damaged_foreign_or_missing_files_are_errors_naming_them)
{
	char path[700];
	sky_diag d;
	fresh("bad");
	sample(&g_a, "j1");
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	sky_jobstate_path(g_dir, "j1", path, sizeof path);
	static char good[SKY_JOBSTATE_MAX_BYTES];
	long n = sky_file_read(path, good, sizeof good - 1);
	SKY_EXPECT(n > 0);
	/* cut short at every length: never a crash, always the file named */
	for (long cut = 0; cut < n; cut += 7) {
		SKY_EXPECT_EQ(sky_file_write(path, good, (size_t)cut, 0600), 0);
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "damaged"), "cut %ld: %s", cut,
			       d.msg);
	}
	const char *bad[] = {
		"[1,2]",
		/* a request that does not parse */
		"{\"v\":1,\"job\":\"j1\",\"req\":\"{\\\"job\\\":\\\"j1\\\"}\",\"epoch\":1,\"generation\":1,"
		"\"predicted_step_s\":0,\"paused\":false,\"pause_why\":\"\",\"stages\":[{\"board\":\"b1\","
		"\"first\":0,\"last\":7}]}",
		/* another job's state under this name */
		"{\"v\":1,\"job\":\"j2\",\"req\":\"{\\\"job\\\":\\\"j2\\\",\\\"model\\\":\\\"tiny\\\","
		"\\\"task\\\":\\\"train\\\"}\",\"epoch\":1,\"generation\":1,\"predicted_step_s\":0,"
		"\"paused\":false,\"pause_why\":\"\",\"stages\":[{\"board\":\"b1\",\"first\":0,\"last\":7}]}",
		/* a job without checkpoints is never followed */
		"{\"v\":1,\"job\":\"j1\",\"req\":\"{\\\"job\\\":\\\"j1\\\",\\\"model\\\":\\\"tiny\\\"}\","
		"\"epoch\":1,\"generation\":1,\"predicted_step_s\":0,\"paused\":false,\"pause_why\":\"\","
		"\"stages\":[{\"board\":\"b1\",\"first\":0,\"last\":7}]}",
		/* a stage range backwards, a board id with a slash, no stages */
		"{\"v\":1,\"job\":\"j1\",\"req\":\"{\\\"job\\\":\\\"j1\\\",\\\"model\\\":\\\"tiny\\\","
		"\\\"task\\\":\\\"train\\\"}\",\"epoch\":1,\"generation\":1,\"predicted_step_s\":0,"
		"\"paused\":false,\"pause_why\":\"\",\"stages\":[{\"board\":\"b1\",\"first\":5,\"last\":2}]}",
		"{\"v\":1,\"job\":\"j1\",\"req\":\"{\\\"job\\\":\\\"j1\\\",\\\"model\\\":\\\"tiny\\\","
		"\\\"task\\\":\\\"train\\\"}\",\"epoch\":1,\"generation\":1,\"predicted_step_s\":0,"
		"\"paused\":false,\"pause_why\":\"\",\"stages\":[{\"board\":\"b/1\",\"first\":0,\"last\":7}]}",
		"{\"v\":1,\"job\":\"j1\",\"req\":\"{\\\"job\\\":\\\"j1\\\",\\\"model\\\":\\\"tiny\\\","
		"\\\"task\\\":\\\"train\\\"}\",\"epoch\":1,\"generation\":1,\"predicted_step_s\":0,"
		"\"paused\":false,\"pause_why\":\"\",\"stages\":[]}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		SKY_EXPECT_EQ(sky_file_write(path, bad[i], strlen(bad[i]), 0600), 0);
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "damaged"), "%zu: %s", i, d.msg);
	}
	sky_file_remove(path);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "missing"), "%s", d.msg);
}

/* a serving job: its request (model hash, clients, batch), its plan's hash
 * and every stage's slice come back; one without them is refused */
static void sample_serving(sky_jobstate *js)
{
	static const char *req =
		"{\"job\":\"sv\",\"model\":\"tiny\",\"layers\":4,\"algo\":\"even\",\"task\":\"infer\","
		"\"weights\":\"%064d\",\"serve_batch\":4,\"wait_ms\":3,\"queue\":32,"
		"\"clients\":[\"sky-client-t\"]}";
	char buf[512];
	snprintf(buf, sizeof buf, req, 7);
	memset(js, 0, sizeof *js);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, strlen(buf), &js->req, NULL), 0);
	js->epoch = 4;
	js->generation = 1;
	js->n_stages = 2;
	snprintf(js->board[0], sizeof js->board[0], "b1");
	snprintf(js->board[1], sizeof js->board[1], "b2");
	js->first[0] = 0, js->last[0] = 4, js->first[1] = 5, js->last[1] = 9;
	memset(js->plan_sha256, 'a', 64);
	memset(js->slice[0], 'b', 64);
	memset(js->slice[1], 'c', 64);
	js->slice_bytes[0] = 1000, js->slice_bytes[1] = 2000;
}

SKY_TEST(a_serving_job_round_trips_with_its_plan_and_slices)
{
	char path[700];
	sky_diag d;
	fresh("serve");
	sample_serving(&g_a);
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	sky_jobstate_path(g_dir, "sv", path, sizeof path);
	SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, NULL), 0);
	SKY_EXPECT(g_b.req.infer && g_b.req.serve_batch == 4 && g_b.req.queue == 32 &&
		   g_b.req.wait_ms == 3 && g_b.req.n_clients == 1 &&
		   strcmp(g_b.req.clients[0], "sky-client-t") == 0 &&
		   strcmp(g_b.req.weights, g_a.req.weights) == 0);
	SKY_EXPECT(g_b.epoch == 4 && g_b.n_stages == 2 && strcmp(g_b.plan_sha256, g_a.plan_sha256) == 0 &&
		   strcmp(g_b.slice[1], g_a.slice[1]) == 0 && g_b.slice_bytes[1] == 2000 &&
		   g_b.first[1] == 5 && g_b.last[1] == 9);
	/* without its plan's hash, or with a stage that names no slice: refused */
	static char good[SKY_JOBSTATE_MAX_BYTES], bad[SKY_JOBSTATE_MAX_BYTES];
	long n = sky_file_read(path, good, sizeof good - 1);
	SKY_EXPECT(n > 0);
	good[n] = '\0';
	const char *cut[] = {"\"plan_sha256\"", "\"slice\"", "\"slice_bytes\""};
	for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
		snprintf(bad, sizeof bad, "%s", good);
		char *k = strstr(bad, cut[i]);
		SKY_EXPECT(k != NULL);
		if (!k)
			continue;
		k[1] = 'x'; /* the key renamed: the field is missing */
		SKY_EXPECT_EQ(sky_file_write(path, bad, strlen(bad), 0600), 0);
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "damaged"), "%zu: %s", i, d.msg);
	}
	/* a serving job that does not re-plan is never followed */
	sample_serving(&g_a);
	g_a.req.no_replan = 1;
	SKY_EXPECT_EQ(sky_jobstate_save(g_dir, &g_a, NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobstate_load(path, &g_b, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "re-plans") != NULL, "%s", d.msg);
}

SKY_TEST(a_stored_file_is_checked_against_its_hash_and_size)
{
	char path[700], hex[65];
	unsigned char sha[32];
	sky_diag d;
	fresh("check");
	snprintf(path, sizeof path, "%s/slice", g_dir);
	SKY_EXPECT_EQ(sky_file_write(path, "0123456789", 10, 0600), 0);
	sky_sha256("0123456789", 10, sha);
	sky_sha256_hex(sha, hex);
	SKY_EXPECT_EQ(sky_jobstate_check_file(path, hex, 10, "slice of stage 0", NULL), 0);
	SKY_EXPECT_EQ(sky_jobstate_check_file(path, hex, -1, "model", NULL), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobstate_check_file(path, hex, 11, "slice of stage 0", &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "10 bytes, 11 expected"), "%s", d.msg);
	SKY_EXPECT_EQ(sky_file_write(path, "0123456788", 10, 0600), 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobstate_check_file(path, hex, 10, "slice of stage 1", &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "slice of stage 1") && strstr(d.msg, "hashes to"), "%s", d.msg);
	sky_file_remove(path);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobstate_check_file(path, hex, 10, "slice of stage 0", &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "missing") != NULL, "%s", d.msg);
}

/* the re-plans of a job's log come back into the table sky fleet status
 * reads, with their time lost to the next commit */
SKY_TEST(replans_come_back_from_the_job_log)
{
	static sky_jobstat t;
	char path[700];
	fresh("replans");
	snprintf(path, sizeof path, "%s/jobs", g_dir);
	sky_file_mkdirs(path, 0700);
	snprintf(path, sizeof path, "%s/jobs/j1.log.jsonl", g_dir);
	const char *log =
		"{\"t\":100.0,\"event\":\"commit\",\"epoch\":3,\"step\":4,\"parts\":4}\n"
		"{\"t\":101.5,\"event\":\"replan\",\"generation\":2,\"epoch\":4,\"from_epoch\":3,"
		"\"reason\":\"board b2 (stage 1) offline\",\"resume_step\":4,\"lost_steps\":1,"
		"\"predicted_step_s\":0.1,\"boards\":\"b1,b2\"}\n"
		"not json at all\n"
		"{\"t\":103.0,\"event\":\"commit\",\"epoch\":4,\"step\":8,\"parts\":3}\n"
		"{\"t\":110.0,\"event\":\"replan\",\"generation\":3,\"epoch\":6,\"from_epoch\":4,"
		"\"reason\":\"board b3 (stage 0) offline\",\"resume_step\":8,\"lost_steps\":0,"
		"\"predicted_step_s\":0.1,\"boards\":\"b1\"}\n";
	SKY_EXPECT_EQ(sky_file_write(path, log, strlen(log), 0644), 0);
	memset(&t, 0, sizeof t);
	SKY_EXPECT_EQ(sky_jobstate_replans(g_dir, "j1", &t), 2);
	SKY_EXPECT_EQ(t.n_replans, 2);
	SKY_EXPECT(strcmp(t.replan[0].job, "j1") == 0 && t.replan[0].generation == 2 &&
		   t.replan[0].epoch == 4 && t.replan[0].resume_step == 4 &&
		   t.replan[0].lost_steps == 1 && t.replan[0].at_unix == 101 &&
		   strcmp(t.replan[0].reason, "board b2 (stage 1) offline") == 0);
	SKY_EXPECT_NEAR(t.replan[0].lost_s, 1.5, 1e-9);
	SKY_EXPECT(t.replan[1].generation == 3 && t.replan[1].lost_s == -1);
	SKY_EXPECT_EQ(sky_jobstate_replans(g_dir, "nolog", &t), 0);
}
