/* A serving stage: int8 half-layers from a slice file (sky_serve.h). */
#include "sky_serve.h"

#include "sky_arena.h"
#include "sky_embed.h"
#include "sky_ends.h"
#include "sky_head.h"
#include "sky_kernels_s8.h"
#include "sky_le.h"
#include "sky_safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the payload ------------------------------------------------------------ */

size_t sky_serve_payload_bytes(const sky_model_cfg *c)
{
	size_t B = (size_t)c->batch, T = (size_t)sky_model_tokens(c);
	return SKY_SERVE_HDR_BYTES + B * SKY_SERVE_ENTRY_BYTES + T + T * (size_t)c->hidden;
}

void sky_serve_payload_write(const sky_model_cfg *c, const sky_serve_table *tab, int kind,
			     float scale, const int8_t *act, unsigned char *p)
{
	size_t B = (size_t)c->batch, T = (size_t)sky_model_tokens(c);
	uint32_t sb;
	memcpy(&sb, &scale, 4);
	memcpy(p, SKY_SERVE_MAGIC, 4);
	sky_le_put32(p + 4, SKY_SERVE_VERSION);
	sky_le_put32(p + 8, (uint32_t)tab->batch);
	sky_le_put32(p + 12, (uint32_t)(tab->batch >> 32));
	sky_le_put32(p + 16, (uint32_t)tab->n);
	sky_le_put32(p + 20, (uint32_t)kind);
	sky_le_put32(p + 24, sb);
	sky_le_put32(p + 28, 0);
	unsigned char *e = p + SKY_SERVE_HDR_BYTES;
	memset(e, 0, B * SKY_SERVE_ENTRY_BYTES);
	for (int b = 0; b < tab->n; b++, e += SKY_SERVE_ENTRY_BYTES) {
		const sky_serve_req *r = &tab->req[b];
		memcpy(e, r->client, strnlen(r->client, SKY_TOPIC_SEGMENT_MAX));
		memcpy(e + 65, r->id, strnlen(r->id, SKY_INFER_ID_MAX));
		e[130] = (unsigned char)(r->n & 0xff);
		e[131] = (unsigned char)(r->n >> 8);
	}
	unsigned char *m = p + SKY_SERVE_HDR_BYTES + B * SKY_SERVE_ENTRY_BYTES;
	memcpy(m, tab->mask, T);
	memcpy(m + T, act, T * (size_t)c->hidden);
}

/* A NUL-padded field of cap bytes into out; 0 if it is not a string that
 * ok() accepts (empty allowed only when empty_ok). */
static int field(const unsigned char *f, size_t cap, char *out, int (*ok)(const char *))
{
	size_t n = strnlen((const char *)f, cap);
	if (n >= cap)
		return 0;
	for (size_t i = n; i < cap; i++)
		if (f[i])
			return 0;
	memcpy(out, f, n);
	out[n] = '\0';
	return ok(out);
}

static int infer_id_ok(const char *s) { return sky_infer_id_ok(s); }
static int segment_ok(const char *s) { return sky_topic_segment_ok(s); }

int sky_serve_payload_read(const sky_model_cfg *c, const unsigned char *p, sky_serve_table *tab,
			   int *kind, float *scale, const int8_t **act, sky_diag *d)
{
	size_t B = (size_t)c->batch, T = (size_t)sky_model_tokens(c);
	if (memcmp(p, SKY_SERVE_MAGIC, 4) != 0 || sky_le_get32(p + 4) != SKY_SERVE_VERSION ||
	    sky_le_get32(p + 28) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "serving payload: bad magic, version or reserved");
	uint32_t n = sky_le_get32(p + 16), k = sky_le_get32(p + 20), sb = sky_le_get32(p + 24);
	float sc;
	memcpy(&sc, &sb, 4);
	if (n < 1 || n > B)
		return sky_diag_set(d, SKY_EFORMAT, "serving payload: %u requests, batch is %zu", n, B);
	if (k != SKY_SERVE_Y8 && k != SKY_SERVE_H1)
		return sky_diag_set(d, SKY_EFORMAT, "serving payload: kind %u", k);
	if (!isfinite(sc) || !(sc > 0))
		return sky_diag_set(d, SKY_EFORMAT, "serving payload: scale is not a positive number");
	tab->batch = (uint64_t)sky_le_get32(p + 8) | (uint64_t)sky_le_get32(p + 12) << 32;
	tab->n = (int)n;
	const unsigned char *e = p + SKY_SERVE_HDR_BYTES;
	for (size_t b = 0; b < B; b++, e += SKY_SERVE_ENTRY_BYTES) {
		if (b >= n)
			continue;
		sky_serve_req *r = &tab->req[b];
		r->n = e[130] | e[131] << 8;
		if (!field(e, 65, r->client, segment_ok) || !field(e + 65, 65, r->id, infer_id_ok) ||
		    r->n < 1 || r->n > c->seq)
			return sky_diag_set(d, SKY_EFORMAT, "serving payload: request row %zu is bad",
					    b);
	}
	const unsigned char *m = p + SKY_SERVE_HDR_BYTES + B * SKY_SERVE_ENTRY_BYTES;
	for (size_t t = 0; t < T; t++) {
		if (m[t] > 1)
			return sky_diag_set(d, SKY_EFORMAT, "serving payload: mask byte %zu is %u", t,
					    m[t]);
		tab->mask[t] = m[t];
	}
	*kind = (int)k;
	*scale = sc;
	*act = (const int8_t *)(m + T);
	return 0;
}

/* ---- the stage ---------------------------------------------------------------- */

static void carve(sky_serve *s, sky_arena *a, int threads)
{
	const sky_model_cfg *c = &s->cfg;
	size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	sky_model_cfg one = *c;
	one.batch = 1;
	int nl = s->l1 - s->l0 + 1, v = sky_k_s8_variant_active();
	s->embed = s->is_first ? sky_arena_floats(a, (size_t)sky_model_embed_params(c),
						  SKY_LIFE_PERSIST)
			       : NULL;
	s->head = s->is_last ? sky_arena_floats(a, (size_t)sky_model_head_params(c),
						SKY_LIFE_PERSIST)
			     : NULL;
	sky_layer_s8 *q = sky_arena_alloc(a, sizeof(sky_layer_s8) * (size_t)nl, SKY_LIFE_PERSIST);
	sky_layer_s8 local;
	for (int l = 0; l < nl; l++) {
		sky_layer_s8 *L = q ? &q[l] : &local;
		sky_layer_s8_carve_persist(L, c, v, a);
		if (l == 0)
			sky_layer_s8_carve_scratch_mt(L, a, threads); /* shared by every layer */
		else if (q)
			sky_layer_s8_share_scratch(L, &q[0]);
	}
	s->q = q;
	s->tab.req = sky_arena_alloc(a, sizeof(sky_serve_req) * (size_t)c->batch, SKY_LIFE_PERSIST);
	s->tab.mask = sky_arena_alloc(a, T, SKY_LIFE_PERSIST);
	s->ids = sky_arena_alloc(a, T * sizeof(int32_t), SKY_LIFE_PERSIST);
	s->act = sky_arena_floats(a, T * H, SKY_LIFE_PERSIST);
	s->mask = sky_arena_floats(a, T, SKY_LIFE_PERSIST);
	s->logits = sky_arena_floats(a, (size_t)c->batch * c->classes, SKY_LIFE_PERSIST);
	s->head_scratch = sky_arena_floats(a, sky_head_scratch_floats(&one), SKY_LIFE_PERSIST);
	s->tmp = sky_arena_alloc(a, sky_layer_s8_tmp_bytes(c), SKY_LIFE_SCRATCH);
}

static int setup(sky_serve *s, const sky_model_cfg *c, int first, int last, int threads,
		 sky_diag *d)
{
	memset(s, 0, sizeof *s);
	s->cfg = *c;
	if (sky_model_validate(c) != 0)
		return sky_diag_set(d, SKY_EINVAL, "serving stage: model %s has an invalid shape",
				    c->name);
	if (first < 0 || last < first || last >= 2 * c->layers)
		return sky_diag_set(d, SKY_ERANGE, "serving stage: half-layers %d-%d of a %d-layer "
				    "model", first, last, c->layers);
	if (threads < 1 || threads > SKY_POOL_MAX_THREADS)
		return sky_diag_set(d, SKY_ERANGE, "serving stage: %d threads", threads);
	s->first = first;
	s->last = last;
	s->l0 = first / 2;
	s->l1 = last / 2;
	s->is_first = first == 0;
	s->is_last = last == 2 * c->layers - 1;
	s->threads = threads;
	return 0;
}

int64_t sky_serve_bytes(const sky_model_cfg *c, int first, int last, int threads, sky_diag *d)
{
	sky_serve s;
	int rc = setup(&s, c, first, last, threads, d);
	if (rc)
		return rc;
	sky_arena meas;
	sky_arena_init(&meas, NULL, 0);
	carve(&s, &meas, threads);
	return (int64_t)sky_arena_required(&meas);
}

int sky_serve_open(sky_serve *s, const char *slice_path, const sky_model_cfg *c, int first,
		   int last, int threads, sky_diag *d)
{
	sky_st_file f;
	int rc = setup(s, c, first, last, threads, d);
	if (rc)
		return rc;
	sky_st_init(&f);
	sky_arena meas, a;
	sky_arena_init(&meas, NULL, 0);
	carve(s, &meas, threads);
	s->arena_bytes = sky_arena_required(&meas);
	s->mem = malloc(s->arena_bytes); /* the one allocation, when the plan is taken */
	if (!s->mem) {
		rc = sky_diag_set(d, SKY_ENOMEM, "serving stage: %zu bytes of arena", s->arena_bytes);
		goto exit;
	}
	sky_arena_init(&a, s->mem, s->arena_bytes);
	carve(s, &a, threads);
	if ((rc = sky_arena_seal(&a)) != 0) {
		rc = sky_diag_set(d, rc, "serving stage: arena carve failed");
		goto exit;
	}
	if ((rc = sky_st_open(&f, slice_path, d)) != 0)
		goto exit;
	sky_tensor_info te[SKY_EMBED_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_embed_tensors(c, te);
	sky_head_tensors(c, th);
	if (s->is_first && (rc = sky_st_load_block(&f, "bert.", te, SKY_EMBED_NTENSORS, s->embed, d)))
		goto exit;
	if (s->is_last && ((rc = sky_st_load_block(&f, "bert.", th, 2, s->head, d)) ||
			   (rc = sky_st_load_block(&f, "", th + 2, 2, s->head, d))))
		goto exit;
	for (int l = s->l0; l <= s->l1; l++) {
		char prefix[48];
		snprintf(prefix, sizeof prefix, "bert.encoder.layer.%d.", l);
		if ((rc = sky_layer_s8_load(&s->q[l - s->l0], &f, prefix, s->tmp, d)) != 0)
			goto exit;
		s->weight_bytes += sky_layer_s8_weight_bytes(c);
	}
	if (threads > 1) {
		s->pool = sky_pool_create(threads);
		if (!s->pool) {
			rc = sky_diag_set(d, SKY_ENOMEM, "serving stage: cannot start %d threads",
					  threads);
			goto exit;
		}
	}
	for (int l = s->l0; l <= s->l1; l++)
		if ((rc = sky_layer_s8_use_pool(&s->q[l - s->l0], s->pool)) != 0) {
			rc = sky_diag_set(d, rc, "serving stage: pool of %d threads refused", threads);
			goto exit;
		}
exit:
	sky_st_close(&f);
	if (rc)
		sky_serve_close(s);
	return rc;
}

void sky_serve_close(sky_serve *s)
{
	if (!s)
		return;
	sky_pool_destroy(s->pool);
	s->pool = NULL;
	free(s->mem);
	s->mem = NULL;
}

/* The story of a batch through the stage: in (ids or int8 activations),
 * then every half-layer of the range, then out (int8 activations or the
 * logits). ~all of the time is in the int8 layers. */
int sky_serve_forward(sky_serve *s, const unsigned char *in, unsigned char *out, sky_diag *d)
{
	const sky_model_cfg *c = &s->cfg;
	const size_t T = (size_t)sky_model_tokens(c), H = (size_t)c->hidden;
	const int8_t *in8 = NULL;
	int rc, kind = SKY_SERVE_Y8;
	float scale = 0;
	if (s->is_first) {
		if ((rc = sky_ends_embed(c, s->embed, s->ids, s->act)) != 0)
			return sky_diag_set(d, rc, "serving stage: a token id outside the vocabulary");
	} else {
		if (!in)
			return sky_diag_set(d, SKY_EINVAL, "serving stage: no input payload");
		if ((rc = sky_serve_payload_read(c, in, &s->tab, &kind, &scale, &in8, d)) != 0)
			return rc;
		int want = s->first % 2 ? SKY_SERVE_H1 : SKY_SERVE_Y8;
		if (kind != want)
			return sky_diag_set(d, SKY_EFORMAT,
					    "serving payload: kind %s, stage starts at half-layer %d",
					    kind == SKY_SERVE_H1 ? "h1" : "y8", s->first);
		/* after a layer: y = y8 * s_y, exactly the previous layer's exit */
		if (kind == SKY_SERVE_Y8)
			sky_k_dequantize_s8_f32(in8, T * H, scale, s->act);
	}
	for (size_t t = 0; t < T; t++)
		s->mask[t] = s->tab.mask[t] ? 0.0f : -1e9f;
	const int8_t *send = NULL;
	float send_scale = 0;
	int send_kind = SKY_SERVE_Y8;
	for (int l = s->l0; l <= s->l1; l++) {
		sky_layer_s8 *L = &s->q[l - s->l0];
		const int8_t *h1 = NULL;
		if (2 * l >= s->first) {
			if ((rc = sky_layer_s8_forward_attn(L, s->act, s->mask)) != 0)
				return sky_diag_set(d, rc, "serving stage: layer %d input not finite", l);
		} else {
			h1 = in8; /* the stage starts with this layer's FFN half */
		}
		if (2 * l + 1 > s->last) { /* the stage ends mid-layer */
			send = L->h1_8;
			send_scale = L->absmax[SKY_Q_H1] / 127.0f;
			send_kind = SKY_SERVE_H1;
			break;
		}
		int more = l < s->l1 || s->is_last;
		sky_layer_s8_forward_ffn(L, h1, more ? s->act : NULL);
		send = L->x8;
		send_scale = L->s_y;
		send_kind = SKY_SERVE_Y8;
	}
	if (s->is_last) {
		/* one sequence at a time, in portable arithmetic: its logits are the
		 * same whatever batch it is in and whatever machine runs this */
		for (int b = 0; b < s->tab.n; b++)
			sky_ends_head(c, s->head, s->act + (size_t)b * c->seq * H,
				      s->logits + (size_t)b * c->classes, s->head_scratch);
		return 0;
	}
	if (!out)
		return sky_diag_set(d, SKY_EINVAL, "serving stage: no output payload");
	sky_serve_payload_write(c, &s->tab, send_kind, send_scale, send, out);
	return 0;
}
