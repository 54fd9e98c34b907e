/* The planner's side of deploying a model to a serving fleet.
 *
 * 1. An operator uploads the int8 model (`sky job submit --task infer
 *    --weights F`) in hashed chunks (sky_chunk.h, kind SKY_CHUNK_MODEL) on
 *    sky/v1/jobs/<op>/weights, then submits the job naming the model's
 *    SHA-256. Chunks must come in order; each is verified on arrival and
 *    appended to <state>/models/<sha>.part; after the last, the whole file
 *    must hash to the name the chunks carry, and only then is it renamed to
 *    <state>/models/<sha>.safetensors. The planner answers the upload on
 *    sky/v1/jobs/<op>/reply as a sky_job_reply whose submit_id is the first
 *    32 hex digits of the model's hash and whose job is "weights": "stored"
 *    (at the last chunk, or at the first when the model is already stored),
 *    or the reason it refused a chunk or the whole (then the upload is
 *    dropped, and a submit naming that model is refused with the same
 *    reason).
 * 2. At planning, each stage's slice is cut from the stored model (the
 *    runtime's sky_slice_cut, through sky_deploy_model_ops) into
 *    <state>/slices/<sha>.safetensors, and its hash, size and chunking go
 *    into the signed plan.
 * 3. A board that lacks its slice asks on sky/v1/board/<id>/slice-req
 *    ({"job","sha256","from"}); the planner checks the slice is the one
 *    the job's plan gives that board and sends chunks from..total-1 on
 *    sky/v1/job/<job>/slice/<id> (QoS 1), pipelined: several per loop turn,
 *    never waiting for one to arrive (or one every pace_ms, to spare slow
 *    links and to let tests interrupt a download). A new request from the
 *    same board replaces its transfer. */
#ifndef SKY_DEPLOY_H
#define SKY_DEPLOY_H

#include "sky_chunk.h"
#include "sky_err.h"
#include "sky_thread.h"

#include <stdatomic.h>
#include "sky_file.h"
#include "sky_model.h"
#include "sky_planmsg.h"

#include <stddef.h>
#include <stdint.h>

/* Model file operations the planner needs but whose code is the runtime's
 * (safetensors, the int8 model): skyplan's main passes them in, so the
 * planner's code includes no runtime header. */
typedef struct sky_deploy_model_ops {
	/* Checks that the int8 model file at path has cfg's shapes, its layer
	 * count included. Returns 0, or an error with d saying what differs. */
	int (*check)(const char *path, const sky_model_cfg *cfg, sky_diag *d);
	/* sky_slice_cut (runtime/sky_slice.h). */
	int (*cut)(const char *model_path, int first, int last, const char *out_path,
		   char sha256[65], int64_t *bytes, sky_diag *d);
} sky_deploy_model_ops;

/* Publishes len bytes on topic (QoS 1, not retained). Returns 0 or < 0. */
typedef int (*sky_deploy_publish_fn)(void *ctx, const char *topic, const void *data, size_t len);

#define SKY_DEPLOY_MAX_UPLOADS 8
#define SKY_DEPLOY_MAX_FAILURES 16
#define SKY_DEPLOY_MAX_XFERS 64
/* chunks one transfer sends per pump (when not paced) */
#define SKY_DEPLOY_WINDOW 16

typedef struct sky_deploy_upload {
	int active;
	char op[SKY_TOPIC_SEGMENT_MAX + 1];
	unsigned char sha[32];
	uint64_t bytes;
	uint32_t chunk_bytes, total, next;
	double started, last; /* monotonic: chunk 0, the newest chunk */
	/* the last chunk is in: the whole file is hashed on a thread of its
	 * own (up to SKY_CHUNK_MAX_FILE bytes, which takes longer than the
	 * planner loop's watchdog allows), and sky_deploy_pump finishes the
	 * upload once it is done; chunks that come meanwhile are dropped */
	int hashing;
	sky_thread hasher;
	_Atomic int hashed; /* set by the hasher when got, got_bytes, hash_rc are written */
	int hash_rc;
	unsigned char got[32];
	uint64_t got_bytes;
	char part[700];
} sky_deploy_upload;

/* An upload that sent no chunk for this long is abandoned: its slot is
 * free again and its .part file removed. */
#define SKY_DEPLOY_UPLOAD_IDLE_S 60.0

typedef struct sky_deploy_xfer {
	int active;
	char board[SKY_TOPIC_SEGMENT_MAX + 1], job[SKY_TOPIC_SEGMENT_MAX + 1];
	char topic[SKY_TOPIC_BUF];
	unsigned char sha[32];
	sky_file_map map;
	uint32_t chunk_bytes, from, next, total;
	double started, next_at;
	long long wire_bytes;
} sky_deploy_xfer;

typedef struct sky_deploy {
	char state_dir[512];
	const sky_deploy_model_ops *ops;
	uint32_t chunk_bytes;
	int pace_ms;
	sky_deploy_upload up[SKY_DEPLOY_MAX_UPLOADS];
	/* uploads one operator may have in progress (0: any free slot); one
	 * operator's upload never takes a slot another's holds */
	int uploads_per_op;
	/* bytes of stored models one operator may hold (0: no bound); each
	 * stored model's uploader is kept beside it, <state>/models/<sha>.op */
	long long stored_per_op;
	struct {
		unsigned char sha[32];
		char why[201]; /* a job reply's error (sky_service.h) */
	} failed[SKY_DEPLOY_MAX_FAILURES];
	int next_failed;
	sky_deploy_xfer x[SKY_DEPLOY_MAX_XFERS];
	/* totals since start (logged, and for tests) */
	long models_stored, slices_sent, chunks_sent;
	long long bytes_sent;
	unsigned char msg[SKY_CHUNK_MAX_BYTES]; /* one chunk being built */
} sky_deploy;

/* Sets dp up for the planner's state directory. chunk_bytes 0: the
 * default. Cannot fail (directories are made when first needed). */
void sky_deploy_init(sky_deploy *dp, const char *state_dir, const sky_deploy_model_ops *ops,
		     int chunk_bytes, int pace_ms);
/* Ends every transfer (unmaps) and waits for every hash in progress.
 * NULL-safe; may be called twice. */
void sky_deploy_free(sky_deploy *dp);

/* One upload chunk from operator op (its CN, vouched for by the ACL):
 * verified, stored, and answered on op's reply topic through pub. */
void sky_deploy_on_weights(sky_deploy *dp, const char *op, const unsigned char *p, size_t len,
			   sky_deploy_publish_fn pub, void *ctx);

/* The stored model named sha_hex: its path into path. Returns 0, or
 * SKY_ENOTFOUND with d saying why (its upload's refusal, if one was seen)
 * / SKY_EFORMAT (not a hash). */
int sky_deploy_model_path(sky_deploy *dp, const char *sha_hex, char *path, size_t cap,
			  sky_diag *d);

/* Checks the stored model against the job's model cfg (layers included).
 * Returns 0, SKY_EUNSUPPORTED (no model ops), or the check's error. */
int sky_deploy_check(sky_deploy *dp, const char *sha_hex, const sky_model_cfg *cfg, sky_diag *d);

/* Cuts half-layers [first, last] of the stored model sha_hex into
 * <state>/slices/<slice sha>.safetensors and fills out (hash, size, chunks
 * of the planner's chunk size). Returns 0 or the cut's error. */
int sky_deploy_cut(sky_deploy *dp, const char *sha_hex, int first, int last, sky_plan_slice *out,
		   sky_diag *d);

/* Board board asks for slice r->sha of job r->job, from chunk r->from; want
 * is the slice the job's plan gives the board (NULL: none). Starts (or
 * restarts) the transfer. Returns 0, or SKY_EAUTH / SKY_ENOTFOUND /
 * SKY_ERANGE with d saying why nothing is sent. */
int sky_deploy_on_slice_req(sky_deploy *dp, const char *board, const sky_slice_req *r,
			    const sky_plan_slice *want, double now, sky_diag *d);

/* Sends the chunks that are due (each transfer up to SKY_DEPLOY_WINDOW, or
 * one per pace_ms) through pub, and ends finished transfers with a log
 * line (bytes on the wire); finishes the uploads whose hash is done
 * (stored, or refused on a mismatch; answered through pub). Returns how
 * many transfers are still active. */
int sky_deploy_pump(sky_deploy *dp, double now, sky_deploy_publish_fn pub, void *ctx);

#endif
