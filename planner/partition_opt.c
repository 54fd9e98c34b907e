/* optimal: the exact minimum-bottleneck contiguous split for a board order,
 * and a board-order heuristic with local search around it.
 *
 * For a fixed order the question "can every stage take at most T?" is
 * answered by a dynamic programme from the back of the pipeline to the
 * front (sky_plan.h has the cost model). Going backwards, a stage knows how
 * many stages follow it, which is what its 1F1B activation memory depends
 * on (min(m, stages to the end)), and whether it is the last one (no
 * forward send). State r = stages placed so far (clipped at R: m under 1F1B,
 * 1 under GPipe, where memory does not depend on it); best[r] = the smallest
 * s such that units [s, U) can be covered by the boards seen so far using r
 * stages. A smaller s and a smaller r are both better (fewer units left;
 * fewer activations in flight for what comes next), so per r the smallest
 * s is all that needs keeping. Board j either sits out (the state carries
 * over) or takes [a, s) with the smallest feasible a: first [0, s) as the
 * first stage (no backward send, holds the embedding), else by binary
 * search over a in [1, s), since a middle stage that fits keeps fitting when
 * it loses units. O(n * R * log U) per decision.
 *
 * Sites: a cut between two sites also loads its route's hops, wan_xfer_s
 * per micro-batch (sky_plan.h), which counts toward the bottleneck like a
 * stage. Whether a stage's cut fits depends on the next stage's board, so
 * the state also carries the site of the stage placed last (the next one in
 * pipeline order): per (r, site) the smallest s. With S sites that is
 * O(n * R * S * log U) per decision; one site is the case above.
 *
 * The bottleneck is then found by bisection on T. A failed decision at T
 * also yields the smallest stage time it rejected for time alone: no T below
 * it can change a single answer, so the optimum is at least that (this
 * makes lo jump to real stage times). A successful one gives a plan whose
 * real bottleneck becomes hi. It stops when hi <= lo (exact) or within a
 * relative 1e-12. */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec {
	int32_t a, s, from;
	int32_t taken;
} rec;

typedef struct opt_ws {
	plan_ctx c;
	const sky_fleet *f;
	const sky_job *j;
	int n_fleet;
	int n;            /* boards in the current order */
	int *order;       /* n_fleet: fleet indices */
	board_cost *bc;   /* n_fleet, in order */
	board_cost *bc_fleet; /* n_fleet, by fleet index */
	plan_sites sites;  /* cut prices between sites */
	int *site;         /* n_fleet, in order: site index */
	int R, Q;          /* Q = (R + 1) * sites.S states: q = r * S + site of the next stage */
	int *best, *nbest; /* Q */
	rec *rec;          /* n_fleet * Q */
	double flip;       /* smallest stage time rejected for time alone */
	int64_t decisions;
} opt_ws;

static inline int feasible(opt_ws *w, const board_cost *bc, int a, int b, int first, int last,
			   int k, double T)
{
	if (stage_mem(&w->c, a, b, first, last, k) > bc->mem)
		return 0;
	double t = stage_time(bc, a, b, first, last);
	if (t <= T)
		return 1;
	if (t < w->flip)
		w->flip = t;
	return 0;
}

/* Returns the order position where the units were all covered (its state in
 * *r_end), or -1 when T is infeasible. Records choices for the trace. */
static int decide(opt_ws *w, double T, int *r_end)
{
	const int U = w->c.units, R = w->R, S = w->sites.S, Q = w->Q;
	int *best = w->best, *nbest = w->nbest;
	w->flip = INFINITY;
	w->decisions++;
	for (int q = 0; q < Q; q++)
		best[q] = U + 1;
	best[0] = U; /* r = 0: nothing placed (its site part is unused) */
	for (int j = w->n - 1; j >= 0; j--) {
		const board_cost *bc = &w->bc[j];
		const int sj = w->site[j];
		rec *rj = &w->rec[(size_t)j * (size_t)Q];
		memcpy(nbest, best, sizeof(int) * (size_t)Q);
		for (int q = 0; q < Q; q++)
			rj[q].taken = 0;
		for (int q = 0; q < Q; q++) {
			int s = best[q], r = q / S;
			if (s > U)
				continue;
			int last = r == 0, k = plan_in_flight(&w->c, r + 1), r2 = r < R ? r + 1 : R;
			int q2 = r2 * S + sj;
			if (!last) {
				/* the cut to the next stage's site holds its path */
				double x = w->sites.xfer[(size_t)sj * (size_t)S + (size_t)(q % S)];
				if (x > T) {
					if (x < w->flip)
						w->flip = x;
					continue;
				}
			}
			int a = -1;
			if (feasible(w, bc, 0, s, 1, last, k, T)) {
				a = 0;
			} else if (s >= 2 && feasible(w, bc, s - 1, s, 0, last, k, T)) {
				int lo = 1, hi = s - 1;
				while (lo < hi) {
					int mid = lo + (hi - lo) / 2;
					if (feasible(w, bc, mid, s, 0, last, k, T))
						hi = mid;
					else
						lo = mid + 1;
				}
				a = hi;
			}
			if (a >= 0 && a < nbest[q2]) {
				nbest[q2] = a;
				rj[q2] = (rec){a, s, q, 1};
			}
		}
		w->best = nbest;
		w->nbest = best;
		best = w->best;
		nbest = w->nbest;
		for (int q = 0; q < Q; q++) {
			if (best[q] == 0) {
				*r_end = q;
				return j;
			}
		}
	}
	return -1;
}

/* Follows the records from (j, r) to the end of the pipeline into out's
 * stages (fleet indices); returns the plan's real bottleneck. */
static double trace(opt_ws *w, int j, int q, sky_plan *out)
{
	int n = 0;
	double bott = 0;
	while (q / w->sites.S != 0 && j < w->n) {
		const rec *x = &w->rec[(size_t)j * (size_t)w->Q + (size_t)q];
		if (x->taken) {
			out->stage[n].board = w->order[j];
			out->stage[n].first_unit = x->a;
			out->stage[n].last_unit = x->s - 1;
			n++;
			q = x->from;
		}
		j++;
	}
	out->n_stages = n;
	for (int k = 0; k < n; k++) {
		sky_stage *s = &out->stage[k];
		double t = stage_time(&w->bc_fleet[s->board], s->first_unit, s->last_unit + 1, k == 0,
				      k == n - 1);
		if (k + 1 < n) {
			/* the cut as the decision priced it: its route alone */
			double x = w->sites.xfer[(size_t)w->sites.of[s->board] * (size_t)w->sites.S +
						 (size_t)w->sites.of[out->stage[k + 1].board]];
			if (x > t)
				t = x;
		}
		if (t > bott)
			bott = t;
	}
	return bott;
}

static void set_order(opt_ws *w, const int *order, int n)
{
	w->n = n;
	if (w->order != order)
		memcpy(w->order, order, sizeof(int) * (size_t)n);
	for (int i = 0; i < n; i++) {
		w->bc[i] = w->bc_fleet[w->order[i]];
		w->site[i] = w->sites.of[w->order[i]];
	}
}

/* Exact bottleneck for w's current order, given that a plan with bottleneck
 * below `must_beat` is wanted (INFINITY: any). Returns the bottleneck and
 * fills out, or INFINITY (out untouched) when none beats must_beat. With
 * sites, the bottleneck returned is the plan's priced one (above), and the
 * plan is exact for the order when its cuts share no hop. */
/* The bottleneck of out's stages with every cut priced as evaluation does
 * (a hop's load counts every stream that crosses it), which the decision
 * does not see: it prices a cut as if it had its route alone, so its optimum is
 * a lower bound for the order, met when no two streams share a hop. */
static double priced_bottleneck(opt_ws *w, sky_plan *out)
{
	int n = out->n_stages;
	double bott = 0;
	plan_price_cuts(&w->sites, out->stage, n);
	for (int k = 0; k < n; k++) {
		const sky_stage *s = &out->stage[k];
		double t = stage_time(&w->bc_fleet[s->board], s->first_unit, s->last_unit + 1, k == 0,
				      k == n - 1);
		if (s->wan_xfer_s > t)
			t = s->wan_xfer_s;
		if (s->wan_xfer_b_s > t)
			t = s->wan_xfer_b_s;
		if (t > bott)
			bott = t;
	}
	return bott;
}

static double solve_order(opt_ws *w, double must_beat, sky_plan *out)
{
	int r, j;
	double hi;
	if (isinf(must_beat)) {
		j = decide(w, INFINITY, &r);
		if (j < 0)
			return INFINITY;
	} else {
		/* relative margin so float noise does not count as a win */
		j = decide(w, must_beat * (1 - 1e-9), &r);
		if (j < 0)
			return INFINITY;
	}
	hi = trace(w, j, r, out);
	double lo = 0;
	while (hi > lo && hi - lo > 1e-12 * hi) {
		double mid = lo > 0 ? 0.5 * (lo + hi) : 0.5 * hi;
		j = decide(w, mid, &r);
		if (j >= 0) {
			/* a plan the decision took at mid is at most mid; should the
			 * two ever disagree, stop rather than loop */
			double h = trace(w, j, r, out);
			if (!(h < hi))
				break;
			hi = h;
		} else {
			lo = w->flip > mid ? w->flip : mid;
			if (lo >= hi)
				break;
			/* try the flip point itself: often it is the optimum */
			if (w->flip < hi) {
				j = decide(w, w->flip, &r);
				if (j >= 0)
					hi = trace(w, j, r, out);
				else
					lo = w->flip > lo ? w->flip : lo;
			}
		}
	}
	return w->sites.S > 1 ? priced_bottleneck(w, out) : hi;
}

static int ws_init(opt_ws *w, const sky_fleet *f, const sky_job *j)
{
	memset(w, 0, sizeof *w);
	plan_ctx_init(&w->c, j);
	w->f = f;
	w->j = j;
	w->n_fleet = f->n;
	int n = f->n;
	w->R = j->sched == SKY_SCHED_GPIPE ? 1 : (j->micro_batches < n ? j->micro_batches : n);
	if (plan_sites_init(&w->sites, &w->c, f, j))
		return SKY_ENOMEM;
	w->Q = (w->R + 1) * w->sites.S;
	size_t Q = (size_t)w->Q;
	w->order = malloc(sizeof(int) * (size_t)n);
	w->site = malloc(sizeof(int) * (size_t)n);
	w->bc = malloc(sizeof(board_cost) * (size_t)n);
	w->bc_fleet = malloc(sizeof(board_cost) * (size_t)n);
	w->best = malloc(sizeof(int) * Q);
	w->nbest = malloc(sizeof(int) * Q);
	w->rec = malloc(sizeof(rec) * Q * (size_t)n);
	if (!w->order || !w->site || !w->bc || !w->bc_fleet || !w->best || !w->nbest || !w->rec)
		return SKY_ENOMEM;
	for (int i = 0; i < n; i++)
		plan_board_cost(&w->c, j, &f->board[i], &w->bc_fleet[i]);
	return 0;
}

static void ws_free(opt_ws *w)
{
	plan_sites_free(&w->sites);
	free(w->site);
	free(w->order);
	free(w->bc);
	free(w->bc_fleet);
	free(w->best);
	free(w->nbest);
	free(w->rec);
	memset(w, 0, sizeof *w);
}

int plan_optimal_on(const sky_fleet *f, const sky_job *j, const int *order, int n_order,
		    sky_plan *out)
{
	opt_ws w;
	int rc = 0;
	if (ws_init(&w, f, j)) {
		rc = SKY_ENOMEM;
		goto exit;
	}
	set_order(&w, order, n_order);
	if (isinf(solve_order(&w, INFINITY, out)))
		rc = SKY_ENOMEM;
exit:
	ws_free(&w);
	return rc;
}

int sky_plan_optimal_order(const sky_fleet *f, const sky_job *j, const int *order, int n_order,
			   sky_plan *out, sky_diag *d)
{
	int rc = sky_fleet_validate(f, d);
	if (!rc)
		rc = sky_job_validate(j, d);
	if (rc)
		return rc;
	if (n_order < 1 || n_order > f->n)
		return sky_diag_set(d, SKY_EINVAL, "optimal: order of %d boards for a fleet of %d",
				    n_order, f->n);
	unsigned char seen[SKY_PLAN_MAX_BOARDS];
	memset(seen, 0, (size_t)f->n);
	for (int i = 0; i < n_order; i++)
		if (order[i] < 0 || order[i] >= f->n || seen[order[i]]++)
			return sky_diag_set(d, SKY_EINVAL, "optimal: bad or repeated board index %d",
					    order[i]);
	rc = plan_optimal_on(f, j, order, n_order, out);
	if (rc == SKY_ENOMEM)
		return plan_shortfall(f, j, d, "optimal");
	if (rc)
		return rc;
	out->algo = SKY_ALGO_OPTIMAL;
	return sky_plan_evaluate(f, j, out, d);
}

/* seed orders sort (key, index) pairs: no global comparator state */
typedef struct keyed {
	double key;
	int idx;
} keyed;

static int by_key(const void *x, const void *y)
{
	const keyed *a = x, *b = y;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Solves the order cand; if its plan beats *best, keeps the order in
 * best_order and the plan in out. Returns 1 if it won, 0 if not. */
static int try_order(opt_ws *w, const int *cand, int n, double *best, int *best_order,
		     sky_plan *out, sky_plan *tmp)
{
	set_order(w, cand, n);
	double t = solve_order(w, *best, tmp);
	if (!(t < *best))
		return 0;
	*best = t;
	memcpy(best_order, cand, sizeof(int) * (size_t)n);
	memcpy(out, tmp, sizeof *out);
	return 1;
}

/* The seed orders (by memory, by speed, and with sites every site-grouped
 * order), each tried against *best (try_order); keys and cand: n entries of
 * scratch. */
static void seed_orders(opt_ws *w, int n, keyed *keys, int *cand, double *best, int *best_order,
			sky_plan *out, sky_plan *tmp)
{
	/* seeds: memory-rich boards first (1F1B keeps more activations early
	 * in the pipeline, the first stage holds the embedding), fastest first */
	for (int seed = 0; seed < 2; seed++) {
		for (int i = 0; i < n; i++) {
			const board_cost *b = &w->bc_fleet[i];
			keys[i].key = seed == 0 ? -(double)b->mem : b->fwd + b->bwd;
			keys[i].idx = i;
		}
		qsort(keys, (size_t)n, sizeof *keys, by_key);
		for (int i = 0; i < n; i++)
			cand[i] = keys[i].idx;
		try_order(w, cand, n, best, best_order, out, tmp);
	}
	/* with sites: every site-grouped order, fastest first within a site */
	if (w->sites.S > 1) {
		for (int i = 0; i < n; i++) {
			const board_cost *b = &w->bc_fleet[i];
			keys[i].key = b->fwd + b->bwd;
			keys[i].idx = i;
		}
		qsort(keys, (size_t)n, sizeof *keys, by_key);
		int *rank = malloc(sizeof(int) * (size_t)n);
		for (int i = 0; rank && i < n; i++)
			rank[i] = keys[i].idx;
		for (long q = 0; rank && plan_site_order(&w->sites, n, rank, q, w->sites.S, cand) == n;
		     q++)
			try_order(w, cand, n, best, best_order, out, tmp);
		free(rank);
	}
}

/* Local search around the bottleneck stage's board of out (best_order's
 * plan), at most j->order_evals orders; cand: n entries of scratch. */
static void bottleneck_search(opt_ws *w, const sky_fleet *f, const sky_job *j, int n, int *cand,
			      double *best, int *best_order, sky_plan *out, sky_plan *tmp)
{
	/* local search around the bottleneck stage's board: move it to either
	 * end (the end stages send one message per micro-batch, not two), then
	 * swap it with the boards nearest it in the order, then farther ones;
	 * keep the first move that wins and start again from the new
	 * bottleneck, until no move wins or the budget is spent */
	int budget = j->order_evals;
	while (budget > 0) {
		sky_plan_evaluate(f, j, out, NULL);
		int bboard = out->stage[out->bottleneck_stage].board, q = 0;
		while (best_order[q] != bboard)
			q++;
		int improved = 0;
		for (int move = 0; move < 2 * n + 2 && budget > 0 && !improved; move++) {
			memcpy(cand, best_order, sizeof(int) * (size_t)n);
			if (move == 0) {
				if (q == 0)
					continue;
				memmove(cand + 1, cand, sizeof(int) * (size_t)q);
				cand[0] = bboard;
			} else if (move == 1) {
				if (q == n - 1)
					continue;
				memmove(cand + q, cand + q + 1, sizeof(int) * (size_t)(n - q - 1));
				cand[n - 1] = bboard;
			} else {
				/* swap with q - dist (even moves) or q + dist (odd) */
				int dist = move / 2, other = move % 2 ? q + dist : q - dist;
				if (other < 0 || other >= n)
					continue;
				cand[q] = cand[other];
				cand[other] = bboard;
			}
			budget--;
			improved = try_order(w, cand, n, best, best_order, out, tmp);
		}
		if (!improved)
			break;
	}
}

int plan_optimal(const sky_fleet *f, const sky_job *j, sky_plan *out, sky_diag *d)
{
	opt_ws w;
	int rc = 0, n = f->n;
	int *cand = NULL, *best_order = NULL;
	keyed *keys = NULL;
	sky_plan *tmp = NULL;
	if ((rc = ws_init(&w, f, j))) {
		rc = sky_diag_set(d, SKY_ENOMEM, "optimal: no memory for the work arrays");
		goto exit;
	}
	cand = malloc(sizeof(int) * (size_t)n);
	best_order = malloc(sizeof(int) * (size_t)n);
	tmp = malloc(sizeof *tmp);
	keys = malloc(sizeof *keys * (size_t)n);
	if (!cand || !best_order || !tmp || !keys) {
		rc = sky_diag_set(d, SKY_ENOMEM, "optimal: no memory for the work arrays");
		goto exit;
	}
	/* the fleet's own order first: whatever reordering finds can only be
	 * better than the exact optimum for it, which beats even and sky */
	for (int i = 0; i < n; i++)
		best_order[i] = i;
	set_order(&w, best_order, n);
	double best = solve_order(&w, INFINITY, out);
	if (isinf(best) && j->keep_order) {
		rc = plan_shortfall(f, j, d, "optimal");
		goto exit;
	}
	if (j->keep_order)
		goto exit;
	seed_orders(&w, n, keys, cand, &best, best_order, out, tmp);
	if (isinf(best)) {
		rc = plan_shortfall(f, j, d, "optimal");
		goto exit;
	}
	bottleneck_search(&w, f, j, n, cand, &best, best_order, out, tmp);
exit:
	free(keys);
	free(cand);
	free(best_order);
	free(tmp);
	ws_free(&w);
	return rc;
}
