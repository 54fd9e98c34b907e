/* A pipeline stage (see sky_stage.h). The story of a step: for each op of
 * the schedule, forward (data or received activation -> half-layers ->
 * send, or head and loss) or backward (loss gradient or received gradient
 * -> half-layers in reverse -> send, or the embeddings); then the norm
 * exchange, clip and optimizer on this stage's flat vector. */
#include "sky_stage.h"

#include "sky_clock.h"
#include "sky_embed.h"
#include "sky_fedsum.h"
#include "sky_head.h"
#include "sky_layer.h"
#include "sky_safetensors.h"
#include "sky_task.h"
#include "sky_trainorder.h"

#include <stdio.h>
#include <string.h>

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

int sky_stage_share(const sky_stage_cfg *c)
{
	if (!c->route)
		return c->micro;
	int n = 0;
	for (int mb = 0; mb < c->micro; mb++)
		n += c->route[mb] == c->replica;
	return n;
}

int sky_stage_check(const sky_stage_cfg *c, sky_diag *d)
{
	const int units = 2 * c->model.layers;
	if (sky_model_validate(&c->model) != 0)
		return sky_diag_set(d, SKY_EINVAL, "stage: invalid model shapes");
	if (c->n_stages < 1 || c->stage < 0 || c->stage >= c->n_stages)
		return sky_diag_set(d, SKY_EINVAL, "stage: index %d of %d", c->stage, c->n_stages);
	if (c->first < 0 || c->last < c->first || c->last >= units)
		return sky_diag_set(d, SKY_EINVAL, "stage: half-layers %d-%d outside [0, %d)",
				    c->first, c->last, units);
	if ((c->stage == 0) != (c->first == 0) || (c->stage == c->n_stages - 1) != (c->last == units - 1))
		return sky_diag_set(d, SKY_EINVAL,
				    "stage %d of %d: half-layers %d-%d do not start/end the model "
				    "where the stage does",
				    c->stage, c->n_stages, c->first, c->last);
	if (c->micro < 1)
		return sky_diag_set(d, SKY_EINVAL, "stage: %d micro-batches", c->micro);
	int need = sky_schedule_in_flight(c->sched, c->stage, c->n_stages, c->micro);
	if (c->route) {
		/* a replica's micro-batches in flight are a subset of one board's */
		int share = sky_stage_share(c);
		if (share < 1 || !c->fx_sum || c->data_owner)
			return sky_diag_set(d, SKY_EINVAL,
					    "stage %d replica %d: runs %d micro-batches (needs >= 1, "
					    "fixed-point sums, no data owner)",
					    c->stage, c->replica, share);
		need = need < share ? need : share;
	}
	if (c->in_flight < need || c->in_flight > c->micro)
		return sky_diag_set(d, SKY_EINVAL,
				    "stage %d: in_flight %d, %s with %d micro-batches needs %d to %d",
				    c->stage, c->in_flight, sky_schedule_name(c->sched), c->micro,
				    need, c->micro);
	if (!(c->optim.lr >= 0) || c->clip_norm < 0)
		return sky_diag_set(d, SKY_EINVAL, "stage: lr %g, clip %g", (double)c->optim.lr,
				    (double)c->clip_norm);
	return 0;
}

/* Norm block b (global) -> its floats and saved floats. */
static size_t block_len(const sky_model_cfg *m, int b)
{
	if (b == 0)
		return (size_t)sky_model_embed_params(m);
	if (b == 2 * m->layers + 1)
		return (size_t)sky_model_head_params(m);
	return sky_layer_half_floats(m, (b - 1) % 2 == 0 ? SKY_BLOCK_ATTN : SKY_BLOCK_FFN);
}

static size_t block_saved(const sky_model_cfg *m, int b)
{
	if (b == 0)
		return sky_embed_saved_floats(m);
	if (b == 2 * m->layers + 1)
		return sky_head_saved_floats(m);
	return sky_layer_saved_floats(m, (b - 1) % 2 == 0 ? SKY_BLOCK_ATTN : SKY_BLOCK_FFN);
}

static size_t max3(size_t a, size_t b, size_t c)
{
	size_t m = a > b ? a : b;
	return m > c ? m : c;
}

int sky_stage_carve(sky_stage *s, const sky_stage_cfg *cfg, sky_arena *a, sky_diag *d)
{
	int rc = sky_stage_check(cfg, d);
	memset(s, 0, sizeof *s);
	if (rc)
		return rc;
	const sky_model_cfg *m = &cfg->model;
	const size_t T = (size_t)sky_model_tokens(m), H = (size_t)m->hidden;
	const size_t slots = (size_t)cfg->in_flight;
	s->cfg = *cfg;
	s->has_embed = cfg->first == 0;
	s->has_head = cfg->last == 2 * m->layers - 1;
	s->has_data = !cfg->data_owner || s->has_embed || s->has_head;
	const size_t dslots = s->has_data ? slots : 0; /* no data: no token or label buffers */
	const size_t fwd_f = sky_stage_fwd_floats(cfg);
	s->n_units = cfg->last - cfg->first + 1;
	s->blk0 = s->has_embed ? 0 : 1 + cfg->first;
	s->n_blk = s->n_units + s->has_embed + s->has_head;
	s->blk_off = sky_arena_alloc(a, (size_t)s->n_blk * sizeof(size_t), SKY_LIFE_PERSIST);
	s->blk_len = sky_arena_alloc(a, (size_t)s->n_blk * sizeof(size_t), SKY_LIFE_PERSIST);
	s->saved_off = sky_arena_alloc(a, (size_t)s->n_blk * sizeof(size_t), SKY_LIFE_PERSIST);
	size_t off = 0, soff = 0;
	for (int i = 0; i < s->n_blk; i++) {
		size_t n = block_len(m, s->blk0 + i), sv = pad16(block_saved(m, s->blk0 + i));
		if (s->blk_off) {
			s->blk_off[i] = off;
			s->blk_len[i] = n;
			s->saved_off[i] = soff;
		}
		off += pad16(n);
		soff += sv;
	}
	s->n_params = off;
	s->slot_floats = soff;
	size_t nstate = (size_t)sky_optim_state_vectors(cfg->optim.kind) * s->n_params;
	s->params = sky_arena_floats(a, s->n_params, SKY_LIFE_PERSIST);
	s->grads = sky_arena_floats(a, s->n_params, SKY_LIFE_PERSIST);
	s->opt_state = sky_arena_floats(a, nstate, SKY_LIFE_PERSIST);
	s->fx_acc = cfg->fx_sum ? sky_arena_alloc(a, s->n_params * sizeof *s->fx_acc, SKY_LIFE_PERSIST)
				: NULL;
	s->local = sky_arena_alloc(a, (size_t)cfg->micro * sizeof(int), SKY_LIFE_PERSIST);
	s->saved = sky_arena_floats(a, slots * s->slot_floats, SKY_LIFE_ACT);
	s->ids = sky_arena_alloc(a, dslots * T * sizeof(int32_t), SKY_LIFE_ACT);
	s->types = sky_arena_alloc(a, dslots * T * sizeof(int32_t), SKY_LIFE_ACT);
	s->attn = sky_arena_alloc(a, dslots * T * sizeof(int32_t), SKY_LIFE_ACT);
	s->labels = sky_arena_alloc(a, dslots * (size_t)m->batch * sizeof(int32_t), SKY_LIFE_ACT);
	s->mask = sky_arena_floats(a, slots * T, SKY_LIFE_ACT);
	const size_t head_f = SKY_STAGE_HEADROOM / sizeof(float);
	for (int i = 0; i < 2; i++) {
		float *p = sky_arena_floats(a, head_f + fwd_f, SKY_LIFE_ACT);
		s->act[i] = p ? p + head_f : NULL;
		p = sky_arena_floats(a, head_f + T * H, SKY_LIFE_ACT);
		s->dact[i] = p ? p + head_f : NULL;
	}
	s->logits = sky_arena_floats(a, (size_t)m->batch * m->classes, SKY_LIFE_ACT);
	s->scratch = sky_arena_floats(a,
				      max3(sky_layer_scratch_floats(m), sky_embed_scratch_floats(m),
					   sky_head_scratch_floats(m)),
				      SKY_LIFE_SCRATCH);
	const size_t n_all = (size_t)2 * m->layers + 2;
	s->norm_mine = sky_arena_alloc(a, (size_t)s->n_blk * sizeof(double), SKY_LIFE_SCRATCH);
	s->norm_all = sky_arena_alloc(a, n_all * sizeof(double), SKY_LIFE_SCRATCH);
	s->ops = sky_arena_alloc(a, (size_t)2 * cfg->micro * sizeof(sky_schedule_op), SKY_LIFE_PERSIST);
	if (s->ops)
		s->n_ops = sky_schedule_ops(cfg->sched, cfg->stage, cfg->n_stages, cfg->micro, s->ops,
					    2 * cfg->micro);
	if (s->local) {
		/* a replica keeps its own micro-batches of one board's order */
		int n = 0, k = 0;
		for (int mb = 0; mb < cfg->micro; mb++)
			s->local[mb] = !cfg->route || cfg->route[mb] == cfg->replica ? n++ : -1;
		for (int i = 0; s->ops && i < s->n_ops; i++)
			if (s->local[s->ops[i].mb] >= 0)
				s->ops[k++] = s->ops[i];
		if (s->ops)
			s->n_ops = k;
	}
	rc = sky_arena_status(a);
	if (rc)
		sky_diag_set(d, rc, "stage: arena: %s", sky_strerror(rc));
	return rc;
}

size_t sky_stage_fwd_floats(const sky_stage_cfg *cfg)
{
	const size_t T = (size_t)sky_model_tokens(&cfg->model);
	return T * (size_t)cfg->model.hidden + (cfg->data_owner ? T : 0);
}

int sky_stage_arena_bytes(const sky_stage_cfg *cfg, size_t *bytes, sky_diag *d)
{
	sky_arena a;
	sky_stage s;
	sky_arena_init(&a, NULL, 0);
	int rc = sky_stage_carve(&s, cfg, &a, d);
	if (rc)
		return rc;
	*bytes = sky_arena_required(&a);
	return 0;
}

float *sky_stage_block(const sky_stage *s, int b, size_t *n)
{
	int i = b - s->blk0;
	if (i < 0 || i >= s->n_blk)
		return NULL;
	if (n)
		*n = s->blk_len[i];
	return s->params + s->blk_off[i];
}

/* half-layer unit u's block kind */
static int unit_block(int u) { return u % 2 == 0 ? SKY_BLOCK_ATTN : SKY_BLOCK_FFN; }

void sky_stage_init(sky_stage *s)
{
	const sky_model_cfg *m = &s->cfg.model;
	const unsigned long long seed = s->cfg.seed;
	memset(s->params, 0, s->n_params * sizeof *s->params);
	memset(s->grads, 0, s->n_params * sizeof *s->grads);
	memset(s->opt_state, 0,
	       (size_t)sky_optim_state_vectors(s->cfg.optim.kind) * s->n_params * sizeof(float));
	/* the seeds sky_bert_init gives each block */
	for (int i = 0; i < s->n_blk; i++) {
		int b = s->blk0 + i;
		float *p = s->params + s->blk_off[i];
		if (b == 0)
			sky_embed_init(m, p, seed);
		else if (b == 2 * m->layers + 1)
			sky_head_init(m, p, seed + 0x10000);
		else
			sky_layer_init_half(m, p, seed + 1 + (unsigned long long)((b - 1) / 2),
					    unit_block(b - 1));
	}
	s->step = 0;
}

/* index of the first half-layer block among this stage's blocks */
static int unit_index(const sky_stage *s) { return s->has_embed; }

static float *slot_saved(const sky_stage *s, int slot, int i)
{
	return s->saved + (size_t)slot * s->slot_floats + s->saved_off[i];
}

/* The micro-batch's data, regenerated from (seed, step, mb) as `sky train`
 * makes it: every stage has what it needs without receiving it. */
static int load_batch(sky_stage *s, int slot, int mb)
{
	const sky_model_cfg *m = &s->cfg.model;
	const size_t T = (size_t)sky_model_tokens(m);
	int32_t *ids = s->ids + slot * T, *at = s->attn + slot * T;
	int rc = 0;
	if (s->cfg.data)
		/* a data set's rows, in the order one board reads them */
		sky_trainorder_take(s->cfg.data, sky_trainorder_rows(s->cfg.order, s->step, mb),
				    m->batch, ids, s->types + slot * T, at,
				    s->labels + (size_t)slot * m->batch);
	else
		rc = sky_task_batch(m, s->cfg.seed, SKY_TASK_TRAIN,
				    (uint64_t)(s->step * s->cfg.micro + mb), ids, s->types + slot * T,
				    at, s->labels + (size_t)slot * m->batch);
	float *mask = s->mask + slot * T;
	for (size_t i = 0; i < T; i++)
		mask[i] = !at[i] ? -1e9f : 0.0f; /* as sky_bert's make_mask */
	return rc;
}

/* The dropout of micro-batch mb in the step being run, keyed as
 * sky_bert_train_step keys it (NULL when the model has none). */
static const sky_dropout *stage_dropout(const sky_stage *s, int mb, sky_dropout *buf)
{
	return sky_dropout_make(buf, &s->cfg.model, s->cfg.seed, (uint64_t)s->step + 1,
				(uint32_t)mb);
}

static int forward(sky_stage *s, const sky_stage_io *io, int mb, double *loss_sum)
{
	const sky_model_cfg *m = &s->cfg.model;
	sky_dropout drs;
	const sky_dropout *dr = stage_dropout(s, mb, &drs);
	const size_t T = (size_t)sky_model_tokens(m), H = (size_t)m->hidden;
	const int slot = s->local[mb] % s->cfg.in_flight;
	const int u0 = unit_index(s);
	int rc = s->has_data ? load_batch(s, slot, mb) : 0;
	if (rc)
		return rc;
	const float *x;
	int nb = 0; /* next ping-pong buffer */
	if (s->has_embed) {
		rc = sky_embed_forward_dr(m, s->params + s->blk_off[0], s->ids + slot * T,
					  s->types + slot * T, s->act[0], slot_saved(s, slot, 0), dr);
		if (rc)
			return rc;
		x = s->act[0];
		nb = 1;
	} else if ((rc = io->recv(io->ctx, SKY_STAGE_FWD, s->step, mb, &x)) != 0) {
		return rc;
	} else if (!s->has_data) {
		/* the mask travels after the activation: this stage has no data */
		memcpy(s->mask + slot * T, x + T * H, T * sizeof(float));
	}
	double t0 = sky_clock_s();
	const float *mask = s->mask + slot * T;
	for (int k = 0; k < s->n_units; k++) {
		int i = u0 + k;
		float *y = s->act[nb];
		/* unit u is half of layer u / 2: the layer index keys its masks */
		sky_layer_half_forward_dr(m, s->params + s->blk_off[i], x, mask, y,
					  slot_saved(s, slot, i), s->scratch,
					  unit_block(s->cfg.first + k), dr, (s->cfg.first + k) / 2);
		if (k == 0 && !s->has_embed)
			io->release(io->ctx, SKY_STAGE_FWD);
		x = y;
		nb ^= 1;
	}
	if (s->has_head) {
		int i = s->n_blk - 1;
		float l = 0;
		rc = sky_head_forward_dr(m, s->params + s->blk_off[i], x,
					 s->labels + (size_t)slot * m->batch, s->logits, &l,
					 slot_saved(s, slot, i), s->scratch, dr);
		if (rc)
			return rc;
		*loss_sum += l;
	}
	if (io->event)
		io->event(io->ctx, 'F', mb, t0, sky_clock_s());
	if (!s->has_head) {
		size_t n = T * H;
		if (s->cfg.data_owner) {
			/* x is one of this stage's act buffers, which have room */
			memcpy((float *)x + n, mask, T * sizeof(float));
			n += T;
		}
		rc = io->send(io->ctx, SKY_STAGE_FWD, s->step, mb, (float *)x, n);
	}
	return rc;
}

static int backward(sky_stage *s, const sky_stage_io *io, int mb)
{
	const sky_model_cfg *m = &s->cfg.model;
	sky_dropout drs;
	const sky_dropout *dr = stage_dropout(s, mb, &drs);
	const size_t T = (size_t)sky_model_tokens(m), H = (size_t)m->hidden;
	const int slot = s->local[mb] % s->cfg.in_flight;
	const int u0 = unit_index(s);
	const float *dy;
	int nb = 0, rc;
	double t0;
	/* fixed point: this micro-batch's gradient alone, then added exactly */
	if (s->fx_acc)
		memset(s->grads, 0, s->n_params * sizeof *s->grads);
	if (s->has_head) {
		t0 = sky_clock_s();
		int i = s->n_blk - 1;
		sky_head_backward_dr(m, s->params + s->blk_off[i],
				     s->labels + (size_t)slot * m->batch, slot_saved(s, slot, i),
				     1.0f / (float)s->cfg.micro, s->dact[0], s->grads + s->blk_off[i],
				     s->scratch, dr);
		dy = s->dact[0];
		nb = 1;
	} else {
		if ((rc = io->recv(io->ctx, SKY_STAGE_BWD, s->step, mb, &dy)) != 0)
			return rc;
		t0 = sky_clock_s();
	}
	const float *mask = s->mask + slot * T;
	for (int k = s->n_units - 1; k >= 0; k--) {
		int i = u0 + k;
		float *dx = s->dact[nb];
		sky_layer_half_backward_dr(m, s->params + s->blk_off[i], mask,
					   slot_saved(s, slot, i), dy, dx, s->grads + s->blk_off[i],
					   s->scratch, unit_block(s->cfg.first + k), dr,
					   (s->cfg.first + k) / 2);
		if (k == s->n_units - 1 && !s->has_head)
			io->release(io->ctx, SKY_STAGE_BWD);
		dy = dx;
		nb ^= 1;
	}
	if (s->has_embed)
		sky_embed_backward_dr(m, s->params, s->ids + slot * T, s->types + slot * T,
				      slot_saved(s, slot, 0), dy, s->grads, s->scratch, dr);
	if (io->event)
		io->event(io->ctx, 'B', mb, t0, sky_clock_s());
	rc = !s->has_embed ? io->send(io->ctx, SKY_STAGE_BWD, s->step, mb, (float *)dy, T * H) : 0;
	if (s->fx_acc) {
		size_t c = 0;
		sky_fx_accumulate(s->fx_acc, s->grads, s->n_params, SKY_FX_GRAD_CLIP,
				  sky_fx_grad_bits(s->cfg.micro), &c);
		s->fx_clipped += (long)c;
	}
	return rc;
}

void sky_stage_step_begin(sky_stage *s)
{
	memset(s->grads, 0, s->n_params * sizeof *s->grads);
	if (s->fx_acc)
		memset(s->fx_acc, 0, s->n_params * sizeof *s->fx_acc);
	s->loss_sum = 0;
}

int sky_stage_run_op(sky_stage *s, const sky_stage_io *io, sky_schedule_op op)
{
	return op.kind == 'F' ? forward(s, io, op.mb, &s->loss_sum) : backward(s, io, op.mb);
}

void sky_stage_step_sums(sky_stage *s)
{
	if (s->fx_acc)
		sky_fx_decode(s->fx_acc, s->n_params, 1, sky_fx_grad_bits(s->cfg.micro), s->grads,
			      NULL);
	for (int i = 0; i < s->n_blk; i++)
		s->norm_mine[i] = sky_optim_sumsq(s->grads + s->blk_off[i], s->blk_len[i]);
}

void sky_stage_step_finish(sky_stage *s, const double *all, float lr, float *loss)
{
	const int n_all = 2 * s->cfg.model.layers + 2;
	if (s->cfg.clip_norm > 0 && all) {
		float norm = sky_optim_norm(all, n_all);
		sky_optim_clip_scale(s->grads, s->n_params, norm, s->cfg.clip_norm);
	}
	s->cfg.optim.lr = lr;
	s->step++;
	sky_optim_step(&s->cfg.optim, s->params, s->grads, s->opt_state, s->n_params, s->step);
	if (loss)
		*loss = s->has_head ? (float)(s->loss_sum / s->cfg.micro) : 0.0f;
}

int sky_stage_step(sky_stage *s, const sky_stage_io *io, float lr, float *loss)
{
	int rc = 0;
	sky_stage_step_begin(s);
	for (int k = 0; k < s->n_ops && !rc; k++)
		rc = sky_stage_run_op(s, io, s->ops[k]);
	if (rc)
		return rc;
	if (s->cfg.route) {
		/* a replica's sums are partial until the others' are added */
		if (!s->fx_acc || !io->reduce)
			return SKY_EINVAL;
		if ((rc = io->reduce(io->ctx, s->step, s->fx_acc, s->n_params)) != 0)
			return rc;
	}
	const int n_all = 2 * s->cfg.model.layers + 2;
	sky_stage_step_sums(s);
	if (s->cfg.clip_norm > 0) {
		rc = io->share_norm(io->ctx, s->step, s->norm_mine, s->blk0, s->n_blk, s->norm_all,
				    n_all);
		if (rc)
			return rc;
	}
	sky_stage_step_finish(s, s->norm_all, lr, loss);
	return 0;
}

enum { NAME_PREFIX = 48 };

int sky_stage_max_entries(const sky_model_cfg *c, const sky_stage_cfg *cfg)
{
	(void)c;
	return SKY_EMBED_NTENSORS + (cfg->last - cfg->first + 1) * SKY_LAYER_NTENSORS +
	       SKY_HEAD_NTENSORS;
}

int sky_stage_entries(const sky_stage *s, sky_st_entry *e, int cap, char *names, size_t name_cap,
		      sky_diag *d)
{
	const sky_model_cfg *m = &s->cfg.model;
	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_embed_tensors(m, te);
	sky_layer_tensors(m, tl);
	sky_head_tensors(m, th);
	const size_t fo = sky_layer_half_offset(m, SKY_BLOCK_FFN);
	int k = 0, rc = 0;
#define ROOM(n) \
	do { \
		if (k + (n) > cap) \
			return sky_diag_set(d, SKY_ERANGE, "stage: %d tensor entries do not fit", \
					    k + (n)); \
	} while (0)
	for (int i = 0; i < s->n_blk && !rc; i++) {
		int b = s->blk0 + i;
		const float *p = s->params + s->blk_off[i];
		char *nm = names + (size_t)k * name_cap;
		if (b == 0) {
			ROOM(SKY_EMBED_NTENSORS);
			rc = sky_st_block_entries("bert.", te, SKY_EMBED_NTENSORS, p, e + k, nm,
						  name_cap, d);
			k += SKY_EMBED_NTENSORS;
		} else if (b == 2 * m->layers + 1) {
			/* pooler under "bert.", classifier at the top, as sky_bert_save */
			ROOM(SKY_HEAD_NTENSORS);
			rc = sky_st_block_entries("bert.", th, 2, p, e + k, nm, name_cap, d);
			if (!rc)
				rc = sky_st_block_entries("", th + 2, 2, p, e + k + 2, nm + 2 * name_cap,
							  name_cap, d);
			k += SKY_HEAD_NTENSORS;
		} else {
			int u = b - 1, ffn = u % 2, lo = ffn ? 10 : 0, n = ffn ? 6 : 10;
			sky_tensor_info part[SKY_LAYER_NTENSORS];
			char prefix[NAME_PREFIX];
			for (int t = 0; t < n; t++) {
				part[t] = tl[lo + t];
				part[t].offset -= ffn ? fo : 0;
			}
			snprintf(prefix, sizeof prefix, "bert.encoder.layer.%d.", u / 2);
			ROOM(n);
			rc = sky_st_block_entries(prefix, part, n, p, e + k, nm, name_cap, d);
			k += n;
		}
	}
#undef ROOM
	return rc ? rc : k;
}
