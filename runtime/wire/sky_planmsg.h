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
 * board derive its frame deadline from predicted_step_s. */
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

typedef struct sky_plan_stage {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	int first, last;     /* half-layer range, inclusive */
	int in_flight;       /* micro-batches whose activations it holds at once */
	int64_t arena_bytes; /* planner's expectation */
	char key[SKY_JOBKEY_B64_MAX]; /* wrapped frame key ("" when not sealed) */
	char site[SKY_SITE_MAX + 1];  /* the board's site ("" = core) */
} sky_plan_stage;

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
} sky_plan_train;

typedef struct sky_planmsg {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;      /* >= 1 */
	char algo[16];      /* even, sky, optimal, ... (informational) */
	int micro_batches;  /* per training step */
	sky_caps_shape shape;
	int layers;         /* encoder layers L */
	int n_stages;
	sky_plan_train train;     /* steps 0: not a training plan */
	sky_plan_stage stages[SKY_PLANMSG_MAX_STAGES];
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
/* Index of board's stage, or -1. */
int sky_planmsg_find(const sky_planmsg *p, const char *board);

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
