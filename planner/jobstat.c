/* The planner's view of training jobs from their metrics (sky_jobstat.h). */
#include "sky_jobstat.h"

#include "sky_json.h"

#include <stdio.h>
#include <string.h>

static sky_jobstat_refused *refused_of(sky_jobstat *t, const char *job, int add, double now)
{
	for (int i = 0; i < t->n_refused; i++)
		if (!strcmp(t->refused[i].job, job))
			return &t->refused[i];
	if (!add)
		return NULL;
	int at = t->n_refused;
	if (at == SKY_JOBSTAT_REFUSE_JOBS) { /* forget the job refused longest ago */
		at = 0;
		for (int i = 1; i < t->n_refused; i++)
			at = t->refused[i].seen < t->refused[at].seen ? i : at;
	} else {
		t->n_refused++;
	}
	memset(&t->refused[at], 0, sizeof t->refused[at]);
	snprintf(t->refused[at].job, sizeof t->refused[at].job, "%s", job);
	(void)now;
	return &t->refused[at];
}

void sky_jobstat_refuse(sky_jobstat *t, const char *job, const char *reason, double now)
{
	if (!sky_topic_segment_ok(job) || !reason || !reason[0])
		return;
	sky_jobstat_refused *e = refused_of(t, job, 1, now);
	e->seen = now;
	t->changed = 1;
	for (int i = 0; i < e->n; i++)
		if (!strcmp(e->r[i].reason, reason)) {
			e->r[i].count++;
			return;
		}
	if (e->n == SKY_JOBSTAT_REFUSE_REASONS)
		return;
	snprintf(e->r[e->n].reason, sizeof e->r[0].reason, "%s", reason);
	e->r[e->n++].count = 1;
}

long sky_jobstat_refused_n(const sky_jobstat *t, const char *job, const char *reason)
{
	const sky_jobstat_refused *e = refused_of((sky_jobstat *)t, job, 0, 0);
	for (int i = 0; e && i < e->n; i++)
		if (!strcmp(e->r[i].reason, reason))
			return e->r[i].count;
	return 0;
}

int sky_jobstat_on_metrics(sky_jobstat *t, const char *job, const char *board, int stage,
			   int64_t epoch, const char *buf, size_t len, double now)
{
	sky_diag d;
	if (len > SKY_METRICS_MAX_BYTES || !sky_topic_segment_ok(board) || stage < 0)
		return SKY_EFORMAT;
	cJSON *doc = sky_json_parse(buf, len, &d);
	int step = 0, steps = 0;
	/* a serving stage's metrics count batches (runtime/sky_servejob.h) */
	int infer = doc && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "infer"));
	/* the board is the topic's, its stage and epoch the plan's: whatever
	 * the payload says about them is not read */
	if (!doc || sky_json_int(doc, infer ? "batch" : "step", 0, 1 << 30, &step, "metrics", NULL) != 0) {
		sky_json_free(doc);
		return SKY_EFORMAT;
	}
	sky_json_int(doc, "steps", 0, 1 << 30, &steps, "metrics", NULL);
	sky_jobstat_row *r = NULL;
	for (int i = 0; i < t->n && !r; i++)
		if (!strcmp(t->row[i].job, job) && t->row[i].stage == stage &&
		    !strcmp(t->row[i].board, board))
			r = &t->row[i];
	if (!r) {
		if (t->n == SKY_JOBSTAT_MAX) { /* forget the row heard from longest ago */
			int old = 0;
			for (int i = 1; i < t->n; i++)
				old = t->row[i].seen < t->row[old].seen ? i : old;
			t->row[old] = t->row[--t->n];
		}
		r = &t->row[t->n++];
		memset(r, 0, sizeof *r);
		snprintf(r->job, sizeof r->job, "%s", job);
		snprintf(r->board, sizeof r->board, "%s", board);
		r->stage = stage;
	}
	if (epoch && epoch != r->epoch) { /* a new plan of the job: start the row again */
		memset(r->drops, 0, sizeof r->drops);
		r->stall[0] = '\0';
		r->done = r->has_loss = 0;
		r->replica = 0;
	}
	snprintf(r->board, sizeof r->board, "%s", board);
	r->infer = infer;
	r->epoch = epoch ? epoch : r->epoch;
	r->seen = now;
	if (steps)
		r->steps = steps;
	if (step >= r->step)
		r->step = step;
	double v;
	if (sky_json_num(doc, "loss", -1e30, 1e30, &v, "metrics", NULL) == 0)
		r->loss = v, r->has_loss = 1;
	if (sky_json_num(doc, infer ? "stage_s" : "step_s", 0, 1e9, &v, "metrics", NULL) == 0)
		r->step_s = v;
	if (sky_json_num(doc, "busy", 0, 1e3, &v, "metrics", NULL) == 0)
		r->busy = v;
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "done")))
		r->done = 1;
	const cJSON *dr = cJSON_GetObjectItemCaseSensitive(doc, "drops");
	if (cJSON_IsObject(dr) && sky_json_print(dr, r->drops, sizeof r->drops) < 0)
		snprintf(r->drops, sizeof r->drops, "{}");
	if (cJSON_GetObjectItemCaseSensitive(doc, "stall"))
		sky_json_str(doc, "message", r->stall, sizeof r->stall, "metrics", NULL);
	sky_json_free(doc);
	t->changed = 1;
	return 0;
}

void sky_jobstat_set_replica(sky_jobstat *t, const char *job, const char *board, int stage, int r)
{
	for (int i = 0; i < t->n; i++)
		if (!strcmp(t->row[i].job, job) && t->row[i].stage == stage &&
		    !strcmp(t->row[i].board, board) && t->row[i].replica != r) {
			t->row[i].replica = r;
			t->changed = 1;
		}
}

void sky_jobstat_add_replan(sky_jobstat *t, const sky_jobstat_replan *r)
{
	if (t->n_replans == SKY_JOBSTAT_REPLANS) {
		memmove(t->replan, t->replan + 1, (SKY_JOBSTAT_REPLANS - 1) * sizeof t->replan[0]);
		t->n_replans--;
	}
	t->replan[t->n_replans++] = *r;
	t->changed = 1;
}

void sky_jobstat_replan_lost(sky_jobstat *t, const char *job, double lost_s)
{
	for (int i = t->n_replans - 1; i >= 0; i--)
		if (!strcmp(t->replan[i].job, job)) {
			t->replan[i].lost_s = lost_s;
			t->changed = 1;
			return;
		}
}

void sky_jobstat_replan_replayed(sky_jobstat *t, const char *job, long n)
{
	for (int i = t->n_replans - 1; i >= 0; i--)
		if (!strcmp(t->replan[i].job, job)) {
			t->replan[i].replayed = n;
			t->changed = 1;
			return;
		}
}

void sky_jobstat_set_paused(sky_jobstat *t, const char *job, int paused)
{
	int at = -1, free_at = -1;
	for (int i = 0; i < 16; i++) {
		if (!strcmp(t->paused[i], job))
			at = i;
		else if (!t->paused[i][0] && free_at < 0)
			free_at = i;
	}
	if (paused && at < 0 && free_at >= 0)
		snprintf(t->paused[free_at], sizeof t->paused[free_at], "%s", job);
	else if (!paused && at >= 0)
		t->paused[at][0] = '\0';
	t->changed = 1;
}

/* s escaped as a JSON string body into e (cut at a whole escape when
 * longer): job, board, stall and reason came from outside (a board's
 * metrics, a topic) */
#define ESC(e, s) (sky_json_escape((s), (e), sizeof(e)), (e))

int sky_jobstat_to_json(const sky_jobstat *t, char *buf, size_t cap)
{
	size_t n = 0;
	/* 6 bytes an escaped byte at most */
	char e_job[6 * SKY_TOPIC_SEGMENT_MAX + 8], e_board[6 * SKY_TOPIC_SEGMENT_MAX + 8];
	char e_text[6 * 200 + 8];
#define PUT(...) \
	do { \
		int w_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__); \
		if (w_ < 0 || (n += (size_t)w_) >= cap) \
			return SKY_ERANGE; \
	} while (0)
	PUT("{\"jobs\":[");
	int first_job = 1;
	for (int i = 0; i < t->n; i++) {
		const sky_jobstat_row *r = &t->row[i];
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = !strcmp(t->row[j].job, r->job);
		if (seen)
			continue; /* its rows went out with the first one */
		/* the stages of its newest plan: a re-plan over fewer boards
		 * leaves rows of stages that no longer exist */
		int64_t newest = r->epoch;
		for (int j = i + 1; j < t->n; j++)
			if (!strcmp(t->row[j].job, r->job) && t->row[j].epoch > newest)
				newest = t->row[j].epoch;
		PUT("%s{\"job\":\"%s\",\"epoch\":%lld,\"steps\":%d,%s\"stages\":[",
		    first_job ? "" : ",", ESC(e_job, r->job), (long long)newest, r->steps,
		    r->infer ? "\"infer\":true," : "");
		first_job = 0;
		int first = 1;
		for (int j = i; j < t->n; j++) {
			const sky_jobstat_row *s = &t->row[j];
			if (strcmp(s->job, r->job) || s->epoch < newest)
				continue;
			PUT("%s{\"stage\":%d,\"board\":\"%s\",\"step\":%d,", first ? "" : ",", s->stage,
			    ESC(e_board, s->board), s->step);
			if (s->replica > 0)
				PUT("\"replica\":%d,", s->replica);
			if (s->has_loss)
				PUT("\"loss\":%.9g,", s->loss);
			PUT("\"step_s\":%.6f,\"busy\":%.4f,\"done\":%s,\"stall\":\"%s\"", s->step_s,
			    s->busy, s->done ? "true" : "false", ESC(e_text, s->stall));
			PUT(",\"drops\":%s}", s->drops[0] ? s->drops : "{}");
			first = 0;
		}
		int paused = 0;
		for (int k = 0; k < 16; k++)
			paused |= !strcmp(t->paused[k], r->job);
		PUT("],\"paused\":%s,\"replans\":[", paused ? "true" : "false");
		first = 1;
		for (int k = 0; k < t->n_replans; k++) {
			const sky_jobstat_replan *p = &t->replan[k];
			if (strcmp(p->job, r->job))
				continue;
			PUT("%s{\"generation\":%d,\"epoch\":%lld,\"reason\":\"%s\"", first ? "" : ",",
			    p->generation, (long long)p->epoch, ESC(e_text, p->reason));
			PUT(",\"resume_step\":%d,\"lost_steps\":%d,\"lost_s\":%.3f,\"at\":%lld",
			    p->resume_step, p->lost_steps, p->lost_s, (long long)p->at_unix);
			if (p->replayed >= 0)
				PUT(",\"replayed\":%ld", p->replayed);
			PUT("}");
			first = 0;
		}
		PUT("],\"refused\":{");
		const sky_jobstat_refused *e = refused_of((sky_jobstat *)t, r->job, 0, 0);
		for (int k = 0; e && k < e->n; k++)
			PUT("%s\"%s\":%ld", k ? "," : "", e->r[k].reason, e->r[k].count);
		PUT("}}");
	}
	/* jobs with refusals and no metrics yet (or any more) */
	for (int i = 0; i < t->n_refused; i++) {
		const sky_jobstat_refused *e = &t->refused[i];
		int rows = 0;
		for (int j = 0; j < t->n && !rows; j++)
			rows = !strcmp(t->row[j].job, e->job);
		if (rows)
			continue;
		PUT("%s{\"job\":\"%s\",\"epoch\":0,\"steps\":0,\"stages\":[],\"paused\":false,"
		    "\"replans\":[],\"refused\":{",
		    first_job ? "" : ",", e->job);
		first_job = 0;
		for (int k = 0; k < e->n; k++)
			PUT("%s\"%s\":%ld", k ? "," : "", e->r[k].reason, e->r[k].count);
		PUT("}}");
	}
	PUT("]}\n");
#undef PUT
#undef ESC
	return (int)n;
}
