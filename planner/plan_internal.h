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
	double first_s;    /* serving: what the first stage adds (embed_int8_s), else 0 */
	double last_s;     /* serving: what the last stage adds (head_int8_s), else 0 */
	int64_t mem;       /* its budget */
} board_cost;

void plan_ctx_init(plan_ctx *c, const sky_job *j);

/* Sites and the price of cuts (sky_plan.h). A route is the site path from
 * one site's broker to another's: a link the fleet names for the pair, or
 * the two hops through the core. */
typedef struct plan_route {
	int n_hops;        /* 0: one site, link-blind, or no known path */
	int hop[2];        /* link index * 2 + direction (0: from the link's a to its b) */
	double bw[2];      /* each hop's bandwidth */
	double hop_lat[2]; /* each hop's latency */
	double lat;        /* the sum of the hops' latencies */
} plan_route;

typedef struct plan_sites {
	int S;             /* distinct sites among the boards (1 under link_blind) */
	int *of;           /* f->n: each board's site index */
	int *rep;          /* S: a board of each site */
	plan_route *route; /* S x S: [a * S + b] from site a to site b */
	double *xfer;      /* S x S: one message alone on the route (cut_bytes / slowest hop) */
	unsigned char *cross; /* S x S: 1 when a != b (0 under link_blind) */
	int *use;          /* 2 x links: scratch for plan_price_cuts */
	int n_hops;
	double cut_bytes;
	int both_ways;     /* 1: training (activations forward, gradients back); 0: serving */
} plan_sites;

/* The route from site sa to site sb (sky_fleet_site_path's rules). Returns
 * 1 (filled), 0 for one site, SKY_ENOTFOUND (n_hops 0). */
int plan_site_route(const sky_fleet *f, const char *sa, const char *sb, plan_route *r);
/* 0 or SKY_ENOMEM (s then holds nothing). */
int plan_sites_init(plan_sites *s, const plan_ctx *c, const sky_fleet *f, const sky_job *j);
/* NULL-safe, may be called twice. */
void plan_sites_free(plan_sites *s);
/* The one place cuts are priced. Fills the cut fields of st[0..P) (boards
 * set): the route between each stage's site and the next one's, hop by hop
 * (wan_hop*: what the simulator's FIFO hops run), and each cut's load: a
 * hop (one direction of a link) that u message streams of the plan cross
 * (a cut in one direction is one stream; serving has no gradient streams)
 * spends u * cut_bytes / bw on every micro-batch, so wan_xfer_s = max over
 * the cut's hops forward of that, wan_xfer_b_s the same over the hops its
 * gradients take back. Returns the number of cuts priced as crossing sites. */
int plan_price_cuts(plan_sites *s, sky_stage *st, int P);
/* Site-grouped board orders, for the order searches: the first `first`
 * sites of their p-th permutation (lexicographic over site indices), each
 * site's boards in the order of rank[] (fleet indices, e.g. fastest first;
 * every board once). Fills order[] and returns how many boards it holds, or
 * -1 when p >= S! (only the first PLAN_SITE_PERMS permutations are offered). */
#define PLAN_SITE_PERMS 720 /* 6 sites: every order of them */
int plan_site_order(const plan_sites *s, int n, const int *rank, long p, int first, int *order);
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
	if (first)
		t += bc->first_s;
	if (last)
		t += bc->last_s;
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

/* Fills stage k of a P-stage plan (board, first_unit and last_unit set; bc
 * its board's cost) as sky_plan_evaluate does: times, micro-batches in
 * flight, memory. Whether that memory fits is the caller's check. */
static inline void plan_fill_stage(const plan_ctx *c, const board_cost *bc, sky_stage *s, int k, int P)
{
	int a = s->first_unit, b = s->last_unit + 1, first = k == 0, last = k == P - 1;
	double wt = units_weight(bc, a, b);
	s->fwd_s = bc->fwd * wt + (first ? bc->first_s : 0) + (last ? bc->last_s : 0);
	s->bwd_s = bc->bwd * wt;
	s->link_s = bc->link;
	s->send_s = (first ? 0 : bc->link_back) + (last ? 0 : bc->link);
	s->time_s = stage_time(bc, a, b, first, last);
	s->in_flight = plan_in_flight(c, P - k);
	s->mem_bytes = stage_mem(c, a, b, first, last, s->in_flight);
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
/* A message between sites on its way: it reaches hop `at` of its route at t. */
typedef struct plan_sim_msg {
	double t;
	int seq;                /* ties: the one sent first goes first */
	int k, op;              /* sent by stage k after its operation op */
	int at;
} plan_sim_msg;

typedef struct plan_sim_ws {
	int P, m;               /* capacity: stages, micro-batches */
	double *fend, *bend;    /* P * m: forward / backward of (stage, micro-batch) done,
				   its message at the receiver's broker (-1: not yet) */
	double *free_at;        /* P: per machine (a stage's board) */
	int *next, *todo;       /* P: next operation per machine; machines to look at */
	int *u_stage, *u_op;    /* 4m: the owner's op order (U-shaped plans) */
	plan_sim_msg *heap;     /* 2 P m: messages between sites, earliest first */
	int n_heap, seq;
	double hop_free[2 * SKY_PLAN_MAX_LINKS]; /* when each hop (link, direction) is free */
} plan_sim_ws;

/* 0 or SKY_ENOMEM (w then holds nothing). */
int plan_sim_ws_init(plan_sim_ws *w, int P, int m);
/* NULL-safe, may be called twice. */
void plan_sim_ws_free(plan_sim_ws *w);
/* The step time of stages st[0..P) (fwd_s, bwd_s, link_s and the cut
 * fields filled) under
 * sched with m micro-batches, as sky_sim_run defines it; busy_s[0..P) gets
 * each stage's busy time when not NULL. Returns -1 when P or m exceed the
 * workspace or the schedule deadlocks. */
double plan_sim(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
		double *busy_s);

/* plan_sim for a U-shaped plan (sky_job.owner): stages 0 and P-1 are one
 * board, which runs their ops in sky_plan_owner_order(sched, P, m, lag)
 * on one CPU (an op waits for the board, whichever stage it is of). P >= 3.
 * Returns -1 as plan_sim does. */
double plan_sim_owner(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched, int lag,
		      double *busy_s);
/* Picks the owner's lag for stages st[0..P) (priced, filled): the one of
 * 0..min(m, P) with the shortest simulated step (the smallest on a tie).
 * Returns the step (*lag set) or -1. */
double plan_owner_best_lag(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
			   int *lag);
/* The data owner's fleet index (cost.c), or -1 when the job has no owner
 * or names a board the fleet lacks. */
int plan_owner_index(const sky_fleet *f, const sky_job *j);
/* U-shaped plans (partition_owner.c). */
int plan_owner(const sky_fleet *f, const sky_job *j, sky_algo algo, sky_plan *out, sky_diag *d);

/* Fills a one-line description of how far the job is from fitting at all
 * (total bytes the model needs vs the fleet's total). */
int plan_shortfall(const sky_fleet *f, const sky_job *j, sky_diag *d, const char *algo);


/* Operation i of stage k out of p stages running m micro-batches under the
 * schedule (sim.c): mb >= 0 the forward of its mb-th micro-batch, -(mb + 1)
 * the backward. */
int plan_op_at(sky_sched sched, int k, int p, int m, int i);

/* ---- hybrid plans (hybrid.c): the job at micro-batch size B ---------------- */
typedef struct plan_hjob {
	plan_ctx c;       /* the cost model's figures at B sequences per micro-batch */
	double scale;     /* B / the job's micro-batch size: measured times x this */
	int B, M;
} plan_hjob;
/* 0, or SKY_EINVAL when B does not divide the job's global batch (or M is too large). */
int plan_hjob_init(plan_hjob *h, const sky_job *j, int B);
/* Fills replica r of stage k of a P-stage plan (board, share set) as
 * sky_hplan_evaluate does; returns 1 when it fits its board's memory. */
int plan_hfill_rep(const plan_hjob *h, const sky_job *j, const sky_board *b, const sky_hstage *s,
		   sky_hrep *r, int k, int P);
/* stage s's gradient bytes (its units, the embedding on the first, the head on the last) */
double plan_hgrad_bytes(const sky_job *j, const sky_hstage *s, int first, int last);

typedef struct plan_hsim_ws {
	int P, R, M;            /* capacity: stages, replicas in all, micro-batches */
	double *fend, *bend;    /* P * M, as plan_sim_ws */
	int *route;             /* P * M: the global replica each micro-batch goes to */
	int *mbs;               /* R * M: each replica's micro-batches, ascending */
	int *ops;               /* R * 2M: each replica's operations in order (mb: its
				   forward, -(mb + 1): its backward) */
	int *stage_of, *rep_of, *first_rep; /* R, R, P + 1 */
	double *free_at, *last_b; /* R: machine free; start of its last backward */
	int *next, *todo;       /* R */
} plan_hsim_ws;
int plan_hsim_ws_init(plan_hsim_ws *w, int P, int R, int M);
void plan_hsim_ws_free(plan_hsim_ws *w);
/* The step of an evaluated hybrid plan (sky_hsim_run's model) under sched;
 * out (may be NULL) gets the details. -1 on deadlock or if h exceeds w. */
double plan_hsim(plan_hsim_ws *w, const sky_hplan *h, const sky_fleet *f, const sky_job *j,
		 sky_hsim_result *out);

#endif
