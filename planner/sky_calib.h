/* Boards' costs corrected by what their jobs measured.
 *
 * A board's probe is one measurement, under whatever load the machine had
 * while it ran; a running training job measures every stage every step
 * (the ops of its metrics, runtime/sky_trainjob.h: each micro-batch's
 * forward F and backward B). Each such measurement of a stage is folded
 * into its board's figures per half-layer (forward and backward of the
 * attention block and of the feed-forward block, one micro-batch, at the
 * shapes the board probed), and the planner plans on the folded figures
 * wherever a board has them (svc_plan.c), its probe elsewhere.
 *
 * The fold. A sample is the mean forward (and backward) time of one
 * micro-batch over a stage's units, a attention and f feed-forward units.
 * The board's current figures (the folded ones, else the probe's) predict
 * E = a * attn + f * ffn for it; the sample's ratio q = measured / E
 * scales both halves alike (the split between them stays the probe's: a
 * stage measures its units' sum only), geometrically weighted:
 *   figures *= q ^ w,  w = 1 for the first sample, then 1 / (n + 1), at
 *                      least SKY_CALIB_ALPHA (a moving average of logs)
 * Outliers are bounded twice: a sample more than SKY_CALIB_ABSURD times
 * off the probe's prediction either way is refused (counted, not folded),
 * and after the first, q is clamped to [1/SKY_CALIB_BOUND,
 * SKY_CALIB_BOUND], so one step a board spent descheduled moves its
 * figures by at most SKY_CALIB_BOUND ^ w.
 *
 * Who may move a board's figures: only the board itself. The caller
 * (svc_calib.c) takes a sample from a metrics message after svc_authz.c
 * checked its sender, the topic's last level, pinned by the ACL to the
 * certificate's CN, against the stage the signed plan gives that board;
 * the payload's own "board" and "stage" are never read for it.
 *
 * Links are not folded: a stage's send op is the hand-over of a frame to
 * the MQTT client's queue, not its transfer, so the metrics measure no
 * link; the board's link probe (echoes through the broker) stays its
 * figure.
 *
 * Persisted as <state>/calib.json (sky_calib_to_json), read back at start:
 *   {"v":1,"boards":[{"board":"b1","shape":{"name":"mini","hidden":256,
 *     "heads":4,"ffn":1024,"seq":128,"batch":8},
 *     "fp32":{"fwd_attn_s":..,"fwd_ffn_s":..,"bwd_attn_s":..,"bwd_ffn_s":..},
 *     "probe":{...the probe's at the last fold...},"n_fwd":3,"n_bwd":3,
 *     "refused":0,"job":"j1","at":1764560000}]} */
#ifndef SKY_CALIB_H
#define SKY_CALIB_H

#include "sky_caps.h"
#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_CALIB_MAX 512        /* (board, shape) entries; the oldest goes first */
#define SKY_CALIB_BOUND 2.0      /* one later sample moves a figure by at most this ^ w */
#define SKY_CALIB_ABSURD 64.0    /* a sample this far off the probe either way is refused */
#define SKY_CALIB_ALPHA 0.25     /* the smallest weight of a sample */
#define SKY_CALIB_MAX_BYTES (1u << 20) /* calib.json larger than this is refused */

typedef struct sky_calib_entry {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_caps_shape shape;     /* the shapes the board probed and the job ran */
	sky_caps_times t;         /* the folded figures: one layer's halves, one micro-batch */
	sky_caps_times probe;     /* the probe's, when the last sample was folded */
	int n_fwd, n_bwd;         /* samples folded into the forward and backward figures */
	long refused;             /* samples refused as absurd */
	char job[SKY_TOPIC_SEGMENT_MAX + 1]; /* the job of the last sample folded */
	int64_t at_unix;          /* when */
} sky_calib_entry;

typedef struct sky_calib {
	int n;
	sky_calib_entry e[SKY_CALIB_MAX];
	int changed; /* set by a fold; the caller writes the file and clears it */
} sky_calib;

/* One stage's measurement in one step: the mean time of one micro-batch's
 * forward and backward over half-layer units [first_unit, last_unit]
 * (unit 2i: layer i's attention block, 2i + 1 its feed-forward block);
 * 0 = not measured. */
typedef struct sky_calib_sample {
	int first_unit, last_unit;
	double fwd_s, bwd_s;
} sky_calib_sample;

void sky_calib_init(sky_calib *c);

/* The sample of one training metrics message (ops F and B, summed per
 * kind and divided by how many of each there are) for units [first,
 * last]. Returns 1 with *s set, 0 when the message measured nothing (a
 * serving stage, no ops, a done or stall report), SKY_EFORMAT when it is
 * not a metrics object. */
int sky_calib_sample_from_metrics(const char *buf, size_t len, int first_unit, int last_unit,
				  sky_calib_sample *s);

/* Folds sample s of board (at shape, whose probe said *probe) as the
 * header says, naming job as its source. Returns 1 when folded, 0 when
 * refused (absurd against the probe, or nothing measured), SKY_EINVAL
 * for a bad board id, unit range or probe. */
int sky_calib_fold(sky_calib *c, const char *board, const sky_caps_shape *shape,
		   const sky_caps_times *probe, const sky_calib_sample *s, const char *job,
		   int64_t now_unix);

/* The entry of board at shape, or NULL. */
const sky_calib_entry *sky_calib_find(const sky_calib *c, const char *board,
				      const sky_caps_shape *shape);

/* The figures to plan board with: the folded ones where it has samples
 * (forward and backward each on their own), the probe's elsewhere, into
 * *out; the probe's alone when probe (the board's current one) is more
 * than SKY_CALIB_BOUND times off the probe the figures were last folded
 * against (the board changed: restarted slower, or now shares its cores).
 * Returns 1 when any folded figure was used, else 0 (*out = *probe). */
int sky_calib_times(const sky_calib *c, const char *board, const sky_caps_shape *shape,
		    const sky_caps_times *probe, sky_caps_times *out);

/* The table as JSON (above). Returns the length or SKY_ERANGE. */
int sky_calib_to_json(const sky_calib *c, char *buf, size_t cap);
/* Replaces the table with a document sky_calib_to_json wrote. Returns 0,
 * or SKY_EFORMAT with d naming what is wrong (the table is then empty). */
int sky_calib_from_json(sky_calib *c, const char *buf, size_t len, sky_diag *d);

#endif
