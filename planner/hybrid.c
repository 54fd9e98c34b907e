/* Hybrid plans: stage replicas and micro-batching, evaluated and simulated.
 *
 * The simulated step (sky_hsim_run, docs/planner.md):
 * - Machines are replicas. Replica r of stage k runs its own micro-batches
 *   (those routed to it, sky_hplan_route), in ascending order, under the
 *   job's schedule as if it were a pipeline stage with share[r]
 *   micro-batches: GPipe all forwards then the backwards in reverse;
 *   1F1B min(P - k - 1, share) warm-up forwards, then one forward one
 *   backward, then the rest. An operation starts when the replica is free
 *   and its input has arrived from the replica of stage k - 1 (forward) or
 *   k + 1 (backward) that the route names for that micro-batch; it holds
 *   the replica for its compute plus its send (lat + cut / bw on its link),
 *   and the receiver gets it after its own link time, as in sim.c. With one
 *   replica per stage this is plan_sim exactly (tested).
 * - Gradient reduction, per stage with R > 1 replicas, bucketed by half
 *   layer (the head's gradient first on the last stage, the embedding's
 *   last on the first): a bucket is ready on a replica when its last
 *   backward has passed through that half layer (the backward runs the
 *   stage's units from the last to the first, in proportion to their time
 *   on that board), and ready for the stage when ready on every replica.
 *   The buckets then go, in order, through a reduce-scatter and an
 *   all-gather through the broker: each replica sends (R - 1) / R of a
 *   bucket of g bytes up its link and receives as much, twice, so the
 *   stage's reduction is a FIFO server that holds each bucket for
 *   2 (R - 1) / R * g / (the slowest replica's bandwidth); a bucket is done
 *   4 latencies (up and down, both rounds: the largest replica's) and one
 *   last download of (R - 1) / R * g after it leaves the server. So the
 *   reduction of the later units overlaps the backward of the earlier
 *   ones, as bucketed all-reduce does. The reduction uses the links only
 *   (not the CPU); its contention with the stage's own activation and
 *   gradient messages is not modelled (one message of B x seq x H floats
 *   against the stage's whole gradient).
 * - The step ends at the last backward or the last bucket, whichever is
 *   later. The optimizer step after it is not timed (as in sim.c). */
#include "plan_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* sums per reduction chunk, as runtime/sky_transport.h SKY_TRANSPORT_RED_CHUNK */
#define HYB_RED_CHUNK 131072

int sky_hplan_alloc(sky_hplan *h, int cap)
{
	memset(h, 0, sizeof *h);
	h->stage = calloc((size_t)(cap > 0 ? cap : 1), sizeof *h->stage);
	if (!h->stage)
		return SKY_ENOMEM;
	h->cap = cap > 0 ? cap : 1;
	return 0;
}

void sky_hplan_free(sky_hplan *h)
{
	if (!h)
		return;
	free(h->stage);
	memset(h, 0, sizeof *h);
}

int sky_hplan_boards(const sky_hplan *h)
{
	int n = 0;
	for (int k = 0; k < h->n_stages; k++)
		n += h->stage[k].n_rep;
	return n;
}

int sky_hplan_route(const sky_hstage *s, int M, int mb)
{
	/* replica r has taken floor-free count t_r of micro-batches 0..mb-1;
	 * recomputed from scratch so the rule needs no state */
	int taken[SKY_HPLAN_MAX_REPS] = {0}, pick = 0;
	for (int i = 0; i <= mb; i++) {
		double best = -INFINITY;
		for (int r = 0; r < s->n_rep; r++) {
			double lag = (double)s->rep[r].share * (i + 1) / M - taken[r];
			if (taken[r] < s->rep[r].share && lag > best + 1e-12) {
				best = lag;
				pick = r;
			}
		}
		taken[pick]++;
	}
	return pick;
}

int plan_hjob_init(plan_hjob *h, const sky_job *j, int B)
{
	int G = j->model.batch * j->micro_batches;
	if (B < 1 || G % B != 0 || G / B > SKY_PLAN_MAX_MICRO)
		return SKY_EINVAL;
	sky_job jb = *j;
	jb.model.batch = B;
	jb.micro_batches = G / B;
	plan_ctx_init(&h->c, &jb);
	h->B = B;
	h->M = G / B;
	h->scale = (double)B / j->model.batch;
	return 0;
}

double plan_hgrad_bytes(const sky_job *j, const sky_hstage *s, int first, int last)
{
	int a = s->first_unit, b = s->last_unit + 1, na = units_attn(a, b);
	double g = (double)na * sky_cost_half_params(&j->model, 0) +
		   (double)(b - a - na) * sky_cost_half_params(&j->model, 1);
	if (first)
		g += (double)sky_model_embed_params(&j->model);
	if (last)
		g += (double)sky_model_head_params(&j->model);
	return g * sizeof(float);
}

int plan_hfill_rep(const plan_hjob *h, const sky_job *j, const sky_board *b, const sky_hstage *s,
		   sky_hrep *r, int k, int P)
{
	board_cost bc;
	plan_board_cost(&h->c, j, b, &bc);
	int a = s->first_unit, e = s->last_unit + 1, first = k == 0, last = k == P - 1;
	double wt = units_weight(&bc, a, e);
	r->fwd_s = bc.fwd * h->scale * wt;
	r->bwd_s = bc.bwd * h->scale * wt;
	r->link_s = bc.link;
	r->attn_share = bc.share;
	int to_end = P - k;
	r->in_flight = j->sched == SKY_SCHED_GPIPE ? r->share
		       : r->share < to_end	   ? r->share
						   : to_end;
	r->mem_bytes = stage_mem(&h->c, a, e, first, last, r->in_flight);
	/* every stage of such a plan sums in fixed point (runtime/stage.c: 8
	 * bytes a parameter, a stage of one board too: the board carves them
	 * for any plan with replicas or exact sums); a replicated stage's
	 * boards also keep the other replicas' sums by step parity (2 x 8)
	 * and a chunk received and one sent (runtime/transport.c: at most
	 * HYB_RED_CHUNK sums each). This is the search's estimate; the
	 * service prices the plan it publishes with the board's own function
	 * (planner/svc_plan.c price_roles), so no margin is kept here */
	double params = plan_hgrad_bytes(j, s, first, last) / sizeof(float);
	r->mem_bytes += (int64_t)(8 * params);
	if (s->n_rep > 1) {
		double chunk = params < HYB_RED_CHUNK ? params : HYB_RED_CHUNK;
		r->mem_bytes += (int64_t)(16 * params + 2 * 8 * chunk);
	}
	return r->mem_bytes <= b->mem_bytes;
}

int sky_hplan_evaluate(const sky_fleet *f, const sky_job *j, sky_hplan *h, sky_diag *d)
{
	plan_hjob hj;
	const int U = 2 * j->model.layers, P = h->n_stages;
	if (plan_hjob_init(&hj, j, h->micro_batch) || h->micro_batches != hj.M)
		return sky_diag_set(d, SKY_EINVAL,
				    "hybrid plan: %d micro-batches of %d is not the job's batch of %d",
				    h->micro_batches, h->micro_batch, j->model.batch * j->micro_batches);
	if (P < 1 || P > h->cap)
		return sky_diag_set(d, SKY_EINVAL, "hybrid plan: %d stages", P);
	unsigned char *used = calloc((size_t)f->n, 1);
	if (!used)
		return sky_diag_set(d, SKY_ENOMEM, "hybrid plan: no memory");
	int rc = 0, next = 0;
	for (int k = 0; k < P && !rc; k++) {
		sky_hstage *s = &h->stage[k];
		if (s->first_unit != next || s->last_unit < s->first_unit || s->last_unit >= U) {
			rc = sky_diag_set(d, SKY_EINVAL,
					  "hybrid plan: stage %d covers units %d-%d, expected to start "
					  "at %d within %d",
					  k, s->first_unit, s->last_unit, next, U);
			break;
		}
		next = s->last_unit + 1;
		if (s->n_rep < 1 || s->n_rep > SKY_HPLAN_MAX_REPS) {
			rc = sky_diag_set(d, SKY_EINVAL, "hybrid plan: stage %d has %d replicas", k,
					  s->n_rep);
			break;
		}
		int sum = 0;
		for (int r = 0; r < s->n_rep && !rc; r++) {
			sky_hrep *x = &s->rep[r];
			if (x->board < 0 || x->board >= f->n || used[x->board]++) {
				rc = sky_diag_set(d, SKY_EINVAL,
						  "hybrid plan: stage %d replica %d: board index %d is "
						  "out of range or used twice",
						  k, r, x->board);
				break;
			}
			if (!sky_site_eq(f->board[x->board].site, f->board[h->stage[0].rep[0].board].site)) {
				rc = sky_diag_set(d, SKY_EINVAL,
						  "hybrid plan: board %s is in another site (replica "
						  "plans are for one site)",
						  f->board[x->board].id);
				break;
			}
			if (x->share < 1) {
				rc = sky_diag_set(d, SKY_EINVAL,
						  "hybrid plan: stage %d replica %s has share %d", k,
						  f->board[x->board].id, x->share);
				break;
			}
			sum += x->share;
			if (!plan_hfill_rep(&hj, j, &f->board[x->board], s, x, k, P))
				rc = sky_diag_set(d, SKY_ENOMEM,
						  "hybrid plan: board %s needs %lld bytes for stage %d, "
						  "has %lld",
						  f->board[x->board].id, (long long)x->mem_bytes, k,
						  (long long)f->board[x->board].mem_bytes);
		}
		if (!rc && sum != hj.M)
			rc = sky_diag_set(d, SKY_EINVAL,
					  "hybrid plan: stage %d's shares add up to %d, not %d", k, sum,
					  hj.M);
		s->grad_bytes = plan_hgrad_bytes(j, s, k == 0, k == P - 1);
	}
	if (!rc && next != U)
		rc = sky_diag_set(d, SKY_EINVAL, "hybrid plan: units %d-%d are not covered", next,
				  U - 1);
	free(used);
	return rc;
}

/* ---- the simulator ------------------------------------------------------------- */

void plan_hsim_ws_free(plan_hsim_ws *w)
{
	if (!w)
		return;
	free(w->fend);
	free(w->bend);
	free(w->route);
	free(w->mbs);
	free(w->ops);
	free(w->stage_of);
	free(w->rep_of);
	free(w->first_rep);
	free(w->free_at);
	free(w->last_b);
	free(w->next);
	free(w->todo);
	memset(w, 0, sizeof *w);
}

int plan_hsim_ws_init(plan_hsim_ws *w, int P, int R, int M)
{
	memset(w, 0, sizeof *w);
	size_t pm = (size_t)P * (size_t)M, rm = (size_t)R * (size_t)M;
	w->fend = malloc(sizeof(double) * pm);
	w->bend = malloc(sizeof(double) * pm);
	w->route = malloc(sizeof(int) * pm);
	w->mbs = malloc(sizeof(int) * rm);
	w->ops = malloc(sizeof(int) * 2 * rm);
	w->stage_of = malloc(sizeof(int) * (size_t)R);
	w->rep_of = malloc(sizeof(int) * (size_t)R);
	w->first_rep = malloc(sizeof(int) * ((size_t)P + 1));
	w->free_at = malloc(sizeof(double) * (size_t)R);
	w->last_b = malloc(sizeof(double) * (size_t)R);
	w->next = malloc(sizeof(int) * (size_t)R);
	w->todo = malloc(sizeof(int) * (size_t)R);
	if (!w->fend || !w->bend || !w->route || !w->mbs || !w->ops || !w->stage_of || !w->rep_of ||
	    !w->first_rep || !w->free_at || !w->last_b || !w->next || !w->todo) {
		plan_hsim_ws_free(w);
		return SKY_ENOMEM;
	}
	w->P = P;
	w->R = R;
	w->M = M;
	return 0;
}

typedef struct hrun {
	plan_hsim_ws *w;
	const sky_hplan *h;
	sky_sched sched;
	int P, M, n_todo;
} hrun;

static const sky_hrep *rep_at(const hrun *r, int g)
{
	return &r->h->stage[r->w->stage_of[g]].rep[r->w->rep_of[g]];
}

static void hwake(hrun *r, int g)
{
	int *next = r->w->next;
	if (next[g] >= 0 && next[g] < 2 * rep_at(r, g)->share) {
		next[g] = -next[g] - 1;
		r->w->todo[r->n_todo++] = g;
	}
}

static void hrun_machine(hrun *r, int g)
{
	plan_hsim_ws *w = r->w;
	const int P = r->P, M = r->M, k = w->stage_of[g];
	const sky_hrep *x = rep_at(r, g);
	const int *ops = &w->ops[(size_t)g * 2 * M];
	while (w->next[g] < 2 * x->share) {
		int o = ops[w->next[g]];
		double ready, dur;
		int mb;
		if (o >= 0) {
			mb = o;
			if (k == 0)
				ready = 0;
			else if (w->fend[(size_t)(k - 1) * M + mb] < 0)
				break;
			else
				ready = w->fend[(size_t)(k - 1) * M + mb] + x->link_s;
			dur = x->fwd_s + (k < P - 1 ? x->link_s : 0);
		} else {
			mb = -o - 1;
			if (k == P - 1)
				ready = w->fend[(size_t)k * M + mb];
			else if (w->bend[(size_t)(k + 1) * M + mb] < 0)
				break;
			else
				ready = w->bend[(size_t)(k + 1) * M + mb] + x->link_s;
			if (ready < 0)
				break;
			dur = x->bwd_s + (k > 0 ? x->link_s : 0);
		}
		double start = ready > w->free_at[g] ? ready : w->free_at[g];
		w->free_at[g] = start + dur;
		if (o >= 0) {
			w->fend[(size_t)k * M + mb] = w->free_at[g];
			if (k + 1 < P)
				hwake(r, w->route[(size_t)(k + 1) * M + mb]);
		} else {
			w->last_b[g] = start;
			w->bend[(size_t)k * M + mb] = w->free_at[g];
			if (k > 0)
				hwake(r, w->route[(size_t)(k - 1) * M + mb]);
		}
		w->next[g]++;
	}
}

/* stage k's reduction (R > 1): its end, and its server time alone in *busy */
static double reduce_stage(const hrun *r, const sky_fleet *f, const sky_job *j, int k,
			   double *busy)
{
	const sky_hstage *s = &r->h->stage[k];
	const plan_hsim_ws *w = r->w;
	const int R = s->n_rep, P = r->P, g0 = w->first_rep[k];
	double bw = INFINITY, lat = 0, frac = (double)(R - 1) / R;
	for (int i = 0; i < R; i++) {
		const sky_board *b = &f->board[s->rep[i].board];
		bw = b->bw_Bps < bw ? b->bw_Bps : bw;
		lat = b->lat_s > lat ? b->lat_s : lat;
	}
	const int a = s->first_unit, e = s->last_unit + 1;
	double server = 0, done = 0;
	*busy = 0;
	/* buckets in the order the backward finishes them: the head (last
	 * stage), units e-1 down to a, the embedding (first stage) */
	for (int q = -1; q <= e - a; q++) {
		double bytes;
		int u = e - 1 - q; /* the unit of bucket q, for 0 <= q < e - a */
		if (q < 0) {
			if (k != P - 1)
				continue;
			bytes = (double)sky_model_head_params(&j->model) * sizeof(float);
		} else if (q == e - a) {
			if (k != 0)
				continue;
			bytes = (double)sky_model_embed_params(&j->model) * sizeof(float);
		} else {
			bytes = (double)sky_cost_half_params(&j->model, u % 2) * sizeof(float);
		}
		double ready = 0;
		for (int i = 0; i < R; i++) {
			const sky_hrep *x = &s->rep[i];
			double t = w->last_b[g0 + i];
			if (q >= 0) {
				board_cost bc = {.share = x->attn_share};
				double whole = units_weight(&bc, a, e);
				int upto = q == e - a ? a : u; /* the backward has passed [upto, e) */
				t += whole > 0 ? x->bwd_s * units_weight(&bc, upto, e) / whole : 0;
			}
			ready = t > ready ? t : ready;
		}
		double hold = 2 * frac * bytes / bw;
		double start = ready > server ? ready : server;
		server = start + hold;
		*busy += hold;
		double fin = server + 4 * lat + frac * bytes / bw;
		done = fin > done ? fin : done;
	}
	return done;
}

/* Replica g's operations: its micro-batches' forwards and backwards in the
 * order the job's schedule gives them on a single pipeline stage k, keeping
 * only its own. 1F1B: a forward of micro-batch x comes at x, the backward of
 * mb after the forward of mb + P - k - 1 (GPipe: every forward, then the
 * backwards in reverse). With one replica this is the schedule of sim.c
 * (plan_op_at); with several, each replica's order is a subsequence of that
 * one stage's, so any run of the single pipeline orders every operation of
 * the replicated one consistently: no deadlock. And a replica holds at most
 * min(share, P - k) micro-batches at once, as sky_hrep.in_flight says. */
static void order_ops(plan_hsim_ws *w, int g, int s, int k, int P, int M, sky_sched sched)
{
	const int *mbs = &w->mbs[(size_t)g * M];
	int *ops = &w->ops[(size_t)g * 2 * M], n = 0;
	if (sched == SKY_SCHED_GPIPE) {
		for (int i = 0; i < s; i++)
			ops[n++] = mbs[i];
		for (int i = s - 1; i >= 0; i--)
			ops[n++] = -mbs[i] - 1;
		return;
	}
	int lead = P - k - 1;
	for (int f = 0, b = 0; b < s;) {
		if (f < s && mbs[f] <= mbs[b] + lead)
			ops[n++] = mbs[f++];
		else
			ops[n++] = -mbs[b++] - 1;
	}
}

double plan_hsim(plan_hsim_ws *w, const sky_hplan *h, const sky_fleet *f, const sky_job *j,
		 sky_hsim_result *out)
{
	const int P = h->n_stages, M = h->micro_batches;
	if (P < 1 || P > w->P || M < 1 || M > w->M)
		return -1;
	int G = 0;
	for (int k = 0; k < P; k++) {
		const sky_hstage *s = &h->stage[k];
		w->first_rep[k] = G;
		if (G + s->n_rep > w->R)
			return -1;
		int fill[SKY_HPLAN_MAX_REPS] = {0}, taken[SKY_HPLAN_MAX_REPS] = {0};
		for (int r = 0; r < s->n_rep; r++) {
			w->stage_of[G + r] = k;
			w->rep_of[G + r] = r;
		}
		/* the route, incrementally (sky_hplan_route's rule) */
		for (int mb = 0; mb < M; mb++) {
			double best = -INFINITY;
			int pick = 0;
			for (int r = 0; r < s->n_rep; r++) {
				double lag = (double)s->rep[r].share * (mb + 1) / M - taken[r];
				if (taken[r] < s->rep[r].share && lag > best + 1e-12) {
					best = lag;
					pick = r;
				}
			}
			taken[pick]++;
			w->route[(size_t)k * M + mb] = G + pick;
			w->mbs[(size_t)(G + pick) * M + fill[pick]++] = mb;
		}
		for (int r = 0; r < s->n_rep; r++)
			order_ops(w, G + r, s->rep[r].share, k, P, M, j->sched);
		G += s->n_rep;
	}
	w->first_rep[P] = G;
	for (size_t i = 0; i < (size_t)P * (size_t)M; i++)
		w->fend[i] = w->bend[i] = -1;
	hrun r = {.w = w, .h = h, .sched = j->sched, .P = P, .M = M};
	for (int g = G - 1; g >= 0; g--) {
		w->free_at[g] = 0;
		w->last_b[g] = 0;
		w->next[g] = 0;
		hwake(&r, g);
	}
	while (r.n_todo > 0) {
		int g = w->todo[--r.n_todo];
		w->next[g] = -w->next[g] - 1;
		hrun_machine(&r, g);
	}
	double end = 0;
	for (int g = 0; g < G; g++) {
		if (w->next[g] != 2 * rep_at(&r, g)->share)
			return -1; /* deadlock */
		end = w->free_at[g] > end ? w->free_at[g] : end;
	}
	double step = end;
	if (out)
		out->compute_end_s = end;
	for (int k = 0; k < P; k++) {
		double busy = 0, done = h->stage[k].n_rep > 1 ? reduce_stage(&r, f, j, k, &busy) : 0;
		if (out) {
			out->reduce_end_s[k] = done;
			out->reduce_s[k] = busy;
		}
		step = done > step ? done : step;
	}
	if (out)
		out->step_s = step;
	return step;
}

int sky_hsim_run(const sky_fleet *f, const sky_hplan *h, const sky_job *j, sky_hsim_result *out,
		 sky_diag *d)
{
	plan_hsim_ws w;
	int P = h->n_stages, R = sky_hplan_boards(h), M = h->micro_batches;
	if (P < 1 || M < 1 || M > SKY_PLAN_MAX_MICRO || R < P)
		return sky_diag_set(d, SKY_EINVAL, "hybrid sim: %d stages, %d replicas, %d micro-batches",
				    P, R, M);
	if (plan_hsim_ws_init(&w, P, R, M))
		return sky_diag_set(d, SKY_ENOMEM, "hybrid sim: no memory for %d x %d operations", R,
				    M);
	memset(out, 0, sizeof *out);
	double step = plan_hsim(&w, h, f, j, out);
	plan_hsim_ws_free(&w);
	if (step < 0)
		return sky_diag_set(d, SKY_ESTATE, "hybrid sim: the schedule deadlocked");
	return 0;
}

int sky_hplan_from_plan(const sky_fleet *f, const sky_job *j, const sky_plan *p, sky_hplan *h,
			sky_diag *d)
{
	if (p->n_stages > h->cap || p->owner)
		return sky_diag_set(d, SKY_EINVAL, "hybrid plan: a %d-stage%s plan does not fit",
				    p->n_stages, p->owner ? " U-shaped" : "");
	h->micro_batch = j->model.batch;
	h->micro_batches = j->micro_batches;
	h->n_stages = p->n_stages;
	for (int k = 0; k < p->n_stages; k++) {
		sky_hstage *s = &h->stage[k];
		memset(s, 0, sizeof *s);
		s->first_unit = p->stage[k].first_unit;
		s->last_unit = p->stage[k].last_unit;
		s->n_rep = 1;
		s->rep[0].board = p->stage[k].board;
		s->rep[0].share = j->micro_batches;
	}
	return sky_hplan_evaluate(f, j, h, d);
}

static int by_dbl_desc(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a < b) - (a > b);
}

void sky_hplan_bounds(const sky_fleet *f, const sky_job *j, double *work_s, double *path_s)
{
	plan_ctx c;
	plan_ctx_init(&c, j);
	const int U = c.units, n = f->n, G = j->model.batch * j->micro_batches;
	double smin = 1, smax = 0, speed = 0;
	*work_s = *path_s = 0;
	for (int i = 0; i < n; i++) {
		board_cost bc;
		plan_board_cost(&c, j, &f->board[i], &bc);
		smin = bc.share < smin ? bc.share : smin;
		smax = bc.share > smax ? bc.share : smax;
		speed += 1.0 / (bc.fwd + bc.bwd);
	}
	int na = units_attn(0, U), nf = U - na;
	double work = na * smin + nf * (1 - smax); /* layers of work, one micro-batch of B0 */
	if (n < 1 || !(speed > 0))
		return;
	/* every replica computes for at most the step at its speed, and the
	 * stages' shares add up to G sequences through every unit */
	*work_s = (double)G / j->model.batch * work / speed;
	/* one micro-batch of one sequence (the smallest B) forward through every
	 * unit and back: each unit on some board, no board in two stages, each
	 * board holding at most cap units (its memory, with one micro-batch in
	 * flight, each unit the cheapest kind), and at least P_min - 1 cuts,
	 * each crossed forward and backward with the sender's and the
	 * receiver's link time */
	plan_hjob h1;
	if (plan_hjob_init(&h1, j, 1))
		return;
	int64_t per = (h1.c.param_bytes[0] < h1.c.param_bytes[1] ? h1.c.param_bytes[0]
								  : h1.c.param_bytes[1]) +
		      (h1.c.saved_bytes[0] < h1.c.saved_bytes[1] ? h1.c.saved_bytes[0]
								 : h1.c.saved_bytes[1]);
	double wmax = smax > 1 - smin ? smax : 1 - smin, minlink = INFINITY;
	double *key = malloc(sizeof(double) * 2 * (size_t)n);
	if (!key)
		return;
	double *caps = key + n;
	for (int i = 0; i < n; i++) {
		board_cost bc;
		plan_board_cost(&h1.c, j, &f->board[i], &bc);
		int64_t room = f->board[i].mem_bytes - h1.c.fixed_bytes;
		double cap = room > 0 && per > 0 ? (double)(room / per) : 0;
		cap = cap < U ? cap : U;
		caps[i] = cap;
		/* sort key: speed, with the board's cap packed in a second pass */
		key[i] = 1.0 / (bc.fwd + bc.bwd);
		minlink = bc.link < minlink ? bc.link : minlink;
	}
	/* P_min: the fewest boards whose caps add up to U */
	double *cs = malloc(sizeof(double) * (size_t)n);
	int *idx = malloc(sizeof(int) * (size_t)n);
	if (!cs || !idx)
		goto exit;
	memcpy(cs, caps, sizeof(double) * (size_t)n);
	qsort(cs, (size_t)n, sizeof(double), by_dbl_desc);
	int pmin = 0;
	double got = 0;
	while (pmin < n && got < U)
		got += cs[pmin++];
	if (got < U) {
		*path_s = INFINITY; /* no plan fits at all */
		goto exit;
	}
	/* the path's compute: fastest first, each board at most cap * wmax layers */
	for (int i = 0; i < n; i++)
		idx[i] = i;
	for (int i = 1; i < n; i++) /* insertion sort by speed, fastest first */
		for (int q = i; q > 0 && key[idx[q]] > key[idx[q - 1]]; q--) {
			int t = idx[q];
			idx[q] = idx[q - 1];
			idx[q - 1] = t;
		}
	double left = work, path = 0;
	for (int i = 0; i < n && left > 0; i++) {
		double take = caps[idx[i]] * wmax < left ? caps[idx[i]] * wmax : left;
		path += take / key[idx[i]];
		left -= take;
	}
	*path_s = path * h1.scale + 4 * (pmin - 1) * minlink;
exit:
	free(key);
	free(cs);
	free(idx);
}
