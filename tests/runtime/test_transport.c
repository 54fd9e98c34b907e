/* The frame transport: every kind of bad frame is dropped and counted under
 * its reason, and the step goes on with the right frame that follows; and a
 * pipeline of stages whose transports talk through an in-memory network
 * (a fake under sky_transport_net, one thread per stage, sealed frames)
 * reproduces sky_bert_train_step bit for bit without allocating. The
 * pipeline runs one process per stage (fork), its network in shared
 * memory: the qemu leg of make check runs this test too, and threads are
 * not safe under every qemu-user set-up. */
#include "sky_test.h"

#include "memnet.h"
#include "step_batches.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_frameseal.h"
#include "sky_layer.h"
#include "sky_planmsg.h"
#include "sky_task.h"
#include "sky_transport.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ST 4

static const unsigned char k_key[SKY_FRAME_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

/* ---- a network in memory -------------------------------------------------- */

typedef struct net net;
typedef struct node {
	net *nw;
	int k;
	sky_transport t;
	sky_stage s;
	void *mem;
	long published;
} node;

typedef struct shm {
	memnet_inbox in[MAX_ST];
	float loss[MAX_ST][8];
	int rc[MAX_ST];
	unsigned long allocs[MAX_ST];
	long drops[MAX_ST][SKY_TDROP_N];
	float params[MAX_ST][40000];
} shm;

struct net {
	int n;
	node nd[MAX_ST];
	shm *sh;
	long steps, warmup;
	float lr;
};

static int fake_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
			int retained)
{
	node *me = ctx;
	(void)qos, (void)retained;
	me->published++;
	/* every node sees every topic; each keeps its own */
	return memnet_publish(me->nw->sh->in, me->nw->n, topic, data, len);
}

static void on_msg(void *ctx, const char *topic, const unsigned char *data, size_t len)
{
	node *me = ctx;
	sky_transport_on_msg(&me->t, topic, data, len);
}

static void fake_poll(void *ctx, int wait_ms)
{
	node *me = ctx;
	if (!me->nw->sh)
		return;
	memnet_poll(&me->nw->sh->in[me->k], wait_ms, on_msg, me);
}

/* ---- bad frames ------------------------------------------------------------- */

static sky_model_cfg tiny(int layers)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	c.layers = layers;
	return c;
}

static const char *const g_boards3[3] = {"b1", "b2", "b3"};
static int g_first[3] = {0, 2, 4}, g_last[3] = {1, 3, 5};

/* A transport for stage 1 of 3 over a net that goes nowhere. */
static sky_transport *make_stage1(const unsigned char *key, void **mem)
{
	static sky_transport t;
	static node dummy;
	static net nowhere; /* no nodes: a publish goes nowhere */
	dummy.nw = &nowhere;
	sky_model_cfg c = tiny(3);
	sky_transport_cfg tc = {.job = "jt", .board = "b2", .epoch = 5, .stage = 1, .n_stages = 3,
				.micro = 2, .batch = c.batch, .seq = c.seq, .hidden = c.hidden,
				.fwd_slots = 2, .bwd_slots = 2, .first = g_first, .last = g_last,
				.key = key, .stall_s = 0.2, .boards = g_boards3};
	sky_transport_net nt = {.ctx = &dummy, .publish = fake_publish, .poll = fake_poll};
	sky_arena a;
	sky_diag d;
	sky_arena_init(&a, NULL, 0);
	SKY_EXPECT(sky_transport_carve(&t, &tc, &nt, &a, &d) == 0);
	size_t n = sky_arena_required(&a);
	*mem = malloc(n);
	sky_arena_init(&a, *mem, n);
	SKY_EXPECT_MSG(sky_transport_carve(&t, &tc, &nt, &a, &d) == 0, "%s", d.msg);
	return &t;
}

/* A forward frame for stage 1: (job, epoch, step, mb) as given, shape
 * (B, S, H + extra_h), payload value v, packed with key (NULL: plain). */
static size_t frame(unsigned char *out, size_t cap, const char *job, int64_t epoch, int64_t step,
		    int mb, int extra_h, float v, const unsigned char *key)
{
	sky_model_cfg c = tiny(3);
	size_t n = (size_t)c.batch * c.seq * (c.hidden + extra_h);
	float *p = malloc(n * sizeof *p);
	for (size_t i = 0; i < n; i++)
		p[i] = v + (float)i;
	sky_frame_key k;
	memset(&k, 0, sizeof k);
	sky_frame_key_init(&k, key);
	sky_frame_hdr h = {.direction = SKY_FRAME_FWD, .dtype = SKY_FRAME_F32, .ndim = 3,
			   .stage = 1, .micro_batch = (uint32_t)mb,
			   .shape = {(uint32_t)c.batch, (uint32_t)c.seq, (uint32_t)(c.hidden + extra_h)},
			   .epoch = epoch, .step = step};
	snprintf(h.job, sizeof h.job, "%s", job);
	int rc = sky_frame_pack(&k, &h, p, n * sizeof *p, out, cap, NULL);
	sky_frame_key_free(&k);
	free(p);
	return rc > 0 ? (size_t)rc : 0;
}

static void drops_case(const unsigned char *key)
{
	void *mem;
	sky_transport *t = make_stage1(key, &mem);
	sky_transport_begin_step(t, 0);
	const char *topic = "sky/v1/job/jt/stage/1/fwd/b1";
	static unsigned char buf[MEMNET_MSG_MAX];
	unsigned char other[SKY_FRAME_KEY_BYTES] = {9};
	size_t n;
	long want[SKY_TDROP_N] = {0};
#define DELIVER(len, reason) \
	do { \
		SKY_EXPECT(sky_transport_on_msg(t, topic, buf, (len)) == 1); \
		want[reason]++; \
		for (int r_ = 0; r_ < SKY_TDROP_N; r_++) \
			SKY_EXPECT_MSG(t->drops[r_] == want[r_], "%s: %s counted %ld, expected %ld", \
				       #reason, sky_transport_drop_name(r_), t->drops[r_], want[r_]); \
	} while (0)
	n = frame(buf, sizeof buf, "jt", 4, 0, 0, 0, 1.0f, key);
	DELIVER(n, SKY_DROP_EPOCH);
	n = frame(buf, sizeof buf, "jt", 5, 7, 0, 0, 1.0f, key);
	DELIVER(n, SKY_DROP_STEP);
	n = frame(buf, sizeof buf, "jt", 5, 0, 2, 0, 1.0f, key);
	DELIVER(n, SKY_DROP_MICRO);
	n = frame(buf, sizeof buf, "other", 5, 0, 0, 0, 1.0f, key);
	DELIVER(n, SKY_DROP_JOB);
	n = frame(buf, sizeof buf, "jt", 5, 0, 0, -2, 1.0f, key);
	DELIVER(n, SKY_DROP_SHAPE);
	n = frame(buf, sizeof buf, "jt", 5, 0, 0, 2, 1.0f, key);
	DELIVER(n, SKY_DROP_OVERSIZE);
	n = frame(buf, sizeof buf, "jt", 5, 0, 0, 0, 1.0f, key);
	DELIVER(n - 9, SKY_DROP_TRUNCATED);
	buf[SKY_FRAME_HEADER_BYTES + 40] ^= 1; /* a payload bit flips on the way */
	DELIVER(n, SKY_DROP_CHECKSUM);
	if (key) { /* sealed job: another key's frame, and a plaintext one */
		n = frame(buf, sizeof buf, "jt", 5, 0, 0, 0, 1.0f, other);
		DELIVER(n, SKY_DROP_AUTH);
		n = frame(buf, sizeof buf, "jt", 5, 0, 0, 0, 1.0f, NULL);
		DELIVER(n, SKY_DROP_AUTH);
	}
	buf[0] = 'X';
	DELIVER(n, SKY_DROP_FORMAT);
	/* a good frame from a board that is not stage 0's: the sender level
	 * refuses it before it is decoded */
	n = frame(buf, sizeof buf, "jt", 5, 0, 0, 0, 1.0f, key);
	topic = "sky/v1/job/jt/stage/1/fwd/b3";
	DELIVER(n, SKY_TDROP_SENDER);
	topic = "sky/v1/job/jt/stage/1/bwd/b1"; /* a backward one only from stage 2's */
	DELIVER(n, SKY_TDROP_SENDER);
	topic = "sky/v1/job/jt/stage/1/fwd/b1";
	/* nothing bad reached the ring: the stage still waits, then the right
	 * frame comes and is the one it gets */
	const float *x = NULL;
	sky_stage_io io = sky_transport_io(t);
	n = frame(buf, sizeof buf, "jt", 5, 0, 0, 0, 3.0f, key);
	SKY_EXPECT(sky_transport_on_msg(t, topic, buf, n) == 1);
	DELIVER(n, SKY_TDROP_DUPLICATE); /* the same micro-batch again */
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 0, 0, &x), 0);
	SKY_EXPECT(x && x[0] == 3.0f && x[100] == 103.0f);
	io.release(io.ctx, SKY_STAGE_FWD);
	DELIVER(n, SKY_TDROP_DUPLICATE); /* and once more after it was used */
	/* a frame of the next step is kept for it */
	n = frame(buf, sizeof buf, "jt", 5, 1, 0, 0, 5.0f, key);
	SKY_EXPECT(sky_transport_on_msg(t, topic, buf, n) == 1);
	/* a frame that never comes: a stall naming stage, step and micro-batch */
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 0, 1, &x), SKY_ETIMEOUT);
	SKY_EXPECT_MSG(strstr(t->stall, "stage 1 stalled at step 1 micro-batch 1: no activation "
					"from stage 0") != NULL,
		       "%s", t->stall);
	sky_transport_begin_step(t, 1);
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 1, 0, &x), 0);
	SKY_EXPECT(x[0] == 5.0f);
	for (int r = 0; r < SKY_TDROP_N; r++)
		SKY_EXPECT_EQ(t->drops[r], want[r]);
#undef DELIVER
	sky_transport_free(t);
	free(mem);
}

SKY_TEST(transport_drops_bad_plain_frames_by_reason_and_takes_the_right_one)
{
	drops_case(NULL);
}

SKY_TEST(transport_drops_bad_sealed_frames_by_reason_and_takes_the_right_one)
{
	drops_case(k_key);
}

/* ---- stage replicas: who may send which micro-batch --------------------------- */

static sky_planmsg g_rplan; /* large: not on the stack */

/* 3 stages, 4 micro-batches: stage 0 on b1 and r1 (route 0,1,0,1), stage
 * 1 on b2 and r2 (route 0,0,1,1), stage 2 on b3 alone. */
static void replica_plan(void)
{
	sky_planmsg *p = &g_rplan;
	memset(p, 0, sizeof *p);
	p->n_stages = 3;
	p->micro_batches = 4;
	for (int k = 0; k < 3; k++) {
		snprintf(p->stages[k].board, sizeof p->stages[k].board, "%s", g_boards3[k]);
		p->stages[k].first = g_first[k];
		p->stages[k].last = g_last[k];
	}
	sky_plan_replica r;
	memset(&r, 0, sizeof r);
	r.in_flight = 2;
	strcpy(r.board, "r1");
	SKY_EXPECT_EQ(sky_planmsg_add_replica(p, 0, &r), 1);
	strcpy(r.board, "r2");
	SKY_EXPECT_EQ(sky_planmsg_add_replica(p, 1, &r), 1);
	const unsigned char r0[4] = {0, 1, 0, 1}, r1[4] = {0, 0, 1, 1};
	sky_planmsg_set_route(p, 0, r0);
	sky_planmsg_set_route(p, 1, r1);
}

static int carve_replica(sky_transport *t, const char *board, int stage, int replica,
			 const unsigned char *key, sky_transport_net *nt, void **mem, sky_diag *d)
{
	sky_model_cfg c = tiny(3);
	sky_transport_cfg tc = {.job = "jt", .board = board, .epoch = 5, .stage = stage,
				.n_stages = 3, .micro = 4, .batch = c.batch, .seq = c.seq,
				.hidden = c.hidden, .fwd_slots = 2, .bwd_slots = 2,
				.first = g_first, .last = g_last, .key = key, .stall_s = 0.2,
				.boards = g_boards3, .plan = &g_rplan, .replica = replica};
	sky_arena a;
	sky_arena_init(&a, NULL, 0);
	int rc = sky_transport_carve(t, &tc, nt, &a, d);
	if (rc)
		return rc;
	size_t n = sky_arena_required(&a);
	*mem = malloc(n);
	sky_arena_init(&a, *mem, n);
	return sky_transport_carve(t, &tc, nt, &a, d);
}

/* a frame of direction dir for stage 1 */
static size_t frame_dir(unsigned char *out, size_t cap, int dir, int mb, float v)
{
	size_t n = frame(out, cap, "jt", 5, 0, mb, 0, v, k_key);
	if (dir == SKY_FRAME_FWD || !n)
		return n;
	/* the same tensor, backward: re-pack with the direction changed */
	sky_model_cfg c = tiny(3);
	size_t nf = (size_t)c.batch * c.seq * c.hidden;
	float *p = malloc(nf * sizeof *p);
	for (size_t i = 0; i < nf; i++)
		p[i] = v + (float)i;
	sky_frame_key k;
	memset(&k, 0, sizeof k);
	sky_frame_key_init(&k, k_key);
	sky_frame_hdr h = {.direction = SKY_FRAME_BWD, .dtype = SKY_FRAME_F32, .ndim = 3,
			   .stage = 1, .micro_batch = (uint32_t)mb,
			   .shape = {(uint32_t)c.batch, (uint32_t)c.seq, (uint32_t)c.hidden},
			   .epoch = 5, .step = 0};
	snprintf(h.job, sizeof h.job, "jt");
	int rc = sky_frame_pack(&k, &h, p, nf * sizeof *p, out, cap, NULL);
	sky_frame_key_free(&k);
	free(p);
	return rc > 0 ? (size_t)rc : 0;
}

SKY_TEST(transport_replicas_take_their_micro_batches_only_from_the_routed_replica)
{
	static sky_transport t;
	static node dummy;
	static net nowhere;
	static unsigned char buf[MEMNET_MSG_MAX];
	dummy.nw = &nowhere;
	sky_transport_net nt = {.ctx = &dummy, .publish = fake_publish, .poll = fake_poll};
	sky_diag d;
	void *mem = NULL;
	replica_plan();
	/* the board must be the plan's replica it says it is */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(carve_replica(&t, "r2", 1, 0, k_key, &nt, &mem, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board r2 is not replica 0 of stage 1") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(carve_replica(&t, "r2", 1, 2, k_key, &nt, &mem, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(carve_replica(&t, "r2", 1, 1, k_key, &nt, &mem, &d), 0);
	sky_transport_begin_step(&t, 0);
	long want[SKY_TDROP_N] = {0};
	long sib = 0;
#define TAKE(dir_, from_, mb_, reason_, sibling_)                                                  \
	do {                                                                                      \
		char topic_[SKY_TOPIC_BUF];                                                       \
		snprintf(topic_, sizeof topic_, "sky/v1/job/jt/stage/1/%s/%s",                     \
			 (dir_) == SKY_FRAME_FWD ? "fwd" : "bwd", from_);                         \
		size_t n_ = frame_dir(buf, sizeof buf, dir_, mb_, 10.0f * (mb_));                 \
		SKY_EXPECT(sky_transport_on_msg(&t, topic_, buf, n_) == 1);                       \
		if ((reason_) >= 0)                                                               \
			want[reason_]++;                                                          \
		sib += (sibling_);                                                                \
		for (int r_ = 0; r_ < SKY_TDROP_N; r_++)                                          \
			SKY_EXPECT_MSG(t.drops[r_] == want[r_], "mb %d from %s: %s %ld, want %ld", \
				       mb_, from_, sky_transport_drop_name(r_), t.drops[r_],      \
				       want[r_]);                                                 \
		SKY_EXPECT_EQ(t.sibling_frames, sib);                                             \
	} while (0)
	/* micro-batches 0 and 1 are b2's: not ours, not a drop */
	TAKE(SKY_FRAME_FWD, "b1", 0, -1, 1);
	TAKE(SKY_FRAME_FWD, "r1", 1, -1, 1);
	/* mb 2 is ours and comes through b1 (stage 0 routes it to replica 0):
	 * from r1, a replica of stage 0 but not mb 2's, it is dropped */
	TAKE(SKY_FRAME_FWD, "r1", 2, SKY_TDROP_REPLICA, 0);
	/* mb 3 through r1: from b1 dropped */
	TAKE(SKY_FRAME_FWD, "b1", 3, SKY_TDROP_REPLICA, 0);
	/* a board of no replica of stage 0, ours or another stage's */
	TAKE(SKY_FRAME_FWD, "b3", 2, SKY_TDROP_SENDER, 0);
	TAKE(SKY_FRAME_FWD, "r2", 2, SKY_TDROP_SENDER, 0);
	TAKE(SKY_FRAME_FWD, "zz", 2, SKY_TDROP_SENDER, 0);
	/* gradients come from stage 2's only board; a stage-0 replica's is refused */
	TAKE(SKY_FRAME_BWD, "r1", 2, SKY_TDROP_SENDER, 0);
	TAKE(SKY_FRAME_BWD, "b3", 0, -1, 1);
	/* the right ones are taken, and are what the stage gets */
	TAKE(SKY_FRAME_FWD, "b1", 2, -1, 0);
	TAKE(SKY_FRAME_FWD, "r1", 3, -1, 0);
	TAKE(SKY_FRAME_BWD, "b3", 3, -1, 0);
	sky_stage_io io = sky_transport_io(&t);
	const float *x = NULL;
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 0, 2, &x), 0);
	SKY_EXPECT(x && x[0] == 20.0f);
	io.release(io.ctx, SKY_STAGE_FWD);
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 0, 3, &x), 0);
	SKY_EXPECT(x && x[0] == 30.0f);
	io.release(io.ctx, SKY_STAGE_FWD);
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_BWD, 0, 3, &x), 0);
	SKY_EXPECT(x && x[0] == 30.0f);
	io.release(io.ctx, SKY_STAGE_BWD);
	/* a sibling's micro-batch never reaches this replica's ring */
	SKY_EXPECT_EQ(io.recv(io.ctx, SKY_STAGE_FWD, 0, 0, &x), SKY_ETIMEOUT);
#undef TAKE
	/* a replica posts no norm (its stage board does, after the reduction) */
	long before = dummy.published;
	double mine[2] = {1, 2};
	SKY_EXPECT_EQ(sky_transport_norm_post(&t, 0, mine, 3, 2), 0);
	SKY_EXPECT_EQ(dummy.published, before);
	/* a norm from a replica is refused: only a stage's own board sends it */
	long s0 = t.drops[SKY_TDROP_SENDER];
	SKY_EXPECT(sky_transport_on_msg(&t, "sky/v1/job/jt/stage/0/norm/r1", buf, 10) == 1);
	SKY_EXPECT_EQ(t.drops[SKY_TDROP_SENDER], s0 + 1);
	sky_transport_free(&t);
	free(mem);
}

SKY_TEST(transport_replicas_are_all_waited_for_at_the_start)
{
	/* five boards; each announces on a net that loops back to one
	 * transport (stage 2's b3), which is ready when all five are */
	static sky_transport t, other;
	static node dummy;
	static net nowhere;
	dummy.nw = &nowhere;
	sky_transport_net nt = {.ctx = &dummy, .publish = fake_publish, .poll = fake_poll};
	sky_diag d;
	void *mem = NULL, *m2 = NULL;
	replica_plan();
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(carve_replica(&t, "b3", 2, 0, k_key, &nt, &mem, &d), 0);
	SKY_EXPECT_EQ(sky_transport_announce(&t, &d), 0);
	SKY_EXPECT_EQ(sky_transport_wait_ready(&t, 0.05, &d), SKY_ETIMEOUT);
	SKY_EXPECT_MSG(strstr(d.msg, "stages 0,1,r1,r2 not ready") != NULL, "%s", d.msg);
	/* the others' ready frames, as their transports make them */
	const char *boards[4] = {"b1", "r1", "b2", "r2"};
	const int stages[4] = {0, 0, 1, 1}, reps[4] = {0, 1, 0, 1};
	for (int i = 0; i < 4; i++) {
		SKY_EXPECT_EQ(carve_replica(&other, boards[i], stages[i], reps[i], k_key, &nt, &m2, &d),
			      0);
		long before = dummy.published;
		SKY_EXPECT_EQ(sky_transport_announce(&other, &d), 0);
		SKY_EXPECT_EQ(dummy.published, before + 1);
		/* the frame is in other's sendbuf; deliver it as the broker would */
		char topic[SKY_TOPIC_BUF];
		snprintf(topic, sizeof topic, "sky/v1/job/jt/stage/%d/ready/%s", stages[i], boards[i]);
		size_t len = sky_frame_packed_bytes(&(sky_frame_key){.sealed = 1}, sizeof(int32_t));
		SKY_EXPECT(sky_transport_on_msg(&t, topic, other.sendbuf, len) == 1);
		/* a ready of stage 0 from stage 1's replica is refused */
		if (i == 3) {
			snprintf(topic, sizeof topic, "sky/v1/job/jt/stage/0/ready/r2");
			SKY_EXPECT(sky_transport_on_msg(&t, topic, other.sendbuf, len) == 1);
			SKY_EXPECT_EQ(t.drops[SKY_TDROP_SENDER], 1);
		}
		sky_transport_free(&other);
		free(m2);
		m2 = NULL;
	}
	SKY_EXPECT_EQ(t.n_ready, 5);
	SKY_EXPECT_EQ(sky_transport_wait_ready(&t, 0.05, &d), 0);
	sky_transport_free(&t);
	free(mem);
}

/* ---- stage replicas: the reduction of their sums ------------------------------ */

/* Two threads, one transport each; a publish goes into every other
 * node's queue (malloc'd messages, a mutex), a poll drains one's own. */
#define RQ_CAP 64
typedef struct rnode {
	sky_transport t;
	void *mem;
	pthread_mutex_t mu;
	char *topic[RQ_CAP];
	unsigned char *msg[RQ_CAP];
	size_t len[RQ_CAP];
	int n;
	struct rnode *peers[4];
	int n_peers;
	uint64_t *acc;
	size_t n_acc;
	long step;
	int rc;
} rnode;

static int rq_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
		      int retained)
{
	rnode *me = ctx;
	(void)qos, (void)retained;
	for (int i = 0; i < me->n_peers; i++) {
		rnode *o = me->peers[i];
		pthread_mutex_lock(&o->mu);
		if (o->n < RQ_CAP) {
			o->topic[o->n] = strdup(topic);
			o->msg[o->n] = malloc(len);
			memcpy(o->msg[o->n], data, len);
			o->len[o->n++] = len;
		}
		pthread_mutex_unlock(&o->mu);
	}
	return 0;
}

static void rq_poll(void *ctx, int wait_ms)
{
	rnode *me = ctx;
	pthread_mutex_lock(&me->mu);
	int n = me->n;
	char *tp[RQ_CAP];
	unsigned char *m[RQ_CAP];
	size_t l[RQ_CAP];
	memcpy(tp, me->topic, sizeof tp);
	memcpy(m, me->msg, sizeof m);
	memcpy(l, me->len, sizeof l);
	me->n = 0;
	pthread_mutex_unlock(&me->mu);
	if (!n)
		sky_sleep_ms(wait_ms < 1 ? 0 : 1);
	for (int i = 0; i < n; i++) {
		sky_transport_on_msg(&me->t, tp[i], m[i], l[i]);
		free(tp[i]);
		free(m[i]);
	}
}

static void *reduce_thread(void *arg)
{
	rnode *me = arg;
	me->rc = sky_transport_reduce(&me->t, me->step, me->acc, me->n_acc);
	return NULL;
}

static int carve_reducer(rnode *nd, const char *board, int replica, size_t n)
{
	sky_model_cfg c = tiny(3);
	sky_transport_cfg tc = {.job = "jt", .board = board, .epoch = 5, .stage = 1,
				.n_stages = 3, .micro = 4, .batch = c.batch, .seq = c.seq,
				.hidden = c.hidden, .fwd_slots = 2, .bwd_slots = 2,
				.first = g_first, .last = g_last, .key = k_key, .stall_s = 5,
				.boards = g_boards3, .plan = &g_rplan, .replica = replica,
				.reduce_n = n};
	sky_transport_net nt = {.ctx = nd, .publish = rq_publish, .poll = rq_poll};
	sky_arena a;
	sky_diag d;
	sky_diag_clear(&d);
	sky_arena_init(&a, NULL, 0);
	int rc = sky_transport_carve(&nd->t, &tc, &nt, &a, &d);
	if (rc)
		return rc;
	size_t need = sky_arena_required(&a);
	nd->mem = malloc(need);
	sky_arena_init(&a, nd->mem, need);
	return sky_transport_carve(&nd->t, &tc, &nt, &a, &d);
}

SKY_TEST(transport_replicas_reduce_their_sums_in_sealed_chunks)
{
	static rnode nd[2];
	/* 2.3 chunks: the last one short */
	const size_t n = 2 * SKY_TRANSPORT_RED_CHUNK + 12345;
	replica_plan();
	memset(nd, 0, sizeof nd);
	const char *boards[2] = {"b2", "r2"};
	for (int i = 0; i < 2; i++) {
		pthread_mutex_init(&nd[i].mu, NULL);
		nd[i].peers[0] = &nd[1 - i];
		nd[i].n_peers = 1;
		SKY_EXPECT_EQ(carve_reducer(&nd[i], boards[i], i, n), 0);
		nd[i].acc = malloc(n * sizeof(uint64_t));
		nd[i].n_acc = n;
		for (size_t j = 0; j < n; j++)
			nd[i].acc[j] = (uint64_t)(j * 2654435761u) ^ ((uint64_t)i << 40);
		sky_transport_begin_step(&nd[i].t, 0);
	}
	char topics[8][SKY_TOPIC_BUF];
	int nt = sky_transport_topics(&nd[1].t, topics, 8);
	SKY_EXPECT_EQ(nt, 5);
	SKY_EXPECT_MSG(strcmp(topics[nt - 1], "sky/v1/job/jt/stage/1/grad/+") == 0, "%s",
		       topics[nt - 1]);
	uint64_t *want = malloc(n * sizeof(uint64_t));
	for (size_t j = 0; j < n; j++)
		want[j] = nd[0].acc[j] + nd[1].acc[j];
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, reduce_thread, &nd[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		SKY_EXPECT_EQ(nd[i].rc, 0);
		SKY_EXPECT(memcmp(nd[i].acc, want, n * sizeof(uint64_t)) == 0);
		SKY_EXPECT_EQ(nd[i].t.frames_out, 3);
		SKY_EXPECT_EQ(nd[i].t.frames_in, 3);
		for (int r = 0; r < SKY_TDROP_N; r++)
			SKY_EXPECT_EQ(nd[i].t.drops[r], 0);
	}
	/* chunks from a board that is no replica of the stage, and a chunk
	 * again: dropped and counted; then a forged chunk under another key */
	for (int i = 0; i < 2; i++) {
		sky_transport_begin_step(&nd[i].t, 1);
		nd[i].step = 1;
	}
	pthread_create(&th[1], NULL, reduce_thread, &nd[1]);
	/* r2's 3 chunks of step 1 reach b2's queue */
	for (int tries = 0; tries < 5000; tries++) {
		pthread_mutex_lock(&nd[0].mu);
		int got = nd[0].n;
		pthread_mutex_unlock(&nd[0].mu);
		if (got >= 3)
			break;
		sky_sleep_ms(1);
	}
	pthread_mutex_lock(&nd[0].mu);
	SKY_EXPECT_EQ(nd[0].n, 3);
	/* the same chunk under other senders' names, and once more as r2 */
	unsigned char *c0 = nd[0].msg[0];
	size_t l0 = nd[0].len[0];
	pthread_mutex_unlock(&nd[0].mu);
	sky_transport *t0 = &nd[0].t;
	SKY_EXPECT(sky_transport_on_msg(t0, "sky/v1/job/jt/stage/1/grad/b1", c0, l0) == 1);
	SKY_EXPECT(sky_transport_on_msg(t0, "sky/v1/job/jt/stage/1/grad/r1", c0, l0) == 1);
	SKY_EXPECT_EQ(t0->drops[SKY_TDROP_SENDER], 2);
	SKY_EXPECT(sky_transport_on_msg(t0, "sky/v1/job/jt/stage/1/grad/r2", c0, l0) == 1);
	SKY_EXPECT_EQ(t0->red_n[1], 1);
	SKY_EXPECT(sky_transport_on_msg(t0, "sky/v1/job/jt/stage/1/grad/r2", c0, l0) == 1);
	SKY_EXPECT_EQ(t0->drops[SKY_TDROP_DUPLICATE], 1);
	unsigned char *bad = malloc(l0);
	memcpy(bad, c0, l0);
	bad[l0 - 20] ^= 1; /* a bit of the sealed payload flips */
	SKY_EXPECT(sky_transport_on_msg(t0, "sky/v1/job/jt/stage/1/grad/r2", bad, l0) == 1);
	SKY_EXPECT_EQ(t0->drops[SKY_DROP_AUTH] + t0->drops[SKY_DROP_CHECKSUM], 1);
	free(bad);
	/* b2 reduces: the queued chunks (the first again, as a duplicate);
	 * its own reach r2, which ends with the same sums */
	SKY_EXPECT_EQ(sky_transport_reduce(t0, 1, nd[0].acc, n), 0);
	SKY_EXPECT_EQ(t0->drops[SKY_TDROP_DUPLICATE], 2);
	pthread_join(th[1], NULL);
	SKY_EXPECT_EQ(nd[1].rc, 0);
	SKY_EXPECT(memcmp(nd[0].acc, nd[1].acc, n * sizeof(uint64_t)) == 0);
	for (int i = 0; i < 2; i++) {
		sky_transport_free(&nd[i].t);
		free(nd[i].mem);
		free(nd[i].acc);
	}
	free(want);
}

/* ---- a pipeline over the fake network ------------------------------------------ */

/* A stage's process: start barrier, steps, results into shared memory. */
static void node_child(node *me)
{
	net *nw = me->nw;
	shm *sh = nw->sh;
	sky_stage_io io = sky_transport_io(&me->t);
	sky_diag d;
	alarm(300); /* a deadlock ends the child, and the test fails */
	unsigned long before = sky_test_allocs();
	int rc = sky_transport_start(&me->t, 30, &d);
	for (long s = 0; s < nw->steps && !rc; s++) {
		sky_transport_begin_step(&me->t, s);
		rc = sky_stage_step(&me->s, &io, sky_optim_lr_at(nw->lr, s, nw->steps, nw->warmup),
				    &sh->loss[me->k][s]);
	}
	sh->allocs[me->k] = sky_test_allocs() - before;
	sh->rc[me->k] = rc;
	memcpy(sh->drops[me->k], me->t.drops, sizeof me->t.drops);
	if (me->s.n_params <= 40000)
		memcpy(sh->params[me->k], me->s.params, me->s.n_params * sizeof(float));
	_exit(0);
}

/* ---- sites: which topic a message goes to ------------------------------------ */

typedef struct rec {
	char topic[8][SKY_TOPIC_BUF];
	int n;
} rec;

static int rec_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
		       int retained)
{
	rec *r = ctx;
	(void)data, (void)len, (void)qos, (void)retained;
	if (r->n < 8)
		snprintf(r->topic[r->n++], SKY_TOPIC_BUF, "%s", topic);
	return 0;
}

static void rec_poll(void *ctx, int wait_ms)
{
	(void)ctx;
	sky_sleep_ms(wait_ms < 5 ? wait_ms : 5);
}

/* Stage k of 3 with the given sites, over a recording net; returns the
 * topics its ready went to (start times out at once: nobody answers). */
static sky_transport *site_stage(int k, const char *const *sites, rec *r, void **mem)
{
	static sky_transport t;
	sky_model_cfg c = tiny(3);
	sky_transport_cfg tc = {.job = "jt", .board = "b", .epoch = 5, .stage = k, .n_stages = 3,
				.micro = 2, .batch = c.batch, .seq = c.seq, .hidden = c.hidden,
				.fwd_slots = 2, .bwd_slots = 2, .first = g_first, .last = g_last,
				.site = sites, .stall_s = 0.2};
	sky_transport_net nt = {.ctx = r, .publish = rec_publish, .poll = rec_poll};
	sky_arena a;
	sky_diag d;
	sky_arena_init(&a, NULL, 0);
	SKY_EXPECT(sky_transport_carve(&t, &tc, &nt, &a, &d) == 0);
	size_t n = sky_arena_required(&a);
	*mem = malloc(n);
	sky_arena_init(&a, *mem, n);
	SKY_EXPECT_MSG(sky_transport_carve(&t, &tc, &nt, &a, &d) == 0, "%s", d.msg);
	return &t;
}

static int has(const char topics[][SKY_TOPIC_BUF], int n, const char *want)
{
	for (int i = 0; i < n; i++)
		if (strcmp(topics[i], want) == 0)
			return 1;
	return 0;
}

SKY_TEST(transport_sites_frames_within_a_site_stay_plain_across_sites_are_addressed)
{
	/* stages 0 and 1 on site A, stage 2 on site B */
	static const char *const sites[3] = {"A", "A", "B"};
	rec r = {0};
	void *mem;
	sky_transport *t = site_stage(1, sites, &r, &mem);
	SKY_EXPECT_MSG(strcmp(t->topic_bwd_out, "sky/v1/job/jt/stage/0/bwd/b") == 0, "%s", t->topic_bwd_out);
	SKY_EXPECT_MSG(strcmp(t->topic_fwd_out, "sky/v1/site/B/job/jt/stage/2/fwd/b") == 0, "%s", t->topic_fwd_out);
	/* ready goes to our site plainly and to B addressed; never to A addressed */
	SKY_EXPECT(sky_transport_start(t, 0.05, NULL) == SKY_ETIMEOUT);
	SKY_EXPECT_EQ(r.n, 2);
	SKY_EXPECT(has(r.topic, r.n, "sky/v1/job/jt/stage/1/ready/b"));
	SKY_EXPECT(has(r.topic, r.n, "sky/v1/site/B/job/jt/stage/1/ready/b"));
	/* a site's stage subscribes to the plain topics only (its bridge
	 * delivers what is addressed to it there) */
	char topics[8][SKY_TOPIC_BUF];
	SKY_EXPECT_EQ(sky_transport_topics(t, topics, 8), 4);
	sky_transport_free(t);
	free(mem);

	/* stage 2 on B: both its neighbours' messages cross */
	memset(&r, 0, sizeof r);
	t = site_stage(2, sites, &r, &mem);
	SKY_EXPECT_MSG(strcmp(t->topic_bwd_out, "sky/v1/site/A/job/jt/stage/1/bwd/b") == 0, "%s", t->topic_bwd_out);
	sky_transport_free(t);
	free(mem);
}

SKY_TEST(transport_sites_the_core_site_reads_what_is_addressed_to_core)
{
	/* stage 0 on the core ("" and "core" are one), 1 on A, 2 on the core */
	static const char *const sites[3] = {"", "A", "core"};
	rec r = {0};
	void *mem;
	sky_transport *t = site_stage(2, sites, &r, &mem);
	SKY_EXPECT_MSG(strcmp(t->topic_bwd_out, "sky/v1/site/A/job/jt/stage/1/bwd/b") == 0, "%s", t->topic_bwd_out);
	char topics[8][SKY_TOPIC_BUF];
	int n = sky_transport_topics(t, topics, 8);
	SKY_EXPECT(has(topics, n, "sky/v1/job/jt/stage/2/fwd/+"));
	SKY_EXPECT(has(topics, n, "sky/v1/site/core/job/jt/stage/2/fwd/+"));
	SKY_EXPECT(has(topics, n, "sky/v1/site/core/job/jt/stage/+/ready/+"));
	/* a ready addressed to the core counts; one addressed to A is not ours */
	SKY_EXPECT(sky_transport_start(t, 0.05, NULL) == SKY_ETIMEOUT);
	unsigned char buf[256];
	sky_frame_hdr h = {.direction = SKY_FRAME_FWD, .dtype = SKY_FRAME_S32, .ndim = 1,
			   .shape = {1}, .stage = 1, .epoch = 5};
	snprintf(h.job, sizeof h.job, "jt");
	int32_t v = 1;
	int len = sky_frame_pack(NULL, &h, &v, sizeof v, buf, sizeof buf, NULL);
	SKY_EXPECT(len > 0);
	SKY_EXPECT_EQ(sky_transport_on_msg(t, "sky/v1/site/A/job/jt/stage/1/ready/b", buf, (size_t)len),
		      0);
	SKY_EXPECT_EQ(t->ready[1], 0);
	SKY_EXPECT_EQ(sky_transport_on_msg(t, "sky/v1/site/core/job/jt/stage/1/ready/b", buf,
					   (size_t)len),
		      1);
	SKY_EXPECT_EQ(t->ready[1], 1);
	sky_transport_free(t);
	free(mem);
}

SKY_TEST(transport_pipeline_sealed_equals_one_board_and_allocates_nothing)
{
	static net nw;
	memset(&nw, 0, sizeof nw);
	sky_model_cfg c = tiny(2);
	const int micro = 3, steps = 3;
	const unsigned long long seed = 11;
	int first[3] = {0, 1, 3}, last[3] = {0, 2, 3}; /* uneven halves */
	nw.n = 3;
	nw.steps = steps;
	nw.warmup = 1;
	nw.lr = 1e-3f;
	/* one board */
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_ADAMW);
	o.micro = micro;
	o.clip_norm = 0.01f; /* small enough to clip: the norm exchange matters */
	size_t nb = 0;
	sky_bert_arena_bytes(&c, &o, &nb);
	void *bb = malloc(nb);
	sky_arena a;
	sky_arena_init(&a, bb, nb);
	sky_bert m;
	SKY_EXPECT(sky_bert_carve(&m, &c, &o, &a) == 0);
	sky_bert_init(&m, seed);
	const size_t T = (size_t)sky_model_tokens(&c);
	int32_t *ids = malloc(8 * T * 4), *types = malloc(8 * T * 4), *attn = malloc(8 * T * 4),
		*labels = malloc(8 * (size_t)c.batch * 4);
	sky_bert_batch mb[8];
	float loss1[8];
	for (long s = 0; s < steps; s++) {
		step_batches(&c, seed, s, micro, ids, types, attn, labels, mb);
		m.opts.optim.lr = sky_optim_lr_at(o.optim.lr, s, steps, nw.warmup);
		SKY_EXPECT(sky_bert_train_step(&m, mb, &loss1[s]) == 0);
	}
	/* the pipeline */
	nw.sh = mmap(NULL, sizeof(shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	SKY_EXPECT(nw.sh != MAP_FAILED);
	if (nw.sh == MAP_FAILED)
		return;
	memset(nw.sh, 0, sizeof *nw.sh);
	memnet_init(nw.sh->in, nw.n);
	for (int k = 0; k < nw.n; k++) {
		node *nd = &nw.nd[k];
		nd->nw = &nw;
		nd->k = k;
		sky_stage_cfg sc;
		memset(&sc, 0, sizeof sc);
		sc.model = c;
		sc.stage = k;
		sc.n_stages = nw.n;
		sc.first = first[k];
		sc.last = last[k];
		sc.micro = micro;
		sc.sched = SKY_SCHEDULE_1F1B;
		sc.in_flight = sky_schedule_in_flight(sc.sched, k, nw.n, micro);
		sc.optim = o.optim;
		sc.clip_norm = o.clip_norm;
		sc.seed = seed;
		sky_transport_cfg tc = {.job = "jp", .board = "b", .epoch = 2, .stage = k,
					.n_stages = nw.n, .micro = micro, .batch = c.batch,
					.seq = c.seq, .hidden = c.hidden,
					.fwd_slots = k ? sky_schedule_in_flight(sc.sched, k - 1, nw.n, micro) : 1,
					.bwd_slots = sc.in_flight, .first = first, .last = last,
					.key = k_key, .stall_s = 30};
		sky_transport_net nt = {.ctx = nd, .publish = fake_publish, .poll = fake_poll};
		sky_diag d;
		sky_arena_init(&a, NULL, 0);
		SKY_EXPECT(sky_stage_carve(&nd->s, &sc, &a, &d) == 0);
		SKY_EXPECT(sky_transport_carve(&nd->t, &tc, &nt, &a, &d) == 0);
		size_t n = sky_arena_required(&a);
		nd->mem = malloc(n);
		sky_arena_init(&a, nd->mem, n);
		SKY_EXPECT(sky_stage_carve(&nd->s, &sc, &a, &d) == 0);
		SKY_EXPECT_MSG(sky_transport_carve(&nd->t, &tc, &nt, &a, &d) == 0, "%s", d.msg);
		SKY_EXPECT(sky_arena_seal(&a) == 0);
		sky_stage_init(&nd->s);
	}
	fflush(NULL);
	pid_t pid[MAX_ST];
	for (int k = 0; k < nw.n; k++)
		if ((pid[k] = fork()) == 0)
			node_child(&nw.nd[k]);
	for (int k = 0; k < nw.n; k++) {
		int status = 0;
		SKY_EXPECT(pid[k] > 0 && waitpid(pid[k], &status, 0) == pid[k]);
		SKY_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			       "stage %d's process ended with status %d", k, status);
	}
	shm *sh = nw.sh;
	for (int k = 0; k < nw.n; k++) {
		SKY_EXPECT_MSG(sh->rc[k] == 0, "stage %d: %s", k, sky_strerror(sh->rc[k]));
		SKY_EXPECT_MSG(sh->allocs[k] == 0, "stage %d allocated %lu times during start and steps",
			       k, sh->allocs[k]);
		for (int r = 0; r < SKY_TDROP_N; r++)
			SKY_EXPECT_MSG(sh->drops[k][r] == 0, "stage %d dropped %ld (%s)", k,
				       sh->drops[k][r], sky_transport_drop_name(r));
		nw.nd[k].s.params = sh->params[k];
	}
	for (int s = 0; s < steps; s++)
		SKY_EXPECT_MSG(memcmp(&sh->loss[nw.n - 1][s], &loss1[s], sizeof(float)) == 0,
			       "step %d: %.9g vs %.9g", s + 1, (double)sh->loss[nw.n - 1][s],
			       (double)loss1[s]);
	int diff = 0;
	for (int k = 0; k < nw.n; k++)
		for (int b = 0; b < 2 * c.layers + 2; b++) {
			size_t n = 0;
			const float *sp = sky_stage_block(&nw.nd[k].s, b, &n), *bp;
			if (!sp)
				continue;
			size_t n_one = 0;
			bp = sky_bert_block(&m, m.params, b, &n_one);
			SKY_EXPECT_MSG(bp && n_one == n, "block %d: %zu floats on the stage, %zu on one board",
				       b, n, n_one);
			if (!bp || n_one != n)
				continue;
			diff += memcmp(sp, bp, n * sizeof(float)) != 0;
		}
	SKY_EXPECT_MSG(diff == 0, "%d blocks differ", diff);
	for (int k = 0; k < nw.n; k++) {
		sky_transport_free(&nw.nd[k].t);
		free(nw.nd[k].mem);
	}
	munmap(nw.sh, sizeof *nw.sh);
	free(ids);
	free(types);
	free(attn);
	free(labels);
	free(bb);
}
