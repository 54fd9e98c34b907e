#include "sky_test.h"

#include "sky_ckpt.h"
#include "sky_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A model of 6 norm blocks (2 layers), two stages: blocks 0-2 and 3-5.
 * Block b's parameters are 4 floats step*100 + b*10 + i, its one state
 * vector the same + 0.5. */
static float g_data[2][6][4];

static size_t part(unsigned char *buf, size_t cap, int64_t epoch, int64_t step, int blk0)
{
	sky_ckpt_tensor t[6];
	int n = 0;
	for (int v = -1; v < 1; v++)
		for (int b = blk0; b < blk0 + 3; b++) {
			for (int i = 0; i < 4; i++)
				g_data[v + 1][b][i] = (float)(step * 100 + b * 10 + i) + (v < 0 ? 0.0f : 0.5f);
			t[n++] = (sky_ckpt_tensor){v, b, g_data[v + 1][b], 4};
		}
	sky_ckpt_meta m;
	memset(&m, 0, sizeof m);
	strcpy(m.job, "j1");
	m.epoch = epoch;
	m.step = step;
	m.blk0 = blk0;
	m.nblk = 3;
	m.nvec = 1;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_encode(&m, t, n, buf, cap, &len, NULL), 0);
	return len;
}

static char g_dir[600];
static sky_ckpt_store g_s;

static void fresh(const char *name)
{
	snprintf(g_dir, sizeof g_dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(g_dir, 0700);
	sky_ckpt_init(&g_s, g_dir);
	SKY_EXPECT(sky_ckpt_begin(&g_s, "j1", 5, 6) != NULL);
}

static int feed(int64_t epoch, int64_t step, int blk0, int64_t *committed, sky_diag *d)
{
	unsigned char buf[4096];
	size_t len = part(buf, sizeof buf, epoch, step, blk0);
	return sky_ckpt_on_part(&g_s, "j1", blk0 ? "b2" : "b1", buf, len, 1.0, committed, d);
}

SKY_TEST(a_step_commits_when_every_block_of_one_epoch_is_in)
{
	int64_t c = 0;
	fresh("commit");
	SKY_EXPECT_EQ(feed(5, 1, 0, &c, NULL), 0);
	SKY_EXPECT_EQ(feed(5, 1, 0, &c, NULL), 0); /* a QoS 1 duplicate counts once */
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 0);
	SKY_EXPECT_EQ(feed(5, 1, 3, &c, NULL), 1);
	SKY_EXPECT_EQ(c, 1);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 1);
	char path[700], log[4096];
	snprintf(path, sizeof path, "%s/jobs/j1.log.jsonl", g_dir);
	long n = sky_file_read(path, log, sizeof log - 1);
	SKY_EXPECT(n > 0);
	log[n > 0 ? n : 0] = 0;
	SKY_EXPECT_MSG(strstr(log, "\"event\":\"commit\",\"epoch\":5,\"step\":1") != NULL, "%s", log);
}

SKY_TEST(stale_epochs_old_steps_and_overlaps_are_refused_with_reasons)
{
	int64_t c = 0;
	sky_diag d;
	fresh("refuse");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(feed(4, 1, 0, &c, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "stale") != NULL, "%s", d.msg);
	feed(5, 1, 0, &c, NULL);
	feed(5, 1, 3, &c, NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(feed(5, 1, 3, &c, &d), SKY_ESTATE); /* committed: never twice */
	SKY_EXPECT_MSG(strstr(d.msg, "at or before the last commit") != NULL, "%s", d.msg);
	/* a part that covers blocks 1-3 of step 2 overlaps the one of 0-2 */
	feed(5, 2, 0, &c, NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(feed(5, 2, 1, &c, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "overlap") != NULL, "%s", d.msg);
	/* a damaged one, by its hash */
	unsigned char buf[4096];
	size_t len = part(buf, sizeof buf, 5, 2, 3);
	buf[len - 1] ^= 0x80;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_on_part(&g_s, "j1", "b2", buf, len, 1.0, &c, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "SHA-256 mismatch") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 1);
	/* a re-plan: the next epoch only */
	sky_ckpt_begin(&g_s, "j1", 6, 6);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(feed(5, 2, 3, &c, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "stale") != NULL, "%s", d.msg);
}

SKY_TEST(only_the_last_two_complete_checkpoints_stay_on_disk)
{
	int64_t c = 0;
	char path[700];
	fresh("keep");
	for (int s = 1; s <= 3; s++) {
		feed(5, s, 0, &c, NULL);
		SKY_EXPECT_EQ(feed(5, s, 3, &c, NULL), 1);
	}
	snprintf(path, sizeof path, "%s/ckpt/j1/1-0.safetensors", g_dir);
	SKY_EXPECT(!sky_file_exists(path));
	snprintf(path, sizeof path, "%s/ckpt/j1/2-3.safetensors", g_dir);
	SKY_EXPECT(sky_file_exists(path));
	snprintf(path, sizeof path, "%s/ckpt/j1/3-0.safetensors", g_dir);
	SKY_EXPECT(sky_file_exists(path));
}

SKY_TEST(an_image_of_any_range_is_assembled_from_the_last_commit)
{
	int64_t c = 0;
	fresh("image");
	feed(5, 4, 0, &c, NULL);
	feed(5, 4, 3, &c, NULL);
	unsigned char *img = NULL;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_image(&g_s, "j1", 9, 2, 3, &img, &len, NULL), 0);
	sky_ckpt_meta m;
	sky_ckpt_tensor t[8];
	int nt = 0;
	SKY_EXPECT_EQ(sky_ckpt_parse(img, len, &m, t, 8, &nt, NULL), 0);
	SKY_EXPECT(m.epoch == 9 && m.step == 4 && m.blk0 == 2 && m.nblk == 3 && m.nvec == 1);
	SKY_EXPECT_EQ(nt, 6);
	for (int k = 0; k < nt; k++) {
		float want[4];
		for (int i = 0; i < 4; i++)
			want[i] = (float)(400 + t[k].blk * 10 + i) + (t[k].vec < 0 ? 0.0f : 0.5f);
		SKY_EXPECT_MSG(t[k].n == 4 && memcmp(t[k].data, want, sizeof want) == 0,
			       "tensor %d (vec %d blk %d)", k, t[k].vec, t[k].blk);
	}
	free(img);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_image(&g_s, "j2", 9, 0, 1, &img, &len, &d), SKY_ENOTFOUND);
}

SKY_TEST(a_full_store_forgets_the_job_idle_longest)
{
	fresh("full");
	for (int i = 0; i < SKY_CKPT_JOBS + 3; i++) {
		char job[16];
		snprintf(job, sizeof job, "x%d", i);
		SKY_EXPECT(sky_ckpt_begin(&g_s, job, 1, 6) != NULL);
	}
	SKY_EXPECT_EQ(g_s.n, SKY_CKPT_JOBS);
	SKY_EXPECT(sky_ckpt_find(&g_s, "x0") == NULL); /* j1 and x0.. went first */
	SKY_EXPECT(sky_ckpt_find(&g_s, "x34") != NULL);
}

/* ---- restarts: the index brings a job's checkpoints back ------------------- */

static sky_ckpt_store g_r; /* the store of the restarted planner */

static int feed_to(sky_ckpt_store *s, int64_t epoch, int64_t step, int blk0, int64_t *committed,
		   sky_diag *d)
{
	unsigned char buf[4096];
	size_t len = part(buf, sizeof buf, epoch, step, blk0);
	return sky_ckpt_on_part(s, "j1", blk0 ? "b2" : "b1", buf, len, 1.0, committed, d);
}

static int count_in_log(const char *needle)
{
	static char log[1 << 16];
	char path[700];
	snprintf(path, sizeof path, "%s/jobs/j1.log.jsonl", g_dir);
	long n = sky_file_read(path, log, sizeof log - 1);
	log[n > 0 ? n : 0] = '\0';
	int k = 0;
	for (const char *p = log; (p = strstr(p, needle)) != NULL; p++)
		k++;
	return k;
}

SKY_TEST(a_restarted_store_goes_on_where_it_stopped)
{
	int64_t c = 0;
	sky_diag d;
	sky_diag_clear(&d);
	fresh("restart");
	SKY_EXPECT_EQ(feed(5, 1, 0, &c, NULL), 0);
	SKY_EXPECT_EQ(feed(5, 1, 3, &c, NULL), 1);
	SKY_EXPECT_EQ(feed(5, 2, 0, &c, NULL), 0); /* step 2 half in when the planner dies */
	sky_ckpt_init(&g_r, g_dir);
	SKY_EXPECT_MSG(sky_ckpt_restore(&g_r, "j1", 5, 6, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_r, "j1"), 1);
	SKY_EXPECT_EQ(sky_ckpt_find(&g_r, "j1")->commits, 1);
	/* step 1 again (a QoS 1 resend): refused, not committed twice */
	SKY_EXPECT_EQ(feed_to(&g_r, 5, 1, 3, &c, &d), SKY_ESTATE);
	SKY_EXPECT(strstr(d.msg, "at or before the last commit") != NULL);
	/* the other half of step 2 completes it: the half from before is kept */
	c = 0;
	SKY_EXPECT_EQ(feed_to(&g_r, 5, 2, 3, &c, NULL), 1);
	SKY_EXPECT_EQ(c, 2);
	SKY_EXPECT_EQ(count_in_log("\"event\":\"commit\",\"epoch\":5,\"step\":1,"), 1);
	SKY_EXPECT_EQ(count_in_log("\"event\":\"commit\",\"epoch\":5,\"step\":2,"), 1);
	/* an image of the restored checkpoint, as a re-plan publishes it */
	unsigned char *img = NULL;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_image(&g_r, "j1", 6, 0, 6, &img, &len, NULL), 0);
	free(img);
	/* a restart under a newer epoch drops the open steps of the old one */
	SKY_EXPECT_EQ(feed_to(&g_r, 5, 3, 0, &c, NULL), 0);
	sky_ckpt_init(&g_s, g_dir);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_s, "j1", 6, 6, NULL), 0);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 2);
	SKY_EXPECT_EQ(feed(6, 3, 3, &c, NULL), 0); /* not completing the epoch-5 half */
}

SKY_TEST(a_damaged_checkpoint_file_is_found_again_at_restart)
{
	int64_t c = 0;
	sky_diag d;
	sky_diag_clear(&d);
	fresh("restart-bad");
	for (int64_t st = 1; st <= 2; st++) {
		SKY_EXPECT_EQ(feed(5, st, 0, &c, NULL), 0);
		SKY_EXPECT_EQ(feed(5, st, 3, &c, NULL), 1);
	}
	/* one byte of step 2's second part flipped on disk */
	char path[700];
	static unsigned char buf[8192];
	snprintf(path, sizeof path, "%s/ckpt/j1/2-3.safetensors", g_dir);
	long n = sky_file_read(path, buf, sizeof buf);
	SKY_EXPECT(n > 10);
	buf[n - 3] ^= 0x40;
	SKY_EXPECT_EQ(sky_file_write(path, buf, (size_t)n, 0600), 0);
	sky_ckpt_init(&g_r, g_dir);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "SHA-256 mismatch"), "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_r, "j1"), 1); /* the one before it */
	/* a missing file of it: the same, naming that file */
	snprintf(path, sizeof path, "%s/ckpt/j1/1-0.safetensors", g_dir);
	SKY_EXPECT_EQ(sky_file_remove(path), 0);
	sky_ckpt_init(&g_r, g_dir);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, path) != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_r, "j1"), 0);
}

SKY_TEST(a_damaged_or_missing_index_is_an_error_naming_it)
{
	int64_t c = 0;
	sky_diag d;
	sky_diag_clear(&d);
	fresh("restart-index");
	SKY_EXPECT_EQ(feed(5, 1, 0, &c, NULL), 0);
	char path[700];
	snprintf(path, sizeof path, "%s/ckpt/j1/" SKY_CKPT_INDEX_FILE, g_dir);
	const char *bad[] = {"{\"v\":1,\"job\":\"j1\"", "[]", "{\"v\":1,\"job\":\"j2\",\"epoch\":5,"
			     "\"n_blocks\":6,\"nvec\":1,\"commits\":0,\"done\":[],\"open\":[]}",
			     "{\"v\":1,\"job\":\"j1\",\"epoch\":5,\"n_blocks\":6,\"nvec\":1,"
			     "\"commits\":0,\"done\":[{\"step\":1,\"epoch\":5,\"parts\":[[4,9]]}],"
			     "\"open\":[]}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		SKY_EXPECT_EQ(sky_file_write(path, bad[i], strlen(bad[i]), 0600), 0);
		sky_ckpt_init(&g_r, g_dir);
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, &d), SKY_EFORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "damaged"), "%zu: %s", i, d.msg);
		SKY_EXPECT(sky_ckpt_find(&g_r, "j1") == NULL);
	}
	sky_file_remove(path);
	sky_ckpt_init(&g_r, g_dir);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, path) && strstr(d.msg, "missing"), "%s", d.msg);
}

/* a commit saved in the index but not in the log (the planner killed in
 * between) is logged at the restart, once */
SKY_TEST(a_commit_the_log_missed_is_logged_once_at_restart)
{
	int64_t c = 0;
	fresh("restart-log");
	SKY_EXPECT_EQ(feed(5, 1, 0, &c, NULL), 0);
	SKY_EXPECT_EQ(feed(5, 1, 3, &c, NULL), 1);
	char path[700];
	snprintf(path, sizeof path, "%s/jobs/j1.log.jsonl", g_dir);
	SKY_EXPECT_EQ(sky_file_remove(path), 0);
	sky_ckpt_init(&g_r, g_dir);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, NULL), 0);
	SKY_EXPECT_EQ(count_in_log("\"event\":\"commit\",\"epoch\":5,\"step\":1,"), 1);
	SKY_EXPECT_EQ(count_in_log("\"restored\":true"), 1);
	sky_ckpt_init(&g_r, g_dir);
	SKY_EXPECT_EQ(sky_ckpt_restore(&g_r, "j1", 5, 6, NULL), 0);
	SKY_EXPECT_EQ(count_in_log("\"event\":\"commit\""), 1);
}

/* ---- parts from boards that do not hold those blocks, or out of line ------- */

/* A part of blocks [blk0, blk0 + nblk) whose tensors hold n floats each,
 * all `fill`. */
static size_t part_n(unsigned char *buf, size_t cap, int64_t epoch, int64_t step, int blk0,
		     int nblk, size_t n, float fill)
{
	static float data[2][8][4];
	sky_ckpt_tensor t[16];
	int k = 0;
	for (int v = -1; v < 1; v++)
		for (int b = blk0; b < blk0 + nblk; b++) {
			for (int i = 0; i < 4; i++)
				data[v + 1][b][i] = fill;
			t[k++] = (sky_ckpt_tensor){v, b, data[v + 1][b], n};
		}
	sky_ckpt_meta m;
	memset(&m, 0, sizeof m);
	strcpy(m.job, "j1");
	m.epoch = epoch;
	m.step = step;
	m.blk0 = blk0;
	m.nblk = nblk;
	m.nvec = 1;
	size_t len = 0;
	SKY_EXPECT_EQ(sky_ckpt_encode(&m, t, k, buf, cap, &len, NULL), 0);
	return len;
}

/* the plan of fresh(): b1 holds blocks 0+3, b2 3+3; b9 is in no stage */
static const sky_ckpt_sender B1 = {"b1", 0, 3}, B2 = {"b2", 3, 3}, B9 = {"b9", 0, 0};

static int send_from(const sky_ckpt_sender *from, const unsigned char *img, size_t len,
		     int64_t *c, int *reason, sky_diag *d)
{
	sky_diag_clear(d);
	*reason = -1;
	return sky_ckpt_on_part_from(&g_s, "j1", from, img, len, 1.0, c, reason, d);
}

/* the real part of step from its board (part(): values step*100 + ...) */
static int send_real(const sky_ckpt_sender *from, int64_t step, int64_t *c, int *reason,
		     sky_diag *d)
{
	static unsigned char buf[4096];
	size_t len = part(buf, sizeof buf, 5, step, from->blk0);
	return send_from(from, buf, len, c, reason, d);
}

/* the committed checkpoint's block b parameter 0, as a re-plan loads it */
static float committed_value(int b)
{
	unsigned char *img = NULL;
	size_t len = 0;
	sky_ckpt_meta m;
	sky_ckpt_tensor t[16];
	int nt = 0;
	float v = -1;
	if (sky_ckpt_image(&g_s, "j1", 6, b, 1, &img, &len, NULL) == 0 &&
	    sky_ckpt_parse(img, len, &m, t, 16, &nt, NULL) == 0)
		for (int k = 0; k < nt; k++)
			if (t[k].vec < 0)
				memcpy(&v, t[k].data, sizeof v);
	free(img);
	return v;
}

SKY_TEST(a_full_part_from_a_board_holding_fewer_blocks_is_refused)
{
	static unsigned char evil[8192];
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("forged-full");
	SKY_EXPECT_EQ(sky_ckpt_schedule(&g_s, "j1", 100, 1), 0);
	/* one part of every block at the next step, all zeros */
	size_t len = part_n(evil, sizeof evil, 5, 1, 0, 6, 4, 0.0f);
	/* from a board in no stage of the plan: refused before it is parsed */
	SKY_EXPECT_EQ(send_from(&B9, evil, len, &c, &why, &d), SKY_EAUTH);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_SENDER);
	SKY_EXPECT_MSG(strstr(d.msg, "board b9 holds no blocks in the plan") != NULL, "%s", d.msg);
	/* from a stage that holds blocks 0-2 only */
	SKY_EXPECT_EQ(send_from(&B1, evil, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_BLOCKS);
	SKY_EXPECT_MSG(strstr(d.msg, "blocks 0+6 are not board b1's: the plan gives it 0+3"),
		       "%s", d.msg);
	/* b2 sending b1's blocks */
	len = part_n(evil, sizeof evil, 5, 1, 0, 3, 4, 0.0f);
	SKY_EXPECT_EQ(send_from(&B2, evil, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "are not board b2's") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 0);
	/* the real parts still commit, with the real weights */
	SKY_EXPECT_EQ(send_real(&B1, 1, &c, &why, &d), 0);
	SKY_EXPECT_MSG(send_real(&B2, 1, &c, &why, &d) == 1, "%s", d.msg);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 1);
	SKY_EXPECT(committed_value(0) == 100.0f && committed_value(5) == 150.0f);
	sky_ckpt_job *j = sky_ckpt_find(&g_s, "j1");
	SKY_EXPECT(j->refused_by[SKY_CKPT_R_SENDER] == 1 && j->refused_by[SKY_CKPT_R_BLOCKS] == 2);
	SKY_EXPECT(!strcmp(sky_ckpt_refusal_name(SKY_CKPT_R_BLOCKS), "blocks"));
}

SKY_TEST(steps_outside_the_window_or_the_schedule_are_refused)
{
	static unsigned char buf[4096];
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("step-bounds");
	/* with no schedule known: 2^53 - 1 is past any window */
	size_t len = part_n(buf, sizeof buf, 5, (1ll << 53) - 1, 0, 3, 4, 1.0f);
	SKY_EXPECT_EQ(send_from(&B1, buf, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_STEP);
	SKY_EXPECT_MSG(strstr(d.msg, "step 9007199254740991 is past the job's window") != NULL, "%s",
		       d.msg);
	/* every 2nd of 10 steps: 3 is not a checkpoint step, 12 past the last */
	SKY_EXPECT_EQ(sky_ckpt_schedule(&g_s, "j1", 10, 2), 0);
	len = part_n(buf, sizeof buf, 5, 3, 0, 3, 4, 1.0f);
	SKY_EXPECT_EQ(send_from(&B1, buf, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "step 3 is not one the job checkpoints at (every 2 of 10"),
		       "%s", d.msg);
	len = part_n(buf, sizeof buf, 5, 12, 0, 3, 4, 1.0f);
	SKY_EXPECT_EQ(send_from(&B1, buf, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "a part may be of step 10 at most") != NULL, "%s", d.msg);
	/* the step the planner asked for is taken */
	SKY_EXPECT_EQ(sky_ckpt_ask(&g_s, "j1", 3), 0);
	SKY_EXPECT_EQ(send_real(&B1, 3, &c, &why, &d), 0);
	SKY_EXPECT_EQ(send_real(&B2, 3, &c, &why, &d), 1);
	SKY_EXPECT_EQ(sky_ckpt_last(&g_s, "j1"), 3);
}

SKY_TEST(empty_tensors_and_sizes_unlike_the_header_are_refused_before_hashing)
{
	static unsigned char buf[4096];
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("sizes");
	size_t len = part_n(buf, sizeof buf, 5, 1, 0, 3, 0, 1.0f);
	SKY_EXPECT_EQ(send_from(&B1, buf, len, &c, &why, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_FORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "tensor 'p.0' is empty") != NULL, "%s", d.msg);
	/* bytes after the last tensor (the hash would cover them) */
	len = part_n(buf, sizeof buf, 5, 1, 0, 3, 4, 1.0f);
	memset(buf + len, 0, 8);
	SKY_EXPECT_EQ(send_from(&B1, buf, len + 8, &c, &why, &d), SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "6 tensors in 104 bytes") != NULL, "%s", d.msg);
	/* a damaged one is still refused by its hash, and counted so */
	buf[len - 1] ^= 1;
	SKY_EXPECT_EQ(send_from(&B1, buf, len, &c, &why, &d), SKY_EAUTH);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_HASH);
}

SKY_TEST(new_step_numbers_do_not_evict_another_boards_open_step)
{
	static unsigned char buf[4096];
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("evict");
	SKY_EXPECT_EQ(sky_ckpt_schedule(&g_s, "j1", 100, 1), 0);
	SKY_EXPECT_EQ(send_real(&B1, 1, &c, &why, &d), 0); /* a real open step */
	/* four new step numbers from a board outside the plan */
	for (int64_t st = 2; st <= 5; st++) {
		size_t len = part_n(buf, sizeof buf, 5, st, 3, 3, 4, 0.0f);
		SKY_EXPECT_EQ(send_from(&B9, buf, len, &c, &why, &d), SKY_EAUTH);
		SKY_EXPECT_EQ(why, SKY_CKPT_R_SENDER);
	}
	/* ... and from the other stage, which holds its own blocks: three take
	 * the free slots, the next ones push out its own older steps, never
	 * b1's step 1 (b1 has not moved past it) */
	for (int64_t st = 2; st <= 8; st++) {
		size_t len = part_n(buf, sizeof buf, 5, st, 3, 3, 4, 0.0f);
		SKY_EXPECT_MSG(send_from(&B2, buf, len, &c, &why, &d) == 0, "step %lld: %s",
			       (long long)st, d.msg);
	}
	/* step 1 is still open: b2's real part completes it */
	SKY_EXPECT_MSG(send_real(&B2, 1, &c, &why, &d) == 1, "%s", d.msg);
	SKY_EXPECT_EQ(c, 1);
	SKY_EXPECT(committed_value(0) == 100.0f && committed_value(3) == 130.0f);
}

SKY_TEST(a_board_that_moved_on_gives_up_its_own_open_steps)
{
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("moved-on");
	SKY_EXPECT_EQ(sky_ckpt_schedule(&g_s, "j1", 100, 1), 0);
	/* b2's parts of steps 1-4 were lost: b1's hold every slot */
	for (int64_t st = 1; st <= 4; st++)
		SKY_EXPECT_EQ(send_real(&B1, st, &c, &why, &d), 0);
	/* b1 at step 5: its own step 1 goes */
	SKY_EXPECT_MSG(send_real(&B1, 5, &c, &why, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(send_real(&B2, 5, &c, &why, &d), 1);
	SKY_EXPECT_EQ(c, 5);
}

SKY_TEST(when_every_open_step_awaits_a_board_a_new_step_is_refused)
{
	static unsigned char buf[4096];
	int64_t c = 0;
	int why;
	sky_diag d;
	fresh("open-full");
	SKY_EXPECT_EQ(sky_ckpt_schedule(&g_s, "j1", 100, 1), 0);
	/* five stages: b<k> holds block k-1 (b5 blocks 4-5); each of the
	 * first four has a part in one open step and none after it */
	const sky_ckpt_sender b[5] = {{"b1", 0, 1}, {"b2", 1, 1}, {"b3", 2, 1}, {"b4", 3, 1},
				      {"b5", 4, 2}};
	for (int k = 0; k < 4; k++) {
		size_t len = part_n(buf, sizeof buf, 5, k + 1, b[k].blk0, b[k].nblk, 4, 1.0f);
		SKY_EXPECT_EQ(send_from(&b[k], buf, len, &c, &why, &d), 0);
	}
	size_t len = part_n(buf, sizeof buf, 5, 5, 4, 2, 4, 1.0f);
	SKY_EXPECT_EQ(send_from(&b[4], buf, len, &c, &why, &d), SKY_ESTATE);
	SKY_EXPECT_EQ(why, SKY_CKPT_R_OPEN);
	SKY_EXPECT_MSG(strstr(d.msg, "step 5: 4 steps are open and each still awaits a board's part"),
		       "%s", d.msg);
	/* b1 moving on to step 5 gives its step 1 up */
	len = part_n(buf, sizeof buf, 5, 5, 0, 1, 4, 1.0f);
	SKY_EXPECT_EQ(send_from(&b[0], buf, len, &c, &why, &d), 0);
}
