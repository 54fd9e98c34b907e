/* The running training jobs skyplan follows, kept across its restarts.
 *
 * skyplan follows a training job with checkpoints until it is done, to
 * re-plan it when a board of its plan dies (planner/service.c). What it
 * needs for that is written, atomically, to <state>/jobs/<job>.run.json
 * whenever it changes (a plan published, a pause, a resume) and removed
 * when the job is done:
 *   {"v":1,"job":"j1","req":"<the job request as submitted, sky_job_req_encode>",
 *    "epoch":7,"generation":2,"predicted_step_s":0.12,"paused":false,"pause_why":"",
 *    "stages":[{"board":"b1","first":0,"last":3},{"board":"b3","first":4,"last":7}]}
 * At start skyplan reads every such file (sky_jobstate_list), checks it
 * against the job's saved plan and takes the job's checkpoints back from
 * the store's index (sky_ckpt_restore), then goes on following it. The
 * plan epoch and generation only grow.
 *
 * A serving job (its request has "task":"infer" and re-plans on) is kept
 * the same way from its first plan on; its request holds the model's hash,
 * the clients allowed and the batch and queue settings, and its file adds
 * the SHA-256 of the signed plan it follows (<state>/plans/<job>.env) and
 * each stage's slice (<state>/slices/<sha>.safetensors) with its size:
 *   "plan_sha256":"<64 hex>",
 *   "stages":[{"board":"b1","first":0,"last":3,"slice":"<64 hex>","slice_bytes":123},...]
 * At start the plan must verify and hash to that, and the model and every
 * slice must hash to their names (sky_jobstate_check_file), or the job is
 * not followed at all (a slice that does not may be cut again from the
 * model first). */
#ifndef SKY_JOBSTATE_H
#define SKY_JOBSTATE_H

#include "sky_err.h"
#include "sky_jobstat.h"
#include "sky_jobreq.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_JOBSTATE_SUFFIX ".run.json"
#define SKY_JOBSTATE_MAX_STAGES 64
#define SKY_JOBSTATE_MAX_BYTES (32u << 10)
#define SKY_JOBSTATE_MAX_REPS 64 /* replica boards besides the stages' own, all stages */

typedef struct sky_jobstate {
	sky_job_req req;          /* as submitted (re-plans plan it again) */
	int64_t epoch;            /* of the job's current plan */
	int generation;           /* its plan count: 1 first, + 1 per re-plan */
	double predicted_s;       /* the current plan's simulated step */
	int paused;               /* 1: no plan over the boards left; retried */
	char pause_why[200];
	int n_stages;
	char board[SKY_JOBSTATE_MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 1];
	int first[SKY_JOBSTATE_MAX_STAGES], last[SKY_JOBSTATE_MAX_STAGES];
	/* serving jobs only (req.infer): the signed plan's hash, each stage's slice */
	char plan_sha256[65];
	char slice[SKY_JOBSTATE_MAX_STAGES][65];
	int64_t slice_bytes[SKY_JOBSTATE_MAX_STAGES];
	/* stage replicas (training): a stage with replicas adds its board's
	 * share and the others, "share":2,"replicas":[{"board":"b3","share":2}],
	 * and the file "micro_batch":B,"micro_batches":M (the plan's; 0 when
	 * absent: the request's) */
	int micro_batch, micro_batches;
	int exact_sum; /* "exact_sum":true: its plans sum in fixed point (sky_planmsg.h) */
	int share0[SKY_JOBSTATE_MAX_STAGES]; /* 0: the stage has no replicas */
	int n_rep;
	char rep_board[SKY_JOBSTATE_MAX_REPS][SKY_TOPIC_SEGMENT_MAX + 1];
	int rep_stage[SKY_JOBSTATE_MAX_REPS], rep_share[SKY_JOBSTATE_MAX_REPS];
} sky_jobstate;

/* <state_dir>/jobs/<job>.run.json into buf. Returns 0 or SKY_ERANGE. */
int sky_jobstate_path(const char *state_dir, const char *job, char *buf, size_t cap);
/* Writes js atomically. Returns 0 or SKY_ERANGE / SKY_ENOMEM / SKY_EIO with
 * d naming the file. */
int sky_jobstate_save(const char *state_dir, const sky_jobstate *js, sky_diag *d);
/* Reads the file at path. Returns 0, or SKY_ENOTFOUND / SKY_EIO /
 * SKY_EFORMAT (damaged: not JSON, a field missing or out of range, a
 * request that does not parse, a job other than the file's name says, a
 * job that is neither training with checkpoints nor serving with re-plans,
 * a serving job without its plan or slice hashes) with d naming the file
 * and what is wrong. */
int sky_jobstate_load(const char *path, sky_jobstate *js, sky_diag *d);
/* Checks that the file at path hashes to sha_hex (and is bytes long, when
 * bytes >= 0). Returns 0, or SKY_ENOTFOUND (missing) / SKY_EFORMAT (another
 * size) / SKY_EAUTH (another hash) / SKY_EIO with d naming what (e.g.
 * "slice of stage 1") and the file and saying what is wrong. */
int sky_jobstate_check_file(const char *path, const char *sha_hex, int64_t bytes,
			    const char *what, sky_diag *d);
/* Removes job's file (the job is done). Returns 0 or SKY_ENOTFOUND / SKY_EIO. */
int sky_jobstate_remove(const char *state_dir, const char *job);
/* The re-plans of job's log (<state_dir>/jobs/<job>.log.jsonl) back into t,
 * so `sky fleet status` still shows them after a restart; a re-plan's time
 * lost is taken as from its line to the next commit's (-1 if none). Lines
 * that do not parse are skipped. Returns how many were added (0: no log). */
int sky_jobstate_replans(const char *state_dir, const char *job, sky_jobstat *t);
/* Calls fn(ctx, path) for each <state_dir>/jobs/<job>.run.json, stopping
 * when it returns non-zero. Returns 0 (none is fine) or SKY_EIO. */
int sky_jobstate_list(const char *state_dir, int (*fn)(void *ctx, const char *path), void *ctx);

#endif
