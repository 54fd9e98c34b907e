/* One pipeline stage of a BERT classifier on one board: its contiguous run
 * of half-layers [first, last] of the model's 2L (half-layer 2i is layer
 * i's attention block, 2i+1 its feed-forward block), plus the embeddings
 * and the training data on the first stage, and the head, labels and loss
 * on the last.
 *
 * The arithmetic is sky_bert's, split: a fleet of stages running one step
 * (sky_stage_step) computes the same floats as sky_bert_train_step on one
 * board with the same seed, micro-batches, optimizer and clip. That holds
 * because (1) initial weights come from the same per-block seeds
 * (sky_layer_init_half), (2) every stage regenerates a micro-batch's data
 * from (seed, step, micro-batch) as `sky train` does (sky_task.h) instead of
 * receiving it, (3) backwards run in micro-batch order (sky_schedule.h), so
 * each gradient sums in one board's order, and (4) the clip norm adds
 * per-block squared sums in block order (sky_optim.h), shared between
 * stages through io->share_norm.
 *
 * Memory is the board's one arena, measured then carved then sealed (as
 * sky_bert): parameters, gradients and optimizer state as flat vectors
 * [embeddings | half-layer first | ... | half-layer last | head] (each
 * block 64-byte aligned), saved activations and a batch for each of
 * in_flight micro-batch slots, two activation and two gradient buffers
 * (each with SKY_STAGE_HEADROOM bytes in front, where a transport writes a
 * frame header so the tensor goes out without a copy), and scratch. A
 * step allocates nothing.
 *
 * I/O goes through sky_stage_io: a callback table and an opaque context,
 * so tests run a whole pipeline in one process with a fake transport, and
 * skyd runs it over MQTT (sky_transport.h). */
#ifndef SKY_STAGE_H
#define SKY_STAGE_H

#include "sky_arena.h"
#include "sky_err.h"
#include "sky_model.h"
#include "sky_optim.h"
#include "sky_schedule.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_STAGE_HEADROOM 256 /* bytes before each send buffer (>= a frame header) */

enum { SKY_STAGE_FWD = 0, SKY_STAGE_BWD = 1 };

typedef struct sky_stage_cfg {
	sky_model_cfg model;     /* the whole model: layers is L */
	int stage, n_stages;     /* this stage's index in the pipeline */
	int first, last;         /* half-layers, inclusive, within [0, 2L) */
	int micro;               /* micro-batches per step */
	int in_flight;           /* activation slots (>= sky_schedule_in_flight) */
	sky_schedule_kind sched;
	sky_optim_cfg optim;     /* lr is set per step by sky_stage_step */
	float clip_norm;         /* 0: off */
	uint64_t seed;           /* initial weights and data, as `sky train --seed` */
	/* 1: a job with a data owner (U-shaped, sky_planmsg.h train.owner):
	 * only the first and the last stage (the owner's) make the data; a
	 * stage in between has no tokens or labels (none are carved) and
	 * takes each micro-batch's attention mask from its forward frame:
	 * every forward tensor carries B*S floats of additive mask (0 or
	 * -1e9) after its B*S*H activations */
	int data_owner;
	/* 1: the micro-batches' gradients are added in fixed point
	 * (sky_fx_accumulate, sky_fedsum.h) so the sum does not depend on
	 * their order or on which replica ran each: as sky_bert_opts.fx_sum
	 * (`sky train --exact-sum`) computes it. A plan with stage replicas
	 * runs every stage so. */
	int fx_sum;
	/* Stage replicas (sky_planmsg.h): route[mb] is the replica that runs
	 * micro-batch mb (micro entries), and this stage runs only those whose
	 * route is replica, in the order the schedule gives them on one board
	 * (a subsequence of it, so replicas cannot deadlock one another);
	 * in_flight may then be as low as min(its share, the schedule's
	 * need). NULL: every micro-batch. Needs fx_sum; the replicas' sums
	 * are added by io->reduce before the norms. */
	const unsigned char *route;
	int replica;
	/* A data set instead of the synthetic task (fine-tuning, sky_trainorder.h):
	 * a stage that makes data takes micro-batch mb of step s from data's
	 * rows sky_trainorder_rows(order, s, mb), as `sky train --data` does.
	 * NULL: the task's batches from (seed, step, mb). Set after carving
	 * (the caller owns both; several stages may share one order). */
	const struct sky_dataset *data;
	struct sky_trainorder *order;
} sky_stage_cfg;

typedef struct sky_stage_io {
	void *ctx;
	/* Waits for the neighbour's tensor of (dir, step, mb): the activation
	 * from stage k-1 (SKY_STAGE_FWD) or the gradient from stage k+1
	 * (SKY_STAGE_BWD), n = B*S*H floats. *data stays valid until release.
	 * Returns 0 or a negative SKY_E* (stall, stop), which ends the step. */
	int (*recv)(void *ctx, int dir, long step, int mb, const float **data);
	void (*release)(void *ctx, int dir);
	/* Hands buf[0..n) to the neighbour (stage k+1 for FWD, k-1 for BWD)
	 * without waiting for it; the SKY_STAGE_HEADROOM bytes before buf are
	 * the transport's. buf may be reused when send returns. Returns 0 or
	 * SKY_E*. */
	int (*send)(void *ctx, int dir, long step, int mb, float *buf, size_t n);
	/* The clip norm's exchange: mine holds the squared sums of this
	 * stage's blocks [b0, b0 + n) of the model's n_all = 2L + 2 (0
	 * embeddings, 1 + u half-layer u, 2L + 1 head); fills all[0..n_all)
	 * with every stage's. Returns 0 or SKY_E*. */
	int (*share_norm)(void *ctx, long step, const double *mine, int b0, int n, double *all,
			  int n_all);
	/* Optional: an op of this stage ran from t0 to t1 (sky_clock_s);
	 * kind 'F' forward, 'B' backward. */
	void (*event)(void *ctx, char kind, int mb, double t0, double t1);
	/* Stage replicas (cfg.route): adds the other replicas' fixed-point
	 * gradient sums acc[0..n) of this step into acc (modulo 2^64), so every
	 * replica ends with the sum over all micro-batches. NULL: no replicas.
	 * Returns 0 or SKY_E*. */
	int (*reduce)(void *ctx, long step, uint64_t *acc, size_t n);
} sky_stage_io;

typedef struct sky_stage {
	sky_stage_cfg cfg;
	int has_embed, has_head;
	int has_data;            /* makes the micro-batches itself (not a data-owner
				    job's middle stage) */
	int n_units;             /* last - first + 1 */
	int blk0, n_blk;         /* norm blocks held: [blk0, blk0 + n_blk) */
	size_t n_params;         /* floats of params, grads (with padding) */
	size_t *blk_off;         /* (n_blk) offset of each block in params */
	size_t *blk_len;         /* (n_blk) floats of each block (no padding) */
	size_t *saved_off;       /* (n_blk) offset of each block's saved activations in a slot */
	size_t slot_floats;      /* saved activations per slot */
	float *params, *grads, *opt_state;
	float *saved;            /* (in_flight, slot_floats) */
	int32_t *ids, *types, *attn, *labels; /* (in_flight, B*S) and (in_flight, B) */
	float *mask;             /* (in_flight, B*S) additive attention mask */
	float *act[2], *dact[2]; /* (B*S, H) each, after SKY_STAGE_HEADROOM bytes */
	float *logits;           /* (B, classes) */
	float *scratch;
	double *norm_mine, *norm_all;
	struct sky_schedule_op *ops;
	int n_ops;
	int *local;              /* (micro) each micro-batch's index among this replica's, or -1 */
	uint64_t *fx_acc;        /* (n_params) cfg.fx_sum's sums, else NULL */
	long fx_clipped;         /* gradient elements clipped or NaN in fixed point, so far */
	long step;               /* optimizer steps taken */
	double loss_sum;         /* this step's, so far (last stage) */
} sky_stage;

/* Floats in a forward tensor of stage cfg's job: B*S*H, plus B*S of
 * attention mask in a data-owner job. */
size_t sky_stage_fwd_floats(const sky_stage_cfg *cfg);

/* Micro-batches cfg's stage runs per step (its share with a route). */
int sky_stage_share(const sky_stage_cfg *cfg);
/* Checks cfg (ranges; in_flight covers the schedule). Returns 0 or
 * SKY_EINVAL with d saying what. */
int sky_stage_check(const sky_stage_cfg *cfg, sky_diag *d);
/* Carves the stage from a measuring or real arena. Returns 0, SKY_EINVAL
 * (sky_stage_check) or the arena's status. */
int sky_stage_carve(sky_stage *s, const sky_stage_cfg *cfg, sky_arena *a, sky_diag *d);
/* Bytes of arena sky_stage_carve needs. Returns 0 or SKY_EINVAL. */
int sky_stage_arena_bytes(const sky_stage_cfg *cfg, size_t *bytes, sky_diag *d);
/* Initial weights from cfg.seed, equal tensor for tensor to sky_bert_init's
 * for the same seed; zeroes gradients and optimizer state; step 0. */
void sky_stage_init(sky_stage *s);

/* One optimizer step (the step-th, 0-based: s->step): every op of the
 * schedule, then (a replica) io->reduce, the norm exchange, clip and
 * optimizer with learning rate lr. On the last stage *loss (may be NULL)
 * gets the step's mean loss, as sky_bert_train_step's (a replica of it:
 * its micro-batches' part of that mean, loss sum / micro); elsewhere 0. Returns 0 or the first io error
 * (then the parameters are as before the optimizer: the step did not
 * happen). Allocates nothing. */
int sky_stage_step(sky_stage *s, const sky_stage_io *io, float lr, float *loss);

/* A step in parts, for a board that interleaves two stages (a data
 * owner, sky_trainjob.h): begin (gradients zeroed), each op of the
 * schedule (run_op: forward or backward of a micro-batch, through io),
 * then the squared sums of the blocks' gradients into s->norm_mine (sums),
 * then finish: clip by the norm of all[0..2L+2) (every stage's sums; NULL
 * when clip is off) and the optimizer. sky_stage_step is exactly these.
 * run_op returns 0 or io's error. */
void sky_stage_step_begin(sky_stage *s);
int sky_stage_run_op(sky_stage *s, const sky_stage_io *io, sky_schedule_op op);
void sky_stage_step_sums(sky_stage *s);
void sky_stage_step_finish(sky_stage *s, const double *all, float lr, float *loss);

/* Parameters of norm block b (global index, see share_norm) held by this
 * stage, or NULL. *n gets its length in floats. */
float *sky_stage_block(const sky_stage *s, int b, size_t *n);

/* The stage's tensors as safetensors entries with the HuggingFace names
 * sky_bert_save uses (entries: cap rows; names: cap * name_cap bytes).
 * Returns the number of entries or SKY_ERANGE. */
struct sky_st_entry;
int sky_stage_entries(const sky_stage *s, struct sky_st_entry *entries, int cap, char *names,
		      size_t name_cap, sky_diag *d);
/* Upper bound of the entries of any stage of model c. */
int sky_stage_max_entries(const sky_model_cfg *c, const sky_stage_cfg *cfg);

#endif
