/* Data stays home: the U-shaped plan of a job with a data owner.
 *
 * The owner board holds stage 0 (embeddings, half-layers [0, a)) and the
 * last stage (half-layers [b, U), head, labels and loss), so its tokens and
 * labels never leave it; the other boards split [a, b) between them, in
 * some order, each a contiguous run (a board may be left out). The owner
 * computes both of its stages on one CPU: its time is the sum of both
 * segments (sky_plan_evaluate), and the simulator runs them as one machine
 * in the owner's op order (sky_plan_owner_order, with the lag that gives
 * the shortest step).
 *
 * even: layers split equally (as plan_even) over the owner, the other
 * boards in the fleet's order, and the owner again.
 *
 * optimal (the simulated step, min over the owner's lag), also weighing
 * the owner alone (one stage, the whole model: its data stays home too):
 *  - exact when the candidates are few (OWNER_EXACT_SIMS): every ordered
 *    subset of the other boards, every a < b and every contiguous split of
 *    [a, b) over them, each simulated;
 *  - else, for a set of board orders (all of them up to OWNER_PERM_BOARDS
 *    other boards; otherwise the fleet's, fastest first, slowest first and
 *    site-grouped ones), the exact minimum-bottleneck split of [a, b) for
 *    every a (one DP per a gives every b), the OWNER_KEEP plans with the
 *    smallest bottleneck simulated, then a local search (every boundary,
 *    a and b included, moved by one unit) judged by the simulator.
 * Cuts are priced as every plan's are (plan_price_cuts): link-aware unless
 * the job is link-blind. Working memory is allocated once per call. */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OWNER_EXACT_SIMS 200000 /* candidate plans x lags the exact search may simulate */
#define OWNER_PERM_BOARDS 5     /* other boards up to which every order is tried */
#define OWNER_KEEP 48           /* smallest-bottleneck plans simulated per search */
#define OWNER_LS_EVALS 4000     /* local search: plans simulated at most */

typedef struct own_ws {
	plan_ctx c;
	const sky_fleet *f;
	const sky_job *j;
	int n, U, m, oi;
	int *mid, n_mid;     /* the other boards, fleet order */
	board_cost *bc;      /* n */
	plan_sites sites;
	plan_sim_ws sim;
	sky_stage *trial;    /* n + 1 */
	sky_stage *best;     /* n + 1 */
	int n_best, best_lag;
	double best_step;
	int64_t sims, ls_evals;
	/* DP (heuristic): (n_mid + 1) x (U + 1) */
	double *dp;
	int *from;
	/* the kept candidates: OWNER_KEEP x (n + 1) stages */
	sky_stage *keep;
	int *keep_n;
	double *keep_bn;
	int n_keep;
	int *order, *used, *perm; /* n: scratch for the enumerations */
} own_ws;

/* fills stage k of P as sky_plan_evaluate does; 1 if it fits (the owner's
 * two stages together) */
static int fill(own_ws *w, sky_stage *st, int k, int P)
{
	sky_stage *s = &st[k];
	const board_cost *bc = &w->bc[s->board];
	int first = k == 0, last = k == P - 1;
	plan_fill_stage(&w->c, bc, s, k, P);
	if (last)
		return st[0].mem_bytes + s->mem_bytes <= bc->mem;
	return first || s->mem_bytes <= bc->mem;
}

/* the simulated step of st[0..P) with its best lag (INFINITY: no fit) */
static double eval(own_ws *w, sky_stage *st, int P, int *lag)
{
	for (int k = 0; k < P; k++)
		if (!fill(w, st, k, P))
			return INFINITY;
	plan_price_cuts(&w->sites, st, P);
	w->sims += (w->m < P ? w->m : P) + 1;
	double t = plan_owner_best_lag(&w->sim, st, P, w->m, w->c.sched, lag);
	return t < 0 ? INFINITY : t;
}

/* the owner alone: one stage, all of the model (its data stays home too) */
static void consider_alone(own_ws *w)
{
	sky_stage *s = w->trial;
	s->board = w->oi;
	s->first_unit = 0;
	s->last_unit = w->U - 1;
	const board_cost *bc = &w->bc[w->oi];
	double wt = units_weight(bc, 0, w->U);
	s->fwd_s = bc->fwd * wt;
	s->bwd_s = bc->bwd * wt;
	s->link_s = bc->link;
	s->send_s = 0;
	s->time_s = stage_time(bc, 0, w->U, 1, 1);
	s->in_flight = plan_in_flight(&w->c, 1);
	s->mem_bytes = stage_mem(&w->c, 0, w->U, 1, 1, s->in_flight);
	if (s->mem_bytes > bc->mem)
		return;
	plan_price_cuts(&w->sites, s, 1);
	double t = plan_sim(&w->sim, s, 1, w->m, w->c.sched, NULL);
	if (t >= 0 && t < w->best_step * (1 - 1e-12)) {
		w->best_step = t;
		w->best_lag = 0;
		w->n_best = 1;
		w->best[0] = *s;
	}
}

static void consider(own_ws *w, const sky_stage *st, int P, double step, int lag)
{
	if (!(step < w->best_step * (1 - 1e-12)))
		return;
	w->best_step = step;
	w->best_lag = lag;
	w->n_best = P;
	memcpy(w->best, st, sizeof *st * (size_t)P);
}

/* st's stage boards: owner, order[0..k), owner; units from cuts[0..k+1]
 * (the k + 1 inner boundaries, increasing, within (0, U)) */
static void build(own_ws *w, sky_stage *st, const int *order, int k, const int *cut)
{
	int P = k + 2;
	for (int s = 0; s < P; s++) {
		st[s].board = s == 0 || s == P - 1 ? w->oi : order[s - 1];
		st[s].first_unit = s == 0 ? 0 : cut[s - 1];
		st[s].last_unit = (s == P - 1 ? w->U : cut[s]) - 1;
	}
}

/* ---- exact: every ordered subset, every composition --------------------------- */

static double binom(int n, int k)
{
	if (k < 0 || k > n)
		return 0;
	double r = 1;
	for (int i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

static double exact_count(const own_ws *w)
{
	double total = 0, perms = 1;
	for (int k = 1; k <= w->n_mid; k++) {
		perms *= w->n_mid - k + 1;
		total += perms * binom(w->U - 1, k + 1);
	}
	return total * ((w->m < w->n + 1 ? w->m : w->n + 1) + 1);
}

/* every increasing choice of the k + 1 cuts after cut[i - 1] */
static void cuts_rec(own_ws *w, int k, int *cut, int i)
{
	if (i == k + 1) {
		int lag = 0;
		build(w, w->trial, w->order, k, cut);
		double t = eval(w, w->trial, k + 2, &lag);
		consider(w, w->trial, k + 2, t, lag);
		return;
	}
	int lo = i == 0 ? 1 : cut[i - 1] + 1, hi = w->U - (k + 1 - i);
	for (int u = lo; u <= hi; u++) {
		cut[i] = u;
		cuts_rec(w, k, cut, i + 1);
	}
}

static void orders_rec(own_ws *w, int depth, int *cut)
{
	if (depth > 0 && depth + 1 < w->U)
		cuts_rec(w, depth, cut, 0);
	if (depth == w->n_mid)
		return;
	for (int i = 0; i < w->n_mid; i++) {
		if (w->used[i])
			continue;
		w->used[i] = 1;
		w->order[depth] = w->mid[i];
		orders_rec(w, depth + 1, cut);
		w->used[i] = 0;
	}
}

/* ---- heuristic: minimum-bottleneck splits, then the simulator ------------------- */

static void keep_candidate(own_ws *w, const sky_stage *st, int P, double bn)
{
	int at = w->n_keep;
	if (at == OWNER_KEEP) {
		/* replace the worst kept one if this is better */
		int worst = 0;
		for (int i = 1; i < at; i++)
			if (w->keep_bn[i] > w->keep_bn[worst])
				worst = i;
		if (!(bn < w->keep_bn[worst]))
			return;
		at = worst;
	} else {
		w->n_keep++;
	}
	w->keep_bn[at] = bn;
	w->keep_n[at] = P;
	memcpy(w->keep + (size_t)at * (size_t)(w->n + 1), st, sizeof *st * (size_t)P);
}

/* for the board order order[0..k), every a: the minimum-bottleneck split
 * of [a, b) over a subsequence of the order, for every b */
static void dp_order(own_ws *w, const int *order, int k)
{
	const int U = w->U;
	const size_t U1 = (size_t)U + 1;
	const board_cost *ob = &w->bc[w->oi];
	for (int a = 1; a + 1 < U; a++) {
		double *dp = w->dp;
		int *from = w->from;
		for (size_t i = 0; i < (size_t)(k + 1) * U1; i++) {
			dp[i] = INFINITY;
			from[i] = -2;
		}
		dp[a] = 0;
		for (int j = 0; j < k; j++) {
			const board_cost *bc = &w->bc[order[j]];
			double *cur = dp + (size_t)j * U1, *nxt = dp + (size_t)(j + 1) * U1;
			int *fr = from + (size_t)(j + 1) * U1;
			for (int u = a; u < U; u++) {
				nxt[u] = cur[u]; /* board j left out */
				fr[u] = -1;
				for (int v = a; v < u; v++) {
					if (cur[v] == INFINITY)
						continue;
					if (stage_mem(&w->c, v, u, 0, 0, w->c.m) > bc->mem)
						continue;
					double t = stage_time(bc, v, u, 0, 0);
					double x = cur[v] > t ? cur[v] : t;
					if (x < nxt[u]) {
						nxt[u] = x;
						fr[u] = v;
					}
				}
			}
		}
		double t0 = stage_time(ob, 0, a, 1, 0);
		for (int b = a + 1; b < U; b++) {
			double mid = dp[(size_t)k * U1 + (size_t)b];
			if (mid == INFINITY || mid <= 0)
				continue;
			double own = t0 + stage_time(ob, b, U, 0, 1);
			double bn = own > mid ? own : mid;
			if (w->n_keep == OWNER_KEEP) {
				int worst = 0;
				for (int i = 1; i < w->n_keep; i++)
					if (w->keep_bn[i] > w->keep_bn[worst])
						worst = i;
				if (!(bn < w->keep_bn[worst]))
					continue;
			}
			/* trace the middle stages back from b (from: -1 board left
			 * out, -2 unreachable) */
			int ids[SKY_PLAN_MAX_BOARDS], lo[SKY_PLAN_MAX_BOARDS], km = 0, u = b;
			for (int jj = k; jj > 0 && u > a; jj--) {
				int v = from[(size_t)jj * U1 + (size_t)u];
				if (v == -1)
					continue;
				if (v < 0) {
					km = 0;
					break;
				}
				ids[km] = order[jj - 1];
				lo[km++] = v;
				u = v;
			}
			if (km == 0 || u != a)
				continue;
			/* into the pipeline's order */
			int rid[SKY_PLAN_MAX_BOARDS], cut[SKY_PLAN_MAX_BOARDS + 1];
			for (int i = 0; i < km; i++) {
				rid[i] = ids[km - 1 - i];
				cut[i] = lo[km - 1 - i];
			}
			cut[km] = b;
			build(w, w->trial, rid, km, cut);
			/* a cut's site path is a stage of its own (as in the bottleneck) */
			plan_price_cuts(&w->sites, w->trial, km + 2);
			for (int c = 0; c + 1 < km + 2; c++) {
				const sky_stage *x = &w->trial[c];
				double p = x->wan_xfer_s > x->wan_xfer_b_s ? x->wan_xfer_s : x->wan_xfer_b_s;
				if (p > bn)
					bn = p;
			}
			keep_candidate(w, w->trial, km + 2, bn);
		}
	}
}

/* one local-search pass from w->best: every inner boundary moved by one
 * unit either way; first improvement. Returns 1 if it improved. */
static int ls_pass(own_ws *w)
{
	int P = w->n_best;
	for (int c = 1; c < P; c++)
		for (int dlt = -1; dlt <= 1; dlt += 2) {
			if (w->ls_evals++ >= OWNER_LS_EVALS)
				return 0;
			memcpy(w->trial, w->best, sizeof *w->trial * (size_t)P);
			int u = w->trial[c].first_unit + dlt;
			if (u <= w->trial[c - 1].first_unit || u > w->trial[c].last_unit)
				continue;
			w->trial[c].first_unit = u;
			w->trial[c - 1].last_unit = u - 1;
			int lag = 0;
			double t = eval(w, w->trial, P, &lag);
			if (t < w->best_step * (1 - 1e-12)) {
				consider(w, w->trial, P, t, lag);
				return 1;
			}
		}
	/* drop a middle stage: its units go to the stage before or after */
	for (int c = 1; c + 1 < P && P > 3; c++)
		for (int side = 0; side < 2; side++) {
			if (w->ls_evals++ >= OWNER_LS_EVALS)
				return 0;
			int t = 0;
			for (int k = 0; k < P; k++) {
				if (k == c)
					continue;
				w->trial[t] = w->best[k];
				if (side == 0 && k == c - 1)
					w->trial[t].last_unit = w->best[c].last_unit;
				if (side == 1 && k == c + 1)
					w->trial[t].first_unit = w->best[c].first_unit;
				t++;
			}
			int lag = 0;
			double x = eval(w, w->trial, P - 1, &lag);
			if (x < w->best_step * (1 - 1e-12)) {
				consider(w, w->trial, P - 1, x, lag);
				return 1;
			}
		}
	return 0;
}

/* v[0..k) by the boards' layer time, fastest first (insertion sort: k is small) */
static void sort_fast(const own_ws *w, int *v, int k)
{
	for (int i = 1; i < k; i++) {
		int x = v[i], p = i;
		double tx = w->bc[x].fwd + w->bc[x].bwd;
		while (p > 0 && w->bc[v[p - 1]].fwd + w->bc[v[p - 1]].bwd > tx) {
			v[p] = v[p - 1];
			p--;
		}
		v[p] = x;
	}
}

static void heuristic(own_ws *w)
{
	int k = w->n_mid;
	int *ord = w->order;
	if (k <= OWNER_PERM_BOARDS) {
		/* every order of all of them (the DP leaves boards out itself) */
		int idx[OWNER_PERM_BOARDS], c[OWNER_PERM_BOARDS] = {0};
		for (int i = 0; i < k; i++)
			idx[i] = w->mid[i];
		memcpy(ord, idx, sizeof(int) * (size_t)k);
		dp_order(w, ord, k);
		/* Heap's algorithm */
		for (int i = 1; i < k;) {
			if (c[i] < i) {
				int s = i % 2 ? c[i] : 0, t = idx[s];
				idx[s] = idx[i];
				idx[i] = t;
				memcpy(ord, idx, sizeof(int) * (size_t)k);
				dp_order(w, ord, k);
				c[i]++;
				i = 1;
			} else {
				c[i++] = 0;
			}
		}
	} else {
		memcpy(ord, w->mid, sizeof(int) * (size_t)k);
		dp_order(w, ord, k);
		sort_fast(w, ord, k);
		dp_order(w, ord, k);
		for (int i = 0; i < k / 2; i++) {
			int t = ord[i];
			ord[i] = ord[k - 1 - i];
			ord[k - 1 - i] = t;
		}
		dp_order(w, ord, k);
	}
	/* with sites: the boards of every subset of the sites only (the DP
	 * does not see that leaving a site out saves its slow path), grouped
	 * by site, fastest first within one */
	if (w->sites.S > 1 && w->sites.S <= 6) {
		int *all = w->used;
		memcpy(all, w->mid, sizeof(int) * (size_t)k);
		sort_fast(w, all, k);
		for (int mask = 1; mask < (1 << w->sites.S); mask++)
			for (long p = 0; p < 24; p++) {
				int got = plan_site_order(&w->sites, k, all, p, w->sites.S, w->perm);
				if (got < 0)
					break;
				int t = 0;
				for (int i = 0; i < got; i++)
					if (mask >> w->sites.of[w->perm[i]] & 1)
						ord[t++] = w->perm[i];
				if (t > 0)
					dp_order(w, ord, t);
			}
	}
	for (int i = 0; i < w->n_keep; i++) {
		sky_stage *st = w->keep + (size_t)i * (size_t)(w->n + 1);
		int lag = 0;
		double t = eval(w, st, w->keep_n[i], &lag);
		consider(w, st, w->keep_n[i], t, lag);
	}
	while (w->n_best >= 3 && ls_pass(w))
		;
}

/* ---- even ---------------------------------------------------------------------- */

static int owner_even(own_ws *w, sky_plan *out, sky_diag *d)
{
	int L = w->c.layers, P = w->n_mid + 2 < L ? w->n_mid + 2 : L;
	if (P < 3)
		return sky_diag_set(d, SKY_EINVAL,
				    "even: a data owner needs 3 stages (another board and 3 layers)");
	int base = L / P, extra = L % P, layer = 0;
	for (int s = 0; s < P; s++) {
		int cnt = base + (s < extra);
		out->stage[s].board = s == 0 || s == P - 1 ? w->oi : w->mid[s - 1];
		out->stage[s].first_unit = 2 * layer;
		out->stage[s].last_unit = 2 * (layer + cnt) - 1;
		layer += cnt;
	}
	out->n_stages = P;
	/* the lag the simulator prefers for this split */
	int lag = 0;
	memcpy(w->trial, out->stage, sizeof *w->trial * (size_t)P);
	for (int k = 0; k < P; k++)
		fill(w, w->trial, k, P);
	plan_price_cuts(&w->sites, w->trial, P);
	if (plan_owner_best_lag(&w->sim, w->trial, P, w->m, w->c.sched, &lag) >= 0)
		out->owner_lag = lag;
	return 0;
}

static void ws_free(own_ws *w)
{
	plan_sites_free(&w->sites);
	plan_sim_ws_free(&w->sim);
	free(w->mid);
	free(w->bc);
	free(w->trial);
	free(w->best);
	free(w->dp);
	free(w->from);
	free(w->keep);
	free(w->keep_n);
	free(w->keep_bn);
	free(w->order);
	free(w->used);
	free(w->perm);
}

int plan_owner(const sky_fleet *f, const sky_job *j, sky_algo algo, sky_plan *out, sky_diag *d)
{
	own_ws w;
	int rc = 0;
	memset(&w, 0, sizeof w);
	plan_ctx_init(&w.c, j);
	w.f = f;
	w.j = j;
	w.n = f->n;
	w.U = w.c.units;
	w.m = j->micro_batches;
	w.best_step = INFINITY;
	if ((w.oi = plan_owner_index(f, j)) < 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "data owner %s is not among the fleet's %d boards",
				    j->owner, f->n);
	if (algo == SKY_ALGO_SKY)
		return sky_diag_set(d, SKY_EINVAL,
				    "a data owner's U-shaped plan is made by even or optimal, not sky");
	if (j->infer)
		return sky_diag_set(d, SKY_EINVAL, "a data owner is for training jobs");
	if (f->n < 2 || w.U < 3)
		return sky_diag_set(d, SKY_EINVAL,
				    "a data owner needs another board and at least 3 half-layers "
				    "(%d boards, %d half-layers)",
				    f->n, w.U);
	size_t U1 = (size_t)w.U + 1, n1 = (size_t)w.n + 1;
	w.mid = malloc(sizeof(int) * (size_t)w.n);
	w.bc = malloc(sizeof *w.bc * (size_t)w.n);
	w.trial = malloc(sizeof *w.trial * n1);
	w.best = malloc(sizeof *w.best * n1);
	w.dp = malloc(sizeof(double) * (size_t)w.n * U1);
	w.from = malloc(sizeof(int) * (size_t)w.n * U1);
	w.keep = malloc(sizeof *w.keep * OWNER_KEEP * n1);
	w.keep_n = malloc(sizeof(int) * OWNER_KEEP);
	w.keep_bn = malloc(sizeof(double) * OWNER_KEEP);
	w.order = malloc(sizeof(int) * (size_t)w.n);
	w.used = malloc(sizeof(int) * (size_t)w.n);
	w.perm = malloc(sizeof(int) * (size_t)w.n);
	if (!w.perm || !w.mid || !w.bc || !w.trial || !w.best || !w.dp || !w.from || !w.keep || !w.keep_n ||
	    !w.keep_bn || !w.order || !w.used || plan_sim_ws_init(&w.sim, (int)n1, w.m) ||
	    plan_sites_init(&w.sites, &w.c, f, j)) {
		rc = sky_diag_set(d, SKY_ENOMEM, "owner: no memory for the work arrays");
		goto exit;
	}
	for (int i = 0; i < w.n; i++) {
		plan_board_cost(&w.c, j, &f->board[i], &w.bc[i]);
		if (i != w.oi)
			w.mid[w.n_mid++] = i;
	}
	if (algo == SKY_ALGO_EVEN) {
		rc = owner_even(&w, out, d);
		goto exit;
	}
	consider_alone(&w);
	int exact = !j->no_exact && exact_count(&w) <= OWNER_EXACT_SIMS;
	if (exact) {
		int cut[SKY_PLAN_MAX_BOARDS + 2];
		memset(w.used, 0, sizeof(int) * (size_t)w.n);
		orders_rec(&w, 0, cut);
	} else {
		heuristic(&w);
	}
	if (w.n_best == 0) {
		rc = plan_shortfall(f, j, d, "optimal (data owner)");
		goto exit;
	}
	out->n_stages = w.n_best;
	memcpy(out->stage, w.best, sizeof *w.best * (size_t)w.n_best);
	out->owner_lag = w.best_lag;
	out->step_s = w.best_step;
	out->step_exact = exact;
	out->step_lower_bound_s = exact ? w.best_step : 0;
exit:
	ws_free(&w);
	return rc;
}
