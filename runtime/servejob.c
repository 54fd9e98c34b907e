/* A board's serving job (see sky_servejob.h): requests in on the first
 * stage, int8 frames between stages, logits out on the last. */
#include "sky_servejob.h"

#include "sky_clock.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_slice.h"
#include "sky_trainjob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int slots_for(const sky_planmsg *p)
{
	int n = p->infer.queue / p->infer.batch + 2;
	return n < 4 ? 4 : n > SKY_SERVEJOB_RING ? SKY_SERVEJOB_RING : n;
}

/* The job buffers in one block: queue entries and their tokens, inbound
 * slots, the outbound payload and wire frame. Returns the bytes; with
 * mem, also points j's buffers into it. */
static size_t buffers(sky_servejob *j, const sky_model_cfg *c, int first, unsigned char *mem)
{
	size_t o = 0, S = (size_t)c->seq;
	int qn = first ? j->plan->infer.queue : 0, ns = first ? 0 : slots_for(j->plan);
#define TAKE(ptr, bytes)                                                                          \
	do {                                                                                      \
		if (mem)                                                                          \
			ptr = (void *)(mem + o);                                                  \
		o += ((bytes) + 15) & ~(size_t)15;                                                \
	} while (0)
	TAKE(j->q, sizeof(sky_servejob_qent) * (size_t)qn);
	for (int i = 0; i < qn; i++) {
		TAKE(j->q[i].tokens, S * sizeof(int32_t));
		TAKE(j->q[i].mask, S * sizeof(int32_t));
	}
	for (int i = 0; i < ns; i++)
		TAKE(j->ring[i].payload, j->payload_bytes);
	TAKE(j->out_payload, j->payload_bytes);
	TAKE(j->wire, j->wire_cap);
#undef TAKE
	if (mem) {
		j->q_cap = qn;
		j->n_slots = ns;
	}
	return o;
}

static int threads_of(const sky_planmsg *p, int threads)
{
	int t = p->infer.threads > 0 ? p->infer.threads : threads;
	return t < 1 ? 1 : t > SKY_POOL_MAX_THREADS ? SKY_POOL_MAX_THREADS : t;
}

int64_t sky_servejob_bytes(const sky_planmsg *p, int stage, int threads, sky_diag *d)
{
	sky_model_cfg c;
	if (stage < 0 || stage >= p->n_stages || !p->infer.on)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: no serving stage %d", p->job, stage);
	if (sky_trainjob_model(p, &c) != 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "plan %s: model %s is not known to this build",
				    p->job, p->shape.name);
	int64_t st = sky_serve_bytes(&c, p->stages[stage].first, p->stages[stage].last,
				     threads_of(p, threads), d);
	if (st < 0)
		return st;
	static sky_servejob j; /* only its pointers are written, with mem NULL */
	j.plan = p;
	j.payload_bytes = sky_serve_payload_bytes(&c);
	j.wire_cap = SKY_FRAME_HEADER_BYTES + j.payload_bytes + SKY_FRAME_SEAL_OVERHEAD;
	return st + (int64_t)buffers(&j, &c, stage == 0, NULL);
}

int sky_servejob_setup(sky_servejob *j, const sky_planmsg *p, int stage, const char *board,
		       const char *state_dir, int threads, const unsigned char *key,
		       const sky_transport_net *net, sky_diag *d)
{
	char path[1024], sha[SKY_SLICE_SHA_HEX + 1];
	int64_t bytes = 0;
	sky_model_cfg c;
	int rc;
	memset(j, 0, sizeof *j);
	j->plan = p;
	j->stage = stage;
	j->n_stages = p->n_stages;
	sky_servewin_init(&j->win, p->epoch);
	snprintf(j->job, sizeof j->job, "%s", p->job);
	snprintf(j->board, sizeof j->board, "%s", board);
	if (net)
		j->net = *net;
	if (!p->infer.on || stage < 0 || stage >= p->n_stages)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: no serving stage %d", p->job, stage);
	if (sky_trainjob_model(p, &c) != 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "plan %s: model %s is not known to this build",
				    p->job, p->shape.name);
	const sky_plan_stage *ps = &p->stages[stage];
	if (sky_slice_path(path, sizeof path, state_dir, ps->slice.sha256) != 0)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: bad slice path", p->job);
	if ((rc = sky_slice_sha256_file(path, sha, &bytes, NULL)) != 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "slice %.12s... is not in the cache (%s)",
				    ps->slice.sha256, path);
	if (strcmp(sha, ps->slice.sha256) != 0 || bytes != ps->slice.bytes)
		return sky_diag_set(d, SKY_EAUTH,
				    "slice %s in the cache has SHA-256 %s and %lld bytes, the plan "
				    "says %lld bytes",
				    path, sha, (long long)bytes, (long long)ps->slice.bytes);
	if ((rc = sky_serve_open(&j->st, path, &c, ps->first, ps->last, threads_of(p, threads), d)))
		return rc;
	j->sealed = key != NULL;
	if (p->infer.sealed && !key)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: sealed frames but no key", p->job);
	if ((rc = sky_frame_key_init(&j->send_key, key)) != 0 ||
	    (rc = sky_frame_key_init(&j->recv_key, key)) != 0) {
		sky_servejob_free(j);
		return sky_diag_set(d, rc, "plan %s: frame key refused", p->job);
	}
	j->payload_bytes = sky_serve_payload_bytes(&c);
	j->wire_cap = sky_frame_packed_bytes(&j->send_key, j->payload_bytes);
	size_t need = buffers(j, &c, stage == 0, NULL);
	j->mem = calloc(1, need); /* the one block of job buffers, when the plan is taken */
	if (!j->mem) {
		sky_servejob_free(j);
		return sky_diag_set(d, SKY_ENOMEM, "plan %s: %zu bytes of job buffers", p->job, need);
	}
	buffers(j, &c, stage == 0, j->mem);
	/* what it sends names it (the sender level, sky_topics.h); what it
	 * takes comes from any sender (a filter) and is checked against the
	 * plan per message (sky_servejob_on_msg) */
	if (stage > 0)
		sky_topic_stage(j->topic_in, sizeof j->topic_in, p->job, stage, 0, NULL);
	if (stage < p->n_stages - 1)
		sky_topic_stage(j->topic_out, sizeof j->topic_out, p->job, stage + 1, 0, j->board);
	sky_topic_job_pair(j->topic_req, sizeof j->topic_req, p->job, SKY_TOPIC_REQ, j->board, NULL);
	sky_topic_job_pair(j->topic_replay, sizeof j->topic_replay, p->job, SKY_TOPIC_REPLAY,
			   j->board, NULL);
	sky_topic_stage_leaf(j->topic_ready, sizeof j->topic_ready, p->job, stage, SKY_TOPIC_READY,
			     j->board);
	sky_topic_job_to(j->topic_metrics, sizeof j->topic_metrics, p->job, SKY_TOPIC_METRICS,
			 j->board);
	sky_topic_stage_leaf(j->topic_done, sizeof j->topic_done, p->job, 0, SKY_TOPIC_DONE,
			     j->board);
	sky_servebatch_init(&j->flight);
	j->rule = (sky_servebatch_rule){.batch = p->infer.batch, .wait_s = p->infer.wait_ms / 1000.0,
					.depth = p->n_stages};
	j->stale_s = sky_servebatch_stale_s(p->n_stages, p->infer.batch, p->infer.predicted_seq_s);
	/* a board's batch numbers start from the clock, so a restarted first
	 * stage does not repeat the numbers the later stages saw last */
	j->next_batch = (uint64_t)sky_clock_unix() << 20;
	return 0;
}

void sky_servejob_free(sky_servejob *j)
{
	if (!j)
		return;
	sky_serve_close(&j->st);
	sky_frame_key_free(&j->send_key);
	sky_frame_key_free(&j->recv_key);
	free(j->mem);
	j->mem = NULL;
}

/* ---- answers --------------------------------------------------------------- */

static void publish_resp(sky_servejob *j, const char *client)
{
	char topic[SKY_TOPIC_BUF];
	sky_diag d;
	sky_diag_clear(&d);
	int n = sky_infer_resp_encode(&j->resp, j->msg, sizeof j->msg, &d);
	if (n < 0 ||
	    sky_topic_job_pair(topic, sizeof topic, j->job, SKY_TOPIC_RESP, client, j->board) != 0) {
		SKY_WARN("job %s: response to %s not sent: %s", j->job, client, d.msg);
		return;
	}
	if (j->net.publish(j->net.ctx, topic, j->msg, (size_t)n, 1, 0) == 0)
		j->responses++;
}

static void refuse(sky_servejob *j, const char *client, const char *id, int code, const char *why)
{
	sky_infer_resp_error(&j->resp, id, j->job, code, why);
	j->refused[code]++;
	SKY_INFO("job %s: request %s from %s refused (%s): %s", j->job, id && id[0] ? id : "\"\"",
		 client, sky_infer_code_name(code), why);
	publish_resp(j, client);
}

/* ---- the first stage: requests ----------------------------------------------- */

/* FNV-1a over client, a NUL and id: a taken request's key. */
static uint64_t taken_key(const char *client, const char *id)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *c = client;; c++) {
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
		if (!*c)
			break;
	}
	for (const char *c = id; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	return h;
}

static int was_taken(const sky_servejob *j, uint64_t key)
{
	long n = j->n_taken < SKY_SERVEJOB_TAKEN ? j->n_taken : SKY_SERVEJOB_TAKEN;
	for (long i = 0; i < n; i++)
		if (j->taken[i] == key)
			return 1;
	return 0;
}

/* A request from client; replay: the planner's copy after a re-plan,
 * dropped if this stage already took the client's own. */
static void on_request(sky_servejob *j, const char *client, const unsigned char *p, size_t len,
		       int replay)
{
	sky_diag d;
	sky_diag_clear(&d);
	const sky_model_cfg *c = &j->st.cfg;
	int allowed = sky_planmsg_client_ok(j->plan, client);
	if (j->q_len >= j->q_cap) {
		/* decode into a scratch entry only to learn the id */
		static int32_t tk[SKY_CAPS_MAX_DIM], mk[SKY_CAPS_MAX_DIM];
		sky_infer_req r = {.tokens = tk, .mask = mk, .cap = c->seq};
		int code;
		sky_infer_req_decode((const char *)p, len, c->seq, c->vocab, &r, &code, NULL);
		if (!allowed)
			refuse(j, client, r.id, SKY_INFER_NOT_ALLOWED,
			       "this client is not allowed on the job");
		else
			refuse(j, client, r.id, SKY_INFER_BUSY, "the first stage's queue is full");
		return;
	}
	sky_servejob_qent *e = &j->q[(j->q_head + j->q_len) % j->q_cap];
	sky_infer_req r = {.tokens = e->tokens, .mask = e->mask, .cap = c->seq};
	int code = SKY_INFER_MALFORMED;
	int rc = sky_infer_req_decode((const char *)p, len, c->seq, c->vocab, &r, &code, &d);
	if (!allowed) {
		char why[160];
		snprintf(why, sizeof why, "client %s is not allowed on job %s", client, j->job);
		refuse(j, client, r.id, SKY_INFER_NOT_ALLOWED, why);
		return;
	}
	if (rc) {
		refuse(j, client, r.id, code, d.msg);
		return;
	}
	uint64_t key = taken_key(client, r.id);
	if (replay && was_taken(j, key)) {
		j->replay_dups++;
		SKY_DEBUG("job %s: replay of %s from %s dropped: already taken", j->job, r.id, client);
		return;
	}
	j->replays += replay;
	j->taken[j->n_taken++ % SKY_SERVEJOB_TAKEN] = key;
	snprintf(e->client, sizeof e->client, "%s", client);
	snprintf(e->id, sizeof e->id, "%s", r.id);
	e->n = r.n;
	e->t_in = sky_clock_s();
	j->q_len++;
}

static long drops_sum(const sky_servejob *j)
{
	long n = 0;
	for (int i = 1; i < SKY_TDROP_N; i++)
		n += j->drops[i];
	return n;
}

static void publish_metrics(sky_servejob *j, int n, double stage_s, size_t frame_bytes)
{
	char *b = j->msg;
	j->drops_said = drops_sum(j);
	j->said_s = sky_clock_s();
	size_t cap = sizeof j->msg;
	int o = snprintf(b, cap,
			 "{\"v\":1,\"job\":\"%s\",\"epoch\":%lld,\"stage\":%d,\"board\":\"%s\","
			 "\"infer\":true,\"batch\":%llu,\"requests\":%d,\"stage_s\":%.6f,"
			 "\"queue\":%d,\"frame_bytes\":%zu,\"frames_in\":%ld,\"frames_out\":%ld,"
			 "\"responses\":%ld,\"ring_full\":%ld,\"replays\":%ld,\"replay_dups\":%ld,"
			 "\"refused\":{",
			 j->job, (long long)j->plan->epoch, j->stage, j->board,
			 (unsigned long long)j->batches, n, stage_s, j->q_len, frame_bytes,
			 j->frames_in, j->frames_out, j->responses, j->ring_full, j->replays,
			 j->replay_dups);
	int first = 1;
	for (int i = 1; i < SKY_INFER_NCODES && o > 0 && (size_t)o < cap; i++)
		if (j->refused[i]) {
			o += snprintf(b + o, cap - (size_t)o, "%s\"%s\":%ld", first ? "" : ",",
				      sky_infer_code_name(i), j->refused[i]);
			first = 0;
		}
	if (o > 0 && (size_t)o < cap)
		o += snprintf(b + o, cap - (size_t)o, "},\"drops\":{");
	first = 1;
	for (int i = 1; i < SKY_TDROP_N && o > 0 && (size_t)o < cap; i++)
		if (j->drops[i]) {
			o += snprintf(b + o, cap - (size_t)o, "%s\"%s\":%ld", first ? "" : ",",
				      sky_transport_drop_name(i), j->drops[i]);
			first = 0;
		}
	if (o > 0 && (size_t)o < cap)
		o += snprintf(b + o, cap - (size_t)o, "}}");
	if (o > 0 && (size_t)o < cap)
		j->net.publish(j->net.ctx, j->topic_metrics, b, (size_t)o, 0, 0);
}

/* After the stage ran: the next stage's frame, or the responses. */
static void send_on(sky_servejob *j, double t0)
{
	sky_serve *s = &j->st;
	size_t frame_bytes = 0;
	if (s->is_last) {
		for (int b = 0; b < s->tab.n; b++) {
			sky_infer_resp *r = &j->resp;
			memset(r, 0, sizeof *r);
			snprintf(r->id, sizeof r->id, "%s", s->tab.req[b].id);
			snprintf(r->job, sizeof r->job, "%s", j->job);
			r->ok = 1;
			r->epoch = j->plan->epoch;
			r->n_logits = s->cfg.classes;
			memcpy(r->logits, s->logits + (size_t)b * s->cfg.classes,
			       sizeof(float) * (size_t)s->cfg.classes);
			publish_resp(j, s->tab.req[b].client);
		}
		if (j->n_stages > 1) {
			/* the first stage counts what is in the pipeline (sky_servebatch.h) */
			char done[96];
			int n = snprintf(done, sizeof done, "{\"epoch\":%lld,\"batch\":%llu,\"n\":%d}",
					 (long long)j->plan->epoch, (unsigned long long)s->tab.batch,
					 s->tab.n);
			j->net.publish(j->net.ctx, j->topic_done, done, (size_t)n, 1, 0);
		}
	} else {
		sky_frame_hdr h;
		sky_diag d;
		sky_diag_clear(&d);
		memset(&h, 0, sizeof h);
		h.direction = SKY_FRAME_FWD;
		h.dtype = SKY_FRAME_S8;
		h.ndim = 1;
		h.stage = j->stage + 1;
		h.shape[0] = (uint32_t)j->payload_bytes;
		snprintf(h.job, sizeof h.job, "%s", j->job);
		h.epoch = j->plan->epoch;
		h.step = (int64_t)(s->tab.batch & 0x7fffffffffffffffull);
		int n = sky_frame_pack(&j->send_key, &h, j->out_payload, j->payload_bytes, j->wire,
				       j->wire_cap, &d);
		if (n < 0) {
			SKY_WARN("job %s: batch %llu not sent: %s", j->job,
				 (unsigned long long)s->tab.batch, d.msg);
		} else if (j->net.publish(j->net.ctx, j->topic_out, j->wire, (size_t)n, 1, 0) == 0) {
			j->frames_out++;
			frame_bytes = (size_t)n;
		}
	}
	j->batches++;
	j->requests += s->tab.n;
	double dt = sky_clock_s() - t0;
	j->busy_s += dt;
	publish_metrics(j, s->tab.n, dt, frame_bytes);
}

/* One batch through the stage, as slow as the board's emulated speed says. */
static int forward(sky_servejob *j, const unsigned char *in, unsigned char *out, sky_diag *d)
{
	double w0 = sky_clock_s(), c0 = sky_clock_thread_cpu_s();
	int rc = sky_serve_forward(&j->st, in, out, d);
	if (j->prof)
		sky_profile_stretch_cpu(j->prof, sky_clock_s() - w0, sky_clock_thread_cpu_s() - c0);
	return rc;
}

static void run_first(sky_servejob *j)
{
	sky_serve *s = &j->st;
	const sky_model_cfg *c = &s->cfg;
	const size_t T = (size_t)sky_model_tokens(c), S = (size_t)c->seq;
	double t0 = sky_clock_s();
	int n = j->q_len < j->plan->infer.batch ? j->q_len : j->plan->infer.batch;
	memset(s->ids, 0, T * sizeof *s->ids);
	memset(s->tab.mask, 0, T);
	s->tab.batch = j->next_batch++;
	s->tab.n = n;
	for (int b = 0; b < n; b++) {
		sky_servejob_qent *e = &j->q[j->q_head];
		sky_serve_req *r = &s->tab.req[b];
		memcpy(r->client, e->client, sizeof r->client);
		memcpy(r->id, e->id, sizeof r->id);
		r->n = e->n;
		for (int t = 0; t < e->n; t++) {
			s->ids[b * S + (size_t)t] = e->tokens[t];
			s->tab.mask[b * S + (size_t)t] = (uint8_t)e->mask[t];
		}
		j->q_head = (j->q_head + 1) % j->q_cap;
		j->q_len--;
	}
	/* rows past n: one real token, so every row's softmax has a key */
	for (int b = n; b < c->batch; b++)
		s->tab.mask[(size_t)b * S] = 1;
	sky_diag d;
	sky_diag_clear(&d);
	if (forward(j, NULL, s->is_last ? NULL : j->out_payload, &d) != 0) {
		/* validated on arrival: this does not happen; answer rather than hang */
		for (int b = 0; b < n; b++)
			refuse(j, s->tab.req[b].client, s->tab.req[b].id, SKY_INFER_MALFORMED, d.msg);
		return;
	}
	long sent = j->frames_out;
	send_on(j, t0);
	if (j->frames_out > sent)
		sky_servebatch_sent(&j->flight, s->tab.batch, sky_clock_s());
}

/* The last stage answered a batch: it has left the pipeline. */
static void on_done(sky_servejob *j, const unsigned char *p, size_t len)
{
	int64_t ep = 0;
	uint64_t batch = 0;
	int n = 0;
	if (sky_servebatch_done_parse(p, len, &ep, &batch, &n, NULL) == 0 && ep == j->plan->epoch)
		sky_servebatch_done(&j->flight, batch);
}

/* ---- other stages: frames ------------------------------------------------------ */

static void run_frame(sky_servejob *j, sky_servejob_slot *slot);

/* A frame from sender (the topic's sender level; "" while the topic has
 * none). The step it must carry comes from the sender's window
 * (sky_servewin.h), not from the frame: a batch not above the sender's last
 * is a replay, dropped before it is decrypted. */
static void on_frame(sky_servejob *j, const char *sender, const unsigned char *p, size_t len)
{
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_FORMAT;
	sky_diag d;
	sky_diag_clear(&d);
	j->frames_in++;
	if (sky_frame_decode(p, len < SKY_FRAME_HEADER_BYTES ? len : SKY_FRAME_HEADER_BYTES,
			     j->payload_bytes + 4096u, &h, &d) != 0) {
		j->drops[len < SKY_FRAME_HEADER_BYTES ? SKY_DROP_TRUNCATED : SKY_DROP_FORMAT]++;
		return;
	}
	int64_t step = -1;
	uint64_t batch = (uint64_t)h.step;
	if (h.step < 0 ||
	    sky_servewin_expect(&j->win, sender, j->plan->epoch, batch, &step, &d) != 0) {
		j->drops[h.epoch != j->plan->epoch ? SKY_DROP_EPOCH : SKY_TDROP_DUPLICATE]++;
		SKY_DEBUG("job %s stage %d: frame dropped: %s", j->job, j->stage, d.msg);
		return;
	}
	sky_servejob_slot *slot = NULL;
	for (int i = 0; i < j->n_slots && !slot; i++)
		if (!j->ring[i].full)
			slot = &j->ring[i];
	if (!slot) {
		/* every slot holds a batch (a burst from a faster stage before):
		 * run the oldest now rather than lose requests */
		for (int i = 0; i < j->n_slots; i++)
			if (!slot || j->ring[i].order < slot->order)
				slot = &j->ring[i];
		j->ring_full++;
		run_frame(j, slot);
	}
	sky_frame_expect want = {.job = j->job, .epoch = j->plan->epoch, .step = step,
				 .direction = SKY_FRAME_FWD, .stage = j->stage, .micro_batches = 1,
				 .dtype = SKY_FRAME_S8, .ndim = 1,
				 .shape = {(uint32_t)j->payload_bytes}};
	if (sky_frame_unpack(&j->recv_key, p, len, &want, &h, slot->payload, j->payload_bytes, &why,
			     &d) != 0) {
		j->drops[why]++;
		SKY_DEBUG("job %s stage %d: frame dropped (%s): %s", j->job, j->stage,
			  sky_frame_drop_name(why), d.msg);
		return;
	}
	sky_servewin_take(&j->win, sender, batch);
	slot->full = 1;
	slot->batch = batch;
	slot->order = j->order++;
}

static void run_frame(sky_servejob *j, sky_servejob_slot *slot)
{
	double t0 = sky_clock_s();
	sky_diag d;
	sky_diag_clear(&d);
	int rc = forward(j, slot->payload, j->st.is_last ? NULL : j->out_payload, &d);
	slot->full = 0;
	if (rc) {
		j->drops[SKY_DROP_FORMAT]++;
		SKY_WARN("job %s stage %d: batch %llu dropped: %s", j->job, j->stage,
			 (unsigned long long)slot->batch, d.msg);
		return;
	}
	send_on(j, t0);
}

/* ---- the loop --------------------------------------------------------------------- */

/* A stage message from a board the plan does not give that stage: dropped,
 * counted, before anything is decoded. */
static int refuse_sender(sky_servejob *j, const sky_topic_stage_msg *m, int want)
{
	j->drops[SKY_TDROP_SENDER]++;
	SKY_DEBUG("job %s: %s on stage %d from %s dropped: not stage %d's board", j->job, m->leaf,
		  m->stage, m->sender, want);
	return 1;
}

int sky_servejob_on_msg(sky_servejob *j, const char *topic, const unsigned char *p, size_t len)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], to[SKY_TOPIC_SEGMENT_MAX + 1],
		who[SKY_TOPIC_SEGMENT_MAX + 1];
	size_t tl = strlen(topic);
	sky_topic_stage_msg m;
	if (sky_topic_parse_stage(topic, tl, &m) == 0) {
		if (m.site[0] || strcmp(m.job, j->job) != 0 || m.stage >= j->n_stages)
			return 0;
		/* the sender level is the publishing board's CN (the ACL pins it) */
		if (j->stage > 0 && m.stage == j->stage && strcmp(m.leaf, SKY_TOPIC_FWD) == 0) {
			if (strcmp(m.sender, j->plan->stages[j->stage - 1].board) != 0)
				return refuse_sender(j, &m, j->stage - 1);
			on_frame(j, m.sender, p, len);
			return 1;
		}
		if (j->stage != 0)
			return 0;
		if (m.stage == 0 && strcmp(m.leaf, SKY_TOPIC_DONE) == 0) {
			if (strcmp(m.sender, j->plan->stages[j->n_stages - 1].board) != 0)
				return refuse_sender(j, &m, j->n_stages - 1);
			on_done(j, p, len);
			return 1;
		}
		if (strcmp(m.leaf, SKY_TOPIC_READY) != 0)
			return 0;
		if (strcmp(m.sender, j->plan->stages[m.stage].board) != 0)
			return refuse_sender(j, &m, m.stage);
		const int k = m.stage;
		sky_diag d;
		int64_t ep = 0;
		if (sky_infer_ready_parse(p, len, &ep, &d) != 0)
			SKY_WARN("job %s: stage %d's ready from %s refused: %s", j->job, k, m.sender,
				 d.msg);
		else if (ep == j->plan->epoch && !j->ready_seen[k])
			j->ready_seen[k] = 1, j->n_ready++;
		return 1;
	}
	if (j->stage != 0)
		return 0;
	/* req/<this board>/<client> (the client level is pinned by the ACL),
	 * replay/<this board>/<client> (only the planner writes those) */
	int replay = 0;
	if ((sky_topic_parse_job_pair(topic, tl, SKY_TOPIC_REQ, job, sizeof job, to, sizeof to, who,
				      sizeof who) == 0 ||
	     (replay = sky_topic_parse_job_pair(topic, tl, SKY_TOPIC_REPLAY, job, sizeof job, to,
						sizeof to, who, sizeof who) == 0)) &&
	    strcmp(job, j->job) == 0 && strcmp(to, j->board) == 0) {
		if (len > SKY_INFER_REQ_MAX_BYTES) {
			char why[96];
			snprintf(why, sizeof why, "request is %zu bytes, the limit is %u", len,
				 SKY_INFER_REQ_MAX_BYTES);
			refuse(j, who, "", SKY_INFER_OVERSIZE, why);
		} else {
			on_request(j, who, p, len, replay);
		}
		return 1;
	}
	return 0;
}

int sky_servejob_start(sky_servejob *j, sky_diag *d)
{
	char buf[160], filter[SKY_TOPIC_BUF];
	int rc;
	const sky_transport_net *net = &j->net;
	if (j->stage == 0) {
		char done[SKY_TOPIC_BUF];
		sky_topic_stage_leaf(filter, sizeof filter, j->job, -1, SKY_TOPIC_READY, NULL);
		sky_topic_stage_leaf(done, sizeof done, j->job, 0, SKY_TOPIC_DONE, NULL);
		if ((rc = net->subscribe(net->ctx, filter)) != 0 ||
		    (j->n_stages > 1 && (rc = net->subscribe(net->ctx, done)) != 0) ||
		    (rc = net->subscribe(net->ctx, j->topic_req)) != 0 ||
		    (rc = net->subscribe(net->ctx, j->topic_replay)) != 0)
			return sky_diag_set(d, rc, "job %s: cannot subscribe to its requests", j->job);
	} else if ((rc = net->subscribe(net->ctx, j->topic_in)) != 0) {
		return sky_diag_set(d, rc, "job %s: cannot subscribe to %s", j->job, j->topic_in);
	}
	int n = snprintf(buf, sizeof buf, "{\"epoch\":%lld,\"board\":\"%s\"}",
			 (long long)j->plan->epoch, j->board);
	net->publish(net->ctx, j->topic_ready, buf, (size_t)n, 1, 1);
	SKY_INFO("job %s epoch %lld: serving stage %d of %d, half-layers %d-%d, %d threads, %s "
		 "frames, %zu-byte int8 frames",
		 j->job, (long long)j->plan->epoch, j->stage, j->n_stages, j->st.first, j->st.last,
		 j->st.threads, j->sealed ? "sealed" : "plaintext",
		 sky_frame_packed_bytes(&j->send_key, j->payload_bytes));
	return 0;
}

int sky_servejob_step(sky_servejob *j, int *wait_ms)
{
	*wait_ms = 20;
	if (j->stage == 0) {
		if (!j->open && j->n_ready == j->n_stages) {
			j->open = 1;
			SKY_INFO("job %s: every stage is ready; taking requests", j->job);
		}
		if (j->open && j->q_len > 0) {
			double now = sky_clock_s();
			int in_flight = sky_servebatch_in_flight(&j->flight, now, j->stale_s);
			int go = sky_servebatch_decide(&j->rule, j->q_len, now - j->q[j->q_head].t_in,
						       in_flight, wait_ms);
			if (go == SKY_SERVEBATCH_SEND) {
				run_first(j);
				return 1;
			}
			j->held += go == SKY_SERVEBATCH_HOLD;
		}
		return 0;
	}
	sky_servejob_slot *next = NULL;
	for (int i = 0; i < j->n_slots; i++)
		if (j->ring[i].full && (!next || j->ring[i].order < next->order))
			next = &j->ring[i];
	if (!next)
		return 0;
	run_frame(j, next);
	return 1;
}

int sky_servejob_run(sky_servejob *j, sky_diag *d)
{
	const sky_transport_net *net = &j->net;
	int rc = sky_servejob_start(j, d);
	if (rc)
		return rc;
	while (!atomic_load(&j->stop) && !(net->stopped && net->stopped(net->ctx))) {
		int wait_ms;
		int work = sky_servejob_step(j, &wait_ms);
		net->poll(net->ctx, work ? 0 : wait_ms);
		/* drops no batch has reported yet (sky_servejob.h) */
		if (drops_sum(j) != j->drops_said && sky_clock_s() - j->said_s >= 1.0)
			publish_metrics(j, 0, 0, 0);
	}
	if (drops_sum(j) != j->drops_said && !(net->stopped && net->stopped(net->ctx)))
		publish_metrics(j, 0, 0, 0);
	SKY_INFO("job %s stage %d: serving ends after %ld batches, %ld requests, %ld responses",
		 j->job, j->stage, j->batches, j->requests, j->responses);
	return 0;
}
