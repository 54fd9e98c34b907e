/* Pipeline stages against one board: the same seed gives the same initial
 * tensors; a pipeline of stages (one process each, a fake transport of
 * mailboxes in memory under the sky_stage_io callbacks) gives the same
 * per-step losses and the same final weights as sky_bert_train_step, bit
 * for bit, under several plans, both schedules and both optimizers; a step
 * allocates nothing. */
#include "sky_test.h"

#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_embed.h"
#include "sky_head.h"
#include "sky_layer.h"
#include "sky_stage.h"
#include "sky_task.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ST 6
#define MAX_MB 8
#define STEPS 3

static sky_model_cfg tiny(int layers)
{
	sky_model_cfg c;
	sky_model_preset("tiny", &c);
	c.layers = layers;
	return c;
}

SKY_TEST(stage_layer_init_half_equals_the_whole_layer)
{
	sky_model_cfg c = tiny(1);
	size_t n = (size_t)sky_model_layer_params(&c), fo = sky_layer_half_offset(&c, SKY_BLOCK_FFN);
	SKY_EXPECT_EQ(fo + sky_layer_half_floats(&c, SKY_BLOCK_FFN), n);
	SKY_EXPECT_EQ(sky_layer_half_floats(&c, SKY_BLOCK_ATTN), fo);
	float *w = malloc(n * sizeof(float)), *a = malloc(fo * sizeof(float)),
	      *f = malloc((n - fo) * sizeof(float));
	sky_layer_init(&c, w, 42);
	sky_layer_init_half(&c, a, 42, SKY_BLOCK_ATTN);
	sky_layer_init_half(&c, f, 42, SKY_BLOCK_FFN);
	SKY_EXPECT(memcmp(w, a, fo * sizeof(float)) == 0);
	SKY_EXPECT(memcmp(w + fo, f, (n - fo) * sizeof(float)) == 0);
	sky_layer_init_half(&c, f, 43, SKY_BLOCK_FFN);
	SKY_EXPECT(memcmp(w + fo, f, (n - fo) * sizeof(float)) != 0);
	free(w);
	free(a);
	free(f);
}

/* ---- a pipeline of processes ----------------------------------------------
 * One process per stage (fork: the qemu leg of make check runs these tests
 * too, and threads are not safe under every qemu-user set-up), talking
 * through mailboxes in shared memory under the sky_stage_io callbacks. */

#define BOX_FLOATS 4096 /* tiny: B*S*H = 8*16*32 */
#define PARAM_MAX 40000

typedef struct mailbox {
	atomic_int full;
	long step;
	float data[BOX_FLOATS];
} mailbox;

typedef struct shm {
	mailbox box[MAX_ST][2][MAX_MB]; /* [receiving stage][dir][mb] */
	double norm[2][64];             /* by step parity */
	atomic_int norm_in[2];
	float loss[MAX_ST][STEPS];      /* per process (a stage's replica) */
	int rc[MAX_ST];
	unsigned long allocs[MAX_ST];   /* during the steps, per process */
	float params[MAX_ST][PARAM_MAX];
	/* stage replicas: each process's fixed-point sums, by step parity */
	uint64_t red[MAX_ST][2][PARAM_MAX];
	atomic_int red_in[MAX_ST][2];   /* per stage */
} shm;

typedef struct stage_run {
	shm *sh;
	int k, n;
	int id, np;       /* this process, processes in all */
	int id0, nrep;    /* its stage's first process and replicas */
	sky_stage s;
	void *buf;
	int held[2]; /* the micro-batch whose mailbox recv handed out, per direction */
} stage_run;

/* a waiting stage sleeps: under qemu a spinning process starves the computing one */
static void spin(void) { sky_sleep_ms(1); }

static int fake_recv(void *ctx, int dir, long step, int mb, const float **data)
{
	stage_run *r = ctx;
	mailbox *b = &r->sh->box[r->k][dir][mb];
	while (!(atomic_load(&b->full) && b->step == step))
		spin();
	*data = b->data;
	r->held[dir] = mb;
	return 0;
}

static void fake_release(void *ctx, int dir)
{
	stage_run *r = ctx;
	atomic_store(&r->sh->box[r->k][dir][r->held[dir]].full, 0);
}

static int fake_send(void *ctx, int dir, long step, int mb, float *buf, size_t n)
{
	stage_run *r = ctx;
	int to = dir == SKY_STAGE_FWD ? r->k + 1 : r->k - 1;
	mailbox *b = &r->sh->box[to][dir][mb];
	while (atomic_load(&b->full)) /* the previous step's tensor must have been consumed */
		spin();
	memcpy(b->data, buf, n * sizeof *buf);
	b->step = step;
	atomic_store(&b->full, 1);
	return 0;
}

static int fake_share(void *ctx, long step, const double *mine, int b0, int n, double *all,
		      int n_all)
{
	stage_run *r = ctx;
	shm *sh = r->sh;
	int par = (int)(step & 1);
	memcpy(sh->norm[par] + b0, mine, (size_t)n * sizeof *mine);
	atomic_fetch_add(&sh->norm_in[par], 1);
	while (atomic_load(&sh->norm_in[par]) < r->np)
		spin();
	memcpy(all, sh->norm[par], (size_t)n_all * sizeof *all);
	/* the last reader of this parity resets it for step + 2 */
	if (atomic_fetch_add(&sh->norm_in[par], 1) + 1 == 2 * r->np)
		atomic_store(&sh->norm_in[par], 0);
	return 0;
}

/* the replicas of a stage add their sums (every replica ends with all) */
static int fake_reduce(void *ctx, long step, uint64_t *acc, size_t n)
{
	stage_run *r = ctx;
	shm *sh = r->sh;
	int par = (int)(step & 1);
	if (n > PARAM_MAX)
		return SKY_ERANGE;
	memcpy(sh->red[r->id][par], acc, n * sizeof *acc);
	atomic_fetch_add(&sh->red_in[r->k][par], 1);
	while (atomic_load(&sh->red_in[r->k][par]) < r->nrep)
		spin();
	for (int i = r->id0; i < r->id0 + r->nrep; i++)
		for (size_t j = 0; i != r->id && j < n; j++)
			acc[j] += sh->red[i][par][j];
	if (atomic_fetch_add(&sh->red_in[r->k][par], 1) + 1 == 2 * r->nrep)
		atomic_store(&sh->red_in[r->k][par], 0);
	return 0;
}

/* The child: its steps, then its results into shared memory. */
static void stage_child(stage_run *r, long steps, long warmup, float lr)
{
	sky_stage_io io = {.ctx = r, .recv = fake_recv, .release = fake_release, .send = fake_send,
			   .share_norm = fake_share, .reduce = r->nrep > 1 ? fake_reduce : NULL};
	shm *sh = r->sh;
	alarm(300); /* a pipeline that deadlocks ends the child, and the test fails */
	unsigned long before = sky_test_allocs();
	int rc = 0;
	for (long s = 0; s < steps && !rc; s++)
		rc = sky_stage_step(&r->s, &io, sky_optim_lr_at(lr, s, steps, warmup),
				    &sh->loss[r->id][s]);
	sh->allocs[r->id] = sky_test_allocs() - before;
	sh->rc[r->id] = rc;
	if (r->s.n_params <= PARAM_MAX)
		memcpy(sh->params[r->id], r->s.params, r->s.n_params * sizeof(float));
	_exit(0);
}

typedef struct setup {
	int layers, micro;
	sky_schedule_kind sched;
	sky_optim_kind optim;
	float clip;
	int n;
	int last[MAX_ST]; /* each stage's last half-layer */
	int fx;           /* fixed-point gradient sums on both sides */
	int reps[MAX_ST]; /* replicas of each stage (0: 1); micro-batch mb runs on mb % reps */
} setup;

static unsigned char g_route[MAX_ST][MAX_MB];

/* Runs STEPS steps of `sky train`'s arithmetic on one sky_bert and on a
 * pipeline; expects equal losses and weights. */
/* set by a test: the model drops as a fine-tuned config does (0.1 hidden,
 * 0.1 on the attention probabilities) */
static int g_drop;

static void compare(const setup *u, const char *what)
{
	sky_model_cfg c = tiny(u->layers);
	if (g_drop)
		c.hidden_drop = 0.1f, c.attn_drop = 0.1f;
	const unsigned long long seed = 7;
	const long warmup = 1;
	/* one board */
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, u->optim);
	o.optim.lr = u->optim == SKY_OPTIM_SGD ? 0.05f : 1e-3f;
	o.micro = u->micro;
	o.clip_norm = u->clip;
	o.drop_seed = seed; /* the stages key their masks by their cfg.seed */
	o.fx_sum = u->fx;
	size_t nb = 0;
	SKY_EXPECT(sky_bert_arena_bytes(&c, &o, &nb) == 0);
	void *bb = malloc(nb);
	sky_arena a;
	sky_arena_init(&a, bb, nb);
	sky_bert m;
	SKY_EXPECT(sky_bert_carve(&m, &c, &o, &a) == 0);
	sky_bert_init(&m, seed);
	const size_t T = (size_t)sky_model_tokens(&c);
	int32_t *ids = malloc(MAX_MB * T * 4), *types = malloc(MAX_MB * T * 4),
		*attn = malloc(MAX_MB * T * 4), *labels = malloc(MAX_MB * (size_t)c.batch * 4);
	sky_bert_batch mb[MAX_MB];
	float loss1[STEPS];
	for (long s = 0; s < STEPS; s++) {
		for (int i = 0; i < u->micro; i++) {
			sky_task_batch(&c, seed, SKY_TASK_TRAIN, (uint64_t)(s * u->micro + i), ids + i * T,
				       types + i * T, attn + i * T, labels + i * c.batch);
			mb[i] = (sky_bert_batch){ids + i * T, types + i * T, attn + i * T,
						 labels + i * c.batch};
		}
		m.opts.optim.lr = sky_optim_lr_at(o.optim.lr, s, STEPS, warmup);
		SKY_EXPECT(sky_bert_train_step(&m, mb, &loss1[s]) == 0);
	}

	/* the pipeline */
	shm *sh = mmap(NULL, sizeof(shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	SKY_EXPECT(sh != MAP_FAILED);
	if (sh == MAP_FAILED)
		return;
	memset(sh, 0, sizeof *sh);
	static stage_run st[MAX_ST];
	int first = 0, np = 0;
	for (int k = 0; k < u->n; k++)
		np += u->reps[k] > 1 ? u->reps[k] : 1;
	SKY_EXPECT(np <= MAX_ST);
	for (int id = 0, k = 0, rep = 0; id < np; id++) {
		stage_run *r = &st[id];
		const int nrep = u->reps[k] > 1 ? u->reps[k] : 1;
		sky_stage_cfg sc;
		memset(&sc, 0, sizeof sc);
		sc.model = c;
		sc.stage = k;
		sc.n_stages = u->n;
		sc.first = first;
		sc.last = u->last[k];
		sc.micro = u->micro;
		sc.sched = u->sched;
		sc.in_flight = sky_schedule_in_flight(u->sched, k, u->n, u->micro);
		sc.optim = o.optim;
		sc.clip_norm = u->clip;
		sc.seed = seed;
		sc.fx_sum = u->fx;
		if (nrep > 1) {
			for (int i = 0; i < u->micro; i++)
				g_route[k][i] = (unsigned char)(i % nrep);
			sc.route = g_route[k];
			sc.replica = rep;
			int share = sky_stage_share(&sc);
			sc.in_flight = sc.in_flight < share ? sc.in_flight : share;
		}
		size_t bytes = 0;
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_stage_arena_bytes(&sc, &bytes, &d) == 0, "%s: %s", what, d.msg);
		r->buf = malloc(bytes);
		sky_arena sa;
		sky_arena_init(&sa, r->buf, bytes);
		SKY_EXPECT(sky_stage_carve(&r->s, &sc, &sa, &d) == 0);
		SKY_EXPECT(sky_arena_seal(&sa) == 0);
		sky_stage_init(&r->s);
		r->sh = sh;
		r->k = k;
		r->n = u->n;
		r->id = id;
		r->np = np;
		r->id0 = id - rep;
		r->nrep = nrep;
		SKY_EXPECT(T * (size_t)c.hidden <= BOX_FLOATS && r->s.n_params <= PARAM_MAX);
		if (++rep == nrep) {
			rep = 0;
			first = sc.last + 1;
			k++;
		}
	}
	/* initial weights equal to a fresh sky_bert's, block by block */
	{
		sky_bert m0;
		void *b0 = malloc(nb);
		sky_arena a0;
		sky_arena_init(&a0, b0, nb);
		sky_bert_carve(&m0, &c, &o, &a0);
		sky_bert_init(&m0, seed);
		for (int k = 0; k < np; k++)
			for (int b = 0; b < 2 * c.layers + 2; b++) {
				size_t n = 0;
				const float *sp = sky_stage_block(&st[k].s, b, &n), *bp;
				if (!sp)
					continue;
				size_t n_one = 0;
				bp = sky_bert_block(&m0, m0.params, b, &n_one);
				SKY_EXPECT_MSG(bp && n_one == n, "block %d: %zu floats on the stage, %zu on one board",
					       b, n, n_one);
				if (!bp || n_one != n)
					continue;
				SKY_EXPECT_MSG(memcmp(sp, bp, n * sizeof(float)) == 0,
					       "%s: initial block %d of stage %d differs", what, b, k);
			}
		free(b0);
	}
	fflush(NULL); /* the children must not write the parent's buffered output again */
	pid_t pid[MAX_ST];
	for (int k = 0; k < np; k++)
		if ((pid[k] = fork()) == 0)
			stage_child(&st[k], STEPS, warmup, o.optim.lr);
	for (int k = 0; k < np; k++) {
		int status = 0;
		SKY_EXPECT(pid[k] > 0 && waitpid(pid[k], &status, 0) == pid[k]);
		SKY_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			       "%s: stage %d's process ended with status %d", what, k, status);
	}
	for (int k = 0; k < np; k++) {
		SKY_EXPECT_MSG(sh->rc[k] == 0, "%s: process %d: %s", what, k, sky_strerror(sh->rc[k]));
		SKY_EXPECT_MSG(sh->allocs[k] == 0, "%s: process %d allocated %lu times during the steps",
			       what, k, sh->allocs[k]);
	}
	/* the loss: the last stage's replicas each report their micro-batches'
	 * share of the mean (one replica: exactly one board's) */
	const int nlast = u->reps[u->n - 1] > 1 ? u->reps[u->n - 1] : 1;
	float last_loss[STEPS];
	for (long s = 0; s < STEPS; s++) {
		last_loss[s] = 0;
		for (int i = np - nlast; i < np; i++)
			last_loss[s] += sh->loss[i][s];
		if (nlast == 1)
			SKY_EXPECT_MSG(memcmp(&last_loss[s], &loss1[s], sizeof(float)) == 0,
				       "%s: step %ld loss %.9g on the pipeline, %.9g on one board",
				       what, s + 1, (double)last_loss[s], (double)loss1[s]);
		else
			SKY_EXPECT_MSG(fabsf(last_loss[s] - loss1[s]) <= 1e-6f * loss1[s],
				       "%s: step %ld loss %.9g on the replicas, %.9g on one board",
				       what, s + 1, (double)last_loss[s], (double)loss1[s]);
	}
	/* final weights, block by block (each child copied its params out),
	 * every replica's */
	int diff = 0;
	for (int k = 0; k < np; k++) {
		st[k].s.params = sh->params[k];
		for (int b = 0; b < 2 * c.layers + 2; b++) {
			size_t n = 0;
			const float *sp = sky_stage_block(&st[k].s, b, &n), *bp;
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
	}
	SKY_EXPECT_MSG(diff == 0, "%s: %d blocks differ after %d steps", what, diff, STEPS);
	SKY_EXPECT(last_loss[STEPS - 1] > 0);
	for (int k = 0; k < np; k++)
		free(st[k].buf);
	munmap(sh, sizeof *sh);
	free(ids);
	free(types);
	free(attn);
	free(labels);
	free(bb);
}

SKY_TEST(stage_pipeline_equals_one_board_1f1b_adamw_uneven_halves)
{
	/* 3 layers = half-layers 0..5: stage 1 holds layer 1's attention
	 * alone, stage 2 starts with layer 1's feed-forward block */
	setup u = {3, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 3, {1, 2, 5}, 0, {0}};
	compare(&u, "1f1b adamw 3 stages");
}

SKY_TEST(stage_pipeline_equals_one_board_gpipe_sgd_four_stages)
{
	setup u = {2, 4, SKY_SCHEDULE_GPIPE, SKY_OPTIM_SGD, 0.02f, 4, {0, 1, 2, 3}, 0, {0}};
	compare(&u, "gpipe sgd 4 stages");
}

SKY_TEST(stage_pipeline_equals_one_board_more_stages_than_micro_batches)
{
	setup u = {3, 2, SKY_SCHEDULE_1F1B, SKY_OPTIM_SGD, 0.0f, 5, {0, 2, 3, 4, 5}, 0, {0}};
	compare(&u, "1f1b sgd 5 stages, 2 micro-batches, no clip");
}

/* With dropout, the stages draw the masks one board draws (each keyed by
 * step, micro-batch, layer and position), so the pipeline still equals
 * it bit for bit, a layer split between stages included. */
SKY_TEST(stage_pipeline_with_dropout_equals_one_board)
{
	g_drop = 1;
	setup a = {3, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 3, {1, 2, 5}, 0, {0}};
	compare(&a, "dropout, 1f1b adamw 3 stages");
	setup b = {2, 3, SKY_SCHEDULE_GPIPE, SKY_OPTIM_SGD, 0.02f, 4, {0, 1, 2, 3}, 0, {0}};
	compare(&b, "dropout, gpipe sgd 4 stages");
	g_drop = 0;
}

/* Fixed-point gradient sums (`sky train --exact-sum`): a pipeline equals
 * one board bit for bit as before, and so do stage replicas, however the
 * micro-batches are shared among them (every replica ends each step with
 * the same weights). */
SKY_TEST(stage_fixed_point_pipeline_equals_one_board)
{
	setup a = {3, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 3, {1, 2, 5}, 1, {0}};
	compare(&a, "fixed point, 1f1b adamw 3 stages");
}

SKY_TEST(stage_replicas_equal_one_board_1f1b)
{
	/* stage 1 on 2 replicas, stage 2 on 2: 5 processes */
	setup a = {3, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 3, {1, 2, 5}, 1, {1, 2, 2}};
	compare(&a, "replicas, 1f1b adamw 3 stages");
}

SKY_TEST(stage_replicas_equal_one_board_gpipe_unequal_shares)
{
	/* stage 0 on 3 replicas sharing 5 micro-batches 2/2/1, stage 1 on 2 (3/2) */
	setup a = {2, 5, SKY_SCHEDULE_GPIPE, SKY_OPTIM_SGD, 0.02f, 2, {1, 3}, 1, {3, 2}};
	compare(&a, "replicas, gpipe sgd 2 stages, unequal shares");
	g_drop = 1;
	setup b = {2, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 2, {2, 3}, 1, {2, 1}};
	compare(&b, "replicas with dropout, 1f1b");
	g_drop = 0;
}

SKY_TEST(stage_one_stage_is_one_board)
{
	setup u = {2, 3, SKY_SCHEDULE_GPIPE, SKY_OPTIM_ADAMW, 1.0f, 1, {3}, 0, {0}};
	compare(&u, "1 stage");
}

SKY_TEST(stage_refuses_too_few_activation_slots)
{
	sky_stage_cfg sc;
	memset(&sc, 0, sizeof sc);
	sc.model = tiny(2);
	sc.n_stages = 2;
	sc.first = 0, sc.last = 1;
	sc.micro = 4;
	sc.sched = SKY_SCHEDULE_GPIPE;
	sc.in_flight = 2;
	sky_optim_default(&sc.optim, SKY_OPTIM_ADAMW);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_stage_check(&sc, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "in_flight 2, gpipe with 4 micro-batches needs 4") != NULL, "%s",
		       d.msg);
	sc.in_flight = 4;
	SKY_EXPECT_EQ(sky_stage_check(&sc, &d), 0);
	sc.last = 3; /* stage 0 of 2 cannot hold the head */
	SKY_EXPECT_EQ(sky_stage_check(&sc, &d), SKY_EINVAL);
}
