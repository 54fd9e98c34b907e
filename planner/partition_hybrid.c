/* `optimal` with stage replicas and micro-batching (sky_plan_hybrid).
 *
 * The space: B, a divisor of the global batch G (M = G / B micro-batches);
 * P stages front to back, each a contiguous run of units and a non-empty
 * set of boards (no board in two stages, at most M of them: a share is at
 * least one micro-batch), each replica's share (>= 1, summing to M), every
 * replica within its board's memory. The objective is the hybrid
 * simulator's step (hybrid.c).
 *
 * Small fleets (SKY_HYBRID_EXACT_*): every point of that space, stages
 * placed front to back, subsets of the boards left as bit masks, shares as
 * compositions of M; a replica whose compute alone (share x its time per
 * micro-batch) is not below the best step so far cuts its branch (no step
 * is shorter than any one machine's busy time). That is exact.
 *
 * Larger fleets: seeds, then a simulator-driven local search.
 *  - the pipeline-only optimal (the step objective, partition_step.c) as a
 *    hybrid plan with one replica a stage: so the result is never slower
 *    than it;
 *  - for every B, for the k fastest boards over a sweep of k and a sweep of
 *    stage counts P: the boards dealt to the stages fastest first, each to
 *    the stage with the least speed so far (so the stages' speeds are about
 *    equal), the units split in proportion to the stages' speeds, shares
 *    within a stage in proportion to the replicas' speeds;
 *  - local search from the best seeds (first improvement, within an
 *    evaluation budget): move a boundary by 1, 2 or 4 units; move one
 *    micro-batch between two replicas of a stage; move a replica to a
 *    neighbouring stage; add a board left out to a stage; drop a replica
 *    (shares re-dealt by speed after each board move).
 * The lower bound (sky_hplan_bounds) holds for every plan of the space. */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HYB_SEED_P 16         /* stage counts tried per board count */
#define HYB_LS_EVALS 12000    /* plans the local search may simulate */
#define HYB_LS_STARTS 3       /* seeds it starts from */
#define HYB_WIN 1e-12

typedef struct hws {
	const sky_fleet *f;
	const sky_job *j;
	int n, U, G;
	plan_hjob hj;          /* at the current B */
	plan_hsim_ws sim;
	sky_hplan best, cur, trial;
	double best_step;
	int evals, budget;
	double *speed;         /* n: 1 / (fwd + bwd) at the job's B */
	int *by_speed;         /* n: fastest first */
	unsigned char *used;   /* n */
} hws;

static void hcopy(sky_hplan *to, const sky_hplan *from)
{
	to->micro_batch = from->micro_batch;
	to->micro_batches = from->micro_batches;
	to->n_stages = from->n_stages;
	memcpy(to->stage, from->stage, sizeof *from->stage * (size_t)from->n_stages);
}

static int set_b(hws *w, int B)
{
	if (w->hj.B == B)
		return 0;
	return plan_hjob_init(&w->hj, w->j, B);
}

/* h's step (its B set in w->hj), INFINITY when a replica does not fit */
static double heval(hws *w, sky_hplan *h)
{
	const int P = h->n_stages;
	if (set_b(w, h->micro_batch))
		return INFINITY;
	for (int k = 0; k < P; k++) {
		sky_hstage *s = &h->stage[k];
		for (int r = 0; r < s->n_rep; r++)
			if (!plan_hfill_rep(&w->hj, w->j, &w->f->board[s->rep[r].board], s, &s->rep[r],
					    k, P))
				return INFINITY;
		s->grad_bytes = plan_hgrad_bytes(w->j, s, k == 0, k == P - 1);
	}
	w->evals++;
	double t = plan_hsim(&w->sim, h, w->f, w->j, NULL);
	return t < 0 ? INFINITY : t;
}

static int hconsider(hws *w, const sky_hplan *h, double step)
{
	if (!(step < w->best_step * (1 - HYB_WIN)))
		return 0;
	w->best_step = step;
	hcopy(&w->best, h);
	return 1;
}

/* ---- exact (small fleets) ------------------------------------------------------- */

typedef struct xsearch {
	hws *w;
	sky_hplan *h;
} xsearch;

static void x_place(xsearch *x, int k, int s, unsigned mask);

/* shares of replicas r.. of stage k (left micro-batches to deal), then on */
static void x_shares(xsearch *x, int k, int r, int left, int e, unsigned mask)
{
	hws *w = x->w;
	sky_hstage *st = &x->h->stage[k];
	const int R = st->n_rep, M = x->h->micro_batches;
	const int lo = r == R - 1 ? left : 1, hi = left - (R - 1 - r);
	for (int q = lo; q <= hi; q++) {
		st->rep[r].share = q;
		/* its compute alone: a bound on the step */
		board_cost bc;
		plan_board_cost(&w->hj.c, w->j, &w->f->board[st->rep[r].board], &bc);
		double busy = q * (bc.fwd + bc.bwd) * w->hj.scale * units_weight(&bc, st->first_unit,
										  st->last_unit + 1);
		if (!(busy < w->best_step * (1 - HYB_WIN)))
			break; /* larger shares only take longer */
		if (r + 1 < R) {
			x_shares(x, k, r + 1, left - q, e, mask);
		} else if (e == w->U) {
			x->h->n_stages = k + 1;
			hconsider(w, x->h, heval(w, x->h));
		} else {
			x_place(x, k + 1, e, mask);
		}
	}
	(void)M;
}

static void x_place(xsearch *x, int k, int s, unsigned mask)
{
	hws *w = x->w;
	const int n = w->n, M = x->h->micro_batches;
	for (int e = s + 1; e <= w->U; e++) {
		for (unsigned sub = 1; sub < (1u << n); sub++) {
			if (sub & mask)
				continue;
			sky_hstage *st = &x->h->stage[k];
			st->first_unit = s;
			st->last_unit = e - 1;
			st->n_rep = 0;
			for (int b = 0; b < n; b++)
				if (sub >> b & 1)
					st->rep[st->n_rep++].board = b;
			if (st->n_rep > M)
				continue;
			x_shares(x, k, 0, M, e, mask | sub);
		}
	}
}

static void exact_search(hws *w)
{
	for (int B = 1; B <= w->G; B++) {
		if (w->G % B || (w->j->fix_micro_batch > 0 && B != w->j->fix_micro_batch) || set_b(w, B))
			continue;
		w->trial.micro_batch = B;
		w->trial.micro_batches = w->G / B;
		xsearch x = {.w = w, .h = &w->trial};
		x_place(&x, 0, 0, 0);
	}
}

/* ---- seeds ---------------------------------------------------------------------- */

/* deals stage s's micro-batches to its replicas in proportion to speed
 * (largest remainder, each at least 1); 0 when it has more replicas than M */
static int deal_shares(const hws *w, sky_hstage *s, int M)
{
	const int R = s->n_rep;
	if (R < 1 || R > M)
		return 0;
	double tot = 0, frac[SKY_HPLAN_MAX_REPS];
	for (int r = 0; r < R; r++)
		tot += w->speed[s->rep[r].board];
	int given = 0;
	for (int r = 0; r < R; r++) {
		double want = (M - R) * w->speed[s->rep[r].board] / tot; /* beyond the 1 each */
		s->rep[r].share = 1 + (int)floor(want);
		frac[r] = want - floor(want);
		given += s->rep[r].share;
	}
	while (given < M) {
		int pick = 0;
		for (int r = 1; r < R; r++)
			if (frac[r] > frac[pick])
				pick = r;
		s->rep[pick].share++;
		frac[pick] = -1;
		given++;
	}
	return 1;
}

/* the k fastest boards dealt to P stages; units by the stages' speeds */
static int build_seed(hws *w, sky_hplan *h, int B, int k, int P)
{
	const int M = w->G / B, U = w->U;
	if (P < 1 || P > k || P > U || k > P * (M < SKY_HPLAN_MAX_REPS ? M : SKY_HPLAN_MAX_REPS))
		return 0;
	double sp[SKY_PLAN_MAX_BOARDS];
	h->micro_batch = B;
	h->micro_batches = M;
	h->n_stages = P;
	for (int q = 0; q < P; q++) {
		h->stage[q].n_rep = 0;
		sp[q] = 0;
	}
	for (int i = 0; i < k; i++) {
		int b = w->by_speed[i], pick = -1;
		for (int q = 0; q < P; q++)
			if (h->stage[q].n_rep < SKY_HPLAN_MAX_REPS && h->stage[q].n_rep < M &&
			    (pick < 0 || sp[q] < sp[pick]))
				pick = q;
		if (pick < 0)
			return 0;
		h->stage[pick].rep[h->stage[pick].n_rep++].board = b;
		sp[pick] += w->speed[b];
	}
	double tot = 0, acc = 0;
	for (int q = 0; q < P; q++)
		tot += sp[q];
	int start = 0;
	for (int q = 0; q < P; q++) {
		acc += sp[q];
		int end = q == P - 1 ? U : (int)lround(U * acc / tot);
		if (end < start + 1)
			end = start + 1;
		if (end > U - (P - 1 - q))
			end = U - (P - 1 - q);
		h->stage[q].first_unit = start;
		h->stage[q].last_unit = end - 1;
		start = end;
		if (!deal_shares(w, &h->stage[q], M))
			return 0;
	}
	return 1;
}

/* ---- local search --------------------------------------------------------------- */

static int try_trial(hws *w, double *cur)
{
	double t = heval(w, &w->trial);
	if (!(t < *cur * (1 - HYB_WIN)))
		return 0;
	hcopy(&w->cur, &w->trial);
	*cur = t;
	hconsider(w, &w->cur, t);
	return 1;
}

static int ls_bounds(hws *w, double *cur)
{
	int won = 0;
	for (int k = 0; k + 1 < w->cur.n_stages && w->evals < w->budget; k++)
		for (int d = 1; d <= 4; d *= 2)
			for (int sg = -1; sg <= 1; sg += 2) {
				sky_hstage *a = &w->cur.stage[k], *b = &w->cur.stage[k + 1];
				int nl = a->last_unit + sg * d;
				if (nl < a->first_unit || nl >= b->last_unit)
					continue;
				hcopy(&w->trial, &w->cur);
				w->trial.stage[k].last_unit = nl;
				w->trial.stage[k + 1].first_unit = nl + 1;
				won |= try_trial(w, cur);
			}
	return won;
}

static int ls_shares(hws *w, double *cur)
{
	int won = 0;
	for (int k = 0; k < w->cur.n_stages && w->evals < w->budget; k++) {
		const sky_hstage *s = &w->cur.stage[k];
		if (s->n_rep < 2)
			continue;
		/* the busiest replica gives one to the one that would be least busy */
		int hi = 0, lo = 0;
		for (int r = 1; r < s->n_rep; r++) {
			const sky_hrep *x = &s->rep[r];
			if (x->share * (x->fwd_s + x->bwd_s) >
			    s->rep[hi].share * (s->rep[hi].fwd_s + s->rep[hi].bwd_s))
				hi = r;
			if ((x->share + 1) * (x->fwd_s + x->bwd_s) <
			    (s->rep[lo].share + 1) * (s->rep[lo].fwd_s + s->rep[lo].bwd_s))
				lo = r;
		}
		for (int pass = 0; pass < 2; pass++) {
			int from = pass ? lo : hi, to = pass ? hi : lo;
			if (from == to || s->rep[from].share < 2)
				continue;
			hcopy(&w->trial, &w->cur);
			w->trial.stage[k].rep[from].share--;
			w->trial.stage[k].rep[to].share++;
			won |= try_trial(w, cur);
			s = &w->cur.stage[k];
		}
	}
	return won;
}

static void remove_rep(sky_hstage *s, int r)
{
	for (int i = r; i + 1 < s->n_rep; i++)
		s->rep[i] = s->rep[i + 1];
	s->n_rep--;
}

static int ls_boards(hws *w, double *cur)
{
	int won = 0;
	const int M = w->cur.micro_batches;
	/* a replica to a neighbouring stage, or dropped */
	for (int k = 0; k < w->cur.n_stages && w->evals < w->budget; k++) {
		for (int r = 0; r < w->cur.stage[k].n_rep && w->evals < w->budget; r++) {
			if (w->cur.stage[k].n_rep < 2)
				break;
			for (int to = k - 1; to <= k + 1; to++) {
				if (to < 0 || to >= w->cur.n_stages || r >= w->cur.stage[k].n_rep)
					continue;
				hcopy(&w->trial, &w->cur);
				sky_hstage *a = &w->trial.stage[k];
				int b = a->rep[r].board;
				remove_rep(a, r);
				if (to != k) {
					sky_hstage *t = &w->trial.stage[to];
					if (t->n_rep >= SKY_HPLAN_MAX_REPS)
						continue;
					t->rep[t->n_rep++].board = b;
					if (!deal_shares(w, t, M))
						continue;
				}
				if (!deal_shares(w, a, M))
					continue;
				won |= try_trial(w, cur);
			}
		}
	}
	/* the fastest board left out joins a stage */
	memset(w->used, 0, (size_t)w->n);
	for (int k = 0; k < w->cur.n_stages; k++)
		for (int r = 0; r < w->cur.stage[k].n_rep; r++)
			w->used[w->cur.stage[k].rep[r].board] = 1;
	for (int i = 0, tried = 0; i < w->n && tried < 2 && w->evals < w->budget; i++) {
		int b = w->by_speed[i];
		if (w->used[b])
			continue;
		tried++;
		for (int k = 0; k < w->cur.n_stages && w->evals < w->budget; k++) {
			hcopy(&w->trial, &w->cur);
			sky_hstage *t = &w->trial.stage[k];
			if (t->n_rep >= SKY_HPLAN_MAX_REPS)
				continue;
			t->rep[t->n_rep++].board = b;
			if (!deal_shares(w, t, M))
				continue;
			if (try_trial(w, cur)) {
				won = 1;
				break;
			}
		}
	}
	return won;
}

static void local_search(hws *w, const sky_hplan *start, int budget)
{
	hcopy(&w->cur, start);
	double cur = heval(w, &w->cur);
	if (isinf(cur))
		return;
	w->budget = w->evals + budget;
	for (int improved = 1; improved && w->evals < w->budget;) {
		improved = ls_bounds(w, &cur);
		improved |= ls_shares(w, &cur);
		improved |= ls_boards(w, &cur);
	}
}

/* ---- the whole search ---------------------------------------------------------- */

static int why_not(const sky_fleet *f, const sky_job *j, sky_diag *d)
{
	if (j->infer)
		return sky_diag_set(d, SKY_EINVAL, "replicas: planned for training only");
	if (j->owner[0])
		return sky_diag_set(d, SKY_EINVAL, "replicas: not with a data owner");
	if (j->keep_order)
		return sky_diag_set(d, SKY_EINVAL, "replicas: not with a kept board order");
	for (int i = 1; i < f->n; i++)
		if (!sky_site_eq(f->board[i].site, f->board[0].site))
			return sky_diag_set(d, SKY_EINVAL,
					    "replicas: planned for one site (board %s is in another)",
					    f->board[i].id);
	return 0;
}

typedef struct seedk {
	double step;
	int B, k, P;
} seedk;

int sky_plan_hybrid(const sky_fleet *f, const sky_job *j, sky_hplan *out, sky_diag *d)
{
	int rc;
	if ((rc = sky_job_validate(j, d)) || (rc = sky_fleet_validate(f, d)) ||
	    (rc = why_not(f, j, d)))
		return rc;
	hws w;
	memset(&w, 0, sizeof w);
	w.f = f;
	w.j = j;
	w.n = f->n;
	w.U = 2 * j->model.layers;
	w.G = j->model.batch * j->micro_batches;
	w.best_step = INFINITY;
	sky_plan *pipe = malloc(sizeof *pipe);
	int cap = w.n + 1, maxM = w.G < SKY_PLAN_MAX_MICRO ? w.G : SKY_PLAN_MAX_MICRO;
	w.speed = malloc(sizeof(double) * (size_t)w.n);
	w.by_speed = malloc(sizeof(int) * (size_t)w.n);
	w.used = malloc((size_t)w.n);
	if (!pipe || !w.speed || !w.by_speed || !w.used || sky_hplan_alloc(&w.best, cap) ||
	    sky_hplan_alloc(&w.cur, cap) || sky_hplan_alloc(&w.trial, cap) ||
	    plan_hsim_ws_init(&w.sim, cap, w.n, maxM)) {
		rc = sky_diag_set(d, SKY_ENOMEM, "replicas: no memory for the work arrays");
		goto exit;
	}
	if (out->cap < cap) {
		rc = sky_diag_set(d, SKY_EINVAL, "replicas: the plan holds %d stages, needs %d",
				  out->cap, cap);
		goto exit;
	}
	if ((rc = plan_hjob_init(&w.hj, j, j->model.batch)))
		goto exit;
	for (int i = 0; i < w.n; i++) {
		board_cost bc;
		plan_board_cost(&w.hj.c, j, &f->board[i], &bc);
		w.speed[i] = 1.0 / (bc.fwd + bc.bwd);
		w.by_speed[i] = i;
	}
	for (int i = 1; i < w.n; i++)
		for (int q = i; q > 0 && w.speed[w.by_speed[q]] > w.speed[w.by_speed[q - 1]]; q--) {
			int t = w.by_speed[q];
			w.by_speed[q] = w.by_speed[q - 1];
			w.by_speed[q - 1] = t;
		}
	/* the pipeline-only optimal (step objective), a seed and the yardstick */
	sky_job jp = *j;
	jp.objective = SKY_OBJ_STEP;
	double pipe_step = INFINITY;
	/* (not a seed when the micro-batch size is fixed to another) */
	int pipe_ok = j->fix_micro_batch <= 0 || j->fix_micro_batch == j->model.batch;
	if (pipe_ok && sky_plan_partition(f, &jp, SKY_ALGO_OPTIMAL, pipe, NULL) == 0 &&
	    sky_hplan_from_plan(f, j, pipe, &w.trial, NULL) == 0) {
		pipe_step = heval(&w, &w.trial);
		hconsider(&w, &w.trial, pipe_step);
	}
	int exact = w.n <= SKY_HYBRID_EXACT_BOARDS && w.U <= SKY_HYBRID_EXACT_UNITS &&
		    w.G <= SKY_HYBRID_EXACT_BATCH && !j->no_exact;
	if (exact) {
		exact_search(&w);
	} else {
		/* seeds for every B; the best few, each B once, start the search */
		seedk top[HYB_LS_STARTS];
		for (int i = 0; i < HYB_LS_STARTS; i++)
			top[i] = (seedk){INFINITY, 0, 0, 0};
		for (int B = 1; B <= w.G; B++) {
			if (w.G % B || w.G / B > SKY_PLAN_MAX_MICRO ||
			    (j->fix_micro_batch > 0 && B != j->fix_micro_batch))
				continue;
			seedk mine = {INFINITY, B, 0, 0};
			for (int kq = 4; kq >= 1; kq--) {
				int k = (w.n * kq + 3) / 4;
				int lo = 1, hi = k < w.U ? k : w.U;
				for (int i = 0; i < HYB_SEED_P; i++) {
					int P = lo + (int)lround((double)(hi - lo) * i / (HYB_SEED_P - 1));
					if (i > 0 && P == lo + (int)lround((double)(hi - lo) * (i - 1) /
									    (HYB_SEED_P - 1)))
						continue;
					if (!build_seed(&w, &w.trial, B, k, P))
						continue;
					double t = heval(&w, &w.trial);
					hconsider(&w, &w.trial, t);
					if (t < mine.step)
						mine = (seedk){t, B, k, P};
				}
			}
			for (int i = 0; i < HYB_LS_STARTS; i++)
				if (mine.step < top[i].step) {
					seedk x = top[i];
					top[i] = mine;
					mine = x;
				}
		}
		int per = HYB_LS_EVALS / (HYB_LS_STARTS + 1);
		if (!isinf(pipe_step)) {
			sky_hplan_from_plan(f, j, pipe, &w.trial, NULL);
			sky_hplan start; /* local_search works in cur and trial */
			if (sky_hplan_alloc(&start, cap) == 0) {
				hcopy(&start, &w.trial);
				local_search(&w, &start, per);
				for (int i = 0; i < HYB_LS_STARTS; i++)
					if (!isinf(top[i].step) &&
					    build_seed(&w, &start, top[i].B, top[i].k, top[i].P))
						local_search(&w, &start, per);
				sky_hplan_free(&start);
			}
		} else {
			sky_hplan start;
			if (sky_hplan_alloc(&start, cap) == 0) {
				for (int i = 0; i < HYB_LS_STARTS; i++)
					if (!isinf(top[i].step) &&
					    build_seed(&w, &start, top[i].B, top[i].k, top[i].P))
						local_search(&w, &start, per);
				sky_hplan_free(&start);
			}
		}
	}
	if (isinf(w.best_step)) {
		rc = plan_shortfall(f, j, d, "optimal (replicas)");
		if (!rc)
			rc = sky_diag_set(d, SKY_ENOMEM, "optimal (replicas): no plan fits");
		goto exit;
	}
	hcopy(out, &w.best);
	if ((rc = sky_hplan_evaluate(f, j, out, d)))
		goto exit;
	out->step_s = w.best_step;
	out->step_exact = exact;
	out->pipeline_step_s = pipe_step;
	out->evals = w.evals;
	sky_hplan_bounds(f, j, &out->work_bound_s, &out->path_bound_s);
	out->step_lower_bound_s = exact ? w.best_step
				  : out->work_bound_s > out->path_bound_s ? out->work_bound_s
									   : out->path_bound_s;
exit:
	free(pipe);
	free(w.speed);
	free(w.by_speed);
	free(w.used);
	sky_hplan_free(&w.best);
	sky_hplan_free(&w.cur);
	sky_hplan_free(&w.trial);
	plan_hsim_ws_free(&w.sim);
	return rc;
}
