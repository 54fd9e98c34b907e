/* Plan message: which board runs which contiguous run of half-layers of a
 * job. This is the PAYLOAD of the signed envelope (sky_sign.h) published
 * retained on sky/v1/job/<job>/plan:
 *
 *   {"v":1,"job":"j1","epoch":7,"algo":"optimal","micro_batches":4,
 *    "model":{"name":"mini","hidden":256,"heads":4,"ffn":1024,"layers":4,"seq":128,"batch":8},
 *    "stages":[{"board":"b01","first":0,"last":3,"in_flight":2,"arena_bytes":1234567},
 *              {"board":"b02","first":4,"last":7,"in_flight":1,"arena_bytes":1234567,
 *               "site":"factory"}]}
 *
 * A model of L encoder layers has 2L half-layers: half-layer 2i is layer i's
 * attention block, 2i+1 its feed-forward block (sky_layer.h). Stages are in
 * pipeline order, contiguous and cover [0, 2L-1] exactly; the first stage
 * also holds the embeddings, the last the classification head. arena_bytes
 * is what the planner's memory model expects the stage to need, and
 * in_flight how many micro-batches' activations it keeps at once (m under
 * GPipe, fewer under 1F1B); the board
 * measures its own figure and reports both in its plan-ack. The epoch is a
 * planner-wide counter that only grows: a board runs a plan only if its
 * epoch is newer than the last one it ran (replay protection). "site" (absent:
 * the core site, sky_caps.h) is the site of the stage's board as the planner
 * saw it: neighbouring stages of different sites exchange frames through the
 * bridges, of one site through that site's broker.
 *
 * A training job adds (optional; without it the boards only hold the plan):
 *   "train":{"steps":5,"sched":"1f1b","optim":"adamw","lr":0.001,"seed":1,
 *            "warmup":0,"clip":1,"predicted_step_s":0.12,"stall_s":0,
 *            "sealed":true}
 * and, when sealed, each stage a "key": the per-job frame key wrapped for
 * that board's certificate key (sky_jobkey.h, base64). The settings mean
 * what `sky train`'s options of the same names mean; stall_s 0 lets the
 * board derive its frame deadline from predicted_step_s.
 *
 * A serving (infer) job adds instead (a plan has train or infer, never both):
 *   "infer":{"batch":8,"wait_ms":2,"queue":64,"clients":["sky-client-demo"],
 *            "predicted_seq_s":123.4,"threads":0,"sealed":true}
 * and each stage its slice of the int8 model (runtime/sky_slice.h), which a
 * board keeps as <state>/slices/<sha256>.safetensors:
 *   "slice":{"sha256":"<64 hex>","bytes":N,"chunks":C,"chunk_bytes":B}
 * batch: requests per micro-batch (<= model.batch); wait_ms: the first
 * stage's bounded wait for a batch to fill; queue: its request queue bound
 * (beyond it requests are answered "busy"); clients: the client CNs allowed
 * (none listed: any sky-client-*); predicted_seq_s: the planner's predicted
 * throughput; threads: 0 uses the board profile's threads.
 *
 * A training job with a data owner (data stays home) adds to "train"
 *   "owner":"b01","owner_lag":1
 * and the plan is U-shaped: the owner's board holds stage 0 and the last
 * stage (its only two stages; no other board appears twice), at least 3
 * stages; or the owner holds the only stage. Only the owner makes the data (tokens, labels); forward frames
 * carry the attention mask after the activation (sky_stage.h), and the
 * owner runs both of its stages in one op order (sky_schedule_owner_ops,
 * with owner_lag). Such a plan has no checkpoints (ckpt_every 0).
 *
 * Training jobs that survive faults add "ckpt_every":K, and a re-plan
 * "resume_step":N (the last complete checkpoint) and "generation":G;
 * each is left out when 0.
 *
 * Stage replicas (data parallel inside the pipeline; training only, no
 * data owner): a stage run on R > 1 boards at once adds the R - 1 boards
 * besides its own "board", and which replica runs each micro-batch:
 *   {"board":"b02","first":4,"last":7,"in_flight":1,"arena_bytes":N,"key":"..",
 *    "replicas":[{"board":"b03","in_flight":1,"arena_bytes":N,"key":".."}],
 *    "route":[0,1,0,1]}
 * route[mb] is 0 for the stage's board, r for replicas[r - 1]; it has
 * micro_batches entries and every replica (the stage's board too) runs at
 * least one. The micro-batch size is model.batch and the count
 * micro_batches, as the planner chose them (the job trains as
 * `sky train --batch B --micro M`). No board appears twice in a plan.
 * A stage without replicas has neither key, so a plan with one board per
 * stage encodes exactly as before. */
#ifndef SKY_PLANMSG_H
#define SKY_PLANMSG_H

#include "sky_caps.h"
#include "sky_err.h"
#include "sky_jobkey.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_PLANMSG_VERSION 1
#define SKY_PLANMSG_MAX_STAGES 1024
#define SKY_PLANMSG_MAX_LAYERS 4096
#define SKY_PLANMSG_MAX_MICRO 1024
#define SKY_PLANMSG_MAX_STEPS 100000000
#define SKY_PLANMSG_MAX_REPLICAS 64 /* extra replica boards in one plan, all stages */

#define SKY_PLAN_MAX_CLIENTS 32
#define SKY_PLAN_SHA256_HEX 64
#define SKY_PLAN_MAX_WAIT_MS 60000
#define SKY_PLAN_MAX_QUEUE 65536

/* A stage's slice of an int8 model (serving). sha256[0] == 0: none. */
typedef struct sky_plan_slice {
	char sha256[SKY_PLAN_SHA256_HEX + 1]; /* of the file's bytes, lower-case hex */
	int64_t bytes;                        /* file size */
	int chunks, chunk_bytes;              /* how it is sent: chunks of chunk_bytes (the last shorter) */
} sky_plan_slice;

typedef struct sky_plan_stage {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	int first, last;     /* half-layer range, inclusive */
	int in_flight;       /* micro-batches whose activations it holds at once */
	int64_t arena_bytes; /* planner's expectation */
	char key[SKY_JOBKEY_B64_MAX]; /* wrapped frame key ("" when not sealed) */
	sky_plan_slice slice;         /* infer plans only */
	char site[SKY_SITE_MAX + 1];  /* the board's site ("" = core) */
	/* replicas besides board (training): p->reps[rep0 .. rep0 + n_reps),
	 * and p->route[route_row][mb] which of the 1 + n_reps runs micro-batch
	 * mb (0: board). n_reps 0: one board, no route. */
	int rep0, n_reps, route_row;
} sky_plan_stage;

/* A replica board of a stage (besides the stage's own board). */
typedef struct sky_plan_replica {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	int in_flight;
	int64_t arena_bytes;
	char key[SKY_JOBKEY_B64_MAX];
	char site[SKY_SITE_MAX + 1];
} sky_plan_replica;

typedef struct sky_plan_train {
	int steps;               /* 0: no training section */
	char sched[8];           /* gpipe, 1f1b */
	char optim[8];           /* adamw, sgd */
	double lr, clip;
	int64_t seed;
	int warmup;
	double predicted_step_s; /* the planner's simulated step (0: unknown) */
	double stall_s;          /* frame deadline (0: derived) */
	int sealed;              /* frames AES-GCM sealed under the job key */
	int ckpt_every;          /* checkpoint every K steps (sky_ckptmsg.h); 0: none */
	int resume_step;         /* > 0: load the range from the planner's checkpoint of
				  * this step (sky/v1/job/<job>/load/<board>) and go on */
	int generation;          /* the job's plan count (1 first, + 1 per re-plan) */
	char owner[SKY_TOPIC_SEGMENT_MAX + 1]; /* data owner board ("" none): U-shaped */
	int owner_lag;           /* the owner's op order (sky_schedule_owner_ops) */
	/* the data set the job reads ("dataset":"train","eval_dataset":"dev",
	 * both optional, "" none: the synthetic task); the board of the stage
	 * that reads it holds it (sky_caps.h "datasets") */
	char dataset[SKY_TOPIC_SEGMENT_MAX + 1];
	char eval_dataset[SKY_TOPIC_SEGMENT_MAX + 1];
	/* "exact_sum":true (absent: false): every stage adds its micro-batches'
	 * gradients in fixed point, as `sky train --exact-sum` (always so with
	 * replicas; the planner also sets it on every plan of a job it planned
	 * with its own micro-batching, so a re-plan without replicas computes
	 * the same sums) */
	int exact_sum;
} sky_plan_train;

typedef struct sky_plan_infer {
	int on;                  /* 0: not a serving plan (no "infer" in the JSON) */
	int batch;               /* requests per micro-batch, 1..model.batch */
	int wait_ms;             /* first stage's wait for a batch to fill, 0..SKY_PLAN_MAX_WAIT_MS */
	int queue;               /* first stage's request queue bound, 1..SKY_PLAN_MAX_QUEUE */
	int n_clients;           /* 0: any sky-client-* */
	char clients[SKY_PLAN_MAX_CLIENTS][SKY_TOPIC_SEGMENT_MAX + 1];
	double predicted_seq_s;  /* planner's predicted throughput (0: unknown) */
	int threads;             /* 0: the board profile's threads */
	int sealed;              /* frames AES-GCM sealed under the job key */
	char tokenizer[9];       /* "tokenizer": the served model's tokenizer hash (8 lower-case
				  * hex digits, sky_tokenizer.h), "" when the job gave none */
} sky_plan_infer;

/* ---- a Hugging Face model (fine-tuning a checkpoint; docs/data.md) ----
 * A model whose shapes come from a config.json (sky_hfmodel.h) rather than
 * a preset adds, beside "model" (whose name is then SKY_PLAN_HF_NAME):
 *   "hf":{"vocab":600,"max_pos":512,"type_vocab":2,"classes":3,"act":0,
 *         "ln_eps":1e-07,"hidden_drop":0.1,"attn_drop":0.1,"init":true}
 * act is SKY_ACT_* (sky_model.h), ln_eps 0 BERT's default. init true: a
 * train plan's stages start from the checkpoint, each naming its slice of
 * the fp32 model the job uploaded ("slice", as serving's: a data owner's
 * first stage the slice of both its ranges, its last stage the same); a
 * board sets its stage's weights from it before it acknowledges. */
#define SKY_PLAN_HF_NAME "hf"
#define SKY_PLAN_HF_MAX_VOCAB (1 << 22)
typedef struct sky_plan_hf {
	int on;
	int vocab, max_pos, type_vocab, classes, act;
	double ln_eps, hidden_drop, attn_drop; /* the config's floats, exactly */
	int init;
} sky_plan_hf;

typedef struct sky_planmsg {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;      /* >= 1 */
	char algo[16];      /* even, sky, optimal, ... (informational) */
	int micro_batches;  /* per training step */
	sky_caps_shape shape;
	int layers;         /* encoder layers L */
	int n_stages;
	sky_plan_train train;     /* steps 0: not a training plan */
	sky_plan_infer infer;     /* on 0: not a serving plan */
	sky_plan_hf hf;           /* on 0: a preset's model */
	sky_plan_stage stages[SKY_PLANMSG_MAX_STAGES];
	int n_reps;               /* replicas in use in reps[] (all stages) */
	sky_plan_replica reps[SKY_PLANMSG_MAX_REPLICAS];
	int n_routes;             /* rows in use in route[] (stages with replicas) */
	unsigned char route[SKY_PLANMSG_MAX_REPLICAS][SKY_PLANMSG_MAX_MICRO];
} sky_planmsg;

/* Writes p as JSON into buf. Returns the length or SKY_ERANGE / SKY_EINVAL
 * (p fails validation) / SKY_ENOMEM. */
int sky_planmsg_encode(const sky_planmsg *p, char *buf, size_t cap, sky_diag *d);
/* Parses and validates a plan payload (after the signature check). Refuses
 * more than SKY_PLAN_MAX_BYTES unparsed. Returns 0 or SKY_EFORMAT /
 * SKY_ERANGE with d naming the field or stage. */
int sky_planmsg_decode(const char *buf, size_t len, sky_planmsg *p, sky_diag *d);
/* Checks ranges, board ids (unique), and that stages tile [0, 2L-1]. */
int sky_planmsg_validate(const sky_planmsg *p, sky_diag *d);
/* 1 if the plan lets client CN cn send requests (its list, or any
 * sky-client-* when the list is empty), else 0. */
int sky_planmsg_client_ok(const sky_planmsg *p, const char *cn);
/* 1 if s is 64 lower-case hex digits. */
int sky_plan_sha256_ok(const char *s);
/* 1 if s is 8 lower-case hex digits (a tokenizer hash). */
int sky_plan_tokhash_ok(const char *s);
/* Index of board's stage (its first: a data owner also holds the last),
 * or -1. Finds a stage's own board only, not its replicas. */
int sky_planmsg_find(const sky_planmsg *p, const char *board);

/* Replicas: how many boards run stage k (1 + its extra replicas); the
 * board of replica r (0: the stage's own); the replica that runs
 * micro-batch mb (0 when the stage has no replicas, -1 out of range); the
 * stage and replica of a board (any replica), or -1. */
int sky_planmsg_n_replicas(const sky_planmsg *p, int k);
const char *sky_planmsg_replica_board(const sky_planmsg *p, int k, int r);
int sky_planmsg_route(const sky_planmsg *p, int k, int mb);
int sky_planmsg_find_replica(const sky_planmsg *p, const char *board, int *replica);
/* Adds a replica to stage k of p (before encoding; stages with replicas
 * must be added in stage order) running the micro-batches whose route[mb]
 * the caller then sets with sky_planmsg_set_route. Returns the replica's
 * index in its stage (>= 1) or SKY_ERANGE (no room). */
int sky_planmsg_add_replica(sky_planmsg *p, int k, const sky_plan_replica *r);
/* route[0..micro_batches) of stage k (k must have replicas). */
void sky_planmsg_set_route(sky_planmsg *p, int k, const unsigned char *route);

/* ---- plan acknowledgement (board -> planner, sky/v1/board/<id>/plan-ack) ----
 *   {"v":1,"board":"b01","job":"j1","epoch":7,"session":4,"boot":"9f3c..","stage":0,"ok":true,
 *    "arena_bytes":1200000,"expected_bytes":1234567,"budget_bytes":2147483648,"reason":""}
 * ok false: the board refuses (reason says why, e.g. the stage does not fit:
 * arena_bytes is then what it would need, budget_bytes what it has). */
typedef struct sky_planack {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch, session;
	char boot[SKY_BOOT_ID_MAX + 1]; /* the board's boot id (sky_caps.h); "" if absent */
	int stage;
	int ok;
	int64_t arena_bytes, expected_bytes, budget_bytes;
	char reason[160];
} sky_planack;

/* Returns the length or SKY_ERANGE / SKY_EINVAL / SKY_ENOMEM. */
int sky_planack_encode(const sky_planack *a, char *buf, size_t cap, sky_diag *d);
/* Parses (at most SKY_PLAN_ACK_MAX_BYTES). Returns 0 or SKY_EFORMAT /
 * SKY_ERANGE / SKY_EINVAL naming the field. */
int sky_planack_decode(const char *buf, size_t len, sky_planack *a, sky_diag *d);

#endif
