/* A board's training job (runtime/trainjob.c) in a plan with stage
 * replicas: 3 stages on 5 boards (stage 1 on b1 and r1, stage 2 on b2 and
 * r2, micro-batches shared 2/2 and 1/3), each board a process (fork)
 * running sky_trainjob_run over an in-memory network in shared memory,
 * sealed frames, the replicas' reduction in chunks that fit the network's
 * messages. Under GPipe and 1F1B every board's weights equal
 * sky_bert_train_step with fixed-point sums (`sky train --exact-sum`) bit
 * for bit, and a sealed frame from the replica the plan does not route
 * that micro-batch through is dropped and counted ("replica"). */
#include "sky_test.h"

#include "memnet.h"
#include "step_batches.h"

#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_frameseal.h"
#include "sky_task.h"
#include "sky_trainjob.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_BOARDS 5
#define PARAMS_MAX 60000

static const unsigned char k_key[SKY_FRAME_KEY_BYTES] = {4, 4, 2, 1};

typedef struct shm {
	memnet_inbox in[N_BOARDS];
	int rc[N_BOARDS];
	float loss[N_BOARDS];
	long drops[N_BOARDS][SKY_TDROP_N];
	long sibling[N_BOARDS];
	size_t n_params[N_BOARDS];
	float params[N_BOARDS][PARAMS_MAX];
	char msg[N_BOARDS][160];
} shm;

typedef struct node {
	int k;
	shm *sh;
	sky_trainjob j;
} node;

static node g_nodes[N_BOARDS];
static sky_planmsg g_plan;
static const char *const g_id[N_BOARDS] = {"b0", "b1", "r1", "b2", "r2"};
static const int g_stage[N_BOARDS] = {0, 1, 1, 2, 2};

static int fake_publish(void *ctx, const char *topic, const void *data, size_t len, int qos,
			int retained)
{
	node *me = ctx;
	(void)qos, (void)retained;
	if (!strstr(topic, "/stage/"))
		return 0;
	return memnet_publish(me->sh->in, N_BOARDS, topic, data, len);
}

static void on_msg(void *ctx, const char *topic, const unsigned char *data, size_t len)
{
	node *me = ctx;
	sky_trainjob_on_msg(&me->j, topic, data, len);
}

static void fake_poll(void *ctx, int wait_ms)
{
	node *me = ctx;
	memnet_poll(&me->sh->in[me->k], wait_ms, on_msg, me);
}

/* tiny, 2 layers: stage 0 half-layer 0 on b0; 1-2 on b1 and r1 (route
 * 0,1,0,1); 3 and the head on b2 and r2 (route 0,1,1,1) */
static void make_plan(sky_planmsg *p, const char *sched, int steps)
{
	const int micro = 4, gpipe = !strcmp(sched, "gpipe");
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "jr");
	p->epoch = 2;
	snprintf(p->algo, sizeof p->algo, "test");
	p->micro_batches = micro;
	snprintf(p->shape.name, sizeof p->shape.name, "tiny");
	p->shape.hidden = c.hidden, p->shape.heads = c.heads, p->shape.ffn = c.ffn;
	p->shape.seq = c.seq, p->shape.batch = c.batch;
	p->layers = 2;
	p->n_stages = 3;
	const int first[3] = {0, 1, 3}, last[3] = {0, 2, 3};
	const unsigned char route[3][4] = {{0}, {0, 1, 0, 1}, {0, 1, 1, 1}};
	for (int k = 0; k < 3; k++) {
		sky_plan_stage *s = &p->stages[k];
		snprintf(s->board, sizeof s->board, "%s", g_id[k == 0 ? 0 : 2 * k - 1]);
		s->first = first[k];
		s->last = last[k];
		snprintf(s->key, sizeof s->key, "x");
		int share0 = 0, share1 = 0;
		for (int mb = 0; mb < micro; mb++)
			share0 += k == 0 || route[k][mb] == 0, share1 += k > 0 && route[k][mb] == 1;
		int lim = 3 - k;
		s->in_flight = gpipe ? share0 : (share0 < lim ? share0 : lim);
		if (k == 0)
			continue;
		sky_plan_replica r;
		memset(&r, 0, sizeof r);
		snprintf(r.board, sizeof r.board, "%s", g_id[2 * k]);
		snprintf(r.key, sizeof r.key, "x");
		r.in_flight = gpipe ? share1 : (share1 < lim ? share1 : lim);
		SKY_EXPECT_EQ(sky_planmsg_add_replica(p, k, &r), 1);
		sky_planmsg_set_route(p, k, route[k]);
	}
	sky_plan_train *t = &p->train;
	t->steps = steps;
	snprintf(t->sched, sizeof t->sched, "%s", sched);
	snprintf(t->optim, sizeof t->optim, "adamw");
	t->lr = 1e-3;
	t->seed = 21;
	t->warmup = 1;
	t->clip = 0.01; /* small enough to clip: the norm exchange matters */
	t->stall_s = 30;
	t->sealed = 1;
	sky_diag d;
	sky_diag_clear(&d);
	static char buf[SKY_PLAN_MAX_BYTES];
	SKY_EXPECT_MSG(sky_planmsg_encode(p, buf, sizeof buf, &d) > 0, "%s", d.msg);
}

static void child(node *me)
{
	shm *sh = me->sh;
	sky_diag d;
	sky_diag_clear(&d);
	alarm(300); /* a deadlock ends the child, and the test fails */
	int rc = sky_trainjob_run(&me->j, NULL, 30, &d);
	sh->rc[me->k] = rc;
	snprintf(sh->msg[me->k], sizeof sh->msg[0], "%.159s", d.msg);
	sh->loss[me->k] = me->j.last_loss;
	for (int i = 0; i < SKY_TDROP_N; i++)
		sh->drops[me->k][i] = me->j.tr.drops[i];
	sh->sibling[me->k] = me->j.tr.sibling_frames;
	if (me->j.st.n_params <= PARAMS_MAX) {
		sh->n_params[me->k] = me->j.st.n_params;
		memcpy(sh->params[me->k], me->j.st.params, me->j.st.n_params * sizeof(float));
	}
	_exit(0);
}

/* A sealed forward frame of step 0, micro-batch mb, for stage `to`. */
static size_t forged_frame(unsigned char *out, size_t cap, int to, int mb)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	size_t n = (size_t)c.batch * c.seq * c.hidden;
	float *x = calloc(n, sizeof *x);
	sky_frame_key k;
	memset(&k, 0, sizeof k);
	sky_frame_key_init(&k, k_key);
	sky_frame_hdr h = {.direction = SKY_FRAME_FWD, .dtype = SKY_FRAME_F32, .ndim = 3,
			   .stage = (uint32_t)to, .micro_batch = (uint32_t)mb,
			   .shape = {(uint32_t)c.batch, (uint32_t)c.seq, (uint32_t)c.hidden},
			   .epoch = 2, .step = 0};
	snprintf(h.job, sizeof h.job, "jr");
	int rc = sky_frame_pack(&k, &h, x, n * sizeof *x, out, cap, NULL);
	sky_frame_key_free(&k);
	free(x);
	return rc > 0 ? (size_t)rc : 0;
}

static int run_fleet(shm *sh)
{
	for (int i = 0; i < N_BOARDS; i++)
		sky_trainjob_free(&g_nodes[i].j);
	memset(sh, 0, sizeof *sh);
	memnet_init(sh->in, N_BOARDS);
	int bad = 0;
	for (int i = 0; i < N_BOARDS; i++) {
		node *nd = &g_nodes[i];
		nd->k = i;
		nd->sh = sh;
		sky_transport_net nt = {.ctx = nd, .publish = fake_publish, .poll = fake_poll,
					.max_msg = MEMNET_MSG_MAX};
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_trainjob_setup(&nd->j, &g_plan, g_stage[i], g_id[i], k_key, &nt, &d);
		SKY_EXPECT_MSG(rc == 0, "board %s: %s", g_id[i], d.msg);
		bad |= rc != 0;
	}
	if (bad)
		return -1;
	SKY_EXPECT_EQ(g_nodes[2].j.replica, 1);
	SKY_EXPECT_EQ(g_nodes[3].j.replica, 0);
	/* waiting for the stages: r1 (a replica of stage 1, enrolled in the
	 * job) sends stage 2 micro-batch 0, which the plan routes through b1 */
	static unsigned char buf[MEMNET_MSG_MAX];
	size_t n = forged_frame(buf, sizeof buf, 2, 0);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(memnet_publish(sh->in, N_BOARDS, "sky/v1/job/jr/stage/2/fwd/r1", buf, n), 0);
	fflush(NULL);
	pid_t pid[N_BOARDS];
	for (int i = 0; i < N_BOARDS; i++)
		if ((pid[i] = fork()) == 0)
			child(&g_nodes[i]);
	for (int i = 0; i < N_BOARDS; i++) {
		int status = 0;
		SKY_EXPECT(pid[i] > 0 && waitpid(pid[i], &status, 0) == pid[i]);
		SKY_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			       "board %d's process ended with status %d", i, status);
		bad |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0) || sh->rc[i] != 0;
		SKY_EXPECT_MSG(sh->rc[i] == 0, "board %s: %s", g_id[i], sh->msg[i]);
	}
	return bad ? -1 : 0;
}

static void one_board(int steps, float *loss, sky_bert *m, void **mem)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	c.layers = 2;
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_ADAMW);
	o.optim.lr = (float)g_plan.train.lr;
	o.micro = g_plan.micro_batches;
	o.clip_norm = (float)g_plan.train.clip;
	o.fx_sum = 1;
	size_t nb = 0;
	sky_bert_arena_bytes(&c, &o, &nb);
	*mem = malloc(nb);
	sky_arena a;
	sky_arena_init(&a, *mem, nb);
	SKY_EXPECT(sky_bert_carve(m, &c, &o, &a) == 0);
	const uint64_t seed = (uint64_t)g_plan.train.seed;
	sky_bert_init(m, seed);
	static int32_t ids[8 * 128], types[8 * 128], attn[8 * 128], labels[8 * 8];
	sky_bert_batch mb[8];
	for (long s = 0; s < steps; s++) {
		step_batches(&c, seed, s, o.micro, ids, types, attn, labels, mb);
		m->opts.optim.lr = sky_optim_lr_at(o.optim.lr, s, steps, g_plan.train.warmup);
		SKY_EXPECT(sky_bert_train_step(m, mb, loss) == 0);
	}
}

SKY_TEST(trainjob_replicas_equal_one_board_and_drop_the_wrong_replica)
{
	shm *sh = mmap(NULL, sizeof(shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	SKY_EXPECT(sh != MAP_FAILED);
	if (sh == MAP_FAILED)
		return;
	const char *scheds[2] = {"gpipe", "1f1b"};
	for (int si = 0; si < 2; si++) {
		const int steps = 3;
		make_plan(&g_plan, scheds[si], steps);
		if (run_fleet(sh) != 0)
			continue;
		sky_bert m;
		void *mem = NULL;
		float loss = 0;
		one_board(steps, &loss, &m, &mem);
		/* every board's blocks, replicas too */
		int diff = 0;
		for (int i = 0; i < N_BOARDS; i++) {
			sky_stage *st = &g_nodes[i].j.st;
			st->params = sh->params[i];
			for (int b = 0; b < 2 * 2 + 2; b++) {
				size_t n = 0, n1 = 0;
				const float *sp = sky_stage_block(st, b, &n);
				if (!sp)
					continue;
				const float *bp = sky_bert_block(&m, m.params, b, &n1);
				diff += !bp || n1 != n || memcmp(sp, bp, n * sizeof(float)) != 0;
			}
		}
		SKY_EXPECT_MSG(diff == 0, "%s: %d blocks differ from one board", scheds[si], diff);
		/* the last stage's replicas each report their part of the mean loss */
		float sum = sh->loss[3] + sh->loss[4];
		SKY_EXPECT_MSG(fabsf(sum - loss) <= 1e-6f * loss, "%s: loss %.9g vs one board %.9g",
			       scheds[si], (double)sum, (double)loss);
		/* the forged frame: dropped by b2 (its micro-batch, the wrong
		 * replica), a sibling's frame to r2; nothing else dropped */
		for (int i = 0; i < N_BOARDS; i++)
			for (int r = 0; r < SKY_TDROP_N; r++)
				SKY_EXPECT_MSG(sh->drops[i][r] == (i == 3 && r == SKY_TDROP_REPLICA),
					       "%s: board %s dropped %ld as %s", scheds[si], g_id[i],
					       sh->drops[i][r], sky_transport_drop_name(r));
		SKY_EXPECT(sh->sibling[4] > 0 && sh->sibling[1] > 0);
		free(mem);
	}
	for (int i = 0; i < N_BOARDS; i++)
		sky_trainjob_free(&g_nodes[i].j);
	munmap(sh, sizeof *sh);
}
