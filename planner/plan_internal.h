/* The planner's private parts: the cost model in a form every algorithm and
 * sky_plan_evaluate share, so that a plan is judged by exactly the same
 * arithmetic that chose it (same rounding, same comparisons). */
#ifndef SKY_PLAN_INTERNAL_H
#define SKY_PLAN_INTERNAL_H

#include "sky_plan.h"

/* What the job makes of one unit, and what every stage carries. */
typedef struct plan_ctx {
	int layers, units, m;
	sky_sched sched;
	int64_t bpp;                 /* bytes per trained parameter */
	int64_t param_bytes[2];      /* per half block: params * bpp */
	int64_t saved_bytes[2];      /* per half block, one micro-batch */
	int64_t fixed_bytes;         /* scratch + 4 cut buffers, every stage */
	int64_t embed_param_bytes, embed_saved_bytes; /* first stage */
	int64_t head_param_bytes, head_saved_bytes;   /* last stage */
	double cut_bytes;
	double flops_attn_share;     /* attention block's share of a layer's FLOPs */
} plan_ctx;

/* One board under one job. */
typedef struct board_cost {
	double fwd, bwd;   /* one layer, one micro-batch, at the job's precision */
	double share;      /* attention block's share of the layer's time */
	double link;       /* one message: lat + cut / bw */
	double link_back;  /* the backward message: link, or 0 when serving (sky_job.infer) */
	int64_t mem;       /* its budget */
} board_cost;

void plan_ctx_init(plan_ctx *c, const sky_job *j);
void plan_board_cost(const plan_ctx *c, const sky_job *j, const sky_board *b, board_cost *out);

static inline int units_attn(int a, int b) { return (b + 1) / 2 - (a + 1) / 2; }

/* Units [a, b) as a share of a whole layer's time on this board. */
static inline double units_weight(const board_cost *bc, int a, int b)
{
	int na = units_attn(a, b), nf = (b - a) - na;
	return na * bc->share + nf * (1.0 - bc->share);
}

static inline double stage_time(const board_cost *bc, int a, int b, int first, int last)
{
	double t = (bc->fwd + bc->bwd) * units_weight(bc, a, b);
	if (!first)
		t += bc->link_back;
	if (!last)
		t += bc->link;
	return t;
}

static inline int plan_in_flight(const plan_ctx *c, int stages_to_end)
{
	if (c->sched == SKY_SCHED_GPIPE)
		return c->m;
	return stages_to_end < c->m ? stages_to_end : c->m;
}

static inline int64_t stage_mem(const plan_ctx *c, int a, int b, int first, int last, int k)
{
	int64_t na = units_attn(a, b), nf = (b - a) - na;
	int64_t m = na * c->param_bytes[0] + nf * c->param_bytes[1] +
		    (int64_t)k * (na * c->saved_bytes[0] + nf * c->saved_bytes[1]) + c->fixed_bytes;
	if (first)
		m += c->embed_param_bytes + (int64_t)k * c->embed_saved_bytes;
	if (last)
		m += c->head_param_bytes + (int64_t)k * c->head_saved_bytes;
	return m;
}

/* Algorithms: fill out->n_stages and each stage's board, first_unit and
 * last_unit; sky_plan_partition evaluates. */
int plan_even(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d);
int plan_sky(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d);
int plan_optimal(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d);
int plan_optimal_step(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d);
/* sky_plan_optimal_order without the checks (the caller vouches for f, j and
 * order): the stages only (not evaluated). 0, or SKY_ENOMEM when no split
 * fits or no memory. */
int plan_optimal_on(const sky_fleet *f, const sky_job *j, const int *order, int n_order,
		    sky_plan *out);

/* The simulator's core (sim.c) on working memory sized once, so that a
 * search can simulate thousands of candidate plans without allocating. */
typedef struct plan_sim_ws {
	int P, m;               /* capacity: stages, micro-batches */
	double *fend, *bend;    /* P * m: forward / backward of (stage, micro-batch) done */
	double *free_at;        /* P */
	int *next, *todo;       /* P: next operation per stage; stages to look at */
} plan_sim_ws;

/* 0 or SKY_ENOMEM (w then holds nothing). */
int plan_sim_ws_init(plan_sim_ws *w, int P, int m);
/* NULL-safe, may be called twice. */
void plan_sim_ws_free(plan_sim_ws *w);
/* The step time of stages st[0..P) (fwd_s, bwd_s and link_s filled) under
 * sched with m micro-batches, as sky_sim_run defines it; busy_s[0..P) gets
 * each stage's busy time when not NULL. Returns -1 when P or m exceed the
 * workspace or the schedule deadlocks. */
double plan_sim(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
		double *busy_s);

/* Fills a one-line description of how far the job is from fitting at all
 * (total bytes the model needs vs the fleet's total). */
int plan_shortfall(const sky_fleet *f, const sky_job *j, sky_diag *d, const char *algo);

#endif
