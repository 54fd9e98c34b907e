#include "sky_test.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_deploy.h"
#include "sky_file.h"
#include "sky_service.h"
#include "sky_slicecache.h"

#include <stdio.h>
#include <string.h>

#define MODEL_BYTES 5000
#define CB 1024

static sky_deploy g_dp;
static unsigned char g_model[MODEL_BYTES], g_msg[SKY_CHUNK_HEADER_BYTES + CB];

/* what was published: the last reply, and slice chunks fed to a receiver */
typedef struct sink {
	int replies;
	sky_job_reply last;
	int chunks;
	sky_slice_rx *rx;
	sky_slice_stats st;
	int done;
	char topic[SKY_TOPIC_BUF];
} sink;

static int pub(void *ctx, const char *topic, const void *data, size_t len)
{
	sink *s = ctx;
	snprintf(s->topic, sizeof s->topic, "%s", topic);
	if (strstr(topic, "/reply")) {
		s->replies++;
		sky_job_reply_decode(data, len, &s->last, NULL);
	} else {
		s->chunks++;
		if (s->rx && sky_slice_rx_chunk(s->rx, data, len, &s->st, NULL) == 1)
			s->done = 1;
	}
	return 0;
}

static void model(unsigned seed, unsigned char sha[32])
{
	for (int i = 0; i < MODEL_BYTES; i++)
		g_model[i] = (unsigned char)(i * 31 + seed);
	sky_sha256(g_model, MODEL_BYTES, sha);
}

/* The hashes of finished uploads run on their own threads: pumped until
 * none is left (as skyplan's loop pumps every turn). */
static void settle(sink *s)
{
	for (int t = 0; t < 20000; t++) {
		int busy = 0;
		for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
			busy |= g_dp.up[i].hashing;
		if (!busy)
			return;
		sky_deploy_pump(&g_dp, 0, pub, s);
		sky_sleep_ms(1);
	}
}

static void send(const unsigned char sha[32], uint32_t i, int flip, sink *s)
{
	int n = sky_chunk_encode(SKY_CHUNK_MODEL, g_model, MODEL_BYTES, sha, CB, i, g_msg,
				 sizeof g_msg);
	if (flip)
		g_msg[SKY_CHUNK_HEADER_BYTES + 3] ^= 4;
	sky_deploy_on_weights(&g_dp, "sky-operator", g_msg, (size_t)n, pub, s);
	settle(s);
}

/* the "cut": the whole model as the slice (the real cut is the runtime's) */
static int fake_cut(const char *model_path, int first, int last, const char *out_path,
		    char sha256[65], int64_t *bytes, sky_diag *d)
{
	static unsigned char buf[MODEL_BYTES];
	long n = sky_file_read(model_path, buf, sizeof buf);
	if (n < 0 || sky_file_write(out_path, buf, (size_t)n, 0644) != 0)
		return sky_diag_set(d, SKY_EIO, "fake cut");
	unsigned char h[32];
	sky_sha256(buf, (size_t)n, h);
	sky_sha256_hex(h, sha256);
	*bytes = n;
	return 0;
}
static const sky_deploy_model_ops k_ops = {.cut = fake_cut};

static void setup(const char *name)
{
	char dir[512];
	snprintf(dir, sizeof dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(dir, 0700);
	sky_deploy_init(&g_dp, dir, &k_ops, CB, 0);
}

SKY_TEST(an_upload_in_order_is_stored_by_hash_and_answered)
{
	unsigned char sha[32];
	char hex[65], path[700];
	sink s;
	memset(&s, 0, sizeof s);
	setup("store");
	model(1, sha);
	sky_sha256_hex(sha, hex);
	for (uint32_t i = 0; i < 5; i++)
		send(sha, i, 0, &s);
	SKY_EXPECT_EQ(s.replies, 1);
	SKY_EXPECT(s.last.ok && !strcmp(s.last.state, "stored"));
	SKY_EXPECT(!strncmp(s.last.submit_id, hex, 32) && strlen(s.last.submit_id) == 32);
	SKY_EXPECT(!strcmp(s.topic, "sky/v1/jobs/sky-operator/reply"));
	SKY_EXPECT_EQ(sky_deploy_model_path(&g_dp, hex, path, sizeof path, NULL), 0);
	unsigned char h[32];
	SKY_EXPECT_EQ(sky_sha256_file(path, h, NULL), 0);
	SKY_EXPECT(memcmp(h, sha, 32) == 0);
	/* again: answered at chunk 0, nothing rewritten */
	send(sha, 0, 0, &s);
	SKY_EXPECT_EQ(s.replies, 2);
	SKY_EXPECT(s.last.ok);
}

static void send_as(const char *op, const unsigned char sha[32], uint32_t i, sink *s)
{
	int n = sky_chunk_encode(SKY_CHUNK_MODEL, g_model, MODEL_BYTES, sha, CB, i, g_msg,
				 sizeof g_msg);
	sky_deploy_on_weights(&g_dp, op, g_msg, (size_t)n, pub, s);
	settle(s);
}

static int active_of(const char *op)
{
	int n = 0;
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
		n += g_dp.up[i].active && !strcmp(g_dp.up[i].op, op);
	return n;
}

SKY_TEST(one_operator_cannot_take_anothers_upload_slots)
{
	unsigned char sha[32];
	sink s;
	memset(&s, 0, sizeof s);
	setup("slots");
	g_dp.uploads_per_op = 2;
	/* alice starts one upload */
	model(100, sha);
	send_as("sky-op-alice", sha, 0, &s);
	SKY_EXPECT_EQ(active_of("sky-op-alice"), 1);
	/* bob floods chunk 0 of many models: two slots, then refusals */
	for (unsigned k = 0; k < 20; k++) {
		model(200 + k, sha);
		send_as("sky-op-bob", sha, 0, &s);
	}
	SKY_EXPECT_EQ(active_of("sky-op-bob"), 2);
	SKY_EXPECT(!s.last.ok && strstr(s.last.error, "operator sky-op-bob has 2 model uploads in "
						    "progress (its limit is 2)"));
	SKY_EXPECT(!strcmp(s.topic, "sky/v1/jobs/sky-op-bob/reply"));
	/* alice's upload is still there and completes */
	model(100, sha);
	memset(&s, 0, sizeof s);
	for (uint32_t i = 1; i < 5; i++)
		send_as("sky-op-alice", sha, i, &s);
	SKY_EXPECT_MSG(s.replies == 1 && s.last.ok && !strcmp(s.last.state, "stored"), "%s",
		       s.last.error);
	/* without a limit of its own bob fills the free slots, and then only
	 * its own oldest upload gives way; alice's new one is refused, not
	 * evicting bob's and bob's never evicting hers */
	g_dp.uploads_per_op = 0;
	model(300, sha);
	send_as("sky-op-alice", sha, 0, &s);
	for (unsigned k = 0; k < 20; k++) {
		model(400 + k, sha);
		send_as("sky-op-bob", sha, 0, &s);
	}
	SKY_EXPECT_EQ(active_of("sky-op-alice"), 1);
	SKY_EXPECT_EQ(active_of("sky-op-bob"), SKY_DEPLOY_MAX_UPLOADS - 1);
	memset(&s, 0, sizeof s);
	model(500, sha);
	send_as("sky-op-carol", sha, 0, &s);
	SKY_EXPECT(!s.last.ok && strstr(s.last.error, "upload slots are taken by other operators"));
	/* uploads that went quiet are abandoned: their slots free again */
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
		g_dp.up[i].last -= SKY_DEPLOY_UPLOAD_IDLE_S + 1;
	memset(&s, 0, sizeof s);
	send_as("sky-op-carol", sha, 0, &s);
	SKY_EXPECT_EQ(active_of("sky-op-carol"), 1);
	SKY_EXPECT_EQ(active_of("sky-op-bob"), 0);
}

SKY_TEST(the_last_chunk_is_hashed_off_the_loop_and_answered_by_the_pump)
{
	unsigned char sha[32];
	sink s;
	memset(&s, 0, sizeof s);
	setup("offloop");
	model(7, sha);
	for (uint32_t i = 0; i < 4; i++)
		send(sha, i, 0, &s);
	int n = sky_chunk_encode(SKY_CHUNK_MODEL, g_model, MODEL_BYTES, sha, CB, 4, g_msg,
				 sizeof g_msg);
	sky_deploy_on_weights(&g_dp, "sky-operator", g_msg, (size_t)n, pub, &s);
	/* the handler returned before the whole file was hashed: no answer yet */
	SKY_EXPECT_EQ(s.replies, 0);
	int hashing = 0;
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
		hashing |= g_dp.up[i].hashing;
	SKY_EXPECT(hashing);
	/* a resend of the last chunk meanwhile changes nothing */
	sky_deploy_on_weights(&g_dp, "sky-operator", g_msg, (size_t)n, pub, &s);
	settle(&s);
	SKY_EXPECT_EQ(s.replies, 1);
	SKY_EXPECT(s.last.ok && !strcmp(s.last.state, "stored"));
}

SKY_TEST(an_operators_stored_models_are_bounded)
{
	unsigned char sha[32];
	sink s;
	memset(&s, 0, sizeof s);
	setup("stored");
	g_dp.stored_per_op = 6000; /* one model of MODEL_BYTES, not two */
	model(40, sha);
	for (uint32_t i = 0; i < 5; i++)
		send_as("sky-op-alice", sha, i, &s);
	SKY_EXPECT(s.last.ok && !strcmp(s.last.state, "stored"));
	model(41, sha);
	memset(&s, 0, sizeof s);
	send_as("sky-op-alice", sha, 0, &s);
	SKY_EXPECT_MSG(!s.last.ok && strstr(s.last.error, "operator sky-op-alice holds 5000 bytes of "
							  "models; 5000 more is above its limit of 6000"),
		       "%s", s.last.error);
	SKY_EXPECT_EQ(active_of("sky-op-alice"), 0);
	/* bob's own bound is his */
	memset(&s, 0, sizeof s);
	for (uint32_t i = 0; i < 5; i++)
		send_as("sky-op-bob", sha, i, &s);
	SKY_EXPECT(s.last.ok && !strcmp(s.last.state, "stored"));
}

SKY_TEST(a_corrupted_chunk_refuses_the_upload_once_with_its_reason)
{
	unsigned char sha[32];
	char hex[65], path[700];
	sink s;
	sky_diag d;
	memset(&s, 0, sizeof s);
	setup("corrupt");
	model(2, sha);
	sky_sha256_hex(sha, hex);
	send(sha, 0, 0, &s);
	send(sha, 1, 1, &s);
	for (uint32_t i = 2; i < 5; i++)
		send(sha, i, 0, &s);
	SKY_EXPECT_EQ(s.replies, 1); /* one refusal, not one per chunk */
	SKY_EXPECT(!s.last.ok);
	SKY_EXPECT_MSG(strstr(s.last.error, "chunk 1 of 5: payload SHA-256 mismatch") != NULL, "%s",
		       s.last.error);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_deploy_model_path(&g_dp, hex, path, sizeof path, &d), SKY_ENOTFOUND);
	SKY_EXPECT_MSG(strstr(d.msg, "payload SHA-256 mismatch") != NULL, "%s", d.msg);
	/* sent again whole, it is taken */
	for (uint32_t i = 0; i < 5; i++)
		send(sha, i, 0, &s);
	SKY_EXPECT(s.last.ok);
	SKY_EXPECT_EQ(sky_deploy_model_path(&g_dp, hex, path, sizeof path, NULL), 0);
}

SKY_TEST(a_model_whose_bytes_do_not_hash_to_its_name_is_refused)
{
	unsigned char sha[32], other[32];
	char hex[65], path[700];
	sink s;
	memset(&s, 0, sizeof s);
	setup("wrong");
	model(3, sha);
	memcpy(other, sha, 32);
	other[5] ^= 1; /* the operator names another hash */
	for (uint32_t i = 0; i < 5; i++)
		send(other, i, 0, &s);
	SKY_EXPECT_EQ(s.replies, 1);
	SKY_EXPECT(!s.last.ok);
	SKY_EXPECT_MSG(strstr(s.last.error, "model hash mismatch") != NULL, "%s", s.last.error);
	sky_sha256_hex(other, hex);
	SKY_EXPECT(sky_deploy_model_path(&g_dp, hex, path, sizeof path, NULL) == SKY_ENOTFOUND);
	sky_sha256_hex(sha, hex);
	SKY_EXPECT(sky_deploy_model_path(&g_dp, hex, path, sizeof path, NULL) == SKY_ENOTFOUND);
}

SKY_TEST(a_skipped_chunk_refuses_the_upload)
{
	unsigned char sha[32];
	sink s;
	memset(&s, 0, sizeof s);
	setup("skip");
	model(4, sha);
	send(sha, 0, 0, &s);
	send(sha, 2, 0, &s);
	SKY_EXPECT_EQ(s.replies, 1);
	SKY_EXPECT_MSG(strstr(s.last.error, "chunk 1 is needed next") != NULL, "%s", s.last.error);
}

/* cut, asked for, pumped: a board's receiver rebuilds the slice from the
 * chunks; a request for another slice is refused */
SKY_TEST(a_requested_slice_is_sent_whole_from_the_asked_chunk)
{
	unsigned char sha[32];
	char hex[65], dir[600];
	sink s;
	memset(&s, 0, sizeof s);
	setup("slice");
	model(5, sha);
	sky_sha256_hex(sha, hex);
	for (uint32_t i = 0; i < 5; i++)
		send(sha, i, 0, &s);
	sky_plan_slice sl;
	SKY_EXPECT_EQ(sky_deploy_cut(&g_dp, hex, 0, 3, &sl, NULL), 0);
	SKY_EXPECT(sl.bytes == MODEL_BYTES && sl.chunks == 5 && sl.chunk_bytes == CB);
	/* the board: already holds 2 chunks */
	sky_slice_info w = {.bytes = MODEL_BYTES, .chunks = 5, .chunk_bytes = CB};
	sky_sha256_parse(sl.sha256, w.sha);
	snprintf(dir, sizeof dir, "%s/board", g_dp.state_dir);
	sky_slice_rx rx;
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	SKY_EXPECT_EQ(sky_file_append(rx.part, g_model, 2 * CB, 0600), 0);
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	SKY_EXPECT_EQ(rx.next, 2);
	s.rx = &rx;
	sky_slice_req r;
	memset(&r, 0, sizeof r);
	snprintf(r.job, sizeof r.job, "j1");
	memcpy(r.sha, w.sha, 32);
	r.from = rx.next;
	sky_diag d;
	sky_plan_slice other = sl;
	other.sha256[0] = other.sha256[0] == 'a' ? 'b' : 'a';
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_deploy_on_slice_req(&g_dp, "b1", &r, &other, 0, &d), SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "not the slice the job's plan gives it") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_deploy_on_slice_req(&g_dp, "b1", &r, NULL, 0, NULL), SKY_EAUTH);
	SKY_EXPECT_EQ(sky_deploy_on_slice_req(&g_dp, "b1", &r, &sl, 0, NULL), 0);
	int active = 1;
	for (int t = 0; t < 10 && active; t++)
		active = sky_deploy_pump(&g_dp, 1.0 + t, pub, &s);
	SKY_EXPECT_EQ(active, 0);
	SKY_EXPECT_EQ(s.chunks, 3); /* chunks 2, 3 and 4 only */
	SKY_EXPECT(!strcmp(s.topic, "sky/v1/job/j1/slice/b1"));
	SKY_EXPECT(s.done);
	SKY_EXPECT_EQ(g_dp.slices_sent, 1);
	sky_deploy_free(&g_dp);
}

SKY_TEST(a_paced_transfer_sends_one_chunk_per_interval)
{
	unsigned char sha[32];
	char hex[65];
	sink s;
	memset(&s, 0, sizeof s);
	setup("paced");
	g_dp.pace_ms = 100;
	model(6, sha);
	sky_sha256_hex(sha, hex);
	for (uint32_t i = 0; i < 5; i++)
		send(sha, i, 0, &s);
	sky_plan_slice sl;
	SKY_EXPECT_EQ(sky_deploy_cut(&g_dp, hex, 0, 1, &sl, NULL), 0);
	sky_slice_req r;
	memset(&r, 0, sizeof r);
	snprintf(r.job, sizeof r.job, "j2");
	sky_sha256_parse(sl.sha256, r.sha);
	SKY_EXPECT_EQ(sky_deploy_on_slice_req(&g_dp, "b2", &r, &sl, 10.0, NULL), 0);
	sky_deploy_pump(&g_dp, 10.0, pub, &s);
	sky_deploy_pump(&g_dp, 10.05, pub, &s);
	SKY_EXPECT_EQ(s.chunks, 1);
	sky_deploy_pump(&g_dp, 10.1, pub, &s);
	SKY_EXPECT_EQ(s.chunks, 2);
	sky_deploy_free(&g_dp);
}
