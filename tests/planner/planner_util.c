#include "planner_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double uni(sky_rng *r, double lo, double hi) { return lo + (hi - lo) * sky_rng_uniform(r); }

void test_job(sky_job *j, int layers, int m, sky_sched s)
{
	sky_job_init(j, "tiny");
	j->model.layers = layers;
	j->micro_batches = m;
	j->sched = s;
}

void test_random_fleet(sky_rng *r, int n, const sky_job *j, int flags, sky_fleet *f)
{
	memset(f, 0, sizeof *f);
	f->n = n;
	/* what one layer needs at m in flight, to scale budgets */
	int64_t bpp = sky_cost_train_bytes_per_param(j->optim);
	double layer = (double)sky_model_layer_params(&j->model) * bpp +
		       (double)j->micro_batches * 4 *
			       (sky_cost_half_saved_floats(&j->model, 0) +
				sky_cost_half_saved_floats(&j->model, 1));
	double fixed = 4.0 * (sky_cost_layer_scratch_floats(&j->model) +
			      4 * sky_model_cut_bytes(&j->model) / 4) +
		       (double)sky_model_embed_params(&j->model) * bpp;
	double cut = (double)sky_model_cut_bytes(&j->model);
	for (int i = 0; i < n; i++) {
		sky_board *b = &f->board[i];
		snprintf(b->id, sizeof b->id, "b%d", i);
		double slow = uni(r, 1, 8);
		if (flags & FLEET_SLOW_FIRST)
			slow = 8.0 - 6.0 * i / (n > 1 ? n - 1 : 1) + uni(r, 0, 0.5);
		b->fwd_s = 0.01 * slow;
		b->bwd_s = b->fwd_s * uni(r, 1.5, 2.5);
		if (sky_rng_below(r, 4) == 0)
			b->attn_share = uni(r, 0.2, 0.6);
		double layers_fit = flags & FLEET_MEM_BOUND ? uni(r, 0.6, 3.0)
							     : uni(r, 2.0, 2.0 + j->model.layers);
		b->mem_bytes = (int64_t)(fixed + layers_fit * layer);
		b->lat_s = uni(r, 0, 0.002);
		double send_target = flags & FLEET_SLOW_LINKS ? uni(r, 0.005, 0.05) : uni(r, 1e-4, 3e-3);
		b->bw_Bps = cut / send_target;
	}
}

/* recursion over units: stage k starts at unit a, boards from position i */
typedef struct ex_ctx {
	const sky_fleet *f;
	const sky_job *j;
	const int *order;
	int n, U;
	sky_plan *p;
	double best;
} ex_ctx;

static void rec(ex_ctx *x, int i, int a, int k)
{
	if (a == x->U) {
		x->p->n_stages = k;
		if (sky_plan_evaluate(x->f, x->j, x->p, NULL) == 0 && x->p->bottleneck_s < x->best)
			x->best = x->p->bottleneck_s;
		return;
	}
	for (int q = i; q < x->n; q++) {
		for (int b = a + 1; b <= x->U; b++) {
			x->p->stage[k].board = x->order[q];
			x->p->stage[k].first_unit = a;
			x->p->stage[k].last_unit = b - 1;
			rec(x, q + 1, b, k + 1);
		}
	}
}

double test_exhaustive(const sky_fleet *f, const sky_job *j, const int *order, int n)
{
	static sky_plan p;
	ex_ctx x = {f, j, order, n, 2 * j->model.layers, &p, INFINITY};
	rec(&x, 0, 0, 0);
	return x.best;
}

int test_plan_sane(const sky_fleet *f, const sky_job *j, const sky_plan *p)
{
	int U = 2 * j->model.layers, next = 0;
	static int count[SKY_PLAN_MAX_UNITS];
	unsigned char used[SKY_PLAN_MAX_BOARDS];
	memset(count, 0, sizeof(int) * (size_t)U);
	memset(used, 0, sizeof used);
	if (p->n_stages < 1)
		return 0;
	for (int k = 0; k < p->n_stages; k++) {
		const sky_stage *s = &p->stage[k];
		if (s->board < 0 || s->board >= f->n || used[s->board]++)
			return 0;
		if (s->first_unit != next || s->last_unit < s->first_unit || s->last_unit >= U)
			return 0;
		for (int u = s->first_unit; u <= s->last_unit; u++)
			count[u]++;
		next = s->last_unit + 1;
		if (s->mem_bytes <= 0 || s->mem_bytes > f->board[s->board].mem_bytes)
			return 0;
	}
	for (int u = 0; u < U; u++)
		if (count[u] != 1)
			return 0;
	return next == U;
}

/* the cost model as sky_plan.h states it, written out again */
static double t_stage(const sky_board *b, const sky_job *j, int a, int e, int first, int last)
{
	int na = 0, nf = 0;
	for (int u = a; u < e; u++)
		u % 2 ? nf++ : na++;
	double fa = sky_cost_half_flops_fwd(&j->model, 0), ff = sky_cost_half_flops_fwd(&j->model, 1);
	double share = b->attn_share > 0 ? b->attn_share : fa / (fa + ff);
	double link = b->lat_s + (double)sky_model_cut_bytes(&j->model) / b->bw_Bps;
	return (b->fwd_s + b->bwd_s) * (na * share + nf * (1 - share)) + (first ? 0 : link) +
	       (last ? 0 : link);
}

static int64_t m_stage(const sky_job *j, int a, int e, int first, int last, int k)
{
	const sky_model_cfg *c = &j->model;
	int64_t na = 0, nf = 0, bpp = sky_cost_train_bytes_per_param(j->optim);
	for (int u = a; u < e; u++)
		u % 2 ? nf++ : na++;
	int64_t m = bpp * (na * sky_cost_half_params(c, 0) + nf * sky_cost_half_params(c, 1)) +
		    k * 4 * (na * sky_cost_half_saved_floats(c, 0) + nf * sky_cost_half_saved_floats(c, 1)) +
		    4 * sky_cost_layer_scratch_floats(c) + 4 * sky_model_cut_bytes(c);
	if (first)
		m += bpp * sky_model_embed_params(c) + k * 4 * sky_cost_embed_saved_floats(c);
	if (last)
		m += bpp * sky_model_head_params(c) + k * 4 * sky_cost_head_saved_floats(c);
	return m;
}

double test_dp_optimum(const sky_fleet *f, const sky_job *j, const int *order, int n)
{
	enum { NMAX = 16, UMAX = 64 };
	/* V[i][s][r]: least bottleneck covering units [0, s) with the first i
	 * boards of the order, when r stages follow */
	static double V[NMAX + 1][UMAX + 1][NMAX + 1];
	int U = 2 * j->model.layers;
	if (n > NMAX || U > UMAX)
		return NAN;
	for (int s = 0; s <= U; s++)
		for (int r = 0; r <= n; r++)
			V[0][s][r] = s == 0 && r > 0 ? 0 : INFINITY;
	for (int i = 1; i <= n; i++) {
		const sky_board *b = &f->board[order[i - 1]];
		for (int s = 0; s <= U; s++) {
			for (int r = 0; r <= n; r++) {
				double v = V[i - 1][s][r]; /* board i-1 sits out */
				if (s == 0) {
					V[i][s][r] = r > 0 ? 0 : INFINITY;
					continue;
				}
				int k = j->sched == SKY_SCHED_GPIPE ? j->micro_batches
					: r + 1 < j->micro_batches ? r + 1 : j->micro_batches;
				for (int a = 0; a < s && r + 1 <= n; a++) {
					if (m_stage(j, a, s, a == 0, r == 0, k) > b->mem_bytes)
						continue;
					double t = t_stage(b, j, a, s, a == 0, r == 0);
					double rest = V[i - 1][a][r + 1];
					double w = t > rest ? t : rest;
					if (w < v)
						v = w;
				}
				V[i][s][r] = v;
			}
		}
	}
	return V[n][U][0];
}

/* every order of every subset, every contiguous split: the simulator's step */
typedef struct bs_ctx {
	const sky_fleet *f;
	const sky_job *j;
	int U, keep_order;
	unsigned char used[16];
	sky_plan *p;
	sky_sim_result *r;
	double best;
	long plans;
} bs_ctx;

static void bs_rec(bs_ctx *x, int a, int k)
{
	if (a == x->U) {
		x->p->n_stages = k;
		if (sky_plan_evaluate(x->f, x->j, x->p, NULL) == 0 &&
		    sky_sim_run(x->p, x->j, x->r, NULL) == 0) {
			x->plans++;
			if (x->r->step_s < x->best)
				x->best = x->r->step_s;
		}
		return;
	}
	int from = x->keep_order && k > 0 ? x->p->stage[k - 1].board + 1 : 0;
	for (int q = from; q < x->f->n; q++) {
		if (x->used[q])
			continue;
		x->used[q] = 1;
		for (int b = a + 1; b <= x->U; b++) {
			x->p->stage[k].board = q;
			x->p->stage[k].first_unit = a;
			x->p->stage[k].last_unit = b - 1;
			bs_rec(x, b, k + 1);
		}
		x->used[q] = 0;
	}
}

double test_brute_step(const sky_fleet *f, const sky_job *j, int keep_order, long *plans)
{
	static sky_plan p;
	static sky_sim_result r;
	bs_ctx x;
	memset(&x, 0, sizeof x);
	x.f = f, x.j = j, x.U = 2 * j->model.layers, x.keep_order = keep_order;
	x.p = &p, x.r = &r, x.best = INFINITY;
	if (f->n > 16)
		return NAN;
	bs_rec(&x, 0, 0);
	if (plans)
		*plans = x.plans;
	return x.best;
}
