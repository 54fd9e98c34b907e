/* Boards' figures corrected by what their jobs measured (svc_internal.h,
 * sky_calib.h): samples from the stages' metrics, the table kept in
 * <state>/calib.json, and which figures each plan was made from. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_file.h"

#include <stdio.h>
#include <string.h>

static char g_buf[SKY_CALIB_MAX_BYTES]; /* calib.json, read or written (the loop's thread) */

void svc_calib_load(svc *s)
{
	char path[640];
	sky_diag d;
	sky_diag_clear(&d);
	sky_calib_init(&s->calib.t);
	if (svc_state_file(s, "calib.json", path, sizeof path) != 0)
		return;
	long n = sky_file_read(path, g_buf, sizeof g_buf);
	if (n == SKY_ENOTFOUND)
		return;
	if (n < 0 || sky_calib_from_json(&s->calib.t, g_buf, (size_t)n, &d) != 0) {
		SKY_WARN("%s: %s; boards are planned on their probes until their jobs measure them "
			 "again",
			 path, n < 0 ? sky_strerror((int)n) : d.msg);
		return;
	}
	SKY_INFO("%d boards' figures measured by their jobs read from %s", s->calib.t.n, path);
}

void svc_calib_tick(svc *s, double now)
{
	char path[640];
	if (!s->calib.t.changed || now - s->calib.saved_s < 1.0)
		return;
	s->calib.saved_s = now;
	int n = sky_calib_to_json(&s->calib.t, g_buf, sizeof g_buf);
	if (n < 0 || svc_state_file(s, "calib.json", path, sizeof path) != 0 ||
	    sky_file_write(path, g_buf, (size_t)n, 0644) != 0) {
		SKY_WARN("the boards' measured figures are not saved (%s)",
			 n < 0 ? "too many to write" : "cannot write calib.json");
		return;
	}
	s->calib.t.changed = 0;
}

/* The shapes of a job's layers, as boards probe them. */
static void job_shape(const svc_job *j, sky_caps_shape *sh)
{
	memset(sh, 0, sizeof *sh);
	snprintf(sh->name, sizeof sh->name, "%s", j->model.name);
	sh->hidden = j->model.hidden;
	sh->heads = j->model.heads;
	sh->ffn = j->model.ffn;
	sh->seq = j->model.seq;
	sh->batch = j->model.batch;
}

void svc_calib_on_metrics(svc *s, const char *job, const char *board, int stage, int64_t epoch,
			  int first, const unsigned char *p, size_t len)
{
	const sky_reg_board *b = sky_registry_find(&s->reg, board);
	if (first || stage < 0 || !b || !b->has_caps)
		return;
	/* the stage's half-layers and the job's shapes: the followed plan's,
	 * else the assignment the registry took from the signed plan */
	int lo = -1, hi = -1, runs = 0;
	double per_seq = 1; /* the plan's micro-batch against the job's (stage replicas) */
	sky_caps_shape sh = b->caps.shape;
	const run_job *r = svc_follow_find(s, job);
	if (r) {
		/* the stage's own board, or one of its replicas (its own
		 * micro-batches' times are as good a sample) */
		for (int i = 0; i < svc_follow_boards(r) && !runs; i++) {
			int k = -1;
			runs = !strcmp(svc_follow_board(r, i, &k), board) && k == stage;
		}
		if (r->epoch != epoch || stage >= r->n_stages || !runs || r->job.req.infer)
			return;
		lo = r->first[stage], hi = r->last[stage];
		job_shape(&r->job, &sh);
		if (r->micro_batch > 0 && r->micro_batch != sh.batch)
			per_seq = (double)sh.batch / r->micro_batch;
	} else if (!strcmp(b->job, job) && b->epoch == epoch && b->stage == stage) {
		lo = b->first, hi = b->last;
		if (b->plan_batch > 0 && b->plan_batch != sh.batch)
			per_seq = (double)sh.batch / b->plan_batch;
	}
	/* its probe must be of the same shapes to be corrected by this */
	if (lo < 0 || hi < lo || !sky_caps_shape_eq(&b->caps.shape, &sh))
		return;
	sky_calib_sample smp;
	if (sky_calib_sample_from_metrics((const char *)p, len, lo, hi, &smp) != 1)
		return;
	/* measured at the plan's micro-batch of B sequences, folded at the
	 * job's (the cost model's linear rule, sky_plan.h) */
	smp.fwd_s *= per_seq;
	smp.bwd_s *= per_seq;
	int rc = sky_calib_fold(&s->calib.t, board, &sh, &b->caps.fp32, &smp, job,
				sky_clock_unix());
	const sky_calib_entry *e = sky_calib_find(&s->calib.t, board, &sh);
	long k = e ? e->refused : 0;
	/* the 1st, 10th, 100th ... refusal of a board: a board off by that
	 * much every step would flood the log */
	while (k >= 10 && k % 10 == 0)
		k /= 10;
	if (rc == 0 && k == 1 && (smp.fwd_s > 0 || smp.bwd_s > 0))
		SKY_WARN("job %s: stage %d (board %s) measured %.3f ms forward, %.3f ms backward a "
			 "micro-batch, over %.0fx off its probe: not folded into its figures (%ld "
			 "such so far)",
			 job, stage, board, 1e3 * smp.fwd_s, 1e3 * smp.bwd_s, SKY_CALIB_ABSURD,
			 e->refused);
}

int svc_calib_times(const svc *s, const sky_reg_board *b, const sky_caps_shape *want,
		    sky_caps_times *out)
{
	return sky_calib_times(&s->calib.t, b->id, want, &b->caps.fp32, out);
}

void svc_calib_plan_figures(svc *s, const char *job, int64_t epoch)
{
	const sky_fleet *f = &s->plan.fleet;
	char path[700];
	size_t n = 0, cap = sizeof g_buf;
	int used = 0, wrote = 1;
#define PUT(...) \
	do { \
		int w_ = snprintf(g_buf + n, n < cap ? cap - n : 0, __VA_ARGS__); \
		if (w_ < 0 || (n += (size_t)w_) >= cap) \
			wrote = 0, n = cap; \
	} while (0)
	for (int i = 0; i < f->n; i++)
		used += s->calib.used[i];
	const char *all = used == 0 ? "probe" : used == f->n ? "calibrated" : "mixed";
	PUT("{\"job\":\"%s\",\"epoch\":%lld,", job, (long long)epoch);
	/* the plan's shape (stage replicas, micro-batching) and the step's
	 * lower bound over every plan of the job on this fleet; then
	 * "figures" and "boards", next to each other as before */
	const sky_planmsg *pm = &s->plan.msg;
	if (!strcmp(pm->job, job) && pm->epoch == epoch)
		PUT("\"stages\":%d,\"replicas\":%d,\"micro_batch\":%d,\"micro_batches\":%d,", pm->n_stages,
		    pm->n_reps, pm->shape.batch, pm->micro_batches);
	if (s->plan.bound_s > 0)
		PUT("\"step_s_lower_bound\":%.9g,", s->plan.bound_s);
	PUT("\"figures\":\"%s\",\"boards\":[", all);
	for (int i = 0; i < f->n && wrote; i++) {
		const sky_board *fb = &f->board[i];
		const sky_reg_board *b = sky_registry_find(&s->reg, fb->id);
		const sky_calib_entry *e =
			b && s->calib.used[i] ? sky_calib_find(&s->calib.t, fb->id, &b->caps.shape) : NULL;
		const sky_caps_times *pr = b ? &b->caps.fp32 : NULL;
		PUT("%s{\"id\":\"%s\",\"figures\":\"%s\",\"fwd_s\":%.9g,\"bwd_s\":%.9g", i ? "," : "",
		    fb->id, e ? "calibrated" : "probe", fb->fwd_s, fb->bwd_s);
		if (pr)
			PUT(",\"probe_fwd_s\":%.9g,\"probe_bwd_s\":%.9g", pr->fwd_attn_s + pr->fwd_ffn_s,
			    pr->bwd_attn_s + pr->bwd_ffn_s);
		if (e)
			PUT(",\"from_job\":\"%s\",\"samples\":%d", e->job, e->n_fwd);
		PUT("}");
	}
	PUT("]}\n");
#undef PUT
	if (!wrote || snprintf(path, sizeof path, "%s/plans/%s.figures.json", s->state_dir, job) >=
			      (int)sizeof path ||
	    sky_file_write(path, g_buf, n, 0644) != 0)
		SKY_WARN("job %s: which figures its plan used is not saved", job);
	SKY_INFO("job %s epoch %lld planned on %s figures (%d of %d boards measured by their jobs)",
		 job, (long long)epoch, all, used, f->n);
}
