/* The followed jobs' state files (see sky_jobstate.h). */
#define _GNU_SOURCE /* memmem */
#include "sky_jobstate.h"

#include "sky_chunk.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_planmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sky_jobstate_path(const char *state_dir, const char *job, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/jobs/%s" SKY_JOBSTATE_SUFFIX, state_dir, job);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* Stage k's share and replicas into its object st. Returns 1, 0 on no memory. */
static int add_replicas(cJSON *st, const sky_jobstate *js, int k)
{
	cJSON *reps = cJSON_AddArrayToObject(st, "replicas");
	int ok = reps && cJSON_AddNumberToObject(st, "share", js->share0[k]);
	for (int i = 0; ok && i < js->n_rep; i++) {
		if (js->rep_stage[i] != k)
			continue;
		cJSON *o = cJSON_CreateObject();
		ok = o && cJSON_AddItemToArray(reps, o) &&
		     cJSON_AddStringToObject(o, "board", js->rep_board[i]) &&
		     cJSON_AddNumberToObject(o, "share", js->rep_share[i]);
	}
	return ok;
}

/* Stage k's "share" and "replicas" from its object o, when it has them.
 * Returns 0 or SKY_EFORMAT with why. */
static int read_replicas(const cJSON *o, sky_jobstate *js, int k, sky_diag *why)
{
	const cJSON *reps = cJSON_GetObjectItemCaseSensitive(o, "replicas"), *r;
	if (!reps)
		return 0;
	int rc = sky_json_int(o, "share", 1, SKY_PLANMSG_MAX_MICRO, &js->share0[k],
			      "job state stage", why);
	if (rc)
		return rc;
	if (!cJSON_IsArray(reps))
		return sky_diag_set(why, SKY_EFORMAT, "stage %d: 'replicas' must be a list", k);
	cJSON_ArrayForEach(r, reps)
	{
		int i = js->n_rep;
		if (i == SKY_JOBSTATE_MAX_REPS)
			return sky_diag_set(why, SKY_EFORMAT, "more than %d replicas",
					    SKY_JOBSTATE_MAX_REPS);
		if ((rc = sky_json_str(r, "board", js->rep_board[i], sizeof js->rep_board[i],
				       "job state replica", why)) ||
		    (rc = sky_json_int(r, "share", 1, SKY_PLANMSG_MAX_MICRO, &js->rep_share[i],
				       "job state replica", why)))
			return rc;
		if (!sky_topic_segment_ok(js->rep_board[i]))
			return sky_diag_set(why, SKY_EFORMAT, "stage %d: replica board '%s' is not an id",
					    k, js->rep_board[i]);
		js->rep_stage[i] = k;
		js->n_rep++;
	}
	return 0;
}

int sky_jobstate_save(const char *state_dir, const sky_jobstate *js, sky_diag *d)
{
	static char req[SKY_JOB_MAX_BYTES + 1], buf[SKY_JOBSTATE_MAX_BYTES];
	char path[700];
	int rc = sky_jobstate_path(state_dir, js->req.job, path, sizeof path);
	if (rc)
		return sky_diag_set(d, rc, "job %s: state path too long", js->req.job);
	int rn = sky_job_req_encode(&js->req, req, sizeof req);
	if (rn < 0)
		return sky_diag_set(d, rn, "job %s: its request does not encode", js->req.job);
	cJSON *doc = sky_json_new_object(), *stages = cJSON_CreateArray();
	int ok = doc && stages && cJSON_AddNumberToObject(doc, "v", 1) &&
		 cJSON_AddStringToObject(doc, "job", js->req.job) &&
		 cJSON_AddStringToObject(doc, "req", req) &&
		 cJSON_AddNumberToObject(doc, "epoch", (double)js->epoch) &&
		 cJSON_AddNumberToObject(doc, "generation", js->generation) &&
		 cJSON_AddNumberToObject(doc, "predicted_step_s", js->predicted_s) &&
		 cJSON_AddBoolToObject(doc, "paused", js->paused) &&
		 cJSON_AddStringToObject(doc, "pause_why", js->pause_why);
	if (ok && js->req.infer)
		ok = cJSON_AddStringToObject(doc, "plan_sha256", js->plan_sha256) != NULL;
	for (int k = 0; ok && k < js->n_stages; k++) {
		cJSON *st = cJSON_CreateObject();
		ok = st && cJSON_AddItemToArray(stages, st) &&
		     cJSON_AddStringToObject(st, "board", js->board[k]) &&
		     cJSON_AddNumberToObject(st, "first", js->first[k]) &&
		     cJSON_AddNumberToObject(st, "last", js->last[k]);
		if (ok && js->req.infer)
			ok = cJSON_AddStringToObject(st, "slice", js->slice[k]) &&
			     cJSON_AddNumberToObject(st, "slice_bytes", (double)js->slice_bytes[k]);
		if (ok && js->share0[k] > 0)
			ok = add_replicas(st, js, k);
	}
	if (ok && js->micro_batch > 0)
		ok = cJSON_AddNumberToObject(doc, "micro_batch", js->micro_batch) &&
		     cJSON_AddNumberToObject(doc, "micro_batches", js->micro_batches);
	if (ok && js->exact_sum)
		ok = cJSON_AddBoolToObject(doc, "exact_sum", 1) != NULL;
	if (ok) {
		cJSON_AddItemToObject(doc, "stages", stages);
		stages = NULL;
	}
	int n = ok ? sky_json_print(doc, buf, sizeof buf) : SKY_ENOMEM;
	cJSON_Delete(stages);
	sky_json_free(doc);
	if (n < 0)
		return sky_diag_set(d, n, "job %s: state does not fit %zu bytes", js->req.job,
				    sizeof buf);
	char dir[640];
	snprintf(dir, sizeof dir, "%s/jobs", state_dir);
	sky_file_mkdirs(dir, 0700);
	if ((rc = sky_file_write(path, buf, (size_t)n, 0600)) != 0)
		return sky_diag_set(d, rc, "cannot write %s", path);
	return 0;
}

/* The file's own job name from its path: ".../jobs/<job>.run.json". */
static void name_of(const char *path, char *job, size_t cap)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	size_t n = strlen(b), sl = sizeof SKY_JOBSTATE_SUFFIX - 1;
	n = n > sl ? n - sl : 0;
	snprintf(job, cap, "%.*s", (int)(n < cap ? n : cap - 1), b);
}

/* A serving job's file names its signed plan and every stage's slice by
 * hash. Returns 0 or SKY_EFORMAT with why. */
static int serving_ok(const sky_jobstate *js, sky_diag *why)
{
	unsigned char sha[32];
	if (sky_sha256_parse(js->plan_sha256, sha) != 0)
		return sky_diag_set(why, SKY_EFORMAT,
				    "serving job %s: 'plan_sha256' must be 64 hex digits",
				    js->req.job);
	for (int k = 0; k < js->n_stages; k++)
		if (sky_sha256_parse(js->slice[k], sha) != 0 || js->slice_bytes[k] <= 0)
			return sky_diag_set(why, SKY_EFORMAT,
					    "serving job %s: stage %d has no 'slice' (64 hex digits) "
					    "and 'slice_bytes'",
					    js->req.job, k);
	return 0;
}

int sky_jobstate_load(const char *path, sky_jobstate *js, sky_diag *d)
{
	static char buf[SKY_JOBSTATE_MAX_BYTES], req[SKY_JOB_MAX_BYTES + 1];
	char job[SKY_TOPIC_SEGMENT_MAX + 1] = "", want[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_diag why;
	sky_diag_clear(&why);
	memset(js, 0, sizeof *js);
	long n = sky_file_read(path, buf, sizeof buf);
	if (n < 0)
		return sky_diag_set(d, n == SKY_ERANGE ? SKY_EFORMAT : (int)n, "job state %s: %s", path,
				    n == SKY_ENOTFOUND ? "missing" : sky_strerror((int)n));
	cJSON *doc = sky_json_parse(buf, (size_t)n, &why);
	int v = 0, rc = doc ? 0 : SKY_EFORMAT;
	const cJSON *paused = doc ? cJSON_GetObjectItemCaseSensitive(doc, "paused") : NULL;
	const cJSON *stages = doc ? cJSON_GetObjectItemCaseSensitive(doc, "stages") : NULL, *o;
	if (!rc)
		(void)((rc = sky_json_int(doc, "v", 1, 1, &v, "job state", &why)) ||
		       (rc = sky_json_str(doc, "job", job, sizeof job, "job state", &why)) ||
		       (rc = sky_json_str(doc, "req", req, sizeof req, "job state", &why)) ||
		       (rc = sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &js->epoch, "job state",
					  &why)) ||
		       (rc = sky_json_int(doc, "generation", 1, 1 << 30, &js->generation, "job state",
					  &why)) ||
		       (rc = sky_json_num(doc, "predicted_step_s", 0, 1e9, &js->predicted_s,
					  "job state", &why)) ||
		       (rc = sky_json_str(doc, "pause_why", js->pause_why, sizeof js->pause_why,
					  "job state", &why)));
	if (!rc && !cJSON_IsBool(paused))
		rc = sky_diag_set(&why, SKY_EFORMAT, "'paused' must be true or false");
	js->paused = cJSON_IsTrue(paused);
	if (!rc && (!cJSON_IsArray(stages) || cJSON_GetArraySize(stages) < 1 ||
		    cJSON_GetArraySize(stages) > SKY_JOBSTATE_MAX_STAGES))
		rc = sky_diag_set(&why, SKY_EFORMAT, "'stages' must be a list of 1 to %d",
				  SKY_JOBSTATE_MAX_STAGES);
	if (!rc)
		cJSON_ArrayForEach(o, stages)
		{
			int k = js->n_stages;
			if ((rc = sky_json_str(o, "board", js->board[k], sizeof js->board[k],
					       "job state stage", &why)) ||
			    (rc = sky_json_int(o, "first", 0, 2 * SKY_PLANMSG_MAX_LAYERS, &js->first[k],
					       "job state stage", &why)) ||
			    (rc = sky_json_int(o, "last", js->first[k], 2 * SKY_PLANMSG_MAX_LAYERS,
					       &js->last[k], "job state stage", &why)))
				break;
			if (!sky_topic_segment_ok(js->board[k])) {
				rc = sky_diag_set(&why, SKY_EFORMAT, "stage %d: board '%s' is not an id",
						  k, js->board[k]);
				break;
			}
			if (cJSON_GetObjectItemCaseSensitive(o, "slice") &&
			    ((rc = sky_json_str(o, "slice", js->slice[k], sizeof js->slice[k],
						"job state stage", &why)) ||
			     (rc = sky_json_i64(o, "slice_bytes", 1, SKY_JSON_INT_MAX,
						&js->slice_bytes[k], "job state stage", &why))))
				break;
			if ((rc = read_replicas(o, js, k, &why)) != 0)
				break;
			js->n_stages++;
		}
	if (!rc && cJSON_GetObjectItemCaseSensitive(doc, "micro_batch"))
		(void)((rc = sky_json_int(doc, "micro_batch", 1, SKY_CAPS_MAX_BATCH, &js->micro_batch,
					  "job state", &why)) ||
		       (rc = sky_json_int(doc, "micro_batches", 1, SKY_PLANMSG_MAX_MICRO,
					  &js->micro_batches, "job state", &why)));
	js->exact_sum = doc && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "exact_sum"));
	if (!rc && cJSON_GetObjectItemCaseSensitive(doc, "plan_sha256"))
		rc = sky_json_str(doc, "plan_sha256", js->plan_sha256, sizeof js->plan_sha256,
				  "job state", &why);
	sky_json_free(doc);
	if (!rc) {
		sky_diag rd;
		sky_diag_clear(&rd);
		if (sky_job_req_parse(req, strlen(req), &js->req, &rd) != 0)
			rc = sky_diag_set(&why, SKY_EFORMAT, "its request: %s", rd.msg);
	}
	name_of(path, want, sizeof want);
	if (!rc && (strcmp(job, want) != 0 || strcmp(js->req.job, job) != 0))
		rc = sky_diag_set(&why, SKY_EFORMAT, "it names job '%s' (request '%s')", job,
				  js->req.job);
	if (!rc && !(js->req.train && js->req.ckpt_every > 0) &&
	    !(js->req.infer && !js->req.no_replan))
		rc = sky_diag_set(&why, SKY_EFORMAT,
				  "job %s is neither a training job with checkpoints nor a serving "
				  "job that re-plans",
				  job);
	if (!rc && js->req.infer)
		rc = serving_ok(js, &why);
	if (rc)
		return sky_diag_set(d, SKY_EFORMAT, "job state %s is damaged: %s", path,
				    why.msg[0] ? why.msg : sky_strerror(rc));
	return 0;
}

int sky_jobstate_check_file(const char *path, const char *sha_hex, int64_t bytes,
			    const char *what, sky_diag *d)
{
	unsigned char sha[32];
	char got[65];
	uint64_t n = 0;
	int rc = sky_sha256_file(path, sha, &n);
	if (rc)
		return sky_diag_set(d, rc, "%s %s: %s", what, path,
				    rc == SKY_ENOTFOUND ? "missing" : sky_strerror(rc));
	if (bytes >= 0 && (int64_t)n != bytes)
		return sky_diag_set(d, SKY_EFORMAT, "%s %s: %llu bytes, %lld expected", what, path,
				    (unsigned long long)n, (long long)bytes);
	sky_sha256_hex(sha, got);
	if (strcmp(got, sha_hex) != 0) /* both lower-case hex (sky_sha256_hex, the plan) */
		return sky_diag_set(d, SKY_EAUTH, "%s %s: hashes to %.16s.., not %.16s..", what, path,
				    got, sha_hex);
	return 0;
}

int sky_jobstate_remove(const char *state_dir, const char *job)
{
	char path[700];
	int rc = sky_jobstate_path(state_dir, job, path, sizeof path);
	return rc ? rc : sky_file_remove(path);
}

typedef struct list_ctx {
	const char *dir;
	int (*fn)(void *ctx, const char *path);
	void *ctx;
} list_ctx;

static int each(void *ctx, const char *name)
{
	list_ctx *l = ctx;
	char path[700];
	int n = snprintf(path, sizeof path, "%s/jobs/%s", l->dir, name);
	if (n < 0 || (size_t)n >= sizeof path)
		return 0;
	return l->fn(l->ctx, path);
}

int sky_jobstate_list(const char *state_dir, int (*fn)(void *ctx, const char *path), void *ctx)
{
	char dir[640];
	list_ctx l = {state_dir, fn, ctx};
	snprintf(dir, sizeof dir, "%s/jobs", state_dir);
	int rc = sky_file_list(dir, SKY_JOBSTATE_SUFFIX, each, &l);
	return rc == SKY_ENOTFOUND ? 0 : rc;
}

int sky_jobstate_replans(const char *state_dir, const char *job, sky_jobstat *t)
{
	char path[700];
	sky_file_map fm;
	memset(&fm, 0, sizeof fm);
	snprintf(path, sizeof path, "%s/jobs/%s.log.jsonl", state_dir, job);
	if (sky_file_map_open(&fm, path) != 0 || !fm.data)
		return 0;
	const char *p = (const char *)fm.data, *end = p + fm.size;
	sky_jobstat_replan rp;
	char reason[256];
	double at = 0;
	int n = 0, open = 0; /* open: rp waits for the commit after it */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		int replan = memmem(p, len, "\"event\":\"replan\"", 16) != NULL;
		int commit = memmem(p, len, "\"event\":\"commit\"", 16) != NULL;
		cJSON *doc = replan || (commit && open) ? sky_json_parse(p, len, NULL) : NULL;
		double tl = 0;
		if (doc && sky_json_num(doc, "t", 0, 1e12, &tl, "job log", NULL) == 0) {
			if (commit && open) {
				rp.lost_s = tl - at;
				sky_jobstat_add_replan(t, &rp);
				open = 0;
				n++;
			} else if (replan) {
				if (open) { /* one re-plan after another, no commit between */
					sky_jobstat_add_replan(t, &rp);
					n++;
				}
				memset(&rp, 0, sizeof rp);
				snprintf(rp.job, sizeof rp.job, "%s", job);
				int64_t e = 0;
				open = sky_json_int(doc, "generation", 1, 1 << 30, &rp.generation, "job log",
						    NULL) == 0 &&
				       sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &e, "job log", NULL) == 0 &&
				       sky_json_int(doc, "resume_step", 0, SKY_PLANMSG_MAX_STEPS,
						    &rp.resume_step, "job log", NULL) == 0 &&
				       sky_json_int(doc, "lost_steps", 0, SKY_PLANMSG_MAX_STEPS,
						    &rp.lost_steps, "job log", NULL) == 0 &&
				       sky_json_str(doc, "reason", reason, sizeof reason, "job log",
						    NULL) == 0;
				snprintf(rp.reason, sizeof rp.reason, "%.*s", (int)sizeof rp.reason - 1,
					 reason);
				rp.epoch = e;
				rp.at_unix = (int64_t)tl;
				rp.lost_s = -1;
				at = tl;
			}
		}
		sky_json_free(doc);
		p += len + 1;
	}
	if (open) {
		sky_jobstat_add_replan(t, &rp);
		n++;
	}
	sky_file_map_close(&fm);
	return n;
}
