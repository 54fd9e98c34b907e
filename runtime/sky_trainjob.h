/* A board's part of a training job: the stage (sky_stage.h) and its frame
 * transport (sky_transport.h) built from a signed plan, in one arena that
 * is measured, allocated once and sealed when the plan is accepted; then,
 * when the job runs, the start barrier, the steps (metrics published on
 * sky/v1/job/<job>/metrics after each), and at the end the stage's trained
 * tensors (its part) published retained on sky/v1/job/<job>/part/<board>
 * and written
 * to <state>/parts/.
 *
 * Metrics, one JSON object per stage and step (SKY_METRICS_MAX_BYTES):
 *   {"v":1,"job":"j1","epoch":3,"stage":1,"board":"b02","step":2,"steps":5,
 *    "loss":0.69 (last stage only),"step_s":0.031,"busy":0.62,"wait_s":0.01,
 *    "send_s":0.001,"predicted_step_s":0.02,"frames_in":8,"frames_out":8,"bytes_out":65600,
 *    "drops":{"epoch":1,...} (only non-zero reasons),
 *    "ops":[["F",0,0.12,1.5],["S",0,1.5,1.52],["W",1,1.6,2.0],...]}
 * ops are [kind, micro-batch, t0_ms, t1_ms] from the step's start: F
 * forward, B backward, S send, W wait for a frame (or the norms, mb -1).
 * With train.ckpt_every K, after every K-th step and the last, the stage's
 * checkpoint image (sky_ckptmsg.h) goes to sky/v1/job/<job>/ckpt/<board>.
 * When the job ends: {"v":1,...,"step":N,"done":true,"part_bytes":B}; on a
 * stall {"stage":k,...,"stall":{...},"message":"..."} (sky_transport.h)
 * and the board stops the job. */
#ifndef SKY_TRAINJOB_H
#define SKY_TRAINJOB_H

#include "sky_ckptmsg.h"
#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_frameseal.h"
#include "sky_planmsg.h"
#include "sky_stage.h"
#include "sky_trainorder.h"
#include "sky_transport.h"

#include <stdint.h>

typedef struct sky_trainjob {
	const sky_planmsg *plan; /* the caller's, kept while the job lives */
	int stage;
	sky_stage st;
	sky_transport tr;
	void *mem;
	size_t bytes;
	int first[SKY_PLANMSG_MAX_STAGES], last[SKY_PLANMSG_MAX_STAGES];
	const char *site[SKY_PLANMSG_MAX_STAGES]; /* the plan's stage sites (transport cfg) */
	const char *boards[SKY_PLANMSG_MAX_STAGES]; /* the plan's stage boards (transport cfg) */
	unsigned char key[SKY_FRAME_KEY_BYTES];
	int sealed;
	long steps_done;
	float last_loss;
	/* checkpoints (plan train.ckpt_every > 0 or a resume): the image buffer
	 * and its tensor table, carved with the rest, so a checkpoint between
	 * steps allocates nothing */
	unsigned char *ckpt_buf;
	size_t ckpt_cap;
	sky_ckpt_tensor *ckpt_t;
	int ckpt_nt;
	long ckpts_sent;
	long ckpt_at;          /* a checkpoint after this step too (planner's request; 0 none) */
	char metrics[SKY_METRICS_MAX_BYTES];
	/* a data owner (plan train.owner is this board, stage 0): it also holds
	 * the last stage, in the same arena under the same job key, and runs
	 * both in one op order (sky_schedule_owner_ops); stage2 -1 otherwise */
	int stage2;
	sky_stage st2;
	sky_transport tr2;
	sky_schedule_op *owner_ops; /* (4 m) */
	int n_owner_ops;
	/* stage replicas (sky_planmsg.h): this board's replica of its stage
	 * (0: the stage's own board, which alone sends checkpoints and the
	 * part; the others' weights are the same) */
	int replica;
	/* fine-tuning on a data set this board holds (plan train.dataset):
	 * the stages that make data read it in sky_trainorder's order;
	 * perm is the order's buffer (rows entries, set up with the plan) */
	sky_dataset ds;
	int has_ds;
	sky_trainorder ord;
	uint32_t *perm;
	int weights_pending; /* hf.init: the stage's slice is not loaded yet */
} sky_trainjob;

/* The last stage a board holding stage `stage` of p also runs: p's last
 * when p names a data owner, stage is 0 and the last stage's board is
 * stage 0's; else -1. */
int sky_trainjob_owner_last(const sky_planmsg *p, int stage);

/* Hands a received message to the job's transport(s) (both of a data
 * owner's stages see every norm and ready). Returns 1 if it was one of
 * theirs. */
int sky_trainjob_on_msg(sky_trainjob *j, const char *topic, const unsigned char *p, size_t len);

/* The model configuration a plan describes (preset, with the plan's
 * shapes and layers). Returns 0 or SKY_ENOTFOUND (unknown preset) /
 * SKY_EINVAL. */
int sky_trainjob_model(const sky_planmsg *p, sky_model_cfg *c);

/* Bytes of arena stage `stage` of plan p needs (stage and transport; a
 * data owner's stage 0: both of its stages).
 * Returns the count (> 0) or a negative SKY_E* with d set. */
int64_t sky_trainjob_bytes(const sky_planmsg *p, int stage, sky_diag *d);
/* The same for board (a replica of stage `stage` in a plan with replicas;
 * NULL: the stage's own board). */
int64_t sky_trainjob_bytes_as(const sky_planmsg *p, int stage, const char *board, sky_diag *d);

/* Measures, allocates once, carves and seals; initial weights from the
 * plan's seed. In a plan with stage replicas board may be any replica of
 * the stage (it runs the micro-batches the plan routes through it, and
 * every stage sums gradients in fixed point). key: the unwrapped frame key (NULL: plaintext, allowed only
 * when the plan says so). p must outlive j. Returns 0, or SKY_ENOMEM /
 * SKY_EINVAL / SKY_ECRYPTO with d set. */
int sky_trainjob_setup(sky_trainjob *j, const sky_planmsg *p, int stage, const char *board,
		       const unsigned char *key, const sky_transport_net *net, sky_diag *d);

/* Runs the job: subscribes, waits for every stage (start barrier, up to
 * start_s), then the plan's steps, then publishes the part and writes it
 * to state_dir/parts/ (state_dir may be NULL). Returns 0 or the first
 * error (stall: SKY_ETIMEOUT, d holds the stall message). */
int sky_trainjob_run(sky_trainjob *j, const char *state_dir, double start_s, sky_diag *d);

/* Loads the stage's blocks, optimizer state and step from a checkpoint
 * image made for it (sky_ckptmsg.h: the planner's image of this plan's
 * job, epoch, resume step and exactly this stage's blocks). Returns 0, or
 * SKY_EAUTH (hash mismatch) / SKY_EFORMAT / SKY_EINVAL (another job, epoch,
 * step or range) with d saying which; the stage is unchanged then. */
int sky_trainjob_load(sky_trainjob *j, const unsigned char *img, size_t len, sky_diag *d);

/* Fine-tuning (plan train.dataset, sky_planmsg.h "hf"). After setup:
 * sky_trainjob_data opens the set at path (the board's copy of the plan's
 * set: its rows must be the plan's seq, its labels within the model's
 * classes) and has the stages that make data read it, as `sky train
 * --data`; sky_trainjob_init_from sets the stages' weights from the slice
 * file at path (the plan's hf.init: every tensor of the stages, F32, of
 * their shapes). Each returns 0, or SKY_EFORMAT / SKY_EINVAL / SKY_ENOMEM
 * with d naming the set or tensor; the job is unusable then. */
int sky_trainjob_data(sky_trainjob *j, const char *path, sky_diag *d);
int sky_trainjob_init_from(sky_trainjob *j, const char *path, sky_diag *d);

/* Frees the arena and wipes the key. NULL-safe; may be called twice. */
void sky_trainjob_free(sky_trainjob *j);

#endif
