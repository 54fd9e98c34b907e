/* Pipeline schedules: the order in which stage k of n runs the forward (F)
 * and backward (B) of each of a step's m micro-batches.
 *
 *   GPipe:  F0 F1 ... F(m-1)  B0 B1 ... B(m-1)           keeps m activations
 *   1F1B:   w = min(n-k-1, m) warm-up forwards, then F(w+i) B(i) pairs,
 *           then the remaining backwards               keeps min(n-k, m)
 *
 * Backwards run in micro-batch order 0..m-1 under both, so every stage adds
 * its gradients in the order one board does (sky_bert_train_step) and the
 * sums are the same floats. (GPipe is usually drawn with the backwards in
 * reverse; in order costs the same time: the last stage starts B0 as soon
 * as it has done its forwards.) */
#ifndef SKY_SCHEDULE_H
#define SKY_SCHEDULE_H

#include "sky_err.h"

typedef enum { SKY_SCHEDULE_GPIPE = 0, SKY_SCHEDULE_1F1B = 1 } sky_schedule_kind;

typedef struct sky_schedule_op {
	char kind; /* 'F' forward, 'B' backward */
	int mb;    /* micro-batch */
	int last;  /* owner orders only: 1 an op of the last stage, 0 of the first */
} sky_schedule_op;

/* "gpipe" / "1f1b" -> kind. Returns 0 or SKY_EINVAL. */
int sky_schedule_parse(const char *name, sky_schedule_kind *kind);
const char *sky_schedule_name(sky_schedule_kind kind);

/* Micro-batches whose activations stage k of n keeps at once under kind
 * with m micro-batches (what the planner puts in the plan's in_flight). */
int sky_schedule_in_flight(sky_schedule_kind kind, int stage, int n_stages, int m);

/* Writes the 2m ops of stage k into ops[0..2m). Returns 2m, or SKY_EINVAL
 * (bad k, n or m) / SKY_ERANGE (cap < 2m). */
int sky_schedule_ops(sky_schedule_kind kind, int stage, int n_stages, int m, sky_schedule_op *ops,
		     int cap);

/* A data owner's one op order (a U-shaped plan: it holds stage 0 and
 * stage n-1 of n >= 3): 4m ops, each stage's in its own order
 * (sky_schedule_ops), merged by the planner's rule (sky_plan_owner_order
 * in planner/sky_plan.h, which the simulator uses): before each op of the
 * last stage, the first stage runs ahead as far as it may (every forward;
 * the backward of its j-th micro-batch once the last stage has done
 * j + 1 + lag backwards); lag is capped at the first stage's leading
 * forwards - 1, so no order deadlocks. Returns 4m, or SKY_EINVAL /
 * SKY_ERANGE (cap < 4m). */
int sky_schedule_owner_ops(sky_schedule_kind kind, int n_stages, int m, int lag,
			   sky_schedule_op *ops, int cap);

#endif
