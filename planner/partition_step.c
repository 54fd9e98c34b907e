/* optimal with the step objective: the shortest simulated training step.
 *
 * The bottleneck sets the pace once the pipeline is full, but a step also
 * pays for filling and draining it, and under 1F1B for the way uneven
 * stages wait on each other; no closed form covers that (GPipe's step is
 * sum(fwd) + sum(bwd) + lags + (m - 1)(max fwd + max bwd); 1F1B's strays
 * from any such formula by tens of percent on uneven stages). So the
 * simulator itself (plan_sim) is the objective, and the search is:
 *
 * 1. Seeds, each simulated. The exact minimum-bottleneck plan with its
 *    board-order search (plan_optimal); on that plan's board order, the
 *    exact minimum-bottleneck plan on only its k fastest boards for a sweep
 *    of k (fewer stages, shorter fill and drain); the plans with the least
 *    largest L_k (below) on the boards fastest first (seed_minl); with
 *    sites, the minimum-bottleneck plan on every site-grouped order
 *    (seed_sites) and the k sweep on the best of them.
 * 2. Local search from the best seed, then from the bottleneck plan, each
 *    move judged by the simulator within memory: move a boundary by one or
 *    two units, drop a stage, swap the boards of neighbouring stages, add a
 *    board left out as a one-unit stage anywhere, or several at the end;
 *    first improvement, until a pass finds none or STEP_LS_OPS simulated
 *    operations are spent.
 *    Sites do not change what follows: the simulator prices every cut
 *    (plan_price_cuts), and the bounds below ignore site paths, which can
 *    only lengthen a step, so they stay bounds.
 * 3. Exactness on fleets of at most STEP_EXACT_BOARDS boards: branch and
 *    bound over every board order (only the fleet's with keep_order), every
 *    subset and every contiguous split, stages placed front to back, the
 *    simulator at every complete plan. It prunes with lower bounds that
 *    hold for any plan under either schedule: the path that takes
 *    micro-batch 0 forward to stage k, runs all of stage k's 2m operations,
 *    and takes micro-batch m-1's gradient back to stage 0 gives
 *        step >= L_k = sum_{i<k} (time_i + lags into i) + lag into k + m time_k,
 *    which depends only on stages 0..k; the stages still to come must
 *    compute the remaining units with each of their L below the best step
 *    so far, which bounds the work they can take (rest_may_fit); under
 *    GPipe the closed form bounds the rest too (gpipe_bound). Boards with
 *    identical figures are interchangeable and tried once. When the search
 *    ends within STEP_EXACT_NODES placements the plan is the exact optimum
 *    (plan->step_exact = 1); otherwise it is the local search's.
 * The result's simulated step is never longer than the minimum-bottleneck
 * plan's, even's or sky's (all three are seeds). On larger fleets there is
 * no proven gap. Measured (2026-12-01): on the 108 of 120 random fleets of
 * 5 to 8 boards where the branch and bound finished, steps 1 and 2 alone
 * found the optimum 64 times, and were 0.57% above it on average, 6.2% at
 * worst. */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STEP_EXACT_BOARDS 8      /* fleets this small get the branch and bound */
#define STEP_EXACT_NODES 3000000 /* stage placements it may try before giving up */
#define STEP_LS_OPS 4e6          /* simulated operations local search may spend */
#define STEP_LS_MIN_EVALS 200    /* ... but at least this many plans */
#define STEP_LS_SHIFT 2          /* boundary moves of 1 .. this many units (powers of 2) */
#define STEP_INSERT_BOARDS 16    /* boards left out that local search tries to add */
#define STEP_MINL_TOL 1e-3       /* relative width at which the L bisection stops */
#define STEP_MINL_CELLS 2e5      /* boards x units above which it is skipped */
#define STEP_WIN 1e-12           /* a relative gain smaller than this is noise */
#define SEED_SITES_FEW 4         /* up to this many sites, seed every ordered subset of them */

typedef struct step_ws {
	plan_ctx c;
	const sky_fleet *f;
	const sky_job *j;
	int n, U, m;
	board_cost *bc;      /* n, by fleet index */
	plan_sites sites;    /* the price of every cut (plan_cut_charge) */
	plan_sim_ws sim;
	sky_stage *best;     /* n: the best plan so far */
	int n_best;
	double best_step;
	sky_stage *cur, *trial; /* n each: local search */
	int64_t evals, eval_budget;
	/* branch and bound */
	unsigned char *used; /* n */
	int *twin;           /* n: an earlier board with identical figures, or -1 */
	double *speed;       /* n: 1 / (fwd + bwd), layers per second */
	double share_min, share_max; /* over the fleet's boards */
	sky_stage *bb;       /* n: the stages placed so far */
	int64_t nodes;
	int aborted;
	int *by_speed;       /* n: fleet indices, fastest first */
	double step_lb;      /* step_lower_bound */
	double *minl_acc, *minl_nacc; /* U + 1 each */
	int32_t *minl_from;  /* n * (U + 1) */
	int *minl_cnt, *minl_ncnt; /* U + 1 each: stages so far */
	sky_plan *tmp;       /* for the seeds */
	int *order;          /* n */
} step_ws;

/* Fills stage k of a P-stage plan from its board and units as
 * sky_plan_evaluate does; returns 1 if it fits its board's memory. */
static int fill_stage(const step_ws *w, sky_stage *s, int k, int P)
{
	const board_cost *bc = &w->bc[s->board];
	plan_fill_stage(&w->c, bc, s, k, P);
	return s->mem_bytes <= bc->mem;
}

/* The simulated step of st[0..P), INFINITY when a stage does not fit. */
static double eval_stages(step_ws *w, sky_stage *st, int P)
{
	for (int k = 0; k < P; k++)
		if (!fill_stage(w, &st[k], k, P))
			return INFINITY;
	plan_price_cuts(&w->sites, st, P);
	w->evals++;
	double step = plan_sim(&w->sim, st, P, w->m, w->c.sched, NULL);
	return step < 0 ? INFINITY : step;
}

/* Keeps st[0..P) as the best plan if its step beats it. */
static int consider(step_ws *w, const sky_stage *st, int P, double step)
{
	if (!(step < w->best_step * (1 - STEP_WIN)))
		return 0;
	w->best_step = step;
	w->n_best = P;
	memcpy(w->best, st, sizeof *st * (size_t)P);
	return 1;
}

/* ---- seeds ------------------------------------------------------------------ */

static double consider_plan(step_ws *w, const sky_plan *p)
{
	sky_stage *st = w->trial;
	for (int k = 0; k < p->n_stages; k++)
		st[k] = p->stage[k];
	double step = eval_stages(w, st, p->n_stages);
	consider(w, st, p->n_stages, step);
	return step;
}

typedef struct keyed_t {
	double t;
	int idx;
} keyed_t;

static int by_time(const void *x, const void *y)
{
	const keyed_t *a = x, *b = y;
	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* The exact minimum-bottleneck plan on the k fastest boards of order[0..n)
 * (kept in that order; rank[board] is its place by speed); returns its
 * simulated step (INFINITY: none fits). */
static double try_k(step_ws *w, const int *order, int n, const int *rank, int k, double *step_at)
{
	if (k < 1 || k > n || !isnan(step_at[k]))
		return INFINITY;
	step_at[k] = INFINITY;
	int cnt = 0;
	for (int i = 0; i < n; i++)
		if (rank[order[i]] < k)
			w->order[cnt++] = order[i];
	if (plan_optimal_on(w->f, w->j, w->order, cnt, w->tmp))
		return INFINITY;
	return step_at[k] = consider_plan(w, w->tmp);
}

/* the k sweep over the boards of plan b, in its order */
static void seed_sweep(step_ws *w, const sky_plan *b)
{
	int n = b->n_stages;
	keyed_t *keys = malloc(sizeof *keys * (size_t)n);
	double *step_at = malloc(sizeof(double) * (size_t)(n + 1));
	int *order = malloc(sizeof(int) * (size_t)n), *rank = malloc(sizeof(int) * (size_t)w->n);
	if (!keys || !step_at || !order || !rank)
		goto exit;
	for (int i = 0; i < n; i++) {
		order[i] = b->stage[i].board;
		const board_cost *bc = &w->bc[order[i]];
		keys[i] = (keyed_t){bc->fwd + bc->bwd, order[i]};
		step_at[i] = NAN;
	}
	step_at[n] = NAN;
	qsort(keys, (size_t)n, sizeof *keys, by_time);
	for (int r = 0; r < n; r++)
		rank[keys[r].idx] = r;
	int spacing = n / 16 > 1 ? n / 16 : 1, best_k = n;
	double best = INFINITY;
	for (int i = 1; i < 16; i++) {
		int k = n - i * spacing;
		double s = try_k(w, order, n, rank, k, step_at);
		if (s < best)
			best = s, best_k = k;
	}
	while (spacing > 1) {
		spacing /= 2;
		int c = best_k;
		for (int side = -1; side <= 1; side += 2) {
			double s = try_k(w, order, n, rank, c + side * spacing, step_at);
			if (s < best)
				best = s, best_k = c + side * spacing;
		}
	}
exit:
	free(keys);
	free(step_at);
	free(order);
	free(rank);
}

/* The plans whose largest L_k is smallest, for one board order (any
 * subsequence of it). L_k is a lower bound on the step that the simulator
 * often nearly meets (when every stage's L is about equal, no other path is
 * much longer), and, unlike the step, it can be planned exactly: for a bound
 * B, go front to back keeping, per units covered s, the least acc (time
 * plus lags of the stages so far) with which every L so far stays within
 * B; a smaller acc leaves every later stage more room, so it is all that
 * needs keeping. Memory under 1F1B depends on the stages still to come,
 * which a front-to-back pass does not know: the first pass assumes m in
 * flight everywhere (always safe), a second assumes the first plan's stage
 * count. O(boards x units x units per stage) per B, so it is skipped on
 * fleets of more than STEP_MINL_CELLS boards x units; B by bisection between
 * the global bound and the best step so far (a plan whose largest L is
 * above that cannot beat it), to 0.1%. Each plan met on the way is
 * simulated (with its real memory) and may become the best. */
static int minl_decide(step_ws *w, const int *order, int n, double B, int p_guess)
{
	const int U = w->U, m = w->m;
	double *acc = w->minl_acc, *nacc = w->minl_nacc;
	int *cnt = w->minl_cnt, *ncnt = w->minl_ncnt;
	for (int s = 0; s <= U; s++)
		acc[s] = INFINITY, cnt[s] = 0;
	acc[0] = 0;
	for (int j = 0; j < n; j++) {
		const board_cost *bc = &w->bc[order[j]];
		int32_t *from = &w->minl_from[(size_t)j * (size_t)(U + 1)];
		memcpy(nacc, acc, sizeof(double) * (size_t)(U + 1));
		memcpy(ncnt, cnt, sizeof(int) * (size_t)(U + 1));
		for (int e = 0; e <= U; e++)
			from[e] = -1;
		for (int s = 0; s < U; s++) {
			if (isinf(acc[s]))
				continue;
			int first = s == 0;
			double lag_in = first ? 0 : bc->link;
			int to_end = p_guess ? p_guess - cnt[s] : m;
			for (int e = s + 1; e <= U; e++) {
				int last = e == U;
				int k_in = plan_in_flight(&w->c, last ? 1 : to_end < 2 ? 2 : to_end);
				double t = stage_time(bc, s, e, first, last);
				if (acc[s] + lag_in + m * t > B ||
				    stage_mem(&w->c, s, e, first, last, k_in) > bc->mem) {
					if (e < U - 1)
						e = U - 1; /* only the last unit can still fit */
					continue;
				}
				double a2 = acc[s] + t + lag_in + (last ? 0 : bc->link);
				if (a2 < nacc[e]) {
					nacc[e] = a2;
					ncnt[e] = cnt[s] + 1;
					from[e] = s;
				}
			}
		}
		double *x = acc;
		acc = nacc;
		nacc = x;
		int *y = cnt;
		cnt = ncnt;
		ncnt = y;
		if (!isinf(acc[U])) {
			/* trace back from (j, U) into w->trial */
			int e = U, P = 0;
			for (int q = j; e > 0 && q >= 0; q--) {
				int32_t f = w->minl_from[(size_t)q * (size_t)(U + 1) + (size_t)e];
				if (f < 0)
					continue;
				w->trial[P++] = (sky_stage){.board = order[q], .first_unit = f,
							    .last_unit = e - 1};
				e = f;
			}
			for (int k = 0; k < P / 2; k++) {
				sky_stage x2 = w->trial[k];
				w->trial[k] = w->trial[P - 1 - k];
				w->trial[P - 1 - k] = x2;
			}
			return P;
		}
	}
	return 0;
}

static void seed_minl(step_ws *w, const int *order, int n)
{
	int p_guess = 0;
	for (int pass = 0; pass < 2; pass++) {
		/* no step is below its largest L: a bound at or above the best
		 * step so far cannot lead to a better plan */
		double lo = w->step_lb, hi = w->best_step * (1 - STEP_WIN);
		int P = 0, P_hi = 0;
		if (!(lo < hi) || !(P = minl_decide(w, order, n, hi, p_guess)))
			return;
		P_hi = P;
		consider(w, w->trial, P, eval_stages(w, w->trial, P));
		while (hi - lo > STEP_MINL_TOL * hi) {
			double mid = 0.5 * (lo + hi);
			if ((P = minl_decide(w, order, n, mid, p_guess))) {
				hi = mid;
				P_hi = P;
				consider(w, w->trial, P, eval_stages(w, w->trial, P));
			} else {
				lo = mid;
			}
		}
		if (w->c.sched == SKY_SCHED_GPIPE)
			return; /* memory does not depend on the stages after */
		p_guess = P_hi;
	}
}

/* Site-grouped seeds (boards of one site next to each other, fastest
 * first within it; every order of the sites up to PLAN_SITE_PERMS): the
 * exact minimum-bottleneck plan on each such order (which also chooses the
 * boards to leave out), simulated; then the k sweep on the best of them.
 * An interleaved fleet otherwise starts from orders that cross a slow site
 * path at most cuts. */
static int by_mem_desc(const void *x, const void *y)
{
	const keyed_t *a = x, *b = y;
	if (a->t != b->t)
		return a->t > b->t ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

static void seed_sites(step_ws *w)
{
	if (w->sites.S < 2 || w->j->keep_order)
		return;
	double best = INFINITY;
	int n = w->n, have = 0;
	sky_plan *keep = malloc(sizeof *keep);
	int *rank = malloc(sizeof(int) * (size_t)n * 3);
	keyed_t *keys = malloc(sizeof *keys * (size_t)n);
	if (!keep || !rank || !keys)
		goto exit;
	/* within a site: fastest first, slowest first (a slow board with room
	 * can take the first units, which hold the embedding), most memory first */
	for (int i = 0; i < n; i++) {
		rank[i] = w->by_speed[i];
		rank[n + i] = w->by_speed[n - 1 - i];
		keys[i] = (keyed_t){(double)w->bc[i].mem, i};
	}
	qsort(keys, (size_t)n, sizeof *keys, by_mem_desc);
	for (int i = 0; i < n; i++)
		rank[2 * n + i] = keys[i].idx;
	/* up to SEED_SITES_FEW sites, also the first 1, 2, ... sites of each
	 * permutation alone (every ordered subset of the sites): a plan that
	 * stays home can beat every one that crosses a slow path */
	int few = w->sites.S <= SEED_SITES_FEW;
	for (int v = 0; v < (few ? 3 : 1); v++) {
		for (long q = 0, cnt; (cnt = plan_site_order(&w->sites, n, rank + (size_t)v * n, q,
							     w->sites.S, w->order)) >= 0;
		     q++) {
			for (int first = few ? 1 : w->sites.S; first <= w->sites.S; first++) {
				cnt = plan_site_order(&w->sites, n, rank + (size_t)v * n, q, first,
						      w->order);
				if (cnt < 1 || plan_optimal_on(w->f, w->j, w->order, (int)cnt, w->tmp))
					continue;
				double step = consider_plan(w, w->tmp);
				if (step < best) {
					best = step;
					memcpy(keep, w->tmp, sizeof *keep);
					have = 1;
				}
			}
		}
	}
	if (have)
		seed_sweep(w, keep);
exit:
	free(keep);
	free(rank);
	free(keys);
}

/* A lower bound on any plan's step, over every order, subset and split:
 * L_k >= sum_{h<k} c_h + m c_k (compute only), so with every L within B
 * the work the boards can do is at most B * alpha (rest_may_fit's linear
 * programme over the whole fleet); the units need `work`. */
static double step_lower_bound(const step_ws *w)
{
	double *v = malloc(sizeof(double) * (size_t)w->n);
	if (!v)
		return 0;
	for (int i = 0; i < w->n; i++) {
		const board_cost *bc = &w->bc[w->by_speed[i]];
		v[i] = 1.0 / (bc->fwd + bc->bwd);
	}
	double alpha = 0, wt = 1.0 / w->m;
	for (int i = 0; i < w->n && wt > 0; i++, wt *= 1.0 - 1.0 / w->m)
		alpha += v[i] * wt;
	free(v);
	int na = units_attn(0, w->U), nf = w->U - na;
	double work = na * w->share_min + nf * (1 - w->share_max);
	return alpha > 0 ? work / alpha : 0;
}

/* ---- local search ------------------------------------------------------------ */

/* Tries trial[0..P) against cur (step *cur_step); takes it when it wins. */
static int take_if_better(step_ws *w, int P, int *n_cur, double *cur_step)
{
	double s = eval_stages(w, w->trial, P);
	if (!(s < *cur_step * (1 - STEP_WIN)))
		return 0;
	memcpy(w->cur, w->trial, sizeof *w->cur * (size_t)P);
	*n_cur = P;
	*cur_step = s;
	consider(w, w->cur, P, s);
	return 1;
}

/* The local search's moves on w->cur (*P stages, step *cur_step), each
 * built in w->trial and taken when it wins (take_if_better). Each returns
 * 1 when one was taken. */

/* Boundaries: between stage k and k + 1, by +-1, 2, 4, ... */
static int ls_shift(step_ws *w, int *P, double *cur_step)
{
	sky_stage *c = w->cur, *t = w->trial;
	int improved = 0;
	for (int k = 0; k + 1 < *P && w->evals < w->eval_budget; k++) {
		for (int step = 1; step <= STEP_LS_SHIFT && step < w->U; step *= 2) {
			int won = 0;
			for (int sign = -1; sign <= 1; sign += 2) {
				int nl = c[k].last_unit + sign * step;
				if (nl < c[k].first_unit || nl >= c[k + 1].last_unit)
					continue;
				memcpy(t, c, sizeof *c * (size_t)*P);
				t[k].last_unit = nl;
				t[k + 1].first_unit = nl + 1;
				if (take_if_better(w, *P, P, cur_step)) {
					won = improved = 1;
					break;
				}
			}
			if (won)
				break;
		}
	}
	return improved;
}

/* Drop a stage: its units go to the stage before (the first's to the next). */
static int ls_drop(step_ws *w, int *P, double *cur_step)
{
	sky_stage *c = w->cur, *t = w->trial;
	int improved = 0;
	for (int k = 0; *P > 1 && k < *P && w->evals < w->eval_budget; k++) {
		int to = k > 0 ? k - 1 : 1, Q = 0;
		for (int i = 0; i < *P; i++) {
			if (i == k)
				continue;
			t[Q] = c[i];
			if (i == to) {
				if (to < k)
					t[Q].last_unit = c[k].last_unit;
				else
					t[Q].first_unit = c[k].first_unit;
			}
			Q++;
		}
		if (take_if_better(w, Q, P, cur_step))
			improved = 1;
	}
	return improved;
}

/* Swap the boards of neighbouring stages (not when the order is kept). */
static int ls_swap(step_ws *w, int *P, double *cur_step)
{
	sky_stage *c = w->cur, *t = w->trial;
	int improved = 0;
	for (int k = 0; !w->j->keep_order && k + 1 < *P && w->evals < w->eval_budget; k++) {
		memcpy(t, c, sizeof *c * (size_t)*P);
		t[k].board = c[k + 1].board;
		t[k + 1].board = c[k].board;
		if (take_if_better(w, *P, P, cur_step))
			improved = 1;
	}
	return improved;
}

/* The q fastest boards left out (w->used) join at the end, a unit each,
 * taken from the last stage: under 1F1B more stages after a stage let it
 * run more forwards before it waits for a backward, which a single board
 * added rarely shows. */
static int ls_grow_tail(step_ws *w, int *P, double *cur_step)
{
	sky_stage *c = w->cur, *t = w->trial;
	int improved = 0;
	for (int q = 2; !improved && w->evals < w->eval_budget; q *= 2) {
		int added = 0, room = c[*P - 1].last_unit - c[*P - 1].first_unit;
		memcpy(t, c, sizeof *c * (size_t)*P);
		for (int i = 0; i < w->n && added < q && added < room; i++) {
			int u = w->by_speed[i];
			if (w->used[u] || (w->j->keep_order && u < t[*P - 1 + added].board))
				continue;
			t[*P + added] = (sky_stage){.board = u};
			added++;
		}
		if (added < 2)
			break;
		/* the new stages take the last `added` units, one each */
		int end = c[*P - 1].last_unit;
		t[*P - 1].last_unit = end - added;
		for (int a = 0; a < added; a++)
			t[*P + a].first_unit = t[*P + a].last_unit = end - added + 1 + a;
		improved = take_if_better(w, *P + added, P, cur_step);
		if (added < q)
			break;
	}
	return improved;
}

/* A board left out (w->used) joins as a new stage of one unit, taken from
 * the stage before it or after it (the few fastest such boards). */
static int ls_insert(step_ws *w, int *P, double *cur_step)
{
	sky_stage *c = w->cur, *t = w->trial;
	int improved = 0;
	for (int i = 0, tried = 0; i < w->n && tried < STEP_INSERT_BOARDS &&
				   w->evals < w->eval_budget && !improved; i++) {
		int u = w->by_speed[i];
		if (w->used[u])
			continue;
		tried++;
		for (int k = 0; k <= *P && !improved; k++) {
			if (w->j->keep_order && ((k > 0 && c[k - 1].board > u) ||
						 (k < *P && c[k].board < u)))
				continue;
			for (int from = -1; from <= 1 && !improved; from += 2) {
				int nb = from < 0 ? k - 1 : k; /* the neighbour giving a unit */
				if (nb < 0 || nb >= *P || c[nb].last_unit == c[nb].first_unit)
					continue;
				memcpy(t, c, sizeof *c * (size_t)k);
				memcpy(t + k + 1, c + k, sizeof *c * (size_t)(*P - k));
				t[k].board = u;
				if (from < 0) {
					t[k].first_unit = t[k].last_unit = c[k - 1].last_unit;
					t[k - 1].last_unit--;
				} else {
					t[k].first_unit = t[k].last_unit = c[k].first_unit;
					t[k + 1].first_unit++;
				}
				improved = take_if_better(w, *P + 1, P, cur_step);
			}
		}
	}
	return improved;
}

static void local_search(step_ws *w, const sky_stage *start, int P0)
{
	int P = P0;
	memcpy(w->cur, start, sizeof *start * (size_t)P);
	double cur_step = eval_stages(w, w->cur, P);
	if (isinf(cur_step))
		return;
	for (int improved = 1; improved && w->evals < w->eval_budget;) {
		improved = ls_shift(w, &P, &cur_step);
		improved |= ls_drop(w, &P, &cur_step);
		improved |= ls_swap(w, &P, &cur_step);
		/* the boards left out, for the two moves that add one */
		memset(w->used, 0, (size_t)w->n);
		for (int k = 0; k < P; k++)
			w->used[w->cur[k].board] = 1;
		if (!improved)
			improved = ls_grow_tail(w, &P, &cur_step);
		if (!improved)
			improved = ls_insert(w, &P, &cur_step);
	}
}

/* ---- branch and bound (small fleets) -------------------------------------------- */

/* Can the boards not yet used still take units [a, U) with every stage's
 * L below acc + r? With c_i the i-th remaining stage's compute, L_i >= acc +
 * sum_{h<i} c_h + m c_i, so m c_i + sum_{h<i} c_h < r. The most work that
 * allows, in layers, over every order and subset, is r times
 *   alpha = sum_i v_(i) (1/m) (1 - 1/m)^(i-1),  v_(i) = 1/(fwd + bwd) sorted
 * fastest first (a stage's best share of the remaining budget is 1/m of it,
 * and each stage's time comes out of the budget of those after it; the
 * greedy fill, fastest first, is the optimum of that linear programme).
 * The units need at least na * share_min + nf * (1 - share_max) layers of
 * work. Returns 1 when they may fit. */
static int rest_may_fit(const step_ws *w, int a, double r)
{
	double v[STEP_EXACT_BOARDS];
	int q = 0;
	for (int b = 0; b < w->n; b++) {
		if (w->used[b])
			continue;
		double x = w->speed[b];
		int i = q++;
		for (; i > 0 && v[i - 1] < x; i--)
			v[i] = v[i - 1];
		v[i] = x;
	}
	double alpha = 0, wt = 1.0 / w->m;
	for (int i = 0; i < q; i++, wt *= 1.0 - 1.0 / w->m)
		alpha += v[i] * wt;
	int na = units_attn(a, w->U), nf = (w->U - a) - na;
	double work = na * w->share_min + nf * (1 - w->share_max);
	return work <= r * alpha * (1 + 1e-9);
}

/* stage k starts at unit s; acc = sum over stages before k of their time
 * plus the lags into them; lmax = the largest L_i of those stages */
/* GPipe's step has a closed form (see the top): sum of every stage's
 * time and lags + (m - 1)(largest forward + largest backward). So with
 * stages placed up to acc and forward / backward maxima mf, mb, the units
 * [a, U) still to place add at least their compute on the fastest board
 * left, and the maxima are at least those so far and at least the least
 * bottleneck the boards left could reach. */
static double gpipe_bound(const step_ws *w, int a, double acc, double mf, double mb)
{
	double inv = 0, fastest = 0;
	for (int b = 0; b < w->n; b++) {
		if (w->used[b])
			continue;
		inv += w->speed[b];
		if (w->speed[b] > fastest)
			fastest = w->speed[b];
	}
	if (!(inv > 0))
		return INFINITY;
	int na = units_attn(a, w->U), nf = (w->U - a) - na;
	double work = na * w->share_min + nf * (1 - w->share_max);
	double rest_max = work / inv;
	double pace = mf + mb > rest_max ? mf + mb : rest_max;
	return acc + work / fastest + (w->m - 1) * pace;
}

static void bb(step_ws *w, int k, int s, double acc, double mf, double mb)
{
	const int U = w->U, m = w->m, keep = w->j->keep_order;
	/* fastest first (good plans early prune more); with the fleet's order
	 * kept, in that order, after the previous stage's board */
	for (int i = keep && k > 0 ? w->bb[k - 1].board + 1 : 0; i < w->n && !w->aborted; i++) {
		int b = keep ? i : w->by_speed[i];
		/* of interchangeable boards, the first unused one stands for all
		 * (under keep_order their places differ: every one is tried) */
		if (w->used[b] || (!keep && w->twin[b] >= 0 && !w->used[w->twin[b]]))
			continue;
		const board_cost *bc = &w->bc[b];
		int first = k == 0;
		double lag_in = first ? 0 : bc->link;
		w->used[b] = 1;
		for (int e = s + 1; e <= U; e++) {
			if (++w->nodes > STEP_EXACT_NODES) {
				w->aborted = 1;
				break;
			}
			int last = e == U;
			/* fewest micro-batches in flight it could have: 1 as the last
			 * stage, else those of the second to last */
			int k_min = plan_in_flight(&w->c, last ? 1 : 2);
			/* time and memory grow with e until the last unit, where the
			 * forward send and, under 1F1B, in-flight activations go */
			if (stage_mem(&w->c, s, e, first, last, k_min) > bc->mem) {
				if (e < U - 1)
					e = U - 1;
				continue;
			}
			double t = stage_time(bc, s, e, first, last);
			double L = acc + lag_in + m * t;
			if (!(L < w->best_step * (1 - STEP_WIN))) {
				if (e < U - 1)
					e = U - 1;
				continue;
			}
			w->bb[k] = (sky_stage){.board = b, .first_unit = s, .last_unit = e - 1};
			if (last) {
				double step = eval_stages(w, w->bb, k + 1);
				consider(w, w->bb, k + 1, step);
				continue;
			}
			double acc2 = acc + t + lag_in + bc->link;
			double room = w->best_step * (1 - STEP_WIN) - acc2;
			double wt = units_weight(bc, s, e);
			double mf2 = bc->fwd * wt + bc->link, mb2 = bc->bwd * wt + lag_in;
			mf2 = mf2 > mf ? mf2 : mf;
			mb2 = mb2 > mb ? mb2 : mb;
			if (room > 0 && rest_may_fit(w, e, room) &&
			    (w->c.sched != SKY_SCHED_GPIPE ||
			     gpipe_bound(w, e, acc2, mf2, mb2) < w->best_step * (1 - STEP_WIN)))
				bb(w, k + 1, e, acc2, mf2, mb2);
		}
		w->used[b] = 0;
	}
}

static int exact_search(step_ws *w)
{
	const board_cost *bc = w->bc;
	for (int b = 0; b < w->n; b++) {
		w->used[b] = 0;
		w->twin[b] = -1;
		for (int a = b - 1; a >= 0 && w->twin[b] < 0; a--)
			if (bc[a].fwd == bc[b].fwd && bc[a].bwd == bc[b].bwd &&
			    bc[a].share == bc[b].share && bc[a].link == bc[b].link &&
			    bc[a].mem == bc[b].mem && w->sites.of[a] == w->sites.of[b])
				w->twin[b] = a;
	}
	w->nodes = 0;
	w->aborted = 0;
	bb(w, 0, 0, 0, 0, 0);
	return !w->aborted;
}

/* ---- the whole search ---------------------------------------------------------- */

static void ws_free(step_ws *w)
{
	plan_sim_ws_free(&w->sim);
	plan_sites_free(&w->sites);
	free(w->bc);
	free(w->best);
	free(w->cur);
	free(w->trial);
	free(w->used);
	free(w->twin);
	free(w->speed);
	free(w->bb);
	free(w->tmp);
	free(w->by_speed);
	free(w->minl_acc);
	free(w->minl_nacc);
	free(w->minl_from);
	free(w->minl_cnt);
	free(w->minl_ncnt);
	free(w->order);
}

/* w's work arrays for a fleet of w->n boards and w->U units (the L
 * bisection's back-pointers only when minl). Returns 0 or SKY_ENOMEM (what
 * was allocated is ws_free's). */
static int step_ws_alloc(step_ws *w, int minl)
{
	size_t n = (size_t)w->n, U1 = (size_t)w->U + 1;
	w->bc = malloc(sizeof *w->bc * n);
	w->best = malloc(sizeof *w->best * n);
	w->cur = malloc(sizeof *w->cur * n);
	w->trial = malloc(sizeof *w->trial * n);
	w->used = malloc(n);
	w->twin = malloc(sizeof(int) * n);
	w->speed = malloc(sizeof(double) * n);
	w->bb = malloc(sizeof *w->bb * n);
	w->order = malloc(sizeof(int) * n);
	w->by_speed = malloc(sizeof(int) * n);
	w->tmp = malloc(sizeof *w->tmp);
	w->minl_acc = malloc(sizeof(double) * U1);
	w->minl_nacc = malloc(sizeof(double) * U1);
	w->minl_cnt = malloc(sizeof(int) * U1);
	w->minl_ncnt = malloc(sizeof(int) * U1);
	w->minl_from = malloc(sizeof(int32_t) * (minl ? n * U1 : 1));
	int ok = w->bc && w->best && w->cur && w->trial && w->used && w->twin && w->speed &&
		 w->bb && w->order && w->by_speed && w->tmp && w->minl_acc && w->minl_nacc &&
		 w->minl_cnt && w->minl_ncnt && w->minl_from;
	return ok ? 0 : SKY_ENOMEM;
}

/* Each board's cost under the job, the boards fastest first (keys: n
 * entries of scratch), the spread of the attention share, and the lower
 * bound on any plan's step. */
static void step_ws_boards(step_ws *w, keyed_t *keys)
{
	const int n = w->n;
	w->share_min = 1, w->share_max = 0;
	for (int i = 0; i < n; i++) {
		board_cost *bc = &w->bc[i];
		plan_board_cost(&w->c, w->j, &w->f->board[i], bc);
		keys[i] = (keyed_t){bc->fwd + bc->bwd, i};
		w->speed[i] = 1.0 / (bc->fwd + bc->bwd);
		if (bc->share < w->share_min)
			w->share_min = bc->share;
		if (bc->share > w->share_max)
			w->share_max = bc->share;
	}
	qsort(keys, (size_t)n, sizeof *keys, by_time);
	for (int i = 0; i < n; i++)
		w->by_speed[i] = keys[i].idx;
	w->step_lb = step_lower_bound(w);
}

int plan_optimal_step(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d)
{
	step_ws w;
	int rc = 0, n = f->n;
	memset(&w, 0, sizeof w);
	plan_ctx_init(&w.c, j);
	w.f = f;
	w.j = j;
	w.n = n;
	w.U = w.c.units;
	w.m = j->micro_batches;
	w.best_step = INFINITY;
	/* the L bisection needs boards x units of back-pointers: skipped above
	 * STEP_MINL_CELLS, and then not allocated */
	int minl = (double)n * (w.U + 1) <= STEP_MINL_CELLS;
	keyed_t *keys = malloc(sizeof *keys * (size_t)n);
	sky_stage *seed = malloc(sizeof *seed * (size_t)n), *start = malloc(sizeof *start * (size_t)n);
	if (!keys || !seed || !start || step_ws_alloc(&w, minl) != 0 ||
	    plan_sim_ws_init(&w.sim, n, w.m) || plan_sites_init(&w.sites, &w.c, f, j)) {
		rc = sky_diag_set(d, SKY_ENOMEM, "optimal (step): no memory for the work arrays");
		goto exit;
	}
	step_ws_boards(&w, keys);
	/* 1. seeds; the minimum-bottleneck plan first: if nothing fits there,
	 * nothing fits (its error message names the shortfall) */
	if ((rc = plan_optimal(f, j, out, d)))
		goto exit;
	out->algo = SKY_ALGO_OPTIMAL;
	if ((rc = sky_plan_evaluate(f, j, out, d)))
		goto exit;
	int n_seed = out->n_stages;
	memcpy(seed, out->stage, sizeof *seed * (size_t)n_seed);
	consider_plan(&w, out);
	seed_sweep(&w, out); /* subsequences of its order: fine under keep_order */
	/* the least largest L_k, fastest first (the order that lets the most
	 * work fit under every L: see rest_may_fit), or in the fleet's order */
	for (int i = 0; i < n; i++)
		w.order[i] = i;
	if (minl)
		seed_minl(&w, j->keep_order ? w.order : w.by_speed, n);
	seed_sites(&w);
	/* the two baselines, so that optimal's step is never longer than
	 * even's or sky's (the local search alone does not promise it on
	 * large fleets) */
	if (plan_even(f, j, w.tmp, NULL) == 0)
		consider_plan(&w, w.tmp);
	if (plan_sky(f, j, w.tmp, NULL) == 0)
		consider_plan(&w, w.tmp);

	/* 2. local search from the best seed, then from the bottleneck plan
	 * with what is left of the budget */
	double ops = (double)w.n_best * w.m * 2;
	w.eval_budget = (int64_t)(STEP_LS_OPS / (ops > 1 ? ops : 1));
	if (w.eval_budget < STEP_LS_MIN_EVALS)
		w.eval_budget = STEP_LS_MIN_EVALS;
	int n_start = w.n_best;
	memcpy(start, w.best, sizeof *start * (size_t)n_start);
	local_search(&w, start, n_start);
	local_search(&w, seed, n_seed);

	/* 3. exact on small fleets */
	int exact = n <= STEP_EXACT_BOARDS && !j->no_exact && exact_search(&w);
	out->n_stages = w.n_best;
	memcpy(out->stage, w.best, sizeof *w.best * (size_t)w.n_best);
	out->step_s = w.best_step;
	out->step_exact = exact;
	out->step_lower_bound_s = exact ? w.best_step : w.step_lb;
exit:
	free(keys);
	free(seed);
	free(start);
	ws_free(&w);
	return rc;
}
