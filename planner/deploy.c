/* Model uploads, slice cutting and slice transfers (sky_deploy.h). */
#include "sky_deploy.h"
#include "sky_clock.h"

#include "sky_file.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_topics.h"

#include <stdio.h>
#include <string.h>

void sky_deploy_init(sky_deploy *dp, const char *state_dir, const sky_deploy_model_ops *ops,
		     int chunk_bytes, int pace_ms)
{
	memset(dp, 0, offsetof(sky_deploy, msg));
	snprintf(dp->state_dir, sizeof dp->state_dir, "%s", state_dir);
	dp->ops = ops;
	dp->chunk_bytes = chunk_bytes >= (int)SKY_CHUNK_MIN_BYTES &&
					  chunk_bytes <= (int)SKY_CHUNK_MAX_PAYLOAD
				  ? (uint32_t)chunk_bytes
				  : SKY_CHUNK_DEFAULT_BYTES;
	dp->pace_ms = pace_ms > 0 ? pace_ms : 0;
}

static void xfer_end(sky_deploy_xfer *x)
{
	sky_file_map_close(&x->map);
	x->active = 0;
}

void sky_deploy_free(sky_deploy *dp)
{
	if (!dp)
		return;
	for (int i = 0; i < SKY_DEPLOY_MAX_XFERS; i++)
		if (dp->x[i].active)
			xfer_end(&dp->x[i]);
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
		if (dp->up[i].hashing) {
			sky_thread_join(&dp->up[i].hasher);
			dp->up[i].hashing = 0;
			dp->up[i].active = 0;
		}
}

/* <state>/<dir>/<hex><ext> */
static int store_path(const sky_deploy *dp, const char *dir, const unsigned char sha[32],
		      const char *ext, char *buf, size_t cap)
{
	char hex[65];
	sky_sha256_hex(sha, hex);
	int n = snprintf(buf, cap, "%s/%s/%s%s", dp->state_dir, dir, hex, ext);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* ---- uploads ------------------------------------------------------------------ */

static void remember_failure(sky_deploy *dp, const unsigned char sha[32], const char *why)
{
	int slot = -1;
	for (int i = 0; i < SKY_DEPLOY_MAX_FAILURES; i++)
		if (memcmp(dp->failed[i].sha, sha, 32) == 0 && dp->failed[i].why[0])
			slot = i;
	if (slot < 0) {
		slot = dp->next_failed;
		dp->next_failed = (slot + 1) % SKY_DEPLOY_MAX_FAILURES;
	}
	memcpy(dp->failed[slot].sha, sha, 32);
	snprintf(dp->failed[slot].why, sizeof dp->failed[slot].why, "%.200s", why);
}

static void forget_failure(sky_deploy *dp, const unsigned char sha[32])
{
	for (int i = 0; i < SKY_DEPLOY_MAX_FAILURES; i++)
		if (memcmp(dp->failed[i].sha, sha, 32) == 0)
			dp->failed[i].why[0] = '\0';
}

/* The answer to an upload, as a job reply (submit_id: the hash's first 32
 * hex digits, which is what `sky job submit` waits for). */
static void upload_reply(const char *op, const unsigned char sha[32], int ok, const char *what,
			 sky_deploy_publish_fn pub, void *ctx)
{
	char hex[65], topic[SKY_TOPIC_BUF], buf[SKY_JOB_REPLY_MAX_BYTES];
	sky_sha256_hex(sha, hex);
	hex[32] = '\0'; /* submit_id is 8-32 hex digits */
	if (sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_REPLY) != 0)
		return;
	cJSON *doc = sky_json_new_object();
	int good = doc && cJSON_AddNumberToObject(doc, "v", 1) &&
		   cJSON_AddStringToObject(doc, "submit_id", hex) &&
		   cJSON_AddStringToObject(doc, "job", "weights") &&
		   cJSON_AddBoolToObject(doc, "ok", ok) &&
		   cJSON_AddStringToObject(doc, ok ? "state" : "error", what);
	int n = good ? sky_json_print(doc, buf, sizeof buf) : -1;
	sky_json_free(doc);
	if (n > 0)
		pub(ctx, topic, buf, (size_t)n);
}

static void refuse_upload(sky_deploy *dp, sky_deploy_upload *u, const char *op,
			  const unsigned char sha[32], const char *why, sky_deploy_publish_fn pub,
			  void *ctx)
{
	char hex[65], line[300];
	sky_sha256_hex(sha, hex);
	snprintf(line, sizeof line, "model %.16s..: %s", hex, why);
	SKY_WARN("upload from %s refused: %s", op, line);
	remember_failure(dp, sha, line);
	upload_reply(op, sha, 0, line, pub, ctx);
	if (u) {
		char part[700];
		if (store_path(dp, "models", u->sha, ".part", part, sizeof part) == 0)
			sky_file_remove(part);
		u->active = 0;
	}
}

/* A chunk that did not decode (msg says why). One whose header could be
 * read names the model whose upload it spoils: that upload is refused,
 * once per upload and not once per chunk; any other is dropped. */
static void on_bad_chunk(sky_deploy *dp, const char *op, const sky_chunk *c, sky_chunk_reason why,
			 size_t len, const char *msg, sky_deploy_publish_fn pub, void *ctx)
{
	if (why == SKY_CHUNK_BAD_HASH || (why == SKY_CHUNK_MALFORMED && len >= 64)) {
		sky_deploy_upload *u = NULL;
		int answered = 0;
		for (int i = 0; i < SKY_DEPLOY_MAX_FAILURES; i++)
			answered |= !memcmp(dp->failed[i].sha, c->file_sha, 32) && dp->failed[i].why[0];
		for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++)
			if (dp->up[i].active && !memcmp(dp->up[i].sha, c->file_sha, 32) &&
			    !strcmp(dp->up[i].op, op))
				u = &dp->up[i];
		if (u || !answered) /* once per upload, not once per chunk */
			refuse_upload(dp, u, op, c->file_sha, msg, pub, ctx);
	} else {
		SKY_WARN("upload from %s: chunk dropped: %s", op, msg);
	}
}

/* Frees the slots of uploads that sent nothing for SKY_DEPLOY_UPLOAD_IDLE_S
 * (their .part files removed). */
static void drop_abandoned(sky_deploy *dp, double now)
{
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++) {
		sky_deploy_upload *x = &dp->up[i];
		char part[700], hex[65];
		if (!x->active || x->hashing || now - x->last < SKY_DEPLOY_UPLOAD_IDLE_S)
			continue;
		sky_sha256_hex(x->sha, hex);
		SKY_WARN("upload of model %.16s.. from %s abandoned: no chunk for %.0f s", hex, x->op,
			 now - x->last);
		if (store_path(dp, "models", x->sha, ".part", part, sizeof part) == 0)
			sky_file_remove(part);
		x->active = 0;
	}
}

typedef struct stored_walk {
	const sky_deploy *dp;
	const char *op;
	long long bytes;
} stored_walk;

static int each_owner(void *ctx, const char *name)
{
	stored_walk *w = ctx;
	char path[800], who[SKY_TOPIC_SEGMENT_MAX + 2];
	size_t n = strlen(name);
	snprintf(path, sizeof path, "%s/models/%s", w->dp->state_dir, name);
	long got = sky_file_read(path, who, sizeof who - 1);
	if (got <= 0 || n < 3)
		return 0;
	who[got] = '\0';
	who[strcspn(who, "\n")] = '\0';
	if (strcmp(who, w->op) != 0)
		return 0;
	snprintf(path, sizeof path, "%s/models/%.*s.safetensors", w->dp->state_dir, (int)(n - 3),
		 name);
	long long b = sky_file_size(path);
	if (b > 0)
		w->bytes += b;
	return 0;
}

/* Bytes of the models op uploaded that the store still holds. */
static long long stored_of(const sky_deploy *dp, const char *op)
{
	char dir[700];
	stored_walk w = {dp, op, 0};
	snprintf(dir, sizeof dir, "%s/models", dp->state_dir);
	sky_file_list(dir, ".op", each_owner, &w);
	return w.bytes;
}

/* A slot for op's new upload: a free one, unless op holds its limit; with
 * none free, op's own oldest upload gives way. Another operator's upload
 * never does. Returns the slot, or NULL with why said. */
static sky_deploy_upload *slot_for(sky_deploy *dp, const char *op, sky_deploy_upload *free_slot,
				   char *why, size_t cap)
{
	sky_deploy_upload *oldest = NULL;
	int mine = 0;
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++) {
		sky_deploy_upload *x = &dp->up[i];
		if (!x->active || strcmp(x->op, op))
			continue;
		mine++;
		if (!x->hashing && (!oldest || x->started < oldest->started))
			oldest = x;
	}
	if (dp->uploads_per_op > 0 && mine >= dp->uploads_per_op) {
		snprintf(why, cap, "operator %s has %d model uploads in progress (its limit is %d)", op,
			 mine, dp->uploads_per_op);
		return NULL;
	}
	if (free_slot)
		return free_slot;
	if (oldest) {
		SKY_WARN("upload of a model from %s abandoned for its newer one", op);
		return oldest;
	}
	snprintf(why, cap, "all %d upload slots are taken by other operators' uploads; try again "
			   "later", SKY_DEPLOY_MAX_UPLOADS);
	return NULL;
}

/* Chunk 0 of a model from op: a new upload, or one sent again from the
 * start. u is op's upload of it in progress, or NULL: then a slot
 * (slot_for). The part file starts empty. Returns the upload, or NULL when
 * refused (answered). */
static sky_deploy_upload *begin_upload(sky_deploy *dp, sky_deploy_upload *u,
				       sky_deploy_upload *free_slot, const char *op,
				       const sky_chunk *c, const char *part, const char *hex,
				       sky_deploy_publish_fn pub, void *ctx)
{
	if (!u && dp->stored_per_op > 0) {
		long long held = stored_of(dp, op);
		if (held + (long long)c->file_bytes > dp->stored_per_op) {
			char why[200];
			snprintf(why, sizeof why,
				 "operator %s holds %lld bytes of models; %llu more is above its limit "
				 "of %lld",
				 op, held, (unsigned long long)c->file_bytes, dp->stored_per_op);
			refuse_upload(dp, NULL, op, c->file_sha, why, pub, ctx);
			return NULL;
		}
	}
	if (!u) {
		char why[200];
		if (!(u = slot_for(dp, op, free_slot, why, sizeof why))) {
			refuse_upload(dp, NULL, op, c->file_sha, why, pub, ctx);
			return NULL;
		}
	}
	char dir[600];
	snprintf(dir, sizeof dir, "%s/models", dp->state_dir);
	if (sky_file_mkdirs(dir, 0700) != 0) {
		refuse_upload(dp, NULL, op, c->file_sha, "the planner cannot create its model store",
			      pub, ctx);
		return NULL;
	}
	sky_file_remove(part);
	memset(u, 0, sizeof *u);
	u->active = 1;
	snprintf(u->op, sizeof u->op, "%s", op);
	memcpy(u->sha, c->file_sha, 32);
	u->bytes = c->file_bytes;
	u->chunk_bytes = c->chunk_bytes;
	u->total = c->total;
	u->started = u->last = sky_clock_s();
	forget_failure(dp, c->file_sha);
	SKY_INFO("upload of model %.16s.. from %s: %llu bytes in %u chunks", hex, op,
		 (unsigned long long)c->file_bytes, c->total);
	return u;
}

/* The hasher's thread: the whole part file of one upload. */
static void *hash_main(void *arg)
{
	sky_deploy_upload *u = arg;
	u->hash_rc = sky_sha256_file(u->part, u->got, &u->got_bytes);
	atomic_store(&u->hashed, 1);
	return NULL;
}

/* u's last chunk is in part: its hash goes to a thread of its own
 * (finish_upload takes it from there), or is taken here when no thread
 * can start. */
static void end_upload(sky_deploy *dp, sky_deploy_upload *u, const char *part)
{
	snprintf(u->part, sizeof u->part, "%s", part);
	atomic_store(&u->hashed, 0);
	u->hashing = 1;
	if (sky_thread_start(&u->hasher, hash_main, u) != 0) {
		u->hashing = 0;
		hash_main(u);
	}
	(void)dp;
}

/* u's file is hashed: stores it as the model when it hashes to the
 * model's SHA-256, else refuses the upload; answers its operator either
 * way. */
static void finish_upload(sky_deploy *dp, sky_deploy_upload *u, sky_deploy_publish_fn pub,
			  void *ctx)
{
	char path[700], hex[65];
	sky_sha256_hex(u->sha, hex);
	if (store_path(dp, "models", u->sha, ".safetensors", path, sizeof path) != 0) {
		refuse_upload(dp, u, u->op, u->sha, "the planner cannot name its model store", pub,
			      ctx);
		return;
	}
	if (u->hash_rc != 0 || u->got_bytes != u->bytes || memcmp(u->got, u->sha, 32)) {
		char got[65], why_s[200];
		sky_sha256_hex(u->got, got);
		snprintf(why_s, sizeof why_s,
			 "model hash mismatch: the %llu bytes received hash to %.16s.., the upload "
			 "names %.16s..",
			 (unsigned long long)u->got_bytes, got, hex);
		refuse_upload(dp, u, u->op, u->sha, why_s, pub, ctx);
		return;
	}
	if (sky_file_rename(u->part, path) != 0) {
		refuse_upload(dp, u, u->op, u->sha, "the planner cannot write its model store", pub,
			      ctx);
		return;
	}
	u->active = 0;
	dp->models_stored++;
	char opf[720], line[SKY_TOPIC_SEGMENT_MAX + 2];
	int ln = snprintf(line, sizeof line, "%s\n", u->op);
	if (store_path(dp, "models", u->sha, ".op", opf, sizeof opf) != 0 ||
	    sky_file_write(opf, line, (size_t)ln, 0600) != 0)
		SKY_WARN("model %.16s..: cannot note its uploader %s", hex, u->op);
	SKY_INFO("model %.16s.. from %s stored: %s (%llu bytes, %u chunks)", hex, u->op, path,
		 (unsigned long long)u->got_bytes, u->total);
	upload_reply(u->op, u->sha, 1, "stored", pub, ctx);
}

/* The uploads whose hash is done, finished. */
static void pump_hashes(sky_deploy *dp, sky_deploy_publish_fn pub, void *ctx)
{
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++) {
		sky_deploy_upload *u = &dp->up[i];
		if (!u->active || !u->hashing || !atomic_load(&u->hashed))
			continue;
		sky_thread_join(&u->hasher);
		u->hashing = 0;
		finish_upload(dp, u, pub, ctx);
	}
}

void sky_deploy_on_weights(sky_deploy *dp, const char *op, const unsigned char *p, size_t len,
			   sky_deploy_publish_fn pub, void *ctx)
{
	sky_chunk c;
	sky_chunk_reason why;
	sky_diag d;
	char path[700], part[700], hex[65];
	sky_diag_clear(&d);
	int rc = sky_chunk_decode(p, len, &c, &why, &d);
	if (rc == 0 && c.kind != SKY_CHUNK_MODEL)
		rc = sky_diag_set(&d, SKY_EFORMAT, "chunk %u: not a model chunk", c.index);
	if (rc) {
		on_bad_chunk(dp, op, &c, why, len, d.msg, pub, ctx);
		return;
	}
	sky_sha256_hex(c.file_sha, hex);
	if (store_path(dp, "models", c.file_sha, ".safetensors", path, sizeof path) != 0 ||
	    store_path(dp, "models", c.file_sha, ".part", part, sizeof part) != 0)
		return;
	if (sky_file_exists(path)) {
		/* already here (a resubmit): say so at once, so the operator stops */
		if (c.index == 0 || c.index + 1 == c.total)
			upload_reply(op, c.file_sha, 1, "stored", pub, ctx);
		return;
	}
	sky_deploy_upload *u = NULL, *free_slot = NULL;
	drop_abandoned(dp, sky_clock_s());
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++) {
		sky_deploy_upload *x = &dp->up[i];
		if (x->active && !memcmp(x->sha, c.file_sha, 32) && !strcmp(x->op, op))
			u = x;
		else if (!x->active && !free_slot)
			free_slot = x;
	}
	if (u && u->hashing)
		return; /* its last chunk is in and being hashed: a resend waits for the answer */
	if (c.index == 0 &&
	    !(u = begin_upload(dp, u, free_slot, op, &c, part, hex, pub, ctx)))
		return;
	if (!u) {
		for (int i = 0; i < SKY_DEPLOY_MAX_FAILURES; i++)
			if (!memcmp(dp->failed[i].sha, c.file_sha, 32) && dp->failed[i].why[0])
				return; /* the rest of an upload already refused (and answered) */
		char why_s[160];
		snprintf(why_s, sizeof why_s, "chunk %u of %u came with no upload in progress (chunk 0 "
			 "lost, or the upload was already refused)", c.index, c.total);
		refuse_upload(dp, NULL, op, c.file_sha, why_s, pub, ctx);
		return;
	}
	sky_diag_clear(&d);
	if (sky_chunk_expect(&c, SKY_CHUNK_MODEL, u->sha, u->bytes, u->chunk_bytes, u->next, &why,
			     &d) != 0) {
		refuse_upload(dp, u, op, c.file_sha, d.msg, pub, ctx);
		return;
	}
	if (sky_file_append(part, c.data, c.len, 0600) != 0) {
		refuse_upload(dp, u, op, c.file_sha, "the planner cannot write its model store", pub,
			      ctx);
		return;
	}
	u->next++;
	u->last = sky_clock_s();
	if (u->next < u->total)
		return;
	end_upload(dp, u, part);
	if (!u->hashing) /* hashed here: no thread could start */
		finish_upload(dp, u, pub, ctx);
}

int sky_deploy_model_path(sky_deploy *dp, const char *sha_hex, char *path, size_t cap,
			  sky_diag *d)
{
	unsigned char sha[32];
	if (sky_sha256_parse(sha_hex, sha) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "weights must be 64 hex digits (a SHA-256)");
	if (store_path(dp, "models", sha, ".safetensors", path, cap) != 0)
		return sky_diag_set(d, SKY_ERANGE, "state directory name too long");
	if (sky_file_exists(path))
		return 0;
	for (int i = 0; i < SKY_DEPLOY_MAX_FAILURES; i++)
		if (memcmp(dp->failed[i].sha, sha, 32) == 0 && dp->failed[i].why[0])
			return sky_diag_set(d, SKY_ENOTFOUND, "%s", dp->failed[i].why);
	return sky_diag_set(d, SKY_ENOTFOUND,
			    "model %.16s.. was not uploaded to the planner (sky job submit "
			    "--weights uploads it)",
			    sha_hex);
}

int sky_deploy_check(sky_deploy *dp, const char *sha_hex, const sky_model_cfg *cfg, sky_diag *d)
{
	char path[700];
	int rc = sky_deploy_model_path(dp, sha_hex, path, sizeof path, d);
	if (rc)
		return rc;
	if (!dp->ops || !dp->ops->check)
		return sky_diag_set(d, SKY_EUNSUPPORTED, "this planner cannot read model files");
	return dp->ops->check(path, cfg, d);
}

int sky_deploy_cut(sky_deploy *dp, const char *sha_hex, int first, int last, sky_plan_slice *out,
		   sky_diag *d)
{
	char model[700], tmp[700], final[700], dir[600];
	unsigned char sha[32];
	int64_t bytes = 0;
	memset(out, 0, sizeof *out);
	int rc = sky_deploy_model_path(dp, sha_hex, model, sizeof model, d);
	if (rc)
		return rc;
	if (!dp->ops || !dp->ops->cut)
		return sky_diag_set(d, SKY_EUNSUPPORTED, "this planner cannot cut slices");
	sky_file_touch(model); /* used: the store's least recently used goes first */
	snprintf(dir, sizeof dir, "%s/slices", dp->state_dir);
	if (sky_file_mkdirs(dir, 0700) != 0)
		return sky_diag_set(d, SKY_EIO, "cannot create %s", dir);
	snprintf(tmp, sizeof tmp, "%s/cut-%d-%d.tmp", dir, first, last);
	if ((rc = dp->ops->cut(model, first, last, tmp, out->sha256, &bytes, d)) != 0)
		return rc;
	if (sky_sha256_parse(out->sha256, sha) != 0 ||
	    store_path(dp, "slices", sha, ".safetensors", final, sizeof final) != 0 ||
	    sky_file_rename(tmp, final) != 0) {
		sky_file_remove(tmp);
		return sky_diag_set(d, SKY_EIO, "cannot keep the slice %d-%d in %s", first, last, dir);
	}
	out->bytes = bytes;
	out->chunk_bytes = (int)dp->chunk_bytes;
	out->chunks = (int)sky_chunk_count((uint64_t)bytes, dp->chunk_bytes);
	return 0;
}

int sky_deploy_on_slice_req(sky_deploy *dp, const char *board, const sky_slice_req *r,
			    const sky_plan_slice *want, double now, sky_diag *d)
{
	char hex[65], path[700];
	unsigned char sha[32];
	sky_sha256_hex(r->sha, hex);
	if (!want || !want->sha256[0] || sky_sha256_parse(want->sha256, sha) != 0 ||
	    memcmp(sha, r->sha, 32) != 0)
		return sky_diag_set(d, SKY_EAUTH,
				    "board %s asked for slice %.16s.. of job %s, which is not the "
				    "slice the job's plan gives it",
				    board, hex, r->job);
	if (store_path(dp, "slices", sha, ".safetensors", path, sizeof path) != 0)
		return sky_diag_set(d, SKY_ERANGE, "state directory name too long");
	sky_file_touch(path); /* used: the store's least recently used goes first */
	/* one transfer per board: a new request replaces the old one */
	sky_deploy_xfer *x = NULL;
	for (int i = 0; i < SKY_DEPLOY_MAX_XFERS && !x; i++)
		if (dp->x[i].active && !strcmp(dp->x[i].board, board))
			x = &dp->x[i];
	for (int i = 0; i < SKY_DEPLOY_MAX_XFERS && !x; i++)
		if (!dp->x[i].active)
			x = &dp->x[i];
	if (!x)
		return sky_diag_set(d, SKY_ERANGE, "board %s: %d slice transfers already running",
				    board, SKY_DEPLOY_MAX_XFERS);
	if (x->active)
		xfer_end(x);
	memset(x, 0, sizeof *x);
	int rc = sky_file_map_open(&x->map, path);
	if (rc)
		return sky_diag_set(d, rc, "slice %s: %s", path, sky_strerror(rc));
	if ((int64_t)x->map.size != want->bytes || want->chunk_bytes <= 0 ||
	    sky_chunk_count(x->map.size, (uint32_t)want->chunk_bytes) != (uint32_t)want->chunks ||
	    r->from >= (uint32_t)want->chunks) {
		sky_file_map_close(&x->map);
		return sky_diag_set(d, SKY_ERANGE, "board %s: slice %.16s.. from chunk %u: %s", board,
				    hex, r->from,
				    r->from >= (uint32_t)want->chunks ? "past its last chunk"
								      : "the stored slice changed size");
	}
	if (sky_topic_job_to(x->topic, sizeof x->topic, r->job, SKY_TOPIC_SLICE, board) != 0) {
		sky_file_map_close(&x->map);
		return sky_diag_set(d, SKY_EINVAL, "board %s, job %s: no slice topic", board, r->job);
	}
	x->active = 1;
	snprintf(x->board, sizeof x->board, "%s", board);
	snprintf(x->job, sizeof x->job, "%s", r->job);
	memcpy(x->sha, sha, 32);
	x->chunk_bytes = (uint32_t)want->chunk_bytes;
	x->total = (uint32_t)want->chunks;
	x->from = x->next = r->from;
	x->started = x->next_at = now;
	SKY_INFO("slice %.16s.. for board %s (job %s): sending chunks %u-%u of %u", hex, board,
		 r->job, r->from, x->total - 1, x->total);
	return 0;
}

int sky_deploy_pump(sky_deploy *dp, double now, sky_deploy_publish_fn pub, void *ctx)
{
	int active = 0;
	pump_hashes(dp, pub, ctx);
	for (int i = 0; i < SKY_DEPLOY_MAX_XFERS; i++) {
		sky_deploy_xfer *x = &dp->x[i];
		if (!x->active)
			continue;
		for (int k = 0; k < SKY_DEPLOY_WINDOW && x->next < x->total && now >= x->next_at;
		     k++) {
			int n = sky_chunk_encode(SKY_CHUNK_SLICE, x->map.data, x->map.size, x->sha,
						 x->chunk_bytes, x->next, dp->msg, sizeof dp->msg);
			if (n <= 0 || pub(ctx, x->topic, dp->msg, (size_t)n) != 0)
				break; /* not connected: the board asks again */
			x->wire_bytes += n;
			dp->chunks_sent++;
			dp->bytes_sent += n;
			x->next++;
			if (dp->pace_ms > 0) {
				x->next_at = now + dp->pace_ms / 1000.0;
				break;
			}
		}
		if (x->next >= x->total) {
			char hex[65];
			sky_sha256_hex(x->sha, hex);
			SKY_INFO("slice %.16s.. sent to board %s (job %s): chunks %u-%u of %u, %lld "
				 "bytes on the wire in %.3f s",
				 hex, x->board, x->job, x->from, x->total - 1, x->total,
				 x->wire_bytes, now - x->started);
			dp->slices_sent++;
			xfer_end(x);
			continue;
		}
		active++;
	}
	return active;
}
