/* The planner's checkpoint store and job log.
 *
 * Stages of a training job with train.ckpt_every K publish a checkpoint
 * image of their blocks every K steps (runtime/wire/sky_ckptmsg.h). The
 * store verifies each part's SHA-256 (a bad one is refused with the reason
 * and logged), accepts only parts of the job's current plan epoch (late
 * parts of a plan that was replaced are refused as stale), writes it to
 * <state>/ckpt/<job>/<step>-<blk0>.safetensors, and marks the step complete
 * when the parts of one epoch cover every block of the model (embeddings,
 * each half-layer, head). A complete step is committed: a line goes to the
 * job's log, and only the last two complete checkpoints are kept (files of
 * older ones and of abandoned partial steps are removed).
 *
 * The job log, <state>/jobs/<job>.log.jsonl, one JSON object per line:
 *   {"t":1764560000.123,"event":"commit","epoch":3,"step":4}
 *   {"t":...,"event":"replan","generation":2,"epoch":5,"reason":"board b2 offline",
 *    "resume_step":4,"lost_steps":1, ...}
 * Generations and committed steps only grow; a step commits once.
 *
 * After a re-plan the store assembles, for each board of the new plan, the
 * blocks of its new range from the last complete checkpoint into one image
 * (sky_ckpt_image), which the service publishes to that board. */
#ifndef SKY_CKPT_H
#define SKY_CKPT_H

#include "sky_ckptmsg.h"
#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_CKPT_JOBS 32 /* jobs followed; when full, the one idle longest goes */
#define SKY_CKPT_PARTS 64 /* parts of one step (the stages of a plan) */
#define SKY_CKPT_OPEN 4   /* steps being assembled at once */
/* A part's step is at most this many checkpoint intervals past the last
 * commit (with no schedule known, SKY_CKPT_AHEAD_STEPS steps). */
#define SKY_CKPT_AHEAD 8
#define SKY_CKPT_AHEAD_STEPS 1024

/* Why a part was refused (counted per job in refused_by). */
enum {
	SKY_CKPT_R_NONE,
	SKY_CKPT_R_JOB,     /* "job": not a job the store follows, or the image names another */
	SKY_CKPT_R_SENDER,  /* "sender": the board holds no blocks in the job's plan */
	SKY_CKPT_R_FORMAT,  /* "format": not a checkpoint image (header, sizes, tensors) */
	SKY_CKPT_R_STALE,   /* "stale": another plan epoch */
	SKY_CKPT_R_STEP,    /* "step": at or before the last commit, past the window, or
			     * not a step the job checkpoints at */
	SKY_CKPT_R_BLOCKS,  /* "blocks": not exactly the blocks the sender holds, or overlapping */
	SKY_CKPT_R_OPEN,    /* "open_full": every open step is still awaited by its boards */
	SKY_CKPT_R_HASH,    /* "hash": SHA-256 mismatch */
	SKY_CKPT_R_IO,      /* "io": the store could not write it */
	SKY_CKPT_R_N
};
/* "job", "sender", ... for SKY_CKPT_R_*; "?" out of range. */
const char *sky_ckpt_refusal_name(int r);

typedef struct sky_ckpt_part {
	int blk0, nblk;
} sky_ckpt_part;

typedef struct sky_ckpt_step {
	int64_t step; /* 0: unused */
	int64_t epoch;
	int n_parts, covered;
	sky_ckpt_part part[SKY_CKPT_PARTS];
} sky_ckpt_step;

typedef struct sky_ckpt_job {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;            /* parts of this epoch only */
	int n_blocks;             /* 2L + 2 */
	int nvec;                 /* optimizer state vectors, from the parts */
	sky_ckpt_step done[2];    /* [0] the newest complete checkpoint */
	sky_ckpt_step open[SKY_CKPT_OPEN];
	long commits, refused;
	long refused_by[SKY_CKPT_R_N]; /* refused, by reason (SKY_CKPT_R_*) */
	double commit_s;          /* monotonic time of the last commit */
	/* the schedule (sky_ckpt_schedule): a part's step must be one of it */
	int64_t steps;            /* the job's last step (0: not known) */
	int every;                /* K: every K-th step checkpoints (0: not known) */
	int64_t asked;            /* a step the planner asked a checkpoint of (0: none) */
} sky_ckpt_job;

typedef struct sky_ckpt_store {
	char dir[512];            /* the planner's state directory */
	int n;
	sky_ckpt_job job[SKY_CKPT_JOBS];
} sky_ckpt_store;

void sky_ckpt_init(sky_ckpt_store *s, const char *state_dir);

/* A plan of job at epoch was published (the first or a re-plan): from now
 * on parts of that epoch only; steps being assembled under an older epoch
 * are dropped. A new job takes a free entry, or that of the job whose last
 * commit is oldest (its files removed). Returns the job's entry. */
sky_ckpt_job *sky_ckpt_begin(sky_ckpt_store *s, const char *job, int64_t epoch, int n_blocks);
/* The job's entry, or NULL. */
sky_ckpt_job *sky_ckpt_find(sky_ckpt_store *s, const char *job);

/* The steps job checkpoints at: every `every`-th step and its last, steps
 * (the plan's train.steps and train.ckpt_every; kept across sky_ckpt_begin
 * of the same job). A part of any other step is refused, as is one more
 * than SKY_CKPT_AHEAD intervals past the last commit. Returns 0 or
 * SKY_ENOTFOUND (not a job the store follows). */
int sky_ckpt_schedule(sky_ckpt_store *s, const char *job, int64_t steps, int every);
/* The planner asked the job's stages for a checkpoint after step (a
 * voluntary re-plan): parts of that step are taken too. Returns 0 or
 * SKY_ENOTFOUND. */
int sky_ckpt_ask(sky_ckpt_store *s, const char *job, int64_t step);

/* Who sent a part, as the signed plan of the job's epoch has it. */
typedef struct sky_ckpt_sender {
	const char *board; /* the topic's last level (ckpt/<board>), which the ACL pins to
			    * the sender's certificate CN */
	int blk0, nblk;    /* the norm blocks board holds in the plan (sky_ckpt_stage_blocks);
			    * nblk 0: the board holds none (not a stage of the plan) */
} sky_ckpt_sender;

/* The norm blocks [*blk0, *blk0 + *nblk) of a stage holding half-layers
 * [first, last] of a model of `layers` layers (embeddings with half-layer
 * 0, the head with the last). */
void sky_ckpt_stage_blocks(int first, int last, int layers, int *blk0, int *nblk);

/* One part from `from`. The header is parsed and checked before anything
 * is hashed or written: the job followed, the sender in the plan, the
 * epoch, the step (after the last commit, within SKY_CKPT_AHEAD intervals
 * of it, one of the schedule's), the blocks exactly the sender's and
 * inside the model, the sizes as the header declares; a new step takes a
 * free slot or one that every board with a part in it has moved past
 * (one board cannot push out another's open step). Then the SHA-256.
 * Returns 1 when it completed a step (*committed = that step; logged), 0
 * when stored, or a negative SKY_E* with d saying why it was refused and
 * *reason (may be NULL) the SKY_CKPT_R_* (counted in the job's refused_by):
 * SKY_EAUTH (a sender outside the plan, or SHA-256 mismatch), SKY_EFORMAT
 * (not a checkpoint image), SKY_ESTATE (unknown job, stale epoch, step,
 * blocks, open steps full), or an I/O error. */
int sky_ckpt_on_part_from(sky_ckpt_store *s, const char *job, const sky_ckpt_sender *from,
			  const unsigned char *img, size_t len, double now, int64_t *committed,
			  int *reason, sky_diag *d);

/* sky_ckpt_on_part_from with the sender's blocks taken from the part
 * itself: no membership check. Kept for callers that do not know the plan
 * yet; a receiver of sky/v1/job/<job>/ckpt/<board> uses
 * sky_ckpt_on_part_from. */
int sky_ckpt_on_part(sky_ckpt_store *s, const char *job, const char *board,
		     const unsigned char *img, size_t len, double now, int64_t *committed,
		     sky_diag *d);

/* The newest complete step of job (0: none). */
int64_t sky_ckpt_last(const sky_ckpt_store *s, const char *job);

/* An image of blocks [blk0, blk0 + nblk) of job's newest complete
 * checkpoint, stamped with epoch (the plan that will load it), into a
 * malloc'd buffer (*img; free it). Returns 0, SKY_ENOTFOUND (no complete
 * checkpoint, or a file of it is gone), SKY_EAUTH (a stored file no longer
 * matches its hash) or SKY_ENOMEM. */
int sky_ckpt_image(sky_ckpt_store *s, const char *job, int64_t epoch, int blk0, int nblk,
		   unsigned char **img, size_t *len, sky_diag *d);

/* The index, <state>/ckpt/<job>/index.json (at most SKY_CKPT_INDEX_MAX
 * bytes): the job's epoch, block and state-vector counts, commits, and the
 * parts of its complete and open steps,
 *   {"v":1,"job":"j1","epoch":5,"n_blocks":10,"nvec":2,"commits":3,
 *    "done":[{"step":8,"epoch":5,"parts":[[0,3],[3,7]]},{"step":4,...}],
 *    "open":[{"step":9,"epoch":5,"parts":[[0,3]]}]}
 * written atomically whenever they change (a part stored, a commit, a new
 * epoch), so a planner killed and started again knows what it had. */
#define SKY_CKPT_INDEX_FILE "index.json"
#define SKY_CKPT_INDEX_MAX (64u << 10)
/* Writes j's index. Returns 0 or SKY_EIO / SKY_ERANGE / SKY_ENOMEM. */
int sky_ckpt_save(const sky_ckpt_store *s, const sky_ckpt_job *j);
/* Takes job back from its index after a restart, at plan epoch (open steps
 * of another epoch are dropped) over n_blocks blocks. Every file of every
 * step is verified again (sky_ckpt_parse: its SHA-256, job, step and
 * blocks); a step with a missing or damaged file is dropped (the newest
 * complete one then gives way to the one before). A commit the index holds
 * but the job log lacks (a crash between the two) is logged, once.
 * Returns 0; SKY_EAUTH when a step was dropped (the entry holds the rest;
 * d names the file); or, with no entry made, SKY_ENOTFOUND (no index) or
 * SKY_EFORMAT (damaged), d naming the index file. */
int sky_ckpt_restore(sky_ckpt_store *s, const char *job, int64_t epoch, int n_blocks,
		     sky_diag *d);

/* Appends one JSON line (without newline) to <state>/jobs/<job>.log.jsonl,
 * with "t" (Unix time) put in front. Returns 0 or SKY_EIO / SKY_ERANGE. */
int sky_ckpt_log(sky_ckpt_store *s, const char *job, const char *fields);

#endif
