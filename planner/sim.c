/* The pipeline simulator: one training step of a plan, event by event.
 *
 * Each stage runs a fixed sequence of operations (the schedule); an
 * operation starts when both its stage is free and its input has arrived,
 * and occupies the stage for its compute plus the send of its output on the
 * stage's own link. Its output then reaches the neighbour after the
 * neighbour's link time (lat + bytes / bw: broker to receiver). Stages are
 * swept in turn, each running every operation whose input is there, until
 * all are done; since each stage's order is fixed, this gives the same
 * times as a priority-queue event loop. */
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

int sky_sim_run(const sky_plan *p, const sky_job *j, sky_sim_result *out, sky_diag *d)
{
	int P = p->n_stages, m = j->micro_batches, rc = 0;
	if (P < 1 || P > SKY_PLAN_MAX_BOARDS || m < 1 || m > SKY_PLAN_MAX_MICRO)
		return sky_diag_set(d, SKY_EINVAL, "sim: %d stages, %d micro-batches", P, m);
	size_t cells = (size_t)P * (size_t)m;
	double *fend = malloc(sizeof(double) * cells); /* forward of (k, mb) done, output sent */
	double *bend = malloc(sizeof(double) * cells);
	int *next = calloc((size_t)P, sizeof(int));
	double *free_at = calloc((size_t)P, sizeof(double));
	if (!fend || !bend || !next || !free_at) {
		rc = sky_diag_set(d, SKY_ENOMEM, "sim: no memory for %d x %d operations", P, m);
		goto exit;
	}
	for (size_t i = 0; i < cells; i++)
		fend[i] = bend[i] = -1;
	memset(out, 0, sizeof *out);
	out->n_stages = P;
	int left = P, progress = 1;
	while (left > 0 && progress) {
		progress = 0;
		for (int k = 0; k < P; k++) {
			const sky_stage *s = &p->stage[k];
			while (next[k] < 2 * m) {
				int op = op_at(j->sched, k, P, m, next[k]);
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
				out->busy_s[k] += dur;
				if (op >= 0)
					fend[(size_t)k * m + op] = free_at[k];
				else
					bend[(size_t)k * m + (-op - 1)] = free_at[k];
				next[k]++;
				progress = 1;
				if (next[k] == 2 * m)
					left--;
			}
		}
	}
	if (left > 0) {
		rc = sky_diag_set(d, SKY_ESTATE, "sim: the schedule deadlocked (%d stages stuck)",
				  left);
		goto exit;
	}
	double busy = 0;
	for (int k = 0; k < P; k++) {
		if (free_at[k] > out->step_s)
			out->step_s = free_at[k];
		busy += out->busy_s[k];
	}
	out->bubble = out->step_s > 0 ? 1.0 - busy / (P * out->step_s) : 0;
exit:
	free(fend);
	free(bend);
	free(next);
	free(free_at);
	return rc;
}
