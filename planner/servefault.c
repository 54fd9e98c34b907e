/* Serving jobs through faults: the unanswered-request table and its
 * replay (sky_servefault.h). */
#include "sky_servefault.h"

#include "sky_json.h"

#include <stdio.h>
#include <string.h>

#define RING(i) ((i) % SKY_SF_MAX_REQS)

void sky_servefault_init(sky_servefault *f)
{
	memset(f, 0, sizeof *f);
	f->next_seq = 1;
}

const char *sky_servefault_reason_name(int why)
{
	return why == SKY_SF_EVICTED ? "evicted" : why == SKY_SF_EXPIRED ? "expired" : "?";
}

static int job_index(const sky_servefault *f, const char *job)
{
	for (int i = 0; i < f->n_jobs; i++)
		if (!strcmp(f->jobs[i].job, job))
			return i;
	return -1;
}

sky_sf_job *sky_servefault_job(sky_servefault *f, const char *job)
{
	int i = job_index(f, job);
	return i < 0 ? NULL : &f->jobs[i];
}

int sky_servefault_follow(sky_servefault *f, const char *job, int64_t epoch, int n_stages,
			  int queue, int replay, double fault_s)
{
	if (n_stages < 1 || n_stages > SKY_SF_MAX_STAGES)
		return SKY_ERANGE;
	int i = job_index(f, job);
	if (i < 0) {
		if (f->n_jobs == SKY_SF_MAX_JOBS)
			return SKY_ERANGE;
		i = f->n_jobs++;
		memset(&f->jobs[i], 0, sizeof f->jobs[i]);
		snprintf(f->jobs[i].job, sizeof f->jobs[i].job, "%s", job);
	}
	sky_sf_job *j = &f->jobs[i];
	j->n_prev_stages = j->n_stages;
	j->epoch = epoch;
	j->n_stages = n_stages;
	j->window = queue / 2 > 1 ? queue / 2 : 1;
	memset(j->ready, 0, sizeof j->ready);
	j->n_ready = 0;
	j->ready0_seq = 0;
	j->replay = replay;
	j->replay_done = 0;
	j->fault_s = replay ? fault_s : 0;
	j->first_answer = 0;
	j->replayed_epoch = 0;
	if (j->boards[0][0]) {
		memcpy(j->prev_first, j->boards[0], sizeof j->prev_first);
		memcpy(j->prev_last, j->boards[j->n_prev_stages - 1], sizeof j->prev_last);
	}
	memset(j->boards, 0, sizeof j->boards);
	return 0;
}

int sky_servefault_boards(sky_servefault *f, const char *job, const char *const *boards,
			  int n_stages)
{
	sky_sf_job *j = sky_servefault_job(f, job);
	if (!j || n_stages != j->n_stages)
		return SKY_EINVAL;
	for (int k = 0; k < n_stages; k++) {
		if (!sky_topic_segment_ok(boards[k]))
			return SKY_EINVAL;
		snprintf(j->boards[k], sizeof j->boards[k], "%s", boards[k]);
	}
	return 0;
}

/* The tracked request of (job, client, id), or NULL. */
static sky_sf_req *find(sky_servefault *f, int job, const char *client, const char *id)
{
	for (uint64_t i = f->head; i < f->tail; i++) {
		sky_sf_req *r = &f->req[RING(i)];
		if (r->job == job && !strcmp(r->id, id) && !strcmp(r->client, client))
			return r;
	}
	return NULL;
}

/* Lets the oldest request go (counted if it had no answer). */
static void pop(sky_servefault *f, sky_sf_reason why,
		void (*log_drop)(void *, const sky_sf_job *, const sky_sf_req *, sky_sf_reason),
		void *ctx)
{
	sky_sf_req *r = &f->req[RING(f->head)];
	if (!r->answered && r->job >= 0 && r->job < f->n_jobs) {
		f->jobs[r->job].dropped[why]++;
		if (log_drop)
			log_drop(ctx, &f->jobs[r->job], r, why);
	}
	f->head++;
	f->bhead = f->head < f->tail ? f->req[RING(f->head)].off : f->btail;
}

/* The request's id, if it has a readable one. */
static int read_id(const void *p, size_t len, char *id, size_t cap)
{
	sky_diag d;
	cJSON *doc = sky_json_parse(p, len, &d);
	int rc = doc ? sky_json_str(doc, "id", id, cap, "request", NULL) : SKY_EFORMAT;
	sky_json_free(doc);
	return rc == 0 && sky_infer_id_ok(id) ? 0 : SKY_EFORMAT;
}

int sky_servefault_on_req(sky_servefault *f, const char *job, const char *client,
			  const void *p, size_t len, double now,
			  void (*log_drop)(void *, const sky_sf_job *, const sky_sf_req *,
					   sky_sf_reason),
			  void *log_ctx)
{
	int ji = job_index(f, job);
	char id[SKY_INFER_ID_MAX + 1];
	if (ji < 0)
		return 0;
	if (len > SKY_SF_MAX_REQ_BYTES) {
		f->jobs[ji].untracked++;
		return SKY_ERANGE;
	}
	if (read_id(p, len, id, sizeof id) != 0 || find(f, ji, client, id))
		return 0;
	/* room: its bytes contiguous (skip the ring's end if they would wrap) */
	uint64_t off = f->btail, pos = off % SKY_SF_BYTES;
	if (pos + len > SKY_SF_BYTES)
		off += SKY_SF_BYTES - pos;
	if (f->head == f->tail)
		f->bhead = off;
	while (f->head < f->tail &&
	       (f->tail - f->head >= SKY_SF_MAX_REQS || off + len - f->bhead > SKY_SF_BYTES))
		pop(f, SKY_SF_EVICTED, log_drop, log_ctx);
	if (f->head == f->tail)
		f->bhead = off;
	sky_sf_req *r = &f->req[RING(f->tail)];
	memset(r, 0, sizeof *r);
	r->seq = f->next_seq++;
	r->off = off;
	r->len = (uint32_t)len;
	r->job = ji;
	r->t_in = now;
	snprintf(r->client, sizeof r->client, "%s", client);
	snprintf(r->id, sizeof r->id, "%s", id);
	memcpy(f->bytes + off % SKY_SF_BYTES, p, len);
	f->btail = off + len;
	f->tail++;
	f->jobs[ji].tracked++;
	return 1;
}

int sky_servefault_on_resp(sky_servefault *f, const char *job, const char *client,
			   const char *sender, const void *p, size_t len, double now,
			   double *lost_s)
{
	int ji = job_index(f, job);
	if (ji < 0)
		return 0;
	const sky_sf_job *jj = &f->jobs[ji];
	/* who answers: the last stage, the first (its refusals) or the planner */
	if (!jj->boards[0][0] ||
	    (strcmp(sender, jj->boards[jj->n_stages - 1]) != 0 &&
	     strcmp(sender, jj->boards[0]) != 0 && strcmp(sender, SKY_TOPIC_PLANNER_CN) != 0 &&
	     (!jj->prev_last[0] || strcmp(sender, jj->prev_last) != 0) &&
	     (!jj->prev_first[0] || strcmp(sender, jj->prev_first) != 0))) {
		f->jobs[ji].refused_sender++;
		return SKY_EAUTH;
	}
	sky_diag d;
	char id[SKY_INFER_ID_MAX + 1] = "";
	int64_t epoch = 0;
	if (len > SKY_INFER_RESP_MAX_BYTES)
		return SKY_EFORMAT;
	cJSON *doc = sky_json_parse(p, len, &d);
	if (!doc || sky_json_str(doc, "id", id, sizeof id, "response", NULL) != 0) {
		sky_json_free(doc);
		return SKY_EFORMAT;
	}
	if (cJSON_GetObjectItemCaseSensitive(doc, "epoch"))
		sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &epoch, "response", NULL);
	sky_json_free(doc);
	sky_sf_job *j = &f->jobs[ji];
	sky_sf_req *r = id[0] ? find(f, ji, client, id) : NULL;
	if (r && !r->answered) {
		r->answered = 1;
		j->answered++;
	}
	if (epoch == j->epoch && !j->first_answer) {
		j->first_answer = 1;
		if (j->fault_s > 0) {
			*lost_s = now - j->fault_s;
			return 1;
		}
	}
	return 0;
}

int sky_servefault_on_ready(sky_servefault *f, const char *job, int k, const char *sender,
			    const void *p, size_t len)
{
	sky_sf_job *j = sky_servefault_job(f, job);
	sky_diag d;
	int64_t epoch = 0;
	if (!j || k < 0 || k >= j->n_stages)
		return 0;
	if (!j->boards[k][0] || strcmp(sender, j->boards[k]) != 0) {
		j->refused_sender++;
		return SKY_EAUTH;
	}
	if (sky_infer_ready_parse(p, len, &epoch, &d) != 0 || epoch != j->epoch || j->ready[k])
		return 0;
	j->ready[k] = 1;
	j->n_ready++;
	if (k == 0)
		j->ready0_seq = f->next_seq;
	return 1;
}

int sky_servefault_pump(sky_servefault *f, double now, sky_sf_publish_fn pub, void *ctx,
			void (*log_drop)(void *, const sky_sf_job *, const sky_sf_req *,
					 sky_sf_reason),
			int *finished)
{
	int sent = 0;
	*finished = -1;
	/* the oldest first: the ring is in arrival order (an answered one
	 * that old goes too, uncounted) */
	while (f->head < f->tail && now - f->req[RING(f->head)].t_in >= SKY_SF_MAX_AGE_S)
		pop(f, SKY_SF_EXPIRED, log_drop, ctx);
	for (int ji = 0; ji < f->n_jobs; ji++) {
		sky_sf_job *j = &f->jobs[ji];
		if (!j->replay || j->replay_done || j->n_ready < j->n_stages || !j->ready0_seq ||
		    !j->boards[0][0])
			continue;
		int out = 0, more = 0;
		for (uint64_t i = f->head; i < f->tail; i++) {
			const sky_sf_req *r = &f->req[RING(i)];
			if (r->job == ji && !r->answered && r->replayed_epoch == j->epoch)
				out++;
		}
		for (uint64_t i = f->head; i < f->tail; i++) {
			sky_sf_req *r = &f->req[RING(i)];
			if (r->job != ji || r->answered || r->replayed_epoch == j->epoch ||
			    r->seq >= j->ready0_seq)
				continue;
			if (out >= j->window) {
				more = 1;
				break;
			}
			char topic[SKY_TOPIC_BUF];
			if (sky_topic_job_pair(topic, sizeof topic, j->job, SKY_TOPIC_REPLAY,
					       j->boards[0], r->client) ||
			    pub(ctx, topic, f->bytes + r->off % SKY_SF_BYTES, r->len) != 0)
				return sent;
			r->replayed_epoch = j->epoch;
			j->replayed++;
			j->replayed_epoch++;
			out++;
			sent++;
		}
		if (!more) {
			j->replay_done = 1;
			*finished = ji;
		}
	}
	return sent;
}
