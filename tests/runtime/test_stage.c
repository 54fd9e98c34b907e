/* Pipeline stages against one board: the same seed gives the same initial
 * tensors; a pipeline of stages (one thread each, a fake transport of
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
#include "sky_thread.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- a pipeline in one process ------------------------------------------ */

typedef struct mailbox {
	sky_mutex lock;
	int full;
	long step;
	float *data; /* T*H */
} mailbox;

typedef struct pipe_run pipe_run;

typedef struct stage_run {
	pipe_run *p;
	int k;
	sky_stage s;
	void *buf;
	float loss[STEPS];
	int held[2]; /* the micro-batch whose mailbox recv handed out, per direction */
	int rc;
	sky_thread t;
} stage_run;

struct pipe_run {
	int n;
	size_t th;
	mailbox box[MAX_ST][2][MAX_MB]; /* [receiving stage][dir][mb] */
	sky_mutex norm_lock;
	double norm[2][64];  /* by step parity */
	int norm_in[2];
	long steps, warmup;
	float lr;
	atomic_int go, done;
	unsigned long allocs_before, allocs_after;
	stage_run st[MAX_ST];
};

static int fake_recv(void *ctx, int dir, long step, int mb, const float **data)
{
	stage_run *r = ctx;
	mailbox *b = &r->p->box[r->k][dir][mb];
	for (;;) {
		sky_mutex_lock(&b->lock);
		int ok = b->full && b->step == step;
		sky_mutex_unlock(&b->lock);
		if (ok)
			break;
		sky_sleep_ms(0);
	}
	*data = b->data;
	r->held[dir] = mb;
	return 0;
}

static void fake_release(void *ctx, int dir)
{
	stage_run *r = ctx;
	mailbox *b = &r->p->box[r->k][dir][r->held[dir]];
	sky_mutex_lock(&b->lock);
	b->full = 0;
	sky_mutex_unlock(&b->lock);
}

static int fake_send(void *ctx, int dir, long step, int mb, float *buf, size_t n)
{
	stage_run *r = ctx;
	int to = dir == SKY_STAGE_FWD ? r->k + 1 : r->k - 1;
	mailbox *b = &r->p->box[to][dir][mb];
	for (;;) { /* the previous step's tensor must have been consumed */
		sky_mutex_lock(&b->lock);
		if (!b->full) {
			memcpy(b->data, buf, n * sizeof *buf);
			b->step = step;
			b->full = 1;
			sky_mutex_unlock(&b->lock);
			return 0;
		}
		sky_mutex_unlock(&b->lock);
		sky_sleep_ms(0);
	}
}

static int fake_share(void *ctx, long step, const double *mine, int b0, int n, double *all,
		      int n_all)
{
	stage_run *r = ctx;
	pipe_run *p = r->p;
	int par = (int)(step & 1);
	sky_mutex_lock(&p->norm_lock);
	memcpy(p->norm[par] + b0, mine, (size_t)n * sizeof *mine);
	p->norm_in[par]++;
	sky_mutex_unlock(&p->norm_lock);
	for (;;) {
		sky_mutex_lock(&p->norm_lock);
		int ready = p->norm_in[par] >= p->n;
		sky_mutex_unlock(&p->norm_lock);
		if (ready)
			break;
		sky_sleep_ms(0);
	}
	memcpy(all, p->norm[par], (size_t)n_all * sizeof *all);
	/* the last reader of this parity resets it for step + 2 */
	sky_mutex_lock(&p->norm_lock);
	if (++p->norm_in[par] == 2 * p->n)
		p->norm_in[par] = 0;
	sky_mutex_unlock(&p->norm_lock);
	return 0;
}

static void *stage_main(void *arg)
{
	stage_run *r = arg;
	pipe_run *p = r->p;
	sky_stage_io io = {.ctx = r, .recv = fake_recv, .release = fake_release, .send = fake_send,
			   .share_norm = fake_share};
	atomic_fetch_add(&p->go, 1);
	while (atomic_load(&p->go) < p->n + 1) /* main thread counts allocations first */
		sky_sleep_ms(0);
	for (long s = 0; s < p->steps && !r->rc; s++)
		r->rc = sky_stage_step(&r->s, &io, sky_optim_lr_at(p->lr, s, p->steps, p->warmup),
				       &r->loss[s]);
	atomic_fetch_add(&p->done, 1);
	return NULL;
}

typedef struct setup {
	int layers, micro;
	sky_schedule_kind sched;
	sky_optim_kind optim;
	float clip;
	int n;
	int last[MAX_ST]; /* each stage's last half-layer */
} setup;

/* Runs STEPS steps of `sky train`'s arithmetic on one sky_bert and on a
 * pipeline; expects equal losses and weights. */
static void compare(const setup *u, const char *what)
{
	sky_model_cfg c = tiny(u->layers);
	const unsigned long long seed = 7;
	const long warmup = 1;
	/* one board */
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, u->optim);
	o.optim.lr = u->optim == SKY_OPTIM_SGD ? 0.05f : 1e-3f;
	o.micro = u->micro;
	o.clip_norm = u->clip;
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
	static pipe_run p;
	memset(&p, 0, sizeof p);
	p.n = u->n;
	p.th = T * (size_t)c.hidden;
	p.steps = STEPS;
	p.warmup = warmup;
	p.lr = o.optim.lr;
	sky_mutex_init(&p.norm_lock);
	for (int k = 0; k < MAX_ST; k++)
		for (int d = 0; d < 2; d++)
			for (int i = 0; i < MAX_MB; i++) {
				sky_mutex_init(&p.box[k][d][i].lock);
				p.box[k][d][i].data = malloc(p.th * sizeof(float));
			}
	int first = 0;
	for (int k = 0; k < u->n; k++) {
		stage_run *r = &p.st[k];
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
		first = sc.last + 1;
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
		/* initial weights: block for block what sky_bert_init made */
		r->p = &p;
		r->k = k;
	}
	/* initial weights equal to a fresh sky_bert's, block by block */
	{
		sky_bert m0;
		void *b0 = malloc(nb);
		sky_arena a0;
		sky_arena_init(&a0, b0, nb);
		sky_bert_carve(&m0, &c, &o, &a0);
		sky_bert_init(&m0, seed);
		for (int k = 0; k < u->n; k++)
			for (int b = 0; b < 2 * c.layers + 2; b++) {
				size_t n = 0;
				const float *sp = sky_stage_block(&p.st[k].s, b, &n), *bp;
				if (!sp)
					continue;
				if (b == 0)
					bp = sky_bert_embed_params(&m0);
				else if (b == 2 * c.layers + 1)
					bp = sky_bert_head_params(&m0);
				else
					bp = sky_bert_layer_params(&m0, (b - 1) / 2) +
					     ((b - 1) % 2 ? sky_layer_half_offset(&c, SKY_BLOCK_FFN) : 0);
				SKY_EXPECT_MSG(memcmp(sp, bp, n * sizeof(float)) == 0,
					       "%s: initial block %d of stage %d differs", what, b, k);
			}
		free(b0);
	}
	for (int k = 0; k < u->n; k++)
		sky_thread_start(&p.st[k].t, stage_main, &p.st[k]);
	while (atomic_load(&p.go) < p.n)
		sky_sleep_ms(0);
	p.allocs_before = sky_test_allocs();
	atomic_fetch_add(&p.go, 1);
	while (atomic_load(&p.done) < p.n)
		sky_sleep_ms(1);
	p.allocs_after = sky_test_allocs();
	for (int k = 0; k < u->n; k++)
		sky_thread_join(&p.st[k].t);
	SKY_EXPECT_MSG(p.allocs_after == p.allocs_before, "%s: %lu allocations during the steps",
		       what, p.allocs_after - p.allocs_before);
	stage_run *last = &p.st[u->n - 1];
	for (int k = 0; k < u->n; k++)
		SKY_EXPECT_MSG(p.st[k].rc == 0, "%s: stage %d: %s", what, k, sky_strerror(p.st[k].rc));
	for (long s = 0; s < STEPS; s++)
		SKY_EXPECT_MSG(memcmp(&last->loss[s], &loss1[s], sizeof(float)) == 0,
			       "%s: step %ld loss %.9g on the pipeline, %.9g on one board", what,
			       s + 1, (double)last->loss[s], (double)loss1[s]);
	/* final weights, block by block */
	int diff = 0;
	for (int k = 0; k < u->n; k++)
		for (int b = 0; b < 2 * c.layers + 2; b++) {
			size_t n = 0;
			const float *sp = sky_stage_block(&p.st[k].s, b, &n), *bp;
			if (!sp)
				continue;
			if (b == 0)
				bp = sky_bert_embed_params(&m);
			else if (b == 2 * c.layers + 1)
				bp = sky_bert_head_params(&m);
			else
				bp = sky_bert_layer_params(&m, (b - 1) / 2) +
				     ((b - 1) % 2 ? sky_layer_half_offset(&c, SKY_BLOCK_FFN) : 0);
			diff += memcmp(sp, bp, n * sizeof(float)) != 0;
		}
	SKY_EXPECT_MSG(diff == 0, "%s: %d blocks differ after %d steps", what, diff, STEPS);
	SKY_EXPECT(last->loss[STEPS - 1] > 0);
	for (int k = 0; k < u->n; k++)
		free(p.st[k].buf);
	for (int k = 0; k < MAX_ST; k++)
		for (int d = 0; d < 2; d++)
			for (int i = 0; i < MAX_MB; i++) {
				free(p.box[k][d][i].data);
				sky_mutex_free(&p.box[k][d][i].lock);
			}
	sky_mutex_free(&p.norm_lock);
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
	setup u = {3, 4, SKY_SCHEDULE_1F1B, SKY_OPTIM_ADAMW, 0.01f, 3, {1, 2, 5}};
	compare(&u, "1f1b adamw 3 stages");
}

SKY_TEST(stage_pipeline_equals_one_board_gpipe_sgd_four_stages)
{
	setup u = {2, 4, SKY_SCHEDULE_GPIPE, SKY_OPTIM_SGD, 0.02f, 4, {0, 1, 2, 3}};
	compare(&u, "gpipe sgd 4 stages");
}

SKY_TEST(stage_pipeline_equals_one_board_more_stages_than_micro_batches)
{
	setup u = {3, 2, SKY_SCHEDULE_1F1B, SKY_OPTIM_SGD, 0.0f, 5, {0, 2, 3, 4, 5}};
	compare(&u, "1f1b sgd 5 stages, 2 micro-batches, no clip");
}

SKY_TEST(stage_one_stage_is_one_board)
{
	setup u = {2, 3, SKY_SCHEDULE_GPIPE, SKY_OPTIM_ADAMW, 1.0f, 1, {3}};
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
