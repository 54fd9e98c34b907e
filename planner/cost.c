/* The job, the cost model and plan evaluation (formulas in sky_plan.h). */
#include "plan_internal.h"

#include "sky_ckptmsg.h"
#include "sky_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

int sky_job_init(sky_job *j, const char *model)
{
	memset(j, 0, sizeof *j);
	if (sky_model_preset(model ? model : "base", &j->model))
		return SKY_ENOTFOUND;
	j->micro_batches = 8;
	j->optim = SKY_OPTIM_ADAM;
	j->sched = SKY_SCHED_1F1B;
	j->prec = SKY_PREC_FP32;
	j->keep_order = 0;
	j->order_evals = 64;
	j->objective = SKY_OBJ_STEP;
	return 0;
}

int sky_job_validate(const sky_job *j, sky_diag *d)
{
	if (sky_model_validate(&j->model))
		return sky_diag_set(d, SKY_EINVAL, "job: model '%s' has invalid shapes",
				    j->model.name);
	if (j->model.layers > SKY_PLAN_MAX_LAYERS)
		return sky_diag_set(d, SKY_EINVAL, "job: layers is %d, at most %d",
				    j->model.layers, SKY_PLAN_MAX_LAYERS);
	if (j->micro_batches < 1 || j->micro_batches > SKY_PLAN_MAX_MICRO)
		return sky_diag_set(d, SKY_EINVAL, "job: micro_batches is %d, allowed 1 to %d",
				    j->micro_batches, SKY_PLAN_MAX_MICRO);
	if ((unsigned)j->optim > SKY_OPTIM_ADAM || (unsigned)j->sched > SKY_SCHED_1F1B ||
	    (unsigned)j->prec > SKY_PREC_INT8)
		return sky_diag_set(d, SKY_EINVAL, "job: unknown optimizer, schedule or precision");
	if ((unsigned)j->objective > SKY_OBJ_STEP)
		return sky_diag_set(d, SKY_EINVAL, "job: unknown objective %d", (int)j->objective);
	if (j->infer && (j->prec != SKY_PREC_INT8 || j->objective != SKY_OBJ_BOTTLENECK))
		return sky_diag_set(d, SKY_EINVAL,
				    "job: serving is planned with int8 times and the bottleneck "
				    "objective");
	if (j->order_evals < 0)
		return sky_diag_set(d, SKY_EINVAL, "job: order_evals must be >= 0");
	return 0;
}

static const char *const k_algo[SKY_ALGO_COUNT] = {"even", "sky", "optimal"};
static const char *const k_sched[2] = {"gpipe", "1f1b"};

const char *sky_algo_name(sky_algo a) { return (unsigned)a < SKY_ALGO_COUNT ? k_algo[a] : "?"; }
const char *sky_sched_name(sky_sched s) { return (unsigned)s < 2 ? k_sched[s] : "?"; }

int sky_algo_parse(const char *name, sky_algo *out)
{
	for (int i = 0; i < SKY_ALGO_COUNT; i++)
		if (name && strcmp(name, k_algo[i]) == 0)
			return *out = (sky_algo)i, 0;
	return SKY_EINVAL;
}

static const char *const k_obj[2] = {"bottleneck", "step"};

const char *sky_objective_name(sky_objective o) { return (unsigned)o < 2 ? k_obj[o] : "?"; }

int sky_objective_parse(const char *name, sky_objective *out)
{
	for (int i = 0; i < 2; i++)
		if (name && strcmp(name, k_obj[i]) == 0)
			return *out = (sky_objective)i, 0;
	return SKY_EINVAL;
}

int sky_sched_parse(const char *name, sky_sched *out)
{
	for (int i = 0; i < 2; i++)
		if (name && strcmp(name, k_sched[i]) == 0)
			return *out = (sky_sched)i, 0;
	return SKY_EINVAL;
}

void plan_ctx_init(plan_ctx *c, const sky_job *j)
{
	const sky_model_cfg *m = &j->model;
	memset(c, 0, sizeof *c);
	c->layers = m->layers;
	c->units = 2 * m->layers;
	c->m = j->micro_batches;
	c->sched = j->sched;
	c->bpp = sky_cost_train_bytes_per_param(j->optim);
	for (int h = 0; h < 2; h++) {
		c->param_bytes[h] = sky_cost_half_params(m, h) * c->bpp;
		c->saved_bytes[h] = sky_cost_half_saved_floats(m, h) * (int64_t)sizeof(float);
	}
	c->cut_bytes = (double)sky_model_cut_bytes(m);
	if (j->infer) /* int8 activations: one byte per value instead of a float's four */
		c->cut_bytes /= (double)sizeof(float);
	c->fixed_bytes = sky_cost_layer_scratch_floats(m) * (int64_t)sizeof(float) +
			 4 * sky_model_cut_bytes(m);
	c->embed_param_bytes = sky_model_embed_params(m) * c->bpp;
	c->embed_saved_bytes = sky_cost_embed_saved_floats(m) * (int64_t)sizeof(float);
	c->head_param_bytes = sky_model_head_params(m) * c->bpp;
	c->head_saved_bytes = sky_cost_head_saved_floats(m) * (int64_t)sizeof(float);
	if (j->infer) {
		/* serving holds int8 layer weights (1 byte a parameter; the
		 * per-channel scales are noise), the fp32 embeddings and head, no
		 * gradients or optimizer state, and nothing saved for a backward:
		 * a layer's scratch and the cut buffers (fixed_bytes) carry the
		 * activations */
		c->bpp = 1;
		for (int h = 0; h < 2; h++) {
			c->param_bytes[h] = sky_cost_half_params(m, h);
			c->saved_bytes[h] = 0;
		}
		c->embed_param_bytes = sky_model_embed_params(m) * (int64_t)sizeof(float);
		c->head_param_bytes = sky_model_head_params(m) * (int64_t)sizeof(float);
		c->embed_saved_bytes = c->head_saved_bytes = 0;
	}
	if (j->ckpt && !j->infer) {
		/* the checkpoint image a stage keeps in its arena (runtime/trainjob.c
		 * carves sky_ckpt_bound(tensors, floats) and a tensor table): per
		 * block its parameters and state vectors (each padded to 16 floats
		 * as the stage lays them out) and their header entries; once per
		 * stage the image's fixed header and two allocations' alignment */
		int64_t nv = 1 + sky_cost_optim_vectors(j->optim);
		int64_t per_blk = (int64_t)sky_ckpt_bound((int)nv, 0) - (int64_t)sky_ckpt_bound(0, 0) +
				  nv * ((int64_t)sizeof(sky_ckpt_tensor) + 16 * (int64_t)sizeof(float));
		int64_t cbpp = sky_cost_ckpt_bytes_per_param(j->optim);
		for (int h = 0; h < 2; h++)
			c->param_bytes[h] += sky_cost_half_params(m, h) * cbpp + per_blk;
		c->embed_param_bytes += sky_model_embed_params(m) * cbpp + per_blk;
		c->head_param_bytes += sky_model_head_params(m) * cbpp + per_blk;
		c->fixed_bytes += (int64_t)sky_ckpt_bound(0, 0) + 2 * 64;
	}
	double fa = sky_cost_half_flops_fwd(m, SKY_HALF_ATTN);
	c->flops_attn_share = fa / (fa + sky_cost_half_flops_fwd(m, SKY_HALF_FFN));
}

void plan_board_cost(const plan_ctx *c, const sky_job *j, const sky_board *b, board_cost *out)
{
	int int8 = j->prec == SKY_PREC_INT8;
	out->fwd = int8 ? b->fwd_int8_s : b->fwd_s;
	out->bwd = j->infer ? 0 : int8 ? b->bwd_int8_s : b->bwd_s;
	out->share = b->attn_share > 0 ? b->attn_share : c->flops_attn_share;
	out->link = b->lat_s + c->cut_bytes / b->bw_Bps;
	out->link_back = j->infer ? 0 : out->link;
	out->mem = b->mem_bytes;
	/* serving: the int8 halves' own split, and the ends; training is
	 * priced as before (neither applies to it) */
	out->first_s = out->last_s = 0;
	if (j->infer) {
		if (b->attn_share_int8 > 0)
			out->share = b->attn_share_int8;
		out->first_s = b->embed_int8_s;
		out->last_s = b->head_int8_s;
	}
}

/* the index of the link f names between sites a and b (either way round), or -1 */
static int find_link(const sky_fleet *f, const char *a, const char *b)
{
	for (int i = 0; i < f->n_links; i++) {
		const sky_site_link *l = &f->link[i];
		if ((sky_site_eq(l->a, a) && sky_site_eq(l->b, b)) ||
		    (sky_site_eq(l->a, b) && sky_site_eq(l->b, a)))
			return i;
	}
	return -1;
}

/* appends link i, crossed from site `from`, to r */
static void add_hop(const sky_fleet *f, int i, const char *from, plan_route *r)
{
	const sky_site_link *l = &f->link[i];
	r->hop[r->n_hops] = 2 * i + (sky_site_eq(l->a, from) ? 0 : 1);
	r->bw[r->n_hops] = l->bw_Bps;
	r->hop_lat[r->n_hops] = l->lat_s;
	r->lat += l->lat_s;
	r->n_hops++;
}

int plan_site_route(const sky_fleet *f, const char *sa, const char *sb, plan_route *r)
{
	memset(r, 0, sizeof *r);
	if (sky_site_eq(sa, sb))
		return 0;
	int l = find_link(f, sa, sb);
	if (l >= 0) {
		add_hop(f, l, sa, r);
		return 1;
	}
	/* through the core: two hops, bridged broker to broker */
	if (sky_site_eq(sa, "") || sky_site_eq(sb, ""))
		return SKY_ENOTFOUND;
	int la = find_link(f, sa, ""), lb = find_link(f, "", sb);
	if (la < 0 || lb < 0)
		return SKY_ENOTFOUND;
	add_hop(f, la, sa, r);
	add_hop(f, lb, "", r);
	return 1;
}

int sky_fleet_site_path(const sky_fleet *f, const char *a, const char *b, double *bw_Bps,
			double *lat_s)
{
	plan_route r;
	int rc = plan_site_route(f, a, b, &r);
	if (rc != 1)
		return rc;
	*bw_Bps = r.n_hops > 1 && r.bw[1] < r.bw[0] ? r.bw[1] : r.bw[0];
	*lat_s = r.lat;
	return 1;
}

void plan_sites_free(plan_sites *s)
{
	if (!s)
		return;
	free(s->of);
	free(s->rep);
	free(s->route);
	free(s->xfer);
	free(s->cross);
	free(s->use);
	memset(s, 0, sizeof *s);
}

int plan_sites_init(plan_sites *s, const plan_ctx *c, const sky_fleet *f, const sky_job *j)
{
	memset(s, 0, sizeof *s);
	int n = f->n > 0 ? f->n : 1;
	s->cut_bytes = c->cut_bytes;
	s->both_ways = !j->infer;
	s->n_hops = 2 * f->n_links;
	s->of = malloc(sizeof(int) * (size_t)n);
	s->rep = malloc(sizeof(int) * (size_t)n);
	s->use = malloc(sizeof(int) * (size_t)(s->n_hops > 0 ? s->n_hops : 1));
	if (!s->of || !s->rep || !s->use)
		goto fail;
	s->S = 1;
	s->rep[0] = 0;
	for (int i = 0; i < f->n; i++) {
		int k = 0;
		if (!j->link_blind) {
			while (k < s->S && !sky_site_eq(f->board[s->rep[k]].site, f->board[i].site))
				k++;
			if (k == s->S)
				s->rep[s->S++] = i;
		}
		s->of[i] = k;
	}
	size_t SS = (size_t)s->S * (size_t)s->S;
	s->route = malloc(sizeof *s->route * SS);
	s->xfer = malloc(sizeof(double) * SS);
	s->cross = malloc(SS);
	if (!s->route || !s->xfer || !s->cross)
		goto fail;
	for (int a = 0; a < s->S; a++)
		for (int b = 0; b < s->S; b++) {
			size_t q = (size_t)a * (size_t)s->S + (size_t)b;
			plan_route *r = &s->route[q];
			memset(r, 0, sizeof *r);
			s->cross[q] = a != b;
			if (a != b)
				plan_site_route(f, f->board[s->rep[a]].site, f->board[s->rep[b]].site, r);
			s->xfer[q] = 0;
			for (int h = 0; h < r->n_hops; h++)
				if (c->cut_bytes / r->bw[h] > s->xfer[q])
					s->xfer[q] = c->cut_bytes / r->bw[h];
		}
	return 0;
fail:
	plan_sites_free(s);
	return SKY_ENOMEM;
}

/* the route of the cut after stage k (st[k + 1] exists) */
static const plan_route *cut_route(const plan_sites *s, const sky_stage *st, int k)
{
	return &s->route[(size_t)s->of[st[k].board] * (size_t)s->S + (size_t)s->of[st[k + 1].board]];
}

int plan_price_cuts(plan_sites *s, sky_stage *st, int P)
{
	int crossing = 0;
	const int S = s->S;
	for (int h = 0; h < s->n_hops; h++)
		s->use[h] = 0;
	/* count the streams on every hop: forward a -> b, backward b -> a
	 * (the other direction of each hop: h ^ 1) when training */
	for (int k = 0; k + 1 < P && S > 1; k++) {
		const plan_route *r = cut_route(s, st, k);
		for (int h = 0; h < r->n_hops; h++) {
			s->use[r->hop[h]]++;
			if (s->both_ways)
				s->use[r->hop[h] ^ 1]++;
		}
	}
	for (int k = 0; k < P; k++) {
		sky_stage *x = &st[k];
		x->cross_site = 0;
		x->wan_lat_s = x->wan_xfer_s = x->wan_xfer_b_s = 0;
		x->wan_hops = 0;
		if (k + 1 >= P || S == 1)
			continue;
		size_t q = (size_t)s->of[x->board] * (size_t)S + (size_t)s->of[st[k + 1].board];
		const plan_route *r = cut_route(s, st, k);
		x->cross_site = s->cross[q];
		crossing += x->cross_site;
		x->wan_lat_s = r->lat;
		x->wan_hops = r->n_hops;
		for (int h = 0; h < r->n_hops; h++) {
			/* a message alone on the hop, and the hop's load per
			 * micro-batch: every stream that crosses it, one message each */
			double one = s->cut_bytes / r->bw[h];
			double f = one * s->use[r->hop[h]];
			double b = s->both_ways ? one * s->use[r->hop[h] ^ 1] : 0;
			x->wan_hop[h] = r->hop[h];
			x->wan_hop_s[h] = one;
			x->wan_hop_lat_s[h] = r->hop_lat[h];
			if (f > x->wan_xfer_s)
				x->wan_xfer_s = f;
			if (b > x->wan_xfer_b_s)
				x->wan_xfer_b_s = b;
		}
	}
	return crossing;
}

/* (k)! capped above PLAN_SITE_PERMS (all that matters for p below it) */
static long fact_capped(int k)
{
	long f = 1;
	for (int i = 2; i <= k && f <= PLAN_SITE_PERMS; i++)
		f *= i;
	return f;
}

int plan_site_order(const plan_sites *s, int n, const int *rank, long p, int first, int *order)
{
	int S = s->S, perm[64], left[64];
	if (p < 0 || p >= PLAN_SITE_PERMS || S > 64 || p >= fact_capped(S))
		return -1;
	for (int i = 0; i < S; i++)
		left[i] = i;
	/* p in the factorial number system picks the sites one by one */
	long q = p;
	for (int i = 0; i < S; i++) {
		int rest = S - i;
		long fct = fact_capped(rest - 1);
		int pick = (int)(q / fct);
		q %= fct;
		perm[i] = left[pick];
		memmove(left + pick, left + pick + 1, sizeof(int) * (size_t)(rest - pick - 1));
	}
	int at = 0;
	for (int i = 0; i < S && i < first; i++)
		for (int k = 0; k < n; k++)
			if (s->of[rank[k]] == perm[i])
				order[at++] = rank[k];
	return at;
}

double sky_plan_lower_bound(const sky_fleet *f, const sky_job *j)
{
	double speed = 0;
	for (int i = 0; i < f->n; i++) {
		const sky_board *b = &f->board[i];
		double t = j->prec == SKY_PREC_INT8 ? b->fwd_int8_s + b->bwd_int8_s
						    : b->fwd_s + b->bwd_s;
		if (t > 0)
			speed += 1.0 / t;
	}
	return speed > 0 ? j->model.layers / speed : INFINITY;
}

/* The owner is part of the job that the cost model reads (its board holds
 * two stages), so finding it lives here, below every algorithm. */
int plan_owner_index(const sky_fleet *f, const sky_job *j)
{
	for (int i = 0; j->owner[0] && i < f->n; i++)
		if (strcmp(f->board[i].id, j->owner) == 0)
			return i;
	return -1;
}

int sky_plan_evaluate(const sky_fleet *f, const sky_job *j, sky_plan *p, sky_diag *d)
{
	plan_ctx c;
	plan_ctx_init(&c, j);
	p->bottleneck_s = 0;
	p->bottleneck_stage = -1;
	p->lower_bound_s = sky_plan_lower_bound(f, j);
	int n = p->n_stages;
	if (n < 1 || n > f->n + (j->owner[0] != 0)) /* the owner's board holds two */
		return sky_diag_set(d, SKY_EINVAL, "plan: %d stages for a fleet of %d boards", n,
				    f->n);
	unsigned char used[SKY_PLAN_MAX_BOARDS];
	memset(used, 0, (size_t)f->n);
	int next = 0, rc = 0, oi = -1;
	p->owner = 0;
	p->owner_time_s = 0;
	if (j->owner[0]) {
		/* U-shaped: the owner holds the first and the last stage */
		if ((oi = plan_owner_index(f, j)) < 0)
			return sky_diag_set(d, SKY_EINVAL, "plan: data owner %s is not in the fleet",
					    j->owner);
		if (n == 2 || p->stage[0].board != oi || p->stage[n - 1].board != oi)
			return sky_diag_set(d, SKY_EINVAL,
					    "plan: data owner %s must hold the first and the last of "
					    "at least 3 stages (or the only one)",
					    j->owner);
		p->owner = n >= 3;
		if (n == 1)
			oi = -1; /* the owner alone: a plan like any other */
	}
	p->cross_site_cuts = 0;
	p->wan_bytes_per_step = 0;
	for (int k = 0; k < n; k++) {
		sky_stage *s = &p->stage[k];
		if (s->board < 0 || s->board >= f->n)
			return sky_diag_set(d, SKY_EINVAL, "plan: stage %d has board index %d", k,
					    s->board);
		if (used[s->board]++ && !(s->board == oi && k == n - 1))
			return sky_diag_set(d, SKY_EINVAL, "plan: board %s holds two stages",
					    f->board[s->board].id);
		if (s->first_unit != next || s->last_unit < s->first_unit ||
		    s->last_unit >= c.units)
			return sky_diag_set(d, SKY_EINVAL,
					    "plan: stage %d covers units %d..%d, expected to start at "
					    "%d (of %d)",
					    k, s->first_unit, s->last_unit, next, c.units);
		next = s->last_unit + 1;
		board_cost bc;
		plan_board_cost(&c, j, &f->board[s->board], &bc);
		int last = k == n - 1;
		if (!(bc.fwd > 0 && (bc.bwd > 0 || j->infer)))
			return sky_diag_set(d, SKY_EINVAL, "board %s: no %s times measured",
					    f->board[s->board].id,
					    j->prec == SKY_PREC_INT8 ? "int8" : "fp32");
		plan_fill_stage(&c, &bc, s, k, n);
		if (s->time_s > p->bottleneck_s || p->bottleneck_stage < 0) {
			p->bottleneck_s = s->time_s;
			p->bottleneck_stage = k;
		}
		if (!last && p->stage[k + 1].board >= 0 && p->stage[k + 1].board < f->n &&
		    !sky_site_eq(f->board[s->board].site, f->board[p->stage[k + 1].board].site)) {
			/* counted whatever the pricing (link-blind too): the plan crosses */
			p->cross_site_cuts++;
			p->wan_bytes_per_step += 2.0 * c.m * c.cut_bytes;
		}
		int64_t need = s->mem_bytes;
		if (s->board == oi) {
			/* both of the owner's stages: one board's memory and CPU */
			p->owner_time_s += s->time_s;
			if (p->owner_time_s > p->bottleneck_s) {
				p->bottleneck_s = p->owner_time_s;
				p->bottleneck_stage = 0;
			}
			need = last ? p->stage[0].mem_bytes + s->mem_bytes : 0;
		}
		if (need > bc.mem && !rc)
			rc = sky_diag_set(d, SKY_ENOMEM,
					  "board %s (stage %d, units %d..%d): needs %lld bytes "
					  "(%.2f GiB), has %lld (short by %.2f GiB)",
					  f->board[s->board].id, k, s->first_unit, s->last_unit, (long long)need,
					  need / GIB, (long long)bc.mem, (need - bc.mem) / GIB);
	}
	if (next != c.units)
		return sky_diag_set(d, SKY_EINVAL, "plan: covers %d of %d units", next, c.units);
	/* the cuts, priced as every algorithm prices them */
	plan_sites ps;
	if (plan_sites_init(&ps, &c, f, j))
		return sky_diag_set(d, SKY_ENOMEM, "plan: no memory to price the cuts");
	plan_price_cuts(&ps, p->stage, n);
	plan_sites_free(&ps);
	for (int k = 0; k + 1 < n; k++) {
		const sky_stage *s = &p->stage[k];
		double x = s->wan_xfer_s > s->wan_xfer_b_s ? s->wan_xfer_s : s->wan_xfer_b_s;
		if (x > p->bottleneck_s) {
			p->bottleneck_s = x;
			p->bottleneck_stage = k;
		}
	}
	return rc;
}

int plan_shortfall(const sky_fleet *f, const sky_job *j, sky_diag *d, const char *algo)
{
	plan_ctx c;
	plan_ctx_init(&c, j);
	/* the least any split could need: every unit's weights and its
	 * activations at the fewest micro-batches in flight (1 under 1F1B, on
	 * the last stage), the embedding and head once, one stage's fixed part */
	int k = c.sched == SKY_SCHED_GPIPE ? c.m : 1;
	int64_t need = stage_mem(&c, 0, c.units, 1, 1, k);
	double have = 0, biggest = 0;
	for (int i = 0; i < f->n; i++) {
		have += (double)f->board[i].mem_bytes;
		if (f->board[i].mem_bytes > biggest)
			biggest = (double)f->board[i].mem_bytes;
	}
	if ((double)need > have)
		return sky_diag_set(d, SKY_ENOMEM,
				    "%s: the job does not fit: it needs at least %.2f GiB (weights, "
				    "gradients, %s state, activations%s), the fleet's %d boards have "
				    "%.2f GiB in all (short by %.2f GiB)",
				    algo, need / GIB, sky_cost_optim_name(j->optim),
				    j->ckpt && !j->infer ? ", checkpoint buffer" : "", f->n, have / GIB,
				    (need - have) / GIB);
	int64_t unit_min = stage_mem(&c, 0, 1, 1, 0, c.m);
	return sky_diag_set(d, SKY_ENOMEM,
			    "%s: no contiguous split fits: the job needs at least %.2f GiB of the "
			    "fleet's %.2f GiB, but stages also need their own activations in flight "
			    "and %.2f MiB fixed each (first stage with one block: %.2f GiB; largest "
			    "board %.2f GiB)",
			    algo, need / GIB, have / GIB, c.fixed_bytes / 1048576.0, unit_min / GIB,
			    biggest / GIB);
}
