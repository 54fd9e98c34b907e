/* The pipeline simulator: one training step of a plan, event by event.
 *
 * Each machine (a stage's board; a data owner's board runs two stages)
 * runs a fixed sequence of operations (the schedule); an operation starts
 * when both its machine is free and its input has arrived, and occupies
 * the machine for its compute plus the send of its output on the stage's
 * own link. Its output then reaches the neighbour after the neighbour's
 * link time (lat + bytes / bw: broker to receiver). A machine runs every
 * operation whose input is there, then waits; a finished operation wakes
 * the machine it feeds (a work list, so a step costs O(stages x
 * micro-batches) however the stages wait on each other). Since each
 * machine's order is fixed, this gives the same times as a priority-queue
 * event loop.
 *
 * A cut between two sites (sky_stage.wan_hop*) adds its route, hop by hop,
 * stored and forwarded at each broker: every hop in each direction is a
 * FIFO server. A message takes the hop when it is free (behind every
 * message that reached it earlier, whichever cut sent it), holds it
 * wan_hop_s, and reaches the next broker wan_hop_lat_s later; then the next
 * hop, then the receiver's link time as in one site. Hops are shared
 * between cuts, so their queues need the messages in time order: a message
 * between sites goes into a heap, and the earliest is moved on only when
 * the work list is empty. Everything the work list does then starts at or
 * after that message's time (an operation starts after its input arrives),
 * so each hop sees its messages in the order they reach it. */
#include "plan_internal.h"

#include <stdlib.h>
#include <string.h>

/* operation i of stage k out of p under the schedule: +mb forward of
 * micro-batch mb, -(mb+1) backward */
int plan_op_at(sky_sched sched, int k, int p, int m, int i)
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
	free(w->next);
	free(w->todo);
	free(w->u_stage);
	free(w->u_op);
	free(w->heap);
	memset(w, 0, sizeof *w);
}

int plan_sim_ws_init(plan_sim_ws *w, int P, int m)
{
	memset(w, 0, sizeof *w);
	size_t cells = (size_t)P * (size_t)m;
	w->fend = malloc(sizeof(double) * cells);
	w->bend = malloc(sizeof(double) * cells);
	w->free_at = malloc(sizeof(double) * (size_t)P);
	w->next = malloc(sizeof(int) * (size_t)P);
	w->todo = malloc(sizeof(int) * (size_t)P);
	w->u_stage = malloc(sizeof(int) * 4 * (size_t)m);
	w->u_op = malloc(sizeof(int) * 4 * (size_t)m);
	w->heap = malloc(sizeof *w->heap * 2 * cells); /* every message at most once */
	if (!w->fend || !w->bend || !w->free_at || !w->next || !w->todo || !w->u_stage ||
	    !w->u_op || !w->heap) {
		plan_sim_ws_free(w);
		return SKY_ENOMEM;
	}
	w->P = P;
	w->m = m;
	return 0;
}

/* ---- messages between sites: a binary heap, earliest (then first sent) on top */

static int msg_before(const plan_sim_msg *a, const plan_sim_msg *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void heap_push(plan_sim_ws *w, double t, int k, int op, int at)
{
	plan_sim_msg x = {.t = t, .seq = w->seq++, .k = k, .op = op, .at = at};
	int i = w->n_heap++;
	while (i > 0 && msg_before(&x, &w->heap[(i - 1) / 2])) {
		w->heap[i] = w->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->heap[i] = x;
}

static plan_sim_msg heap_pop(plan_sim_ws *w)
{
	plan_sim_msg top = w->heap[0], x = w->heap[--w->n_heap];
	int i = 0, n = w->n_heap;
	for (;;) {
		int c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && msg_before(&w->heap[c + 1], &w->heap[c]))
			c++;
		if (!msg_before(&w->heap[c], &x))
			break;
		w->heap[i] = w->heap[c];
		i = c;
	}
	w->heap[i] = x;
	return top;
}

/* ---- one run ------------------------------------------------------------------ */

typedef struct sim_run {
	plan_sim_ws *w;
	const sky_stage *st;
	int P, m;
	sky_sched sched;
	int owner;          /* 1: stages 0 and P-1 run on machine 0 (U-shaped) */
	double *busy_s;     /* per stage, or NULL */
	int n_todo, left;   /* machines on the work list; machines not done */
} sim_run;

static int machine_of(const sim_run *r, int k) { return r->owner && k == r->P - 1 ? 0 : k; }

static int n_ops(const sim_run *r, int mc) { return r->owner && mc == 0 ? 4 * r->m : 2 * r->m; }

/* machine mc's i-th operation (as op_at numbers it) and its stage *k */
static int op_of(const sim_run *r, int mc, int i, int *k)
{
	if (r->owner && mc == 0) {
		*k = r->w->u_stage[i];
		return r->w->u_op[i];
	}
	*k = mc;
	return plan_op_at(r->sched, mc, r->P, r->m, i);
}

/* puts a machine that waits on the work list (once) */
static void wake(sim_run *r, int mc)
{
	int *next = r->w->next;
	if (next[mc] >= 0 && next[mc] < n_ops(r, mc)) {
		next[mc] = -next[mc] - 1; /* < 0: on the list */
		r->w->todo[r->n_todo++] = mc;
	}
}

/* the message of stage k's op: its hops, and hop i's id, time and latency */
static int msg_hops(const sim_run *r, int k, int op)
{
	if (op >= 0)
		return k < r->P - 1 ? r->st[k].wan_hops : 0;
	return k > 0 ? r->st[k - 1].wan_hops : 0;
}

static int msg_hop(const sim_run *r, int k, int op, int i, double *x, double *lat)
{
	const sky_stage *c = &r->st[op >= 0 ? k : k - 1];
	int h = op >= 0 ? i : c->wan_hops - 1 - i; /* a gradient takes them in reverse */
	*x = c->wan_hop_s[h];
	*lat = c->wan_hop_lat_s[h];
	return op >= 0 ? c->wan_hop[h] : c->wan_hop[h] ^ 1;
}

/* stage k's op output is at the receiver's broker at t */
static void deliver(sim_run *r, int k, int op, double t)
{
	plan_sim_ws *w = r->w;
	if (op >= 0) {
		w->fend[(size_t)k * r->m + op] = t;
		if (k + 1 < r->P)
			wake(r, machine_of(r, k + 1));
	} else {
		w->bend[(size_t)k * r->m + (-op - 1)] = t;
		if (k > 0)
			wake(r, machine_of(r, k - 1));
	}
}

/* runs machine mc's operations until one's input is missing */
static void run_machine(sim_run *r, int mc)
{
	plan_sim_ws *w = r->w;
	const int P = r->P, m = r->m, end = n_ops(r, mc);
	while (w->next[mc] < end) {
		int k, op = op_of(r, mc, w->next[mc], &k);
		const sky_stage *s = &r->st[k];
		double ready, dur;
		if (op >= 0) {
			if (k == 0)
				ready = 0;
			else if (w->fend[(size_t)(k - 1) * m + op] < 0)
				break;
			else
				ready = w->fend[(size_t)(k - 1) * m + op] + s->link_s;
			dur = s->fwd_s + (k < P - 1 ? s->link_s : 0);
		} else {
			int mb = -op - 1;
			if (k == P - 1)
				ready = w->fend[(size_t)k * m + mb]; /* its own forward */
			else if (w->bend[(size_t)(k + 1) * m + mb] < 0)
				break;
			else
				ready = w->bend[(size_t)(k + 1) * m + mb] + s->link_s;
			if (ready < 0)
				break;
			dur = s->bwd_s + (k > 0 ? s->link_s : 0);
		}
		double start = ready > w->free_at[mc] ? ready : w->free_at[mc];
		w->free_at[mc] = start + dur;
		if (r->busy_s)
			r->busy_s[k] += dur;
		if (msg_hops(r, k, op) > 0)
			heap_push(w, w->free_at[mc], k, op, 0);
		else
			deliver(r, k, op, w->free_at[mc]);
		if (++w->next[mc] == end)
			r->left--;
	}
}

static void drain(sim_run *r)
{
	plan_sim_ws *w = r->w;
	while (r->n_todo > 0) {
		int mc = w->todo[--r->n_todo];
		w->next[mc] = -w->next[mc] - 1;
		run_machine(r, mc);
	}
}

/* moves the earliest message between sites one hop on */
static void step_msg(sim_run *r)
{
	plan_sim_ws *w = r->w;
	plan_sim_msg x = heap_pop(w);
	double hold, lat;
	int h = msg_hop(r, x.k, x.op, x.at, &hold, &lat);
	double start = x.t > w->hop_free[h] ? x.t : w->hop_free[h];
	w->hop_free[h] = start + hold;
	double t = w->hop_free[h] + lat;
	if (x.at + 1 < msg_hops(r, x.k, x.op))
		heap_push(w, t, x.k, x.op, x.at + 1);
	else
		deliver(r, x.k, x.op, t);
}

/* the step of st[0..P): plain (machines = stages) or U-shaped (owner) */
static double simulate(sim_run *r)
{
	plan_sim_ws *w = r->w;
	const int P = r->P, m = r->m, machines = r->owner ? P - 1 : P;
	for (size_t i = 0; i < (size_t)P * (size_t)m; i++)
		w->fend[i] = w->bend[i] = -1;
	for (int k = 0; k < P; k++) {
		for (int i = 0; i < r->st[k].wan_hops; i++)
			w->hop_free[r->st[k].wan_hop[i]] = w->hop_free[r->st[k].wan_hop[i] ^ 1] = 0;
		if (r->busy_s)
			r->busy_s[k] = 0;
	}
	w->n_heap = w->seq = 0;
	r->n_todo = 0;
	r->left = machines;
	for (int mc = machines - 1; mc >= 0; mc--) {
		w->free_at[mc] = 0;
		w->next[mc] = 0;
		wake(r, mc);
	}
	drain(r);
	while (w->n_heap > 0) {
		step_msg(r);
		drain(r);
	}
	if (r->left > 0)
		return -1;
	double step = 0;
	for (int mc = 0; mc < machines; mc++)
		if (w->free_at[mc] > step)
			step = w->free_at[mc];
	return step;
}

double plan_sim(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched,
		double *busy_s)
{
	if (P < 1 || P > w->P || m < 1 || m > w->m)
		return -1;
	sim_run r = {.w = w, .st = st, .P = P, .m = m, .sched = sched, .busy_s = busy_s};
	return simulate(&r);
}

int sky_plan_owner_order(sky_sched sched, int P, int m, int lag, int *stage, int *op)
{
	/* the first stage's forwards before its first backward: a backward
	 * held back by more than that many would hold back a forward that the
	 * last stage waits for (deadlock), so the lag is capped there */
	int lead = 0;
	while (lead < 2 * m && plan_op_at(sched, 0, P, m, lead) >= 0)
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
			int o = plan_op_at(sched, 0, P, m, e);
			if (o < 0 && i < 2 * m && bl < b0 + 1 + lag)
				break;
			stage[n] = 0;
			op[n++] = o;
			b0 += o < 0;
			e++;
		}
		if (i == 2 * m)
			break;
		int o = plan_op_at(sched, P - 1, P, m, i);
		stage[n] = P - 1;
		op[n++] = o;
		bl += o < 0;
	}
	return n;
}

double plan_sim_owner(plan_sim_ws *w, const sky_stage *st, int P, int m, sky_sched sched, int lag,
		      double *busy_s)
{
	if (P < 3 || P > w->P || m < 1 || m > w->m || lag < 0)
		return -1;
	sky_plan_owner_order(sched, P, m, lag, w->u_stage, w->u_op);
	sim_run r = {.w = w, .st = st, .P = P, .m = m, .sched = sched, .owner = 1,
		     .busy_s = busy_s};
	return simulate(&r);
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
