/* A board's training job (runtime/trainjob.c) with a data owner: a
 * U-shaped plan of 4 stages on 3 boards (the owner holds stages 0 and 3),
 * each board a process (fork) running sky_trainjob_run over an in-memory
 * network in shared memory, sealed frames. The owner's one op order works
 * under GPipe and 1F1B for every lag tried, the result equals
 * sky_bert_train_step on one board bit for bit, the boards between make no
 * data (no token or label buffers), and the steps allocate nothing (a job
 * of 3 steps makes exactly the allocations of a job of 1: the part's). */
#include "sky_test.h"

#include "memnet.h"
#include "step_batches.h"

#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_task.h"
#include "sky_trainjob.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_BOARDS 3
#define PARAMS_MAX 60000

static const unsigned char k_key[SKY_FRAME_KEY_BYTES] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

typedef struct shm {
	memnet_inbox in[N_BOARDS];
	int rc[N_BOARDS];
	float loss[N_BOARDS];
	unsigned long allocs[N_BOARDS];
	long drops[N_BOARDS];
	int has_data[N_BOARDS];
	size_t n_params[N_BOARDS][2];
	float params[N_BOARDS][2][PARAMS_MAX];
	char msg[N_BOARDS][160];
} shm;

typedef struct node {
	int k;
	shm *sh;
	sky_trainjob j;
} node;

static node g_nodes[N_BOARDS];
static sky_planmsg g_plan;

/* every board sees every stage message; metrics and the part go nowhere */
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

/* tiny, 2 layers: owner "bo" half-layer 0, "b1" 1, "b2" 2, "bo" 3 */
static void make_plan(sky_planmsg *p, const char *sched, int micro, int steps, int lag)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	memset(p, 0, sizeof *p);
	snprintf(p->job, sizeof p->job, "ju");
	p->epoch = 3;
	snprintf(p->algo, sizeof p->algo, "test");
	p->micro_batches = micro;
	snprintf(p->shape.name, sizeof p->shape.name, "tiny");
	p->shape.hidden = c.hidden, p->shape.heads = c.heads, p->shape.ffn = c.ffn;
	p->shape.seq = c.seq, p->shape.batch = c.batch;
	p->layers = 2;
	p->n_stages = 4;
	const char *board[4] = {"bo", "b1", "b2", "bo"};
	int gpipe = !strcmp(sched, "gpipe");
	for (int k = 0; k < 4; k++) {
		snprintf(p->stages[k].board, sizeof p->stages[k].board, "%s", board[k]);
		p->stages[k].first = p->stages[k].last = k;
		p->stages[k].in_flight = gpipe ? micro : (4 - k < micro ? 4 - k : micro);
		snprintf(p->stages[k].key, sizeof p->stages[k].key, "x");
	}
	sky_plan_train *t = &p->train;
	t->steps = steps;
	snprintf(t->sched, sizeof t->sched, "%s", sched);
	snprintf(t->optim, sizeof t->optim, "adamw");
	t->lr = 1e-3;
	t->seed = 13;
	t->warmup = 1;
	t->clip = 0.01; /* small enough to clip: the norm exchange matters */
	t->stall_s = 30;
	t->sealed = 1;
	snprintf(t->owner, sizeof t->owner, "bo");
	t->owner_lag = lag;
}

static void child(node *me)
{
	shm *sh = me->sh;
	sky_diag d;
	sky_diag_clear(&d);
	alarm(300); /* a deadlock ends the child, and the test fails */
	unsigned long before = sky_test_allocs();
	int rc = sky_trainjob_run(&me->j, NULL, 30, &d);
	sh->allocs[me->k] = sky_test_allocs() - before;
	sh->rc[me->k] = rc;
	snprintf(sh->msg[me->k], sizeof sh->msg[0], "%.159s", d.msg);
	sh->loss[me->k] = me->j.last_loss;
	sh->has_data[me->k] = me->j.st.has_data;
	for (int i = 0; i < SKY_TDROP_N; i++)
		sh->drops[me->k] += me->j.tr.drops[i] + me->j.tr2.drops[i];
	const sky_stage *st[2] = {&me->j.st, me->j.stage2 >= 0 ? &me->j.st2 : NULL};
	for (int s = 0; s < 2; s++)
		if (st[s] && st[s]->n_params <= PARAMS_MAX) {
			sh->n_params[me->k][s] = st[s]->n_params;
			memcpy(sh->params[me->k][s], st[s]->params, st[s]->n_params * sizeof(float));
		}
	_exit(0);
}

static void free_fleet(void);

/* runs the plan on three processes; 0 when every board ended well */
static int run_fleet(shm *sh)
{
	free_fleet();
	memset(sh, 0, sizeof *sh);
	memnet_init(sh->in, N_BOARDS);
	const int stage_of[N_BOARDS] = {0, 1, 2};
	const char *id[N_BOARDS] = {"bo", "b1", "b2"};
	int bad = 0;
	for (int i = 0; i < N_BOARDS; i++) {
		node *nd = &g_nodes[i];
		nd->k = i;
		nd->sh = sh;
		sky_transport_net nt = {.ctx = nd, .publish = fake_publish, .poll = fake_poll};
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_trainjob_setup(&nd->j, &g_plan, stage_of[i], id[i], k_key, &nt, &d);
		SKY_EXPECT_MSG(rc == 0, "board %s: %s", id[i], d.msg);
		bad |= rc != 0;
	}
	SKY_EXPECT_EQ(g_nodes[0].j.stage2, 3);
	SKY_EXPECT_EQ(g_nodes[1].j.stage2, -1);
	if (bad)
		return -1;
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
		SKY_EXPECT_MSG(sh->rc[i] == 0, "board %d: %s", i, sh->msg[i]);
		SKY_EXPECT_EQ(sh->drops[i], 0);
	}
	return bad ? -1 : 0;
}

/* the boards' jobs (kept after a run: their stages are compared) */
static void free_fleet(void)
{
	for (int i = 0; i < N_BOARDS; i++)
		sky_trainjob_free(&g_nodes[i].j);
}

/* one board, the same job: the final loss and parameters */
static void one_board(const char *sched, int micro, int steps, float *loss, sky_bert *m, void **mem)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_ADAMW);
	o.optim.lr = (float)g_plan.train.lr;
	o.micro = micro;
	o.clip_norm = (float)g_plan.train.clip;
	(void)sched; /* the order of the micro-batches does not change one board's sums */
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
		step_batches(&c, seed, s, micro, ids, types, attn, labels, mb);
		m->opts.optim.lr = sky_optim_lr_at(o.optim.lr, s, steps, g_plan.train.warmup);
		SKY_EXPECT(sky_bert_train_step(m, mb, loss) == 0);
	}
}

/* the fleet's blocks against one board's */
static int blocks_differ(shm *sh, sky_bert *m)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	int diff = 0;
	for (int i = 0; i < N_BOARDS; i++)
		for (int s = 0; s < 2; s++) {
			sky_stage *st = s ? &g_nodes[i].j.st2 : &g_nodes[i].j.st;
			if (!sh->n_params[i][s])
				continue;
			st->params = sh->params[i][s];
			for (int b = 0; b < 2 * c.layers + 2; b++) {
				size_t n = 0, n1 = 0;
				const float *sp = sky_stage_block(st, b, &n);
				if (!sp)
					continue;
				const float *bp = sky_bert_block(m, m->params, b, &n1);
				diff += !bp || n1 != n || memcmp(sp, bp, n * sizeof(float)) != 0;
			}
		}
	return diff;
}

SKY_TEST(trainjob_owner_u_pipeline_equals_one_board)
{
	shm *sh = mmap(NULL, sizeof(shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	SKY_EXPECT(sh != MAP_FAILED);
	if (sh == MAP_FAILED)
		return;
	const char *scheds[2] = {"gpipe", "1f1b"};
	for (int si = 0; si < 2; si++)
		for (int lag = 0; lag <= 3; lag++) {
			const int micro = 3, steps = 3;
			make_plan(&g_plan, scheds[si], micro, steps, lag);
			if (run_fleet(sh) != 0)
				continue;
			/* the boards between the owner's stages make no data (and
			 * carve no token or label buffers) */
			SKY_EXPECT(sh->has_data[0] && !sh->has_data[1] && !sh->has_data[2]);
			sky_bert m;
			void *mem = NULL;
			float loss = 0;
			one_board(scheds[si], micro, steps, &loss, &m, &mem);
			SKY_EXPECT_MSG(memcmp(&sh->loss[0], &loss, sizeof loss) == 0,
				       "%s lag %d: last loss %.9g vs one board %.9g", scheds[si], lag,
				       (double)sh->loss[0], (double)loss);
			int diff = blocks_differ(sh, &m);
			SKY_EXPECT_MSG(diff == 0, "%s lag %d: %d blocks differ from one board", scheds[si],
				       lag, diff);
			free(mem);
		}
	/* allocations: 3 steps make exactly those of 1 (the part's, at the end) */
	unsigned long per_job[2][N_BOARDS];
	for (int r = 0; r < 2; r++) {
		make_plan(&g_plan, "1f1b", 3, r ? 3 : 1, 1);
		SKY_EXPECT(run_fleet(sh) == 0);
		memcpy(per_job[r], sh->allocs, sizeof per_job[r]);
	}
	for (int i = 0; i < N_BOARDS; i++)
		SKY_EXPECT_MSG(per_job[0][i] == per_job[1][i],
			       "board %d: %lu allocations in a 1-step job, %lu in a 3-step one", i,
			       per_job[0][i], per_job[1][i]);
	free_fleet();
	munmap(sh, sizeof *sh);
}
