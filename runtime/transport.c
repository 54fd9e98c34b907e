/* A stage's frame transport (see sky_transport.h): pack and queue on send,
 * check and copy into an arena ring on receive, wait with a deadline. */
#include "sky_transport.h"

#include "sky_clock.h"
#include "sky_crc32c.h"
#include "sky_fedsum.h"
#include "sky_log.h"
#include "sky_planmsg.h"

#include <stdio.h>
#include <string.h>

const char *sky_transport_drop_name(int i)
{
	if (i == SKY_TDROP_DUPLICATE)
		return "duplicate";
	if (i == SKY_TDROP_RING_FULL)
		return "ring_full";
	if (i == SKY_TDROP_SENDER)
		return "sender";
	if (i == SKY_TDROP_REPLICA)
		return "replica";
	return sky_frame_drop_name((sky_frame_drop)i);
}

/* 2L + 2: the last stage ends at half-layer 2L - 1 */
static int n_all_of(const sky_transport_cfg *c) { return c->last[c->n_stages - 1] + 1 + 2; }

/* norm blocks of stage k: [lo, lo + n) (sky_stage.h numbering) */
static void stage_blocks(const sky_transport_cfg *c, int k, int *lo, int *n)
{
	int units = c->last[k] - c->first[k] + 1;
	int embed = c->first[k] == 0, head = k == c->n_stages - 1;
	*lo = embed ? 0 : 1 + c->first[k];
	*n = units + embed + head;
}

/* The site of stage i ("" = core, as cfg gave it, or "" for all). */
static const char *site_of(const sky_transport_cfg *cfg, int i)
{
	const char *s = cfg->site ? cfg->site[i] : NULL;
	return s && strcmp(s, "core") != 0 ? s : "";
}

/* This stage's site and the plan's other sites (see sky_transport). */
static int set_sites(sky_transport *t, const sky_transport_cfg *cfg, sky_diag *d)
{
	t->n_other = 0;
	for (int i = 0; i < cfg->n_stages; i++) {
		const char *s = site_of(cfg, i);
		if (s[0] && !sky_topic_segment_ok(s))
			return sky_diag_set(d, SKY_EINVAL, "transport: stage %d: bad site name", i);
	}
	snprintf(t->site, sizeof t->site, "%s", site_of(cfg, cfg->stage));
	for (int i = 0; i < cfg->n_stages; i++) {
		const char *s = site_of(cfg, i);
		int seen = strcmp(s, t->site) == 0;
		for (int j = 0; j < t->n_other && !seen; j++)
			seen = strcmp(s, t->other[j]) == 0;
		if (seen)
			continue;
		if (t->n_other == SKY_TRANSPORT_MAX_SITES)
			return sky_diag_set(d, SKY_EINVAL, "transport: more than %d sites in one plan",
					    SKY_TRANSPORT_MAX_SITES + 1);
		snprintf(t->other[t->n_other++], sizeof t->other[0], "%s", s);
	}
	t->core_in = !t->site[0] && t->n_other > 0;
	return 0;
}

/* The topic for a message to stage k: plain if k is on our site (it never
 * leaves the site's broker), else addressed to k's site (the bridges carry
 * it there). Sets buf (SKY_TOPIC_BUF) or leaves it "" on a bad segment. */
static void out_topic(sky_transport *t, char *buf, int k, const char *s, const char *leaf)
{
	if (strcmp(s, t->site) == 0)
		sky_topic_stage_leaf(buf, SKY_TOPIC_BUF, t->job, k, leaf, t->board);
	else
		sky_topic_site_stage(buf, SKY_TOPIC_BUF, s, t->job, k, leaf, t->board);
}

/* bytes of a tensor going in direction dir */
static size_t dir_bytes(const sky_transport *t, int dir)
{
	return dir == SKY_STAGE_FWD ? t->fwd_bytes : t->tensor_bytes;
}

int sky_transport_carve(sky_transport *t, const sky_transport_cfg *cfg,
			const sky_transport_net *net, sky_arena *a, sky_diag *d)
{
	memset(t, 0, sizeof *t);
	if (!cfg->job || !sky_topic_segment_ok(cfg->job) || !cfg->board || cfg->n_stages < 1 ||
	    cfg->n_stages > SKY_TRANSPORT_MAX_STAGES || cfg->stage < 0 ||
	    cfg->stage >= cfg->n_stages || cfg->micro < 1 || cfg->fwd_slots < 1 ||
	    cfg->bwd_slots < 1 || cfg->batch < 1 || cfg->seq < 1 || cfg->hidden < 1 ||
	    cfg->fwd_extra < 0 || cfg->fwd_extra > 1 ||
	    !cfg->first || !cfg->last || !(cfg->stall_s > 0))
		return sky_diag_set(d, SKY_EINVAL, "transport: bad configuration");
	t->cfg = *cfg;
	if (net)
		t->net = *net;
	snprintf(t->job, sizeof t->job, "%s", cfg->job);
	snprintf(t->board, sizeof t->board, "%s", cfg->board);
	t->cfg.job = t->job;
	t->cfg.board = t->board;
	t->cfg.site = NULL; /* the caller's arrays need not outlive this call */
	t->cfg.boards = NULL;
	t->n_boards = cfg->n_stages;
	if (cfg->plan) {
		const sky_planmsg *pl = cfg->plan;
		if (pl->n_stages != cfg->n_stages || pl->micro_batches != cfg->micro ||
		    cfg->replica < 0 || cfg->replica >= sky_planmsg_n_replicas(pl, cfg->stage) ||
		    strcmp(sky_planmsg_replica_board(pl, cfg->stage, cfg->replica), cfg->board) != 0)
			return sky_diag_set(d, SKY_EINVAL,
					    "transport: board %s is not replica %d of stage %d in the "
					    "plan",
					    cfg->board, cfg->replica, cfg->stage);
		t->n_boards = cfg->n_stages + pl->n_reps;
	} else if (cfg->replica != 0) {
		return sky_diag_set(d, SKY_EINVAL, "transport: a replica needs the plan");
	}
	if (cfg->boards && !cfg->plan) {
		t->boards = sky_arena_alloc(a, (size_t)cfg->n_stages * sizeof *t->boards,
					    SKY_LIFE_SCRATCH);
		for (int i = 0; t->boards && i < cfg->n_stages; i++) {
			if (!cfg->boards[i] || !sky_topic_segment_ok(cfg->boards[i]))
				return sky_diag_set(d, SKY_EINVAL, "transport: stage %d: bad board id", i);
			snprintf(t->boards[i], sizeof t->boards[i], "%s", cfg->boards[i]);
		}
	}
	t->tensor_bytes = (size_t)cfg->batch * cfg->seq * cfg->hidden * sizeof(float);
	t->fwd_bytes = (size_t)cfg->batch * cfg->seq * (size_t)(cfg->hidden + cfg->fwd_extra) *
		       sizeof(float);
	t->sealed = cfg->key != NULL;
	t->n_slots[SKY_STAGE_FWD] = cfg->stage > 0 ? cfg->fwd_slots : 0;
	t->n_slots[SKY_STAGE_BWD] = cfg->stage < cfg->n_stages - 1 ? cfg->bwd_slots : 0;
	for (int dir = 0; dir < 2; dir++) {
		t->ring[dir] = sky_arena_alloc(a, (size_t)t->n_slots[dir] * sizeof(sky_transport_slot),
					       SKY_LIFE_ACT);
		for (int i = 0; i < t->n_slots[dir]; i++) {
			float *p = sky_arena_alloc(a, dir_bytes(t, dir), SKY_LIFE_ACT);
			if (t->ring[dir]) {
				t->ring[dir][i] = (sky_transport_slot){-1, -1, 0, p};
			}
		}
		t->held[dir] = -1;
		t->next_step[dir] = 0;
		t->next_mb[dir] = 0;
	}
	t->n_all = n_all_of(cfg);
	size_t norm_frame = sky_frame_packed_bytes(&(sky_frame_key){.sealed = t->sealed},
						   (size_t)t->n_all * sizeof(double));
	size_t tensor_frame = t->sealed ? sky_frame_packed_bytes(&(sky_frame_key){.sealed = 1},
								 t->fwd_bytes)
					: 0;
	t->sendbuf_cap = norm_frame > tensor_frame ? norm_frame : tensor_frame;
	if (cfg->plan && cfg->reduce_n > 0 && sky_planmsg_n_replicas(cfg->plan, cfg->stage) > 1) {
		t->n_rep = sky_planmsg_n_replicas(cfg->plan, cfg->stage);
		/* chunks that fit the net's messages (the buffers are carved for
		 * the most chunks and the largest, so measuring needs no net) */
		t->red_chunk = SKY_TRANSPORT_RED_CHUNK;
		if (net && net->max_msg > 0) {
			size_t fit = net->max_msg > 1024 ? (net->max_msg - 1024) / sizeof(uint64_t) : 0;
			fit = fit < SKY_TRANSPORT_RED_CHUNK_MIN ? SKY_TRANSPORT_RED_CHUNK_MIN : fit;
			t->red_chunk = fit < t->red_chunk ? fit : t->red_chunk;
		}
		t->n_chunks = (int)((cfg->reduce_n + t->red_chunk - 1) / t->red_chunk);
		size_t most = (cfg->reduce_n + SKY_TRANSPORT_RED_CHUNK_MIN - 1) /
			      SKY_TRANSPORT_RED_CHUNK_MIN;
		for (int i = 0; i < 2; i++) {
			t->red[i] = sky_arena_alloc(a, cfg->reduce_n * sizeof(uint64_t), SKY_LIFE_SCRATCH);
			t->red_got[i] = sky_arena_alloc(a, (size_t)t->n_rep * most, SKY_LIFE_SCRATCH);
		}
		/* no chunk is longer than the sums (a small stage's are one chunk) */
		size_t big = cfg->reduce_n < SKY_TRANSPORT_RED_CHUNK ? cfg->reduce_n
								      : SKY_TRANSPORT_RED_CHUNK;
		t->red_buf = sky_arena_alloc(a, big * sizeof(uint64_t), SKY_LIFE_SCRATCH);
		size_t chunk_frame = sky_frame_packed_bytes(&(sky_frame_key){.sealed = t->sealed},
							    big * sizeof(uint64_t));
		if (chunk_frame > t->sendbuf_cap)
			t->sendbuf_cap = chunk_frame;
	}
	t->sendbuf = sky_arena_alloc(a, t->sendbuf_cap, SKY_LIFE_SCRATCH);
	t->norm_all = sky_arena_alloc(a, (size_t)t->n_all * sizeof(double), SKY_LIFE_SCRATCH);
	t->norm_buf = sky_arena_alloc(a, (size_t)t->n_all * sizeof(double), SKY_LIFE_SCRATCH);
	t->norm_got = sky_arena_alloc(a, (size_t)cfg->n_stages, SKY_LIFE_SCRATCH);
	t->ready = sky_arena_alloc(a, (size_t)t->n_boards, SKY_LIFE_SCRATCH);
	t->cap_ev = 8 * cfg->micro + 8;
	t->ev = sky_arena_alloc(a, (size_t)t->cap_ev * sizeof *t->ev, SKY_LIFE_SCRATCH);
	int rc = sky_arena_status(a);
	if (rc)
		return sky_diag_set(d, rc, "transport: arena: %s", sky_strerror(rc));
	if (!a->base)
		return 0; /* measuring */
	memset(t->norm_got, 0, (size_t)cfg->n_stages);
	memset(t->ready, 0, (size_t)t->n_boards);
	for (int i = 0; i < 2 && t->n_rep > 1; i++) {
		memset(t->red[i], 0, cfg->reduce_n * sizeof(uint64_t));
		memset(t->red_got[i], 0, (size_t)t->n_rep * (size_t)t->n_chunks);
		t->red_n[i] = 0;
	}
	t->norm_done = -1;
	const int k = cfg->stage;
	if ((rc = set_sites(t, cfg, d)) != 0)
		return rc;
	if (k + 1 < cfg->n_stages)
		out_topic(t, t->topic_fwd_out, k + 1, site_of(cfg, k + 1), SKY_TOPIC_FWD);
	if (k > 0)
		out_topic(t, t->topic_bwd_out, k - 1, site_of(cfg, k - 1), SKY_TOPIC_BWD);
	/* in: from any sender (the filter), checked per message; out: as us */
	sky_topic_stage(t->topic_fwd_in, sizeof t->topic_fwd_in, t->job, k, 0, NULL);
	sky_topic_stage(t->topic_bwd_in, sizeof t->topic_bwd_in, t->job, k, 1, NULL);
	sky_topic_stage_leaf(t->topic_norm, sizeof t->topic_norm, t->job, k, SKY_TOPIC_NORM, t->board);
	sky_topic_stage_leaf(t->topic_ready, sizeof t->topic_ready, t->job, k, SKY_TOPIC_READY,
			     t->board);
	sky_topic_stage_leaf(t->topic_grad, sizeof t->topic_grad, t->job, k, SKY_TOPIC_GRAD,
			     t->board);
	sky_topic_job_to(t->topic_metrics, sizeof t->topic_metrics, t->job, SKY_TOPIC_METRICS,
			 t->board);
	/* one key object per direction of use: each has its own nonce counter */
	if (sky_frame_key_init(&t->send_key, cfg->key) != 0 ||
	    sky_frame_key_init(&t->recv_key, cfg->key) != 0)
		return sky_diag_set(d, SKY_ECRYPTO, "transport: the frame key cannot be set up");
	return 0;
}

void sky_transport_free(sky_transport *t)
{
	if (!t)
		return;
	sky_frame_key_free(&t->send_key);
	sky_frame_key_free(&t->recv_key);
}

static void add_event(sky_transport *t, char kind, int mb, double t0_s, double t1_s)
{
	if (t->n_ev >= t->cap_ev)
		return;
	t->ev[t->n_ev++] = (sky_transport_ev){kind, mb, (float)((t0_s - t->step_t0) * 1e3),
					      (float)((t1_s - t->step_t0) * 1e3)};
	if (kind == 'F' || kind == 'B')
		t->busy_s += t1_s - t0_s;
	else if (kind == 'W')
		t->wait_s += t1_s - t0_s;
	else if (kind == 'S')
		t->send_s += t1_s - t0_s;
}

void sky_transport_begin_step(sky_transport *t, int64_t step)
{
	t->step = step;
	t->n_ev = 0;
	t->busy_s = t->wait_s = t->send_s = 0;
	t->step_t0 = sky_clock_s();
	t->cpu_mark = sky_clock_thread_cpu_s();
}

/* ---- receiving ------------------------------------------------------------ */

static void frame_expect(const sky_transport *t, sky_frame_expect *w, int dir, int stage,
			 int64_t step, uint32_t micro, int dtype, uint32_t elems)
{
	memset(w, 0, sizeof *w);
	w->job = t->job;
	w->epoch = t->cfg.epoch;
	w->step = step;
	w->direction = dir;
	w->stage = stage;
	w->micro_batches = micro;
	w->dtype = dtype;
	if (dtype == SKY_FRAME_F32) {
		w->ndim = 3;
		w->shape[0] = (uint32_t)t->cfg.batch;
		w->shape[1] = (uint32_t)t->cfg.seq;
		w->shape[2] = (uint32_t)(t->cfg.hidden + (dir == SKY_FRAME_FWD ? t->cfg.fwd_extra : 0));
	} else {
		w->ndim = 1;
		w->shape[0] = elems;
	}
}

static void count_drop(sky_transport *t, int why, const char *topic, const char *msg)
{
	t->drops[why]++;
	SKY_DEBUG("frame on %s dropped (%s): %s", topic, sky_transport_drop_name(why), msg);
}

static int before(int64_t s1, int m1, int64_t s2, int m2) { return s1 < s2 || (s1 == s2 && m1 < m2); }

/* With replicas: 0 if micro-batch mb's frame from sender is ours to take,
 * 1 if it belongs to a sibling replica, -1 if sender is not the replica
 * of the sending stage the plan routes mb through. */
static int replica_route(const sky_transport *t, int dir, int mb, const char *sender)
{
	const sky_planmsg *pl = t->cfg.plan;
	const int k = t->cfg.stage, from = dir == SKY_STAGE_FWD ? k - 1 : k + 1;
	int r = sky_planmsg_route(pl, k, mb);
	if (r < 0)
		return 0; /* out of range: the frame check refuses it */
	if (r != t->cfg.replica)
		return 1;
	const char *b = sky_planmsg_replica_board(pl, from, sky_planmsg_route(pl, from, mb));
	return b && strcmp(b, sender) == 0 ? 0 : -1;
}

static void on_tensor(sky_transport *t, int dir, const char *topic, const char *sender,
		      const unsigned char *p, size_t len)
{
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_NONE;
	sky_diag d;
	sky_diag_clear(&d);
	/* replicas: is this micro-batch ours, from the replica the plan names?
	 * (decided on the header, which the unpack below then authenticates) */
	if (t->cfg.plan && sky_frame_decode(p, len, UINT64_MAX, &h, NULL) == 0) {
		int r = replica_route(t, dir, (int)h.micro_batch, sender);
		if (r > 0) {
			t->sibling_frames++;
			return;
		}
		if (r < 0) {
			count_drop(t, SKY_TDROP_REPLICA, topic,
				   "not the replica the plan routes this micro-batch through");
			return;
		}
	}
	/* which step it claims: only cur and cur + 1 can be ours */
	int64_t step = t->step;
	if (sky_frame_decode(p, len, UINT64_MAX, &h, NULL) == 0 &&
	    (h.step == t->step || h.step == t->step + 1))
		step = h.step;
	sky_frame_expect w;
	frame_expect(t, &w, dir, t->cfg.stage, step, (uint32_t)t->cfg.micro, SKY_FRAME_F32, 0);
	/* a duplicate is refused before it takes a slot */
	if (sky_frame_decode(p, len, UINT64_MAX, &h, NULL) == 0 && h.step == step &&
	    h.micro_batch < (uint32_t)t->cfg.micro && h.epoch == t->cfg.epoch) {
		int dup = before(step, (int)h.micro_batch, t->next_step[dir], t->next_mb[dir]);
		for (int i = 0; i < t->n_slots[dir] && !dup; i++)
			dup = t->ring[dir][i].state && t->ring[dir][i].step == step &&
			      t->ring[dir][i].mb == (int)h.micro_batch;
		if (dup) {
			count_drop(t, SKY_TDROP_DUPLICATE, topic, "seen before");
			return;
		}
	}
	int slot = -1;
	for (int i = 0; i < t->n_slots[dir] && slot < 0; i++)
		if (t->ring[dir][i].state == 0)
			slot = i;
	if (slot < 0) {
		count_drop(t, SKY_TDROP_RING_FULL, topic, "no free slot");
		return;
	}
	sky_transport_slot *s = &t->ring[dir][slot];
	if (sky_frame_unpack(&t->recv_key, p, len, &w, &h, s->data, dir_bytes(t, dir), &why, &d) !=
	    0) {
		count_drop(t, why, topic, d.msg);
		return;
	}
	s->step = h.step;
	s->mb = (int)h.micro_batch;
	s->state = 1;
	t->frames_in++;
	t->bytes_in += (double)len;
}

static void on_norm(sky_transport *t, int from, const char *topic, const unsigned char *p,
		    size_t len)
{
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_NONE;
	sky_diag d;
	sky_diag_clear(&d);
	sky_frame_expect w;
	frame_expect(t, &w, SKY_FRAME_FWD, from, t->step, 1, SKY_FRAME_S32, (uint32_t)(2 * t->n_all));
	if (from == t->cfg.stage)
		return; /* our own, back from the broker */
	if (sky_frame_unpack(&t->recv_key, p, len, &w, &h, t->norm_buf,
			     (size_t)t->n_all * sizeof(double), &why, &d) != 0) {
		count_drop(t, why, topic, d.msg);
		return;
	}
	if (t->norm_got[from] || t->norm_done >= t->step) {
		count_drop(t, SKY_TDROP_DUPLICATE, topic, "norm seen before");
		return;
	}
	int lo, n;
	stage_blocks(&t->cfg, from, &lo, &n);
	memcpy(t->norm_all + lo, t->norm_buf + lo, (size_t)n * sizeof(double));
	t->norm_got[from] = 1;
	t->norm_n++;
}

static void on_ready(sky_transport *t, int from, int who, const unsigned char *p, size_t len)
{
	sky_frame_hdr h;
	sky_frame_drop why;
	sky_frame_expect w;
	int32_t v = -1;
	frame_expect(t, &w, SKY_FRAME_FWD, from, 0, 1, SKY_FRAME_S32, 1);
	/* a retained ready of an earlier epoch is expected: not counted */
	if (sky_frame_unpack(&t->recv_key, p, len, &w, &h, &v, sizeof v, &why, NULL) == 0 &&
	    v == from && who >= 0 && who < t->n_boards && !t->ready[who]) {
		t->ready[who] = 1;
		t->n_ready++;
	}
}

/* elements in reduction chunk c */
static size_t chunk_elems(const sky_transport *t, int c)
{
	size_t lo = (size_t)c * t->red_chunk, n = t->cfg.reduce_n - lo;
	return n < t->red_chunk ? n : t->red_chunk;
}

/* A chunk of another replica's sums (this step's or the next's: a
 * replica may be one step ahead), added into red[step parity]. */
static void on_grad(sky_transport *t, const char *topic, const char *sender,
		    const unsigned char *p, size_t len)
{
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_NONE;
	sky_diag d;
	sky_diag_clear(&d);
	int r = -1;
	for (int i = 0; i < t->n_rep && r < 0; i++)
		if (strcmp(sky_planmsg_replica_board(t->cfg.plan, t->cfg.stage, i), sender) == 0)
			r = i;
	if (r == t->cfg.replica)
		return; /* our own, back from the broker */
	int64_t step = t->step;
	int c = 0;
	if (sky_frame_decode(p, len, UINT64_MAX, &h, NULL) == 0) {
		if (h.step == t->step + 1)
			step = h.step;
		if (h.micro_batch < (uint32_t)t->n_chunks)
			c = (int)h.micro_batch;
	}
	const int par = (int)(step & 1);
	sky_frame_expect w;
	frame_expect(t, &w, SKY_FRAME_FWD, t->cfg.stage, step, (uint32_t)t->n_chunks, SKY_FRAME_S32,
		     (uint32_t)(2 * chunk_elems(t, c)));
	if (sky_frame_unpack(&t->recv_key, p, len, &w, &h, t->red_buf,
			     SKY_TRANSPORT_RED_CHUNK * sizeof(uint64_t), &why, &d) != 0) {
		count_drop(t, why, topic, d.msg);
		return;
	}
	unsigned char *got = &t->red_got[par][(size_t)r * t->n_chunks + c];
	if (*got) {
		count_drop(t, SKY_TDROP_DUPLICATE, topic, "gradient chunk seen before");
		return;
	}
	*got = 1;
	sky_fx_add(t->red[par] + (size_t)c * t->red_chunk, t->red_buf, chunk_elems(t, c));
	t->red_n[par]++;
	t->frames_in++;
	t->bytes_in += (double)len;
}

/* "sky/v1/job/<job>/stage/<k>/<leaf>/<sender>" (and, on the core site of
 * a plan with sites, "sky/v1/site/core/job/<job>/stage/<k>/<leaf>/<sender>")
 * -> m, if job is ours and k one of its stages */
static int parse_stage_topic(const sky_transport *t, const char *topic, sky_topic_stage_msg *m)
{
	if (sky_topic_parse_stage(topic, strlen(topic), m) != 0 || strcmp(m->job, t->job) != 0 ||
	    m->stage >= t->cfg.n_stages)
		return 0;
	return !m->site[0] || (t->core_in && strcmp(m->site, "core") == 0);
}

/* 1 if the topic's sender is the plan's board of stage k (any sender
 * when the transport was given no boards). */
static int sender_ok(const sky_transport *t, int k, const char *sender)
{
	if (t->cfg.plan) {
		const char *b = sky_planmsg_replica_board(t->cfg.plan, k, 0);
		return b && strcmp(b, sender) == 0;
	}
	return !t->boards || (k >= 0 && k < t->cfg.n_stages && strcmp(t->boards[k], sender) == 0);
}

/* The ready slot of sender as a board of stage k (its own board: k; a
 * replica: n_stages + its index in the plan's list), or -1 when sender is
 * none of k's. any_replica 0: stage k's own board only. */
static int board_slot(const sky_transport *t, int k, const char *sender, int any_replica)
{
	const sky_planmsg *pl = t->cfg.plan;
	if (!pl || !any_replica)
		return sender_ok(t, k, sender) ? k : -1;
	int n = sky_planmsg_n_replicas(pl, k);
	for (int r = 0; r < n; r++)
		if (strcmp(sky_planmsg_replica_board(pl, k, r), sender) == 0)
			return r == 0 ? k : t->cfg.n_stages + pl->stages[k].rep0 + r - 1;
	return -1;
}

/* This transport's own ready slot. */
static int own_slot(const sky_transport *t)
{
	const sky_planmsg *pl = t->cfg.plan;
	return !pl || t->cfg.replica == 0
		       ? t->cfg.stage
		       : t->cfg.n_stages + pl->stages[t->cfg.stage].rep0 + t->cfg.replica - 1;
}

int sky_transport_on_msg(sky_transport *t, const char *topic, const unsigned char *p, size_t len)
{
	sky_topic_stage_msg m;
	if (!parse_stage_topic(t, topic, &m))
		return 0;
	const int k = m.stage;
	const char *leaf = m.leaf;
	/* who may send it, from the topic's sender level (the ACL pins it to
	 * the certificate): a forward frame only stage k-1's board, a backward
	 * one only k+1's, a norm or ready only stage k's; checked before the
	 * frame is decoded or a slot taken */
	int from = k, kind = 0;
	if (k == t->cfg.stage && strcmp(leaf, SKY_TOPIC_FWD) == 0 && t->n_slots[SKY_STAGE_FWD])
		from = k - 1, kind = 1;
	else if (k == t->cfg.stage && strcmp(leaf, SKY_TOPIC_BWD) == 0 && t->n_slots[SKY_STAGE_BWD])
		from = k + 1, kind = 2;
	else if (strcmp(leaf, SKY_TOPIC_NORM) == 0)
		kind = 3;
	else if (strcmp(leaf, SKY_TOPIC_READY) == 0)
		kind = 4;
	else if (k == t->cfg.stage && strcmp(leaf, SKY_TOPIC_GRAD) == 0 && t->n_rep > 1)
		kind = 5;
	else
		return 0;
	/* tensors and ready: any replica of the sending stage (tensors are
	 * then checked against the route); norms: the stage's own board */
	int who = board_slot(t, from, m.sender, kind != 3);
	if (who < 0) {
		t->drops[SKY_TDROP_SENDER]++;
		SKY_DEBUG("message on %s dropped: %s is not stage %d's board", topic, m.sender, from);
		return 1;
	}
	if (kind == 1)
		on_tensor(t, SKY_STAGE_FWD, topic, m.sender, p, len);
	else if (kind == 2)
		on_tensor(t, SKY_STAGE_BWD, topic, m.sender, p, len);
	else if (kind == 3)
		on_norm(t, k, topic, p, len);
	else if (kind == 4)
		on_ready(t, k, who, p, len);
	else
		on_grad(t, topic, m.sender, p, len);
	return 1;
}

/* Publishes a message for every stage (ready, norm): on the plain topic
 * for the stages of our site, and once addressed to each other site of
 * the plan. Returns 0 or the first failure. */
static int publish_all(sky_transport *t, const char *plain, const char *leaf, const void *data,
		       size_t len, int retained)
{
	int rc = t->net.publish(t->net.ctx, plain, data, len, 1, retained);
	for (int i = 0; i < t->n_other && !rc; i++) {
		char topic[SKY_TOPIC_BUF];
		if ((rc = sky_topic_site_stage(topic, sizeof topic, t->other[i], t->job,
					       t->cfg.stage, leaf, t->board)) == 0)
			rc = t->net.publish(t->net.ctx, topic, data, len, 1, retained);
	}
	return rc;
}

/* Publishes a stall on the metrics topic and says what in t->stall. */
static void stall(sky_transport *t, const char *what, int mb, double waited)
{
	char buf[512];
	snprintf(t->stall, sizeof t->stall,
		 "stage %d stalled at step %lld micro-batch %d: no %s within %.1f s", t->cfg.stage,
		 (long long)t->step + 1, mb, what, waited);
	int n = snprintf(buf, sizeof buf,
			 "{\"v\":1,\"stage\":%d,\"board\":\"%s\",\"step\":%lld,\"stall\":{\"mb\":%d,"
			 "\"waiting_for\":\"%s\",\"waited_s\":%.3f},\"message\":\"%s\"}",
			 t->cfg.stage, t->board, (long long)t->step + 1, mb, what, waited, t->stall);
	if (t->net.publish && n > 0 && (size_t)n < sizeof buf)
		t->net.publish(t->net.ctx, t->topic_metrics, buf, (size_t)n, 1, 0);
	SKY_ERROR("job %s: %s", t->job, t->stall);
}

/* Polls until done(t, arg) or the deadline. Returns 0, SKY_ETIMEOUT or
 * SKY_ENET (stopped). The wait is recorded as a W event of mb. */
static int wait_until(sky_transport *t, int (*done)(sky_transport *, const void *), const void *arg,
		      double limit_s, int mb)
{
	if (done(t, arg))
		return 0;
	double t0 = sky_clock_s(), end = t0 + limit_s;
	int rc = 0;
	while (!done(t, arg)) {
		double now = sky_clock_s();
		if (now >= end) {
			rc = SKY_ETIMEOUT;
			break;
		}
		if (t->net.stopped && t->net.stopped(t->net.ctx)) {
			rc = SKY_ENET;
			break;
		}
		double left = (end - now) * 1e3;
		t->net.poll(t->net.ctx, left < 50 ? (int)left + 1 : 50);
	}
	if (mb >= 0)
		add_event(t, 'W', mb, t0, sky_clock_s());
	return rc;
}

typedef struct want_frame {
	int dir, mb;
	int64_t step;
} want_frame;

static int find_slot(const sky_transport *t, const want_frame *w)
{
	for (int i = 0; i < t->n_slots[w->dir]; i++) {
		const sky_transport_slot *s = &t->ring[w->dir][i];
		if (s->state == 1 && s->step == w->step && s->mb == w->mb)
			return i;
	}
	return -1;
}

static int frame_here(sky_transport *t, const void *arg) { return find_slot(t, arg) >= 0; }

static int io_recv(void *ctx, int dir, long step, int mb, const float **data)
{
	sky_transport *t = ctx;
	want_frame w = {dir, mb, step};
	int rc = wait_until(t, frame_here, &w, t->cfg.stall_s, mb);
	if (rc) {
		if (rc == SKY_ETIMEOUT) {
			char what[96];
			snprintf(what, sizeof what, "%s from stage %d",
				 dir == SKY_STAGE_FWD ? "activation" : "gradient",
				 dir == SKY_STAGE_FWD ? t->cfg.stage - 1 : t->cfg.stage + 1);
			stall(t, what, mb, t->cfg.stall_s);
		}
		return rc;
	}
	int i = find_slot(t, &w);
	t->ring[dir][i].state = 2;
	t->held[dir] = i;
	t->next_step[dir] = mb + 1 == t->cfg.micro ? step + 1 : step;
	t->next_mb[dir] = mb + 1 == t->cfg.micro ? 0 : mb + 1;
	*data = t->ring[dir][i].data;
	return 0;
}

static void io_release(void *ctx, int dir)
{
	sky_transport *t = ctx;
	if (t->held[dir] >= 0)
		t->ring[dir][t->held[dir]].state = 0;
	t->held[dir] = -1;
}

/* ---- sending -------------------------------------------------------------- */

static void tensor_hdr(const sky_transport *t, sky_frame_hdr *h, int dir, int to, int64_t step,
		       int mb)
{
	memset(h, 0, sizeof *h);
	h->direction = dir;
	h->dtype = SKY_FRAME_F32;
	h->ndim = 3;
	h->shape[0] = (uint32_t)t->cfg.batch;
	h->shape[1] = (uint32_t)t->cfg.seq;
	h->shape[2] = (uint32_t)(t->cfg.hidden + (dir == SKY_FRAME_FWD ? t->cfg.fwd_extra : 0));
	h->stage = to;
	h->micro_batch = (uint32_t)mb;
	snprintf(h->job, sizeof h->job, "%s", t->job);
	h->epoch = t->cfg.epoch;
	h->step = step;
}

/* A micro-batch of this step the plan routes through another replica of
 * this stage than ours, or -1 (test_wrong_replica). */
static int sibling_mb(const sky_transport *t)
{
	const sky_planmsg *pl = t->cfg.plan;
	for (int mb = 0; pl && mb < t->cfg.micro; mb++)
		if (sky_planmsg_route(pl, t->cfg.stage, mb) != t->cfg.replica)
			return mb;
	return -1;
}

static int send_tensor(sky_transport *t, int dir, long step, int mb, float *buf, size_t n);

static int io_send(void *ctx, int dir, long step, int mb, float *buf, size_t n)
{
	sky_transport *t = ctx;
	int rc = send_tensor(t, dir, step, mb, buf, n);
	int wrong = t->cfg.test_wrong_replica && !t->wrong_sent ? sibling_mb(t) : -1;
	if (rc == 0 && wrong >= 0) {
		t->wrong_sent = 1;
		SKY_WARN("job %s: sending micro-batch %d of step %ld again as micro-batch %d, which "
			 "the plan routes through another replica of stage %d (SKY_TEST_WRONG_REPLICA, "
			 "a test setting)",
			 t->job, mb, step, wrong, t->cfg.stage);
		send_tensor(t, dir, step, wrong, buf, n);
	}
	return rc;
}

static int send_tensor(sky_transport *t, int dir, long step, int mb, float *buf, size_t n)
{
	sky_frame_hdr h;
	sky_diag d;
	sky_diag_clear(&d);
	double t0 = sky_clock_s();
	int to = dir == SKY_STAGE_FWD ? t->cfg.stage + 1 : t->cfg.stage - 1;
	const char *topic = dir == SKY_STAGE_FWD ? t->topic_fwd_out : t->topic_bwd_out;
	size_t bytes = n * sizeof *buf;
	const unsigned char *out;
	size_t len;
	int rc;
	tensor_hdr(t, &h, dir, to, step, mb);
	if (bytes != dir_bytes(t, dir))
		return SKY_EINVAL;
	if (!t->sealed) {
		/* the header goes into the headroom in front of the tensor: no copy */
		unsigned char *hp = (unsigned char *)buf - SKY_FRAME_HEADER_BYTES;
		h.flags = 0;
		h.crc = sky_crc32c(0, buf, bytes);
		if ((rc = sky_frame_encode(&h, hp, SKY_FRAME_HEADER_BYTES, &d)) < 0)
			return rc;
		out = hp;
		len = SKY_FRAME_HEADER_BYTES + bytes;
	} else {
		rc = sky_frame_pack(&t->send_key, &h, buf, bytes, t->sendbuf, t->sendbuf_cap, &d);
		if (rc < 0)
			return rc;
		out = t->sendbuf;
		len = (size_t)rc;
	}
	rc = t->net.publish(t->net.ctx, topic, out, len, 0, 0);
	if (rc == 0) {
		t->frames_out++;
		t->bytes_out += (double)len;
	}
	add_event(t, 'S', mb, t0, sky_clock_s());
	return rc;
}

static int norms_here(sky_transport *t, const void *arg)
{
	(void)arg;
	return t->norm_n >= t->cfg.n_stages - 1;
}

int sky_transport_norm_post(sky_transport *t, long step, const double *mine, int b0, int n)
{
	sky_frame_hdr h;
	sky_diag d;
	sky_diag_clear(&d);
	const int n_all = t->n_all;
	if (b0 < 0 || n < 0 || b0 + n > n_all)
		return SKY_EINVAL;
	memcpy(t->norm_all + b0, mine, (size_t)n * sizeof *mine);
	if (t->cfg.n_stages < 2 || t->cfg.replica > 0)
		return 0; /* a replica's sums are its stage board's (after the reduction) */
	/* the whole vector goes out (others' blocks are ignored by the
	 * receivers): its shape is the same from every stage */
	memset(t->norm_buf, 0, (size_t)n_all * sizeof(double));
	memcpy(t->norm_buf + b0, mine, (size_t)n * sizeof *mine);
	memset(&h, 0, sizeof h);
	h.direction = SKY_FRAME_FWD;
	h.dtype = SKY_FRAME_S32;
	h.ndim = 1;
	h.shape[0] = (uint32_t)(2 * n_all); /* doubles as pairs of 32-bit words, little-endian */
	h.stage = t->cfg.stage;
	snprintf(h.job, sizeof h.job, "%s", t->job);
	h.epoch = t->cfg.epoch;
	h.step = step;
	int rc = sky_frame_pack(t->sealed ? &t->send_key : NULL, &h, t->norm_buf,
				(size_t)n_all * sizeof(double), t->sendbuf, t->sendbuf_cap, &d);
	if (rc < 0)
		return rc;
	return publish_all(t, t->topic_norm, SKY_TOPIC_NORM, t->sendbuf, (size_t)rc, 0);
}

int sky_transport_norm_wait(sky_transport *t, long step, double *all, int n_all)
{
	if (n_all != t->n_all)
		return SKY_EINVAL;
	if (t->cfg.n_stages > 1) {
		int rc = wait_until(t, norms_here, NULL, t->cfg.stall_s, -1);
		if (rc) {
			if (rc == SKY_ETIMEOUT)
				stall(t, "gradient norm from every stage", -1, t->cfg.stall_s);
			return rc;
		}
	}
	memcpy(all, t->norm_all, (size_t)n_all * sizeof *all);
	memset(t->norm_got, 0, (size_t)t->cfg.n_stages);
	t->norm_n = 0;
	t->norm_done = step;
	return 0;
}

typedef struct want_red {
	int par, n;
} want_red;

static int chunks_here(sky_transport *t, const void *arg)
{
	const want_red *w = arg;
	return t->red_n[w->par] >= w->n;
}

int sky_transport_reduce(sky_transport *t, long step, uint64_t *acc, size_t n)
{
	if (t->n_rep < 2 || n != t->cfg.reduce_n || step != t->step)
		return SKY_EINVAL;
	sky_frame_hdr h;
	sky_diag d;
	sky_diag_clear(&d);
	double t0 = sky_clock_s();
	for (int c = 0; c < t->n_chunks; c++) {
		size_t e = chunk_elems(t, c);
		memset(&h, 0, sizeof h);
		h.direction = SKY_FRAME_FWD;
		h.dtype = SKY_FRAME_S32;
		h.ndim = 1;
		h.shape[0] = (uint32_t)(2 * e); /* 64-bit sums as pairs of 32-bit words */
		h.stage = t->cfg.stage;
		h.micro_batch = (uint32_t)c;
		snprintf(h.job, sizeof h.job, "%s", t->job);
		h.epoch = t->cfg.epoch;
		h.step = step;
		int rc = sky_frame_pack(t->sealed ? &t->send_key : NULL, &h,
					acc + (size_t)c * t->red_chunk, e * sizeof *acc,
					t->sendbuf, t->sendbuf_cap, &d);
		if (rc < 0)
			return rc;
		if ((rc = t->net.publish(t->net.ctx, t->topic_grad, t->sendbuf, (size_t)rc, 1, 0)) != 0)
			return rc;
		t->frames_out++;
		t->bytes_out += (double)rc;
		t->red_bytes_out += (double)rc;
	}
	add_event(t, 'S', -1, t0, sky_clock_s());
	const int par = (int)(step & 1);
	want_red w = {par, (t->n_rep - 1) * t->n_chunks};
	int rc = wait_until(t, chunks_here, &w, t->cfg.stall_s, -1);
	if (rc) {
		if (rc == SKY_ETIMEOUT)
			stall(t, "gradient sums from every replica of the stage", -1, t->cfg.stall_s);
		return rc;
	}
	sky_fx_add(acc, t->red[par], n);
	memset(t->red[par], 0, n * sizeof *acc);
	memset(t->red_got[par], 0, (size_t)t->n_rep * (size_t)t->n_chunks);
	t->red_n[par] = 0;
	return 0;
}

static int io_reduce(void *ctx, long step, uint64_t *acc, size_t n)
{
	sky_transport *t = ctx;
	int rc = sky_transport_reduce(t, step, acc, n);
	t->cpu_mark = sky_clock_thread_cpu_s();
	return rc;
}

static int io_share_norm(void *ctx, long step, const double *mine, int b0, int n, double *all,
			 int n_all)
{
	sky_transport *t = ctx;
	if (n_all != t->n_all)
		return SKY_EINVAL;
	int rc = sky_transport_norm_post(t, step, mine, b0, n);
	return rc ? rc : sky_transport_norm_wait(t, step, all, n_all);
}

static void io_event(void *ctx, char kind, int mb, double t0, double t1)
{
	sky_transport *t = ctx;
	if (t->prof && (kind == 'F' || kind == 'B')) {
		t1 += sky_profile_stretch_cpu(t->prof, t1 - t0, sky_clock_thread_cpu_s() - t->cpu_mark);
		t->cpu_mark = sky_clock_thread_cpu_s();
	}
	add_event(t, kind, mb, t0, t1);
}

/* With an emulated speed, the stage computes from when a transport call
 * returns: the CPU time of an op is counted from there (t->cpu_mark). */
static int io_recv_m(void *ctx, int dir, long step, int mb, const float **data)
{
	sky_transport *t = ctx;
	int rc = io_recv(ctx, dir, step, mb, data);
	t->cpu_mark = sky_clock_thread_cpu_s();
	return rc;
}

static int io_send_m(void *ctx, int dir, long step, int mb, float *buf, size_t n)
{
	sky_transport *t = ctx;
	int rc = io_send(ctx, dir, step, mb, buf, n);
	t->cpu_mark = sky_clock_thread_cpu_s();
	return rc;
}

static int io_share_norm_m(void *ctx, long step, const double *mine, int b0, int n, double *all,
			   int n_all)
{
	sky_transport *t = ctx;
	int rc = io_share_norm(ctx, step, mine, b0, n, all, n_all);
	t->cpu_mark = sky_clock_thread_cpu_s();
	return rc;
}

sky_stage_io sky_transport_io(sky_transport *t)
{
	int (*reduce)(void *, long, uint64_t *, size_t) = t->n_rep > 1 ? io_reduce : NULL;
	if (t->prof)
		return (sky_stage_io){.ctx = t, .recv = io_recv_m, .release = io_release,
				      .send = io_send_m, .share_norm = io_share_norm_m, .event = io_event,
				      .reduce = reduce};
	return (sky_stage_io){.ctx = t, .recv = io_recv, .release = io_release, .send = io_send,
			      .share_norm = io_share_norm, .event = io_event, .reduce = reduce};
}

int sky_transport_topics(const sky_transport *t, char topics[][SKY_TOPIC_BUF], int cap)
{
	int n = 0;
	if (t->n_slots[SKY_STAGE_FWD] && n < cap)
		snprintf(topics[n++], SKY_TOPIC_BUF, "%s", t->topic_fwd_in);
	if (t->n_slots[SKY_STAGE_BWD] && n < cap)
		snprintf(topics[n++], SKY_TOPIC_BUF, "%s", t->topic_bwd_in);
	if (n < cap)
		sky_topic_stage_leaf(topics[n++], SKY_TOPIC_BUF, t->job, -1, SKY_TOPIC_NORM, NULL);
	if (n < cap)
		sky_topic_stage_leaf(topics[n++], SKY_TOPIC_BUF, t->job, -1, SKY_TOPIC_READY, NULL);
	if (t->n_rep > 1 && n < cap)
		sky_topic_stage_leaf(topics[n++], SKY_TOPIC_BUF, t->job, t->cfg.stage, SKY_TOPIC_GRAD,
				     NULL);
	/* on the core, messages from other sites stay addressed to "core" */
	if (t->core_in) {
		if (t->n_slots[SKY_STAGE_FWD] && n < cap)
			sky_topic_site_stage(topics[n++], SKY_TOPIC_BUF, "", t->job, t->cfg.stage,
					     SKY_TOPIC_FWD, NULL);
		if (t->n_slots[SKY_STAGE_BWD] && n < cap)
			sky_topic_site_stage(topics[n++], SKY_TOPIC_BUF, "", t->job, t->cfg.stage,
					     SKY_TOPIC_BWD, NULL);
		if (n < cap)
			sky_topic_site_stage(topics[n++], SKY_TOPIC_BUF, "", t->job, -1, SKY_TOPIC_NORM,
					     NULL);
		if (n < cap)
			sky_topic_site_stage(topics[n++], SKY_TOPIC_BUF, "", t->job, -1,
					     SKY_TOPIC_READY, NULL);
	}
	return n;
}

static int all_ready(sky_transport *t, const void *arg)
{
	(void)arg;
	return t->n_ready >= t->n_boards;
}

int sky_transport_announce(sky_transport *t, sky_diag *d)
{
	sky_frame_hdr h;
	int32_t v = t->cfg.stage;
	memset(&h, 0, sizeof h);
	h.direction = SKY_FRAME_FWD;
	h.dtype = SKY_FRAME_S32;
	h.ndim = 1;
	h.shape[0] = 1;
	h.stage = t->cfg.stage;
	snprintf(h.job, sizeof h.job, "%s", t->job);
	h.epoch = t->cfg.epoch;
	int rc = sky_frame_pack(t->sealed ? &t->send_key : NULL, &h, &v, sizeof v, t->sendbuf,
				t->sendbuf_cap, d);
	if (rc < 0)
		return rc;
	if (!t->ready[own_slot(t)]) {
		t->ready[own_slot(t)] = 1;
		t->n_ready++;
	}
	/* retained: a stage that subscribes later still sees that we are here */
	if ((rc = publish_all(t, t->topic_ready, SKY_TOPIC_READY, t->sendbuf, (size_t)rc, 1)) != 0)
		return sky_diag_set(d, rc, "transport: cannot publish ready");
	return 0;
}

int sky_transport_wait_ready(sky_transport *t, double timeout_s, sky_diag *d)
{
	int rc = wait_until(t, all_ready, NULL, timeout_s, -1);
	if (rc) {
		char miss[128] = "";
		size_t k = 0;
		for (int i = 0; i < t->cfg.n_stages && k + 8 < sizeof miss; i++)
			if (!t->ready[i])
				k += (size_t)snprintf(miss + k, sizeof miss - k, "%s%d", k ? "," : "", i);
		/* replicas by board id */
		for (int i = t->cfg.n_stages; i < t->n_boards && k + 2 < sizeof miss; i++)
			if (!t->ready[i])
				k += (size_t)snprintf(miss + k, sizeof miss - k, "%s%s", k ? "," : "",
						      t->cfg.plan->reps[i - t->cfg.n_stages].board);
		if (k >= sizeof miss)
			miss[sizeof miss - 1] = 0;
		return sky_diag_set(d, rc, "job %s: stages %s not ready within %.0f s", t->job, miss,
				    timeout_s);
	}
	return 0;
}

int sky_transport_start(sky_transport *t, double timeout_s, sky_diag *d)
{
	int rc = sky_transport_announce(t, d);
	return rc ? rc : sky_transport_wait_ready(t, timeout_s, d);
}
