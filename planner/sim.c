/* The pipeline simulator: one training step of a plan, event by event.
 *
 * Each stage runs a fixed sequence of operations (the schedule); an
 * operation starts when both its stage is free and its input has arrived,
 * and occupies the stage for its compute plus the send of its output on the
 * stage's own link. Its output then reaches the neighbour after the
 * neighbour's link time (lat + bytes / bw: broker to receiver). A stage runs
 * every operation whose input is there, then waits; a finished operation
 * wakes the neighbour it feeds (a work list, so a step costs O(stages x
 * micro-batches) however the stages wait on each other). Since each stage's
 * order is fixed, this gives the same times as a priority-queue event loop.
 *
 * A cut between two sites (sky_stage.wan_*) adds the site path: a message
 * waits until the path is free in its direction, holds it wan_xfer_s
 * (wan_xfer_b_s backward), and
 * reaches the other site's broker wan_lat_s later; then the receiver's link
 * time applies as in one site. A stage sends in its schedule's order, so
 * each direction of a path is a queue in that order, and it is settled
 * when the sender finishes (the work list's order does not matter). */
#include "plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* operation i of stage k out of p under the schedule: +mb forward of
 * micro-batch mb, -(mb+1) backward */
static int op_at(sky_sched sched, int k, int p, int m, int i)
{
	if (sched == SKY_SCHED_GPIPE)
		return i < m ? i : -(2 * m - i - 1) - 1; /* backwards last-in first-out */
	int warm = p - k - 1 < m ? p - k - 1 : m;
	if (i < warm)
		return i;
	int steady = m - warm, t = i - warm;
	if (t < 2 * steady)
		return t % 2 == 0 ? warm + t / 2 : -(t / 2) - 1;
	return -(steady + (t - 2 * steady)) - 1;
}

void plan_sim_ws_free(plan_sim_ws *w)
{
	if (!w)
		return;
	free(w->fend);
	free(w->bend);
	free(w->free_at);
	free(w->path_f);
	free(w->path_b);
	free(w->next);
	free(w->todo);
	free(w->u_stage);
	free(w->u_op);
	memset(w, 0, sizeof *w);
}

int plan_sim_ws_init(plan_sim_ws *w, int P, int m)
{
	memset(w, 0, sizeof *w);
	size_t cells = (size_t)P * (size_t)m;
	w->fend = malloc(sizeof(double) * cells);
	w->bend = malloc(sizeof(double) * cells);
	w->free_at = malloc(sizeof(double) * (size_t)P);
	w->path_f = malloc(sizeof(double) * (size_t)P);
	w->path_b = malloc(sizeof(double) * (size_t)P);
	w->next = malloc(sizeof(int) * (size_t)P);
	w->todo = malloc(sizeof(int) * (size_t)P);
	w->u_stage = malloc(sizeof(int) * 4 * (size_t)m);
	w->u_op = malloc(sizeof(int) * 4 * (size_t)m);
	if (!w->fend || !w->bend || !w->free_at || !w->path_f || !w->path_b || !w->next ||
	    !w->todo || !w->u_stage || !w->u_op) {
		plan_sim_ws_free(w);
		return SKY_ENOMEM;
	}
	w->P = P;
	w->m = m;
	return 0;
}

double plan_sim(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
		double *busy_s)
{
	if (P < 1 || P > w->P || m < 1 || m > w->m)
		return -1;
	double *fend = w->fend, *bend = w->bend, *free_at = w->free_at;
	double *path_f = w->path_f, *path_b = w->path_b;
	int *next = w->next, *todo = w->todo;
	for (size_t i = 0; i < (size_t)P * (size_t)m; i++)
		fend[i] = bend[i] = -1;
	/* todo is a stack of stages to look at; next[k] < 0 marks one on it */
	int n_todo = 0, left = P;
	for (int k = P - 1; k >= 0; k--) {
		free_at[k] = 0;
		path_f[k] = path_b[k] = 0;
		next[k] = -1; /* on the stack, at operation 0 */
		todo[n_todo++] = k;
		if (busy_s)
			busy_s[k] = 0;
	}
	while (n_todo > 0) {
		int k = todo[--n_todo];
		next[k] = -next[k] - 1;
		const sky_stage *s = &st[k];
		int woke_up = 0, woke_down = 0;
		while (next[k] < 2 * m) {
			int op = op_at(sched, k, P, m, next[k]);
			double ready, dur;
			if (op >= 0) {
				if (k == 0)
					ready = 0;
				else if (fend[(size_t)(k - 1) * m + op] < 0)
					break;
				else
					ready = fend[(size_t)(k - 1) * m + op] + s->link_s;
				dur = s->fwd_s + (k < P - 1 ? s->link_s : 0);
			} else {
				int mb = -op - 1;
				if (k == P - 1)
					ready = fend[(size_t)k * m + mb]; /* its own forward */
				else if (bend[(size_t)(k + 1) * m + mb] < 0)
					break;
				else
					ready = bend[(size_t)(k + 1) * m + mb] + s->link_s;
				if (ready < 0)
					break;
				dur = s->bwd_s + (k > 0 ? s->link_s : 0);
			}
			double start = ready > free_at[k] ? ready : free_at[k];
			free_at[k] = start + dur;
			if (busy_s)
				busy_s[k] += dur;
			double out = free_at[k];
			if (op >= 0) {
				/* to stage k + 1 through the path after k, if the cut crosses */
				if (k < P - 1 && s->wan_xfer_s + s->wan_lat_s > 0) {
					double t0 = out > path_f[k] ? out : path_f[k];
					path_f[k] = t0 + s->wan_xfer_s;
					out = path_f[k] + s->wan_lat_s;
				}
				fend[(size_t)k * m + op] = out;
				woke_down = 1;
			} else {
				/* to stage k - 1 through the path after k - 1, backwards */
				const sky_stage *u = &st[k > 0 ? k - 1 : 0];
				if (k > 0 && u->wan_xfer_b_s + u->wan_lat_s > 0) {
					double t0 = out > path_b[k - 1] ? out : path_b[k - 1];
					path_b[k - 1] = t0 + u->wan_xfer_b_s;
					out = path_b[k - 1] + u->wan_lat_s;
				}
				bend[(size_t)k * m + (-op - 1)] = out;
				woke_up = 1;
			}
			if (++next[k] == 2 * m)
				left--;
		}
		/* a neighbour that waits gets looked at again (once on the stack) */
		if (woke_down && k + 1 < P && next[k + 1] >= 0 && next[k + 1] < 2 * m) {
			next[k + 1] = -next[k + 1] - 1;
			todo[n_todo++] = k + 1;
		}
		if (woke_up && k > 0 && next[k - 1] >= 0 && next[k - 1] < 2 * m) {
			next[k - 1] = -next[k - 1] - 1;
			todo[n_todo++] = k - 1;
		}
	}
	if (left > 0)
		return -1;
	double step = 0;
	for (int k = 0; k < P; k++)
		if (free_at[k] > step)
			step = free_at[k];
	return step;
}

int sky_plan_owner_order(sky_sched sched, int P, int m, int lag, int *stage, int *op)
{
	/* the first stage's forwards before its first backward: a backward
	 * held back by more than that many would hold back a forward that the
	 * last stage waits for (deadlock), so the lag is capped there */
	int lead = 0;
	while (lead < 2 * m && op_at(sched, 0, P, m, lead) >= 0)
		lead++;
	if (lag > lead - 1)
		lag = lead - 1;
	if (lag < 0)
		lag = 0;
	int n = 0, e = 0, b0 = 0, bl = 0;
	for (int i = 0; i <= 2 * m; i++) {
		/* the first stage runs ahead: every forward, and the backward
		 * of a micro-batch whose last-stage backward is lag backwards
		 * behind (all of them once the last stage is done) */
		while (e < 2 * m) {
			int o = op_at(sched, 0, P, m, e);
			if (o < 0 && i < 2 * m && bl < b0 + 1 + lag)
				break;
			stage[n] = 0;
			op[n++] = o;
			b0 += o < 0;
			e++;
		}
		if (i == 2 * m)
			break;
		int o = op_at(sched, P - 1, P, m, i);
		stage[n] = P - 1;
		op[n++] = o;
		bl += o < 0;
	}
	return n;
}

/* The machine that runs stage k: the owner's board (0) for both ends. */
static int machine_of(int k, int P) { return k == P - 1 ? 0 : k; }

double plan_sim_owner(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched, int lag,
		      double *busy_s)
{
	if (P < 3 || P > w->P || m < 1 || m > w->m || lag < 0)
		return -1;
	double *fend = w->fend, *bend = w->bend, *free_at = w->free_at;
	double *path_f = w->path_f, *path_b = w->path_b;
	int *next = w->next, *todo = w->todo;
	sky_plan_owner_order(sched, P, m, lag, w->u_stage, w->u_op);
	for (size_t i = 0; i < (size_t)P * (size_t)m; i++)
		fend[i] = bend[i] = -1;
	/* machines 0 (the owner: stages 0 and P-1) .. P-2; next[] as in plan_sim */
	int n_todo = 0, left = P - 1;
	for (int k = P - 1; k >= 0; k--) {
		free_at[k] = 0;
		path_f[k] = path_b[k] = 0;
		if (busy_s)
			busy_s[k] = 0;
	}
	for (int k = P - 2; k >= 0; k--) {
		next[k] = -1;
		todo[n_todo++] = k;
	}
	while (n_todo > 0) {
		int mc = todo[--n_todo];
		next[mc] = -next[mc] - 1;
		int n_ops = mc == 0 ? 4 * m : 2 * m;
		int wake[2] = {-1, -1};
		while (next[mc] < n_ops) {
			int k = mc == 0 ? w->u_stage[next[mc]] : mc;
			int op = mc == 0 ? w->u_op[next[mc]] : op_at(sched, k, P, m, next[mc]);
			const sky_stage *s = &st[k];
			double ready, dur;
			if (op >= 0) {
				if (k == 0)
					ready = 0;
				else if (fend[(size_t)(k - 1) * m + op] < 0)
					break;
				else
					ready = fend[(size_t)(k - 1) * m + op] + s->link_s;
				dur = s->fwd_s + (k < P - 1 ? s->link_s : 0);
			} else {
				int mb = -op - 1;
				if (k == P - 1)
					ready = fend[(size_t)k * m + mb];
				else if (bend[(size_t)(k + 1) * m + mb] < 0)
					break;
				else
					ready = bend[(size_t)(k + 1) * m + mb] + s->link_s;
				if (ready < 0)
					break;
				dur = s->bwd_s + (k > 0 ? s->link_s : 0);
			}
			double start = ready > free_at[mc] ? ready : free_at[mc];
			free_at[mc] = start + dur;
			if (busy_s)
				busy_s[k] += dur;
			double out = free_at[mc];
			if (op >= 0) {
				if (k < P - 1 && s->wan_xfer_s + s->wan_lat_s > 0) {
					double t0 = out > path_f[k] ? out : path_f[k];
					path_f[k] = t0 + s->wan_xfer_s;
					out = path_f[k] + s->wan_lat_s;
				}
				fend[(size_t)k * m + op] = out;
				if (k < P - 1)
					wake[0] = machine_of(k + 1, P);
			} else {
				const sky_stage *u = &st[k > 0 ? k - 1 : 0];
				if (k > 0 && u->wan_xfer_b_s + u->wan_lat_s > 0) {
					double t0 = out > path_b[k - 1] ? out : path_b[k - 1];
					path_b[k - 1] = t0 + u->wan_xfer_b_s;
					out = path_b[k - 1] + u->wan_lat_s;
				}
				bend[(size_t)k * m + (-op - 1)] = out;
				if (k > 0)
					wake[1] = machine_of(k - 1, P);
			}
			if (++next[mc] == n_ops)
				left--;
		}
		for (int i = 0; i < 2; i++) {
			int o = wake[i];
			if (o >= 0 && o != mc && next[o] >= 0 && next[o] < (o == 0 ? 4 * m : 2 * m)) {
				next[o] = -next[o] - 1;
				todo[n_todo++] = o;
			}
		}
	}
	if (left > 0)
		return -1;
	double step = 0;
	for (int k = 0; k < P - 1; k++)
		if (free_at[k] > step)
			step = free_at[k];
	return step;
}

double plan_owner_best_lag(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
			   int *lag)
{
	double best = -1;
	int hi = m < P ? m : P;
	for (int l = 0; l <= hi; l++) {
		double t = plan_sim_owner(w, st, P, m, sched, l, NULL);
		if (t >= 0 && (best < 0 || t < best)) {
			best = t;
			*lag = l;
		}
	}
	return best;
}

int sky_sim_run(const sky_plan *p, const sky_job *j, sky_sim_result *out, sky_diag *d)
{
	int P = p->n_stages, m = j->micro_batches, rc = 0;
	plan_sim_ws w;
	if (P < 1 || P > SKY_PLAN_MAX_BOARDS + 1 || m < 1 || m > SKY_PLAN_MAX_MICRO)
		return sky_diag_set(d, SKY_EINVAL, "sim: %d stages, %d micro-batches", P, m);
	if (plan_sim_ws_init(&w, P, m))
		return sky_diag_set(d, SKY_ENOMEM, "sim: no memory for %d x %d operations", P, m);
	memset(out, 0, sizeof *out);
	out->n_stages = P;
	double step = p->owner ? plan_sim_owner(&w, p->stage, P, m, j->sched, p->owner_lag,
						out->busy_s)
			       : plan_sim(&w, p->stage, P, m, j->sched, out->busy_s);
	if (step < 0) {
		rc = sky_diag_set(d, SKY_ESTATE, "sim: the schedule deadlocked");
		goto exit;
	}
	out->step_s = step;
	double busy = 0;
	for (int k = 0; k < P; k++)
		busy += out->busy_s[k];
	/* the owner's two stages are one board */
	int boards = p->owner ? P - 1 : P;
	out->bubble = step > 0 ? 1.0 - busy / (boards * step) : 0;
exit:
	plan_sim_ws_free(&w);
	return rc;
}
