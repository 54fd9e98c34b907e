#include "sky_probe.h"

#include "sky_blas_core.h"

#include "sky_arena.h"
#include "sky_clock.h"
#include "sky_ends.h"
#include "sky_file.h"
#include "sky_infermsg.h"
#include "sky_json.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_log.h"
#include "sky_rng.h"
#include "sky_version.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 64

void sky_probe_opts_default(sky_probe_opts *o, const sky_model_cfg *model)
{
	memset(o, 0, sizeof *o);
	o->model = *model;
	o->warmup = 1;
	o->runs = 7;
	o->max_s = SKY_PROBE_DEFAULT_MAX_S;
	o->seed = 1;
	o->int8 = 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
	double s[MAX_RUNS];
	memcpy(s, v, (size_t)n * sizeof *v);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* The buffers one layer's forward and backward need, block by block. */
typedef struct probe_bufs {
	float *w, *dw;           /* layer parameters and gradients */
	float *x, *h1, *y;       /* input, attention-block output, layer output: (T, H) */
	float *dy, *dh1, *dx;    /* their gradients */
	float *saved_a, *saved_f; /* activations each block keeps for backward */
	float *scratch;
} probe_bufs;

static void carve(sky_arena *a, const sky_model_cfg *c, probe_bufs *b)
{
	size_t th = (size_t)sky_model_tokens(c) * (size_t)c->hidden;
	size_t np = (size_t)sky_model_layer_params(c);
	b->w = sky_arena_floats(a, np, SKY_LIFE_PERSIST);
	b->dw = sky_arena_floats(a, np, SKY_LIFE_PERSIST);
	b->x = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->h1 = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->y = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->dy = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->dh1 = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->dx = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->saved_a = sky_arena_floats(a, sky_layer_saved_floats(c, SKY_BLOCK_ATTN), SKY_LIFE_ACT);
	b->saved_f = sky_arena_floats(a, sky_layer_saved_floats(c, SKY_BLOCK_FFN), SKY_LIFE_ACT);
	b->scratch = sky_arena_floats(a, sky_layer_scratch_floats(c), SKY_LIFE_SCRATCH);
}

/* Times one phase, stretched to the profile's emulated speed (from the
 * thread's CPU time: see sky_profile_stretch_cpu). */
#define TIMED(out, call) \
	do { \
		double t0_ = sky_clock_s(), c0_ = sky_clock_thread_cpu_s(); \
		call; \
		double el_ = sky_clock_s() - t0_; \
		if (prof) \
			el_ += sky_profile_stretch_cpu(prof, el_, sky_clock_thread_cpu_s() - c0_); \
		out = el_; \
	} while (0)

/* ---- the shape ladder ----------------------------------------------------------
 *
 * One run at the job's shapes can take longer than the whole bound on a slow
 * board (mini under qemu: 29 s per fp32 layer run). So the probe climbs a
 * ladder of smaller shapes that do the same kind of work, from one short
 * sequence up to the job's micro-batch: seq doubles from LADDER_SEQ0 to S with
 * one sequence, then the batch doubles to B. Each step's time, scaled by the
 * FLOP ratio, predicts the next; the probe jumps to the largest shape whose
 * warm-up and MIN_RUNS measured runs are predicted to fit what is left of the
 * bound, and times there. Figures from a smaller shape are scaled to the job's
 * shape block by block by the FLOP ratio: exact in work for a sub-batch (every
 * block is linear in B), and by the formula's S^2 term for a shorter sequence. */

#define LADDER_SEQ0 16
#define LADDER_MAX 48
#define MIN_RUNS 3        /* a shape is chosen only if warm-up + this many runs fit */
#define FP32_SHARE 0.6    /* of max_s for the fp32 part when int8 is timed too */

typedef struct probe_shape {
	int batch, seq;
} probe_shape;

static int ladder(const sky_model_cfg *c, probe_shape *out)
{
	int n = 0;
	int s = c->seq < LADDER_SEQ0 ? c->seq : LADDER_SEQ0;
	for (; n < LADDER_MAX / 2; s *= 2) {
		out[n++] = (probe_shape){1, s < c->seq ? s : c->seq};
		if (s >= c->seq)
			break;
	}
	for (int b = 2; n < LADDER_MAX; b *= 2) {
		if (b >= c->batch) {
			if (c->batch > 1)
				out[n++] = (probe_shape){c->batch, c->seq};
			break;
		}
		out[n++] = (probe_shape){b, c->seq};
	}
	return n;
}

static sky_model_cfg at_shape(const sky_model_cfg *c, probe_shape sh)
{
	sky_model_cfg x = *c;
	x.batch = sh.batch;
	x.seq = sh.seq;
	return x;
}

/* Forward FLOPs of each block (sky_model_layer_flops_fwd split in two):
 * attention B*S*8*H^2 + 4*B*S^2*H, feed-forward B*S*4*H*F. Backward is twice
 * either, so one ratio scales both directions. */
static double flops_attn(const sky_model_cfg *c, probe_shape sh)
{
	double t = (double)sh.batch * sh.seq, h = c->hidden;
	return t * 8.0 * h * h + 4.0 * t * sh.seq * h;
}
static double flops_ffn(const sky_model_cfg *c, probe_shape sh)
{
	return (double)sh.batch * sh.seq * 4.0 * c->hidden * c->ffn;
}
static double flops_layer(const sky_model_cfg *c, probe_shape sh)
{
	return flops_attn(c, sh) + flops_ffn(c, sh);
}

/* The largest step above `at` whose predicted cost fits `left` seconds, or
 * -1: `runs` runs of run_s plus a setup of scaled_s, both scaled from `at` by
 * the FLOP ratio, plus fixed_s that no shape changes. */
static int next_step(const sky_model_cfg *c, const probe_shape *lad, int n, int at, double run_s,
		     double scaled_s, double fixed_s, int runs, double left)
{
	for (int j = n - 1; j > at; j--) {
		double k = flops_layer(c, lad[j]) / flops_layer(c, lad[at]);
		if ((run_s * runs + scaled_s) * k + fixed_s <= left)
			return j;
	}
	return -1;
}

/* ---- int8 --------------------------------------------------------------------- */

/* The int8 layer's buffers, carved the same way in both arena passes. */
typedef struct s8_bufs {
	sky_layer_s8 L;
	float *calib_scratch;
	void *tmp;
	float *y;
} s8_bufs;

static void carve_s8(sky_arena *a, const sky_model_cfg *c, s8_bufs *b)
{
	size_t th = (size_t)sky_model_tokens(c) * (size_t)c->hidden;
	sky_layer_s8_carve(&b->L, c, sky_k_s8_variant_active(), a);
	b->calib_scratch = sky_arena_floats(a, sky_layer_s8_calib_scratch_floats(c), SKY_LIFE_SCRATCH);
	b->tmp = sky_arena_alloc(a, sky_layer_s8_tmp_bytes(c), SKY_LIFE_SCRATCH);
	b->y = sky_arena_floats(a, th, SKY_LIFE_ACT);
}

/* What setting up the int8 layer at one shape took: the calibration
 * (scales with the shape) and the quantisation of the weights (does not). */
typedef struct s8_setup_times {
	double calib_s, quant_s;
} s8_setup_times;

/* Carves the int8 layer for shape c into mem (sized for the job's shape, so
 * big enough for every smaller one) and quantises w calibrated on x.
 * Returns 0 or the calibration/quantisation errors. */
static int s8_setup(const sky_model_cfg *c, void *mem, size_t cap, s8_bufs *b, const float *w,
		    const float *x, s8_setup_times *t, sky_diag *d)
{
	sky_arena a;
	int rc;
	sky_arena_init(&a, mem, cap);
	carve_s8(&a, c, b);
	if ((rc = sky_arena_seal(&a)) != 0)
		return sky_diag_set(d, rc, "probe int8: arena carving failed");
	sky_layer_s8_calib cal;
	sky_layer_s8_calib_init(&cal);
	double t0 = sky_clock_s();
	if ((rc = sky_layer_s8_calibrate(c, w, x, NULL, b->calib_scratch, &cal, d)) != 0)
		return rc;
	double t1 = sky_clock_s();
	if ((rc = sky_layer_s8_from_f32(&b->L, w, &cal, b->tmp, d)) != 0)
		return rc;
	t->calib_s = t1 - t0;
	t->quant_s = sky_clock_s() - t1;
	return 0;
}

/* Quantises the probe's layer (calibrated on x) and times its int8 forward,
 * climbing the ladder like the fp32 part: median of the measured runs at the
 * chosen shape, scaled to the job's, no new run once `deadline` (monotonic s)
 * is reached (the first measured run always happens). Returns 0 or an error
 * (then the report simply has no int8). */
static int time_int8(const sky_probe_opts *o, sky_profile *prof, const float *w, const float *x,
		     int runs, double deadline, sky_probe_result *r, sky_diag *d)
{
	const sky_model_cfg *c = &o->model;
	static s8_bufs b; /* sky_layer_s8 is large; one probe at a time */
	probe_shape lad[LADDER_MAX];
	int n = ladder(c, lad);
	sky_arena a;
	int rc;
	sky_arena_init(&a, NULL, 0);
	carve_s8(&a, c, &b);
	size_t need = sky_arena_required(&a);
	void *mem = malloc(need);
	if (!mem)
		return sky_diag_set(d, SKY_ENOMEM, "probe int8: cannot allocate %zu bytes", need);
	/* climb and measure as the fp32 part does; a jump also costs a new
	 * calibration (predicted from this shape's, scaled) and quantisation */
	int at = 0, warm = 0, m = 0;
	int warmup = o->warmup < 1 ? 1 : o->warmup;
	s8_setup_times st;
	double ta[MAX_RUNS], tf[MAX_RUNS], ea, ef;
	sky_model_cfg sc = at_shape(c, lad[0]);
	if ((rc = s8_setup(&sc, mem, need, &b, w, x, &st, d)) != 0)
		goto exit;
	for (;;) {
		/* the two halves a serving stage runs (chained they are the whole
		 * layer's forward, bit for bit: sky_layer_s8.h) */
		TIMED(ea, rc = sky_layer_s8_forward_attn(&b.L, x, NULL));
		if (rc)
			goto exit;
		TIMED(ef, rc = sky_layer_s8_forward_ffn(&b.L, NULL, b.y));
		if (rc)
			goto exit;
		if (warm < warmup) {
			warm++;
		} else {
			ta[m] = ea;
			tf[m++] = ef;
		}
		double left = deadline - sky_clock_s();
		if (m >= runs || (m >= 1 && left <= 0))
			break;
		int j = next_step(c, lad, n, at, ea + ef, st.calib_s, st.quant_s, warmup + MIN_RUNS,
				  left);
		if (j >= 0) {
			at = j;
			sc = at_shape(c, lad[at]);
			warm = m = 0;
			if ((rc = s8_setup(&sc, mem, need, &b, w, x, &st, d)) != 0)
				goto exit;
		}
	}
	r->int8_batch = lad[at].batch;
	r->int8_seq = lad[at].seq;
	/* each half scaled by its own FLOP ratio (attention has the S^2 term) */
	r->int8_attn_s = median(ta, m) * flops_attn(c, lad[n - 1]) / flops_attn(c, lad[at]);
	r->int8_fwd_s = r->int8_attn_s + median(tf, m) * flops_ffn(c, lad[n - 1]) / flops_ffn(c, lad[at]);
exit:
	free(mem);
	return rc;
}

/* ---- the serving ends ---------------------------------------------------------- */

#define ENDS_RUNS 3 /* measured runs of the ends, at least (cheap: see sky_probe.h) */

/* A request as `sky bench infer` sends it: S token ids, no mask, an id of
 * the length its ids have. Returns its length or an error. */
static int ends_request(const sky_model_cfg *c, int32_t *tokens, char *buf, size_t cap,
			uint64_t seed)
{
	sky_rng rng;
	sky_rng_seed(&rng, seed);
	for (int i = 0; i < c->seq; i++)
		tokens[i] = 1 + (int32_t)sky_rng_below(&rng, (uint32_t)(c->vocab - 1));
	sky_infer_req q = {.n = c->seq, .tokens = tokens, .cap = c->seq};
	snprintf(q.id, sizeof q.id, "probe0000-c0-%d", 1000);
	return sky_infer_req_encode(&q, buf, cap, NULL);
}

/* The last stage's head, one sequence at a time as sky_serve_forward runs it. */
static void heads(const sky_model_cfg *c, const float *wh, const float *act, float *logits,
		  float *scratch)
{
	for (size_t b = 0; b < (size_t)c->batch; b++)
		sky_ends_head(c, wh, act + b * (size_t)c->seq * (size_t)c->hidden,
			      logits + b * (size_t)c->classes, scratch);
}

/* Times the serving ends (sky_probe.h) at the job's shapes: median of the
 * measured runs, at least ENDS_RUNS, more up to `runs` while `deadline`
 * (monotonic s) allows. Returns 0 or an error (then no ends figures). */
static int time_ends(const sky_probe_opts *o, sky_profile *prof, int runs, double deadline,
		     sky_probe_result *r, sky_diag *d)
{
	const sky_model_cfg *c = &o->model;
	const size_t B = (size_t)c->batch, S = (size_t)c->seq, H = (size_t)c->hidden;
	const size_t ne = (size_t)sky_model_embed_params(c), nh = (size_t)sky_model_head_params(c);
	static char req[SKY_INFER_REQ_MAX_BYTES], resp[SKY_INFER_RESP_MAX_BYTES];
	static sky_infer_resp rs;
	int rc = 0;
	if (c->classes > SKY_INFER_MAX_CLASSES)
		return sky_diag_set(d, SKY_ERANGE, "probe ends: %d classes", c->classes);
	/* measure, allocate once, seal */
	sky_arena a;
	float *we = NULL, *wh = NULL, *act = NULL, *scratch = NULL, *logits = NULL;
	int32_t *ids = NULL, *tok = NULL, *mask = NULL;
	void *mem = NULL;
	for (int pass = 0; pass < 2; pass++) {
		size_t need = pass ? sky_arena_required(&a) : 0;
		if (pass && !(mem = malloc(need)))
			return sky_diag_set(d, SKY_ENOMEM, "probe ends: cannot allocate %zu bytes", need);
		sky_arena_init(&a, mem, need);
		we = sky_arena_floats(&a, ne, SKY_LIFE_PERSIST);
		wh = sky_arena_floats(&a, nh, SKY_LIFE_PERSIST);
		act = sky_arena_floats(&a, B * S * H, SKY_LIFE_ACT);
		scratch = sky_arena_floats(&a, H, SKY_LIFE_SCRATCH);
		logits = sky_arena_floats(&a, B * (size_t)c->classes, SKY_LIFE_ACT);
		ids = sky_arena_alloc(&a, B * S * sizeof *ids, SKY_LIFE_ACT);
		tok = sky_arena_alloc(&a, S * sizeof *tok, SKY_LIFE_SCRATCH);
		mask = sky_arena_alloc(&a, S * sizeof *mask, SKY_LIFE_SCRATCH);
	}
	if ((rc = sky_arena_seal(&a)) != 0) {
		sky_diag_set(d, rc, "probe ends: arena carving failed");
		goto exit;
	}
	/* weights: any finite values (timing does not depend on them) */
	sky_rng rng;
	sky_rng_seed(&rng, o->seed + 7);
	for (size_t i = 0; i < ne; i++)
		we[i] = 0.02f * ((float)sky_rng_below(&rng, 2001) - 1000.0f) / 1000.0f;
	for (size_t i = 0; i < nh; i++)
		wh[i] = 0.02f * ((float)sky_rng_below(&rng, 2001) - 1000.0f) / 1000.0f;
	int qn = ends_request(c, tok, req, sizeof req, o->seed + 11);
	if (qn < 0) {
		rc = sky_diag_set(d, qn, "probe ends: the sample request does not encode");
		goto exit;
	}
	memset(&rs, 0, sizeof rs);
	snprintf(rs.id, sizeof rs.id, "probe0000-c0-%d", 1000);
	snprintf(rs.job, sizeof rs.job, "probe-job");
	rs.ok = 1;
	rs.epoch = 1;
	rs.n_logits = c->classes;
	double te[MAX_RUNS], th[MAX_RUNS];
	int warmup = o->warmup < 1 ? 1 : o->warmup, warm = 0, m = 0;
	if (runs < ENDS_RUNS)
		runs = ENDS_RUNS;
	for (;;) {
		/* first stage: B requests parsed (not stretched), B*S tokens embedded */
		double t0 = sky_clock_s(), parse_s, embed_s, head_s, resp_s;
		for (size_t b = 0; b < B && !rc; b++) {
			sky_infer_req q = {.tokens = ids + b * S, .mask = mask, .cap = c->seq};
			int code;
			rc = sky_infer_req_decode(req, (size_t)qn, c->seq, c->vocab, &q, &code, d);
		}
		parse_s = sky_clock_s() - t0;
		if (rc)
			goto exit;
		TIMED(embed_s, rc = sky_ends_embed(c, we, ids, act));
		if (rc) {
			sky_diag_set(d, rc, "probe ends: embedding refused its ids");
			goto exit;
		}
		/* last stage: B heads (stretched), B responses written (not) */
		TIMED(head_s, heads(c, wh, act, logits, scratch));
		t0 = sky_clock_s();
		for (size_t b = 0; b < B; b++) {
			for (int k = 0; k < c->classes; k++) /* finite, as encode wants */
				rs.logits[k] = isfinite(logits[b * (size_t)c->classes + (size_t)k])
						       ? logits[b * (size_t)c->classes + (size_t)k]
						       : 0.0f;
			if ((rc = sky_infer_resp_encode(&rs, resp, sizeof resp, d)) < 0)
				goto exit;
			rc = 0;
		}
		resp_s = sky_clock_s() - t0;
		if (warm < warmup) {
			warm++;
		} else {
			te[m] = parse_s + embed_s;
			th[m++] = head_s + resp_s;
		}
		if (m >= runs || (m >= ENDS_RUNS && sky_clock_s() >= deadline))
			break;
	}
	r->int8_embed_s = median(te, m);
	r->int8_head_s = median(th, m);
exit:
	free(mem);
	return rc;
}

/* One fp32 layer run at shape c, block by block, each stretched. */
typedef struct f32_times {
	double fa, ff, bf, ba;
} f32_times;

static void run_f32(const sky_model_cfg *c, sky_profile *prof, const probe_bufs *b, f32_times *t)
{
	TIMED(t->fa, sky_layer_forward(c, b->w, b->x, NULL, b->h1, b->saved_a, b->scratch,
				       SKY_BLOCK_ATTN));
	TIMED(t->ff, sky_layer_forward(c, b->w, b->h1, NULL, b->y, b->saved_f, b->scratch,
				       SKY_BLOCK_FFN));
	TIMED(t->bf, sky_layer_backward(c, b->w, NULL, b->saved_f, b->dy, b->dh1, b->dw, b->scratch,
					SKY_BLOCK_FFN));
	TIMED(t->ba, sky_layer_backward(c, b->w, NULL, b->saved_a, b->dh1, b->dx, b->dw, b->scratch,
					SKY_BLOCK_ATTN));
}

int sky_probe_run(const sky_probe_opts *o, sky_profile *prof, sky_probe_result *r, sky_diag *d)
{
	const sky_model_cfg *c = &o->model;
	int rc = 0;
	void *mem = NULL;
	double t_start = sky_clock_s();
	memset(r, 0, sizeof *r);
	if (sky_model_validate(c) != 0)
		return sky_diag_set(d, SKY_EINVAL, "probe: model %s has invalid shapes", c->name);
	int runs = o->runs < 1 ? 1 : o->runs > MAX_RUNS ? MAX_RUNS : o->runs;
	double max_s = o->max_s > 0 ? o->max_s : 0;
	double fp32_deadline = t_start + (o->int8 ? FP32_SHARE : 1.0) * max_s;

	/* measure, allocate once (for the job's shape, the largest), seal */
	sky_arena a;
	probe_bufs b;
	sky_arena_init(&a, NULL, 0);
	carve(&a, c, &b);
	size_t need = sky_arena_required(&a);
	mem = malloc(need);
	if (!mem) {
		rc = sky_diag_set(d, SKY_ENOMEM, "probe: cannot allocate %zu bytes for model %s", need,
				  c->name);
		goto exit;
	}
	sky_arena_init(&a, mem, need);
	carve(&a, c, &b);
	if ((rc = sky_arena_seal(&a)) != 0) {
		sky_diag_set(d, rc, "probe: arena carving failed");
		goto exit;
	}
	r->arena_bytes = need;

	sky_layer_init(c, b.w, o->seed);
	sky_rng rng;
	sky_rng_seed(&rng, o->seed + 1);
	size_t th = (size_t)sky_model_tokens(c) * (size_t)c->hidden;
	for (size_t i = 0; i < th; i++) {
		b.x[i] = sky_rng_normal(&rng);
		b.dy[i] = 0.01f * sky_rng_normal(&rng);
	}

	/* Climb and measure in one loop: the first runs at a shape are its
	 * warm-up, the rest are measured; after every run, the latest time
	 * (warm after the first) decides whether a larger shape still fits, and
	 * a jump there starts over. */
	probe_shape lad[LADDER_MAX];
	int nl = ladder(c, lad), at = 0, warm = 0, n = 0;
	int warmup = o->warmup < 1 ? 1 : o->warmup;
	sky_model_cfg sc = at_shape(c, lad[0]);
	f32_times ft;
	double fa[MAX_RUNS], ff[MAX_RUNS], bf[MAX_RUNS], ba[MAX_RUNS], layer[MAX_RUNS];
	r->ladder_steps = 1;
	for (;;) {
		run_f32(&sc, prof, &b, &ft);
		double run_s = ft.fa + ft.ff + ft.bf + ft.ba;
		if (warm < warmup) {
			warm++;
		} else {
			fa[n] = ft.fa;
			ff[n] = ft.ff;
			bf[n] = ft.bf;
			ba[n] = ft.ba;
			layer[n] = run_s;
			n++;
		}
		double left = fp32_deadline - sky_clock_s();
		/* the bound: no new run once the fp32 share is spent (the first
		 * measured run always happens) */
		if (n >= runs || (n >= 1 && left <= 0))
			break;
		int j = next_step(c, lad, nl, at, run_s, 0, 0, warmup + MIN_RUNS, left);
		if (j >= 0) {
			at = j;
			sc = at_shape(c, lad[at]);
			warm = n = 0;
			r->ladder_steps++;
		}
	}
	r->runs = n;
	r->timed_batch = lad[at].batch;
	r->timed_seq = lad[at].seq;
	r->scale_attn = flops_attn(c, lad[nl - 1]) / flops_attn(c, lad[at]);
	r->scale_ffn = flops_ffn(c, lad[nl - 1]) / flops_ffn(c, lad[at]);
	r->fp32.fwd_attn_s = median(fa, n) * r->scale_attn;
	r->fp32.fwd_ffn_s = median(ff, n) * r->scale_ffn;
	r->fp32.bwd_ffn_s = median(bf, n) * r->scale_ffn;
	r->fp32.bwd_attn_s = median(ba, n) * r->scale_attn;
	double mean = 0, var = 0;
	for (int i = 0; i < n; i++)
		mean += layer[i] / n;
	for (int i = 0; i < n; i++)
		var += (layer[i] - mean) * (layer[i] - mean) / n;
	r->layer_cv = mean > 0 ? sqrt(var) / mean : 0;
	if (prof) {
		r->mem_budget = sky_profile_mem_budget(prof);
	} else {
		sky_profile p;
		sky_profile_defaults(&p);
		r->mem_budget = sky_profile_mem_budget(&p);
	}
	/* a kernel that produced NaN would make every later figure a lie */
	size_t sth = (size_t)sky_model_tokens(&sc) * (size_t)c->hidden;
	if (!isfinite(b.dx[0]) || !isfinite(b.y[sth - 1])) {
		rc = sky_diag_set(d, SKY_EINVAL, "probe: layer output is not finite");
		goto exit;
	}
	if (o->int8) {
		/* the int8 forward gets the rest of the bound */
		sky_diag d8;
		sky_diag_clear(&d8);
		double deadline = t_start + max_s;
		if (time_int8(o, prof, b.w, b.x, runs, deadline, r, &d8) == 0)
			r->has_int8 = 1;
		else
			SKY_WARN("probe: no int8 figure (%s)", d8.msg);
		/* and the serving ends (a floor of three cheap runs, see above) */
		sky_diag_clear(&d8);
		if (r->has_int8 && time_ends(o, prof, runs, deadline, r, &d8) == 0)
			r->has_ends = 1;
		else if (r->has_int8)
			SKY_WARN("probe: no serving ends figures (%s)", d8.msg);
	}
exit:
	free(mem);
	r->probe_s = sky_clock_s() - t_start;
	return rc;
}

/* ---- cache ------------------------------------------------------------------ */

static void cache_key(const char *id, const sky_profile *prof, const sky_model_cfg *m, char *buf,
		      size_t cap)
{
	snprintf(buf, cap, "%s|%s|%s|%d|%.6g|%s|%d|%d|%d|%d|%d", id, SKY_VERSION,
		 prof ? prof->name : "default", prof ? prof->threads : 1, prof ? prof->speed : 1.0,
		 m->name, m->hidden, m->heads, m->ffn, m->seq, m->batch);
}

static int cache_read(const char *path, const char *key, sky_caps *c)
{
	char buf[4096], k[512];
	long n = sky_file_read(path, buf, sizeof buf);
	if (n <= 0)
		return SKY_ENOTFOUND;
	int rc = SKY_EFORMAT;
	cJSON *doc = sky_json_parse(buf, (size_t)n, NULL);
	if (!doc)
		return rc;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "fp32");
	if (sky_json_str(doc, "key", k, sizeof k, "probe cache", NULL) == 0 && strcmp(k, key) == 0 &&
	    t && sky_json_num(t, "fwd_attn_s", 1e-12, SKY_CAPS_MAX_TIME_S, &c->fp32.fwd_attn_s, "", NULL) == 0 &&
	    sky_json_num(t, "fwd_ffn_s", 1e-12, SKY_CAPS_MAX_TIME_S, &c->fp32.fwd_ffn_s, "", NULL) == 0 &&
	    sky_json_num(t, "bwd_attn_s", 1e-12, SKY_CAPS_MAX_TIME_S, &c->fp32.bwd_attn_s, "", NULL) == 0 &&
	    sky_json_num(t, "bwd_ffn_s", 1e-12, SKY_CAPS_MAX_TIME_S, &c->fp32.bwd_ffn_s, "", NULL) == 0 &&
	    sky_json_num(doc, "probe_s", 0, SKY_CAPS_MAX_TIME_S, &c->probe_s, "", NULL) == 0 &&
	    sky_json_i64(doc, "probed_at", 0, 1ll << 40, &c->probed_at, "", NULL) == 0)
		rc = 0;
	c->has_int8 = rc == 0 && sky_json_num(doc, "int8_fwd_s", 1e-12, SKY_CAPS_MAX_TIME_S,
					      &c->int8_fwd_s, "", NULL) == 0;
	/* optional: 0 when absent */
	c->int8_attn_s = c->int8_embed_s = c->int8_head_s = 0;
	if (c->has_int8 &&
	    (sky_json_num(doc, "int8_attn_s", 1e-12, c->int8_fwd_s, &c->int8_attn_s, "", NULL) != 0 ||
	     c->int8_attn_s >= c->int8_fwd_s))
		c->int8_attn_s = 0;
	if (c->has_int8 && (sky_json_num(doc, "int8_embed_s", 1e-12, SKY_CAPS_MAX_TIME_S,
					 &c->int8_embed_s, "", NULL) != 0 ||
			    sky_json_num(doc, "int8_head_s", 1e-12, SKY_CAPS_MAX_TIME_S,
					 &c->int8_head_s, "", NULL) != 0))
		c->int8_embed_s = c->int8_head_s = 0;
	sky_json_free(doc);
	return rc;
}

static void cache_write(const char *path, const char *key, const sky_caps *c)
{
	char buf[4096];
	int n = snprintf(buf, sizeof buf,
			 "{\"key\":\"%s\",\"fp32\":{\"fwd_attn_s\":%.17g,\"fwd_ffn_s\":%.17g,"
			 "\"bwd_attn_s\":%.17g,\"bwd_ffn_s\":%.17g},\"probe_s\":%.6g,\"probed_at\":%lld%s",
			 key, c->fp32.fwd_attn_s, c->fp32.fwd_ffn_s, c->fp32.bwd_attn_s,
			 c->fp32.bwd_ffn_s, c->probe_s, (long long)c->probed_at,
			 c->has_int8 ? "," : "}\n");
	if (c->has_int8 && n > 0 && (size_t)n < sizeof buf)
		n += snprintf(buf + n, sizeof buf - (size_t)n,
			      "\"int8_fwd_s\":%.17g,\"int8_attn_s\":%.17g,\"int8_embed_s\":%.17g,"
			      "\"int8_head_s\":%.17g}\n",
			      c->int8_fwd_s, c->int8_attn_s, c->int8_embed_s, c->int8_head_s);
	if (n > 0 && (size_t)n < sizeof buf && sky_file_write(path, buf, (size_t)n, 0644) == 0)
		return;
	SKY_WARN("probe: cannot write the cache %s (next start probes again)", path);
}

int sky_probe_cached(const char *state_dir, const char *id, const sky_probe_opts *o,
		     sky_profile *prof, sky_caps *c, int *hit, sky_diag *d)
{
	char path[1024], key[512];
	*hit = 0;
	cache_key(id, prof, &o->model, key, sizeof key);
	snprintf(path, sizeof path, "%s/%s", state_dir, SKY_PROBE_CACHE_FILE);
	memset(&c->shape, 0, sizeof c->shape);
	snprintf(c->shape.name, sizeof c->shape.name, "%s", o->model.name);
	c->shape.hidden = o->model.hidden;
	c->shape.heads = o->model.heads;
	c->shape.ffn = o->model.ffn;
	c->shape.seq = o->model.seq;
	c->shape.batch = o->model.batch;
	snprintf(c->version, sizeof c->version, "%s", SKY_VERSION);
	snprintf(c->blas_core, sizeof c->blas_core, "%s", sky_blas_core_running());
	snprintf(c->board, sizeof c->board, "%s", prof ? prof->name : "default");
	snprintf(c->site, sizeof c->site, "%s", prof ? prof->site : "");
	c->threads = prof ? prof->threads : 1;
	if (cache_read(path, key, c) == 0) {
		*hit = 1;
		c->mem_bytes = (int64_t)(prof ? sky_profile_mem_budget(prof) : 0);
		if (!prof) {
			sky_profile p;
			sky_profile_defaults(&p);
			c->mem_bytes = (int64_t)sky_profile_mem_budget(&p);
		}
		SKY_INFO("probe: cached figures for %s (%s)", o->model.name, path);
		return 0;
	}
	sky_probe_result r;
	int rc = sky_probe_run(o, prof, &r, d);
	if (rc)
		return rc;
	c->fp32 = r.fp32;
	c->has_int8 = r.has_int8;
	c->int8_fwd_s = r.int8_fwd_s;
	c->int8_attn_s = r.has_int8 && r.int8_attn_s < r.int8_fwd_s ? r.int8_attn_s : 0;
	c->int8_embed_s = r.has_ends ? r.int8_embed_s : 0;
	c->int8_head_s = r.has_ends ? r.int8_head_s : 0;
	c->probe_s = r.probe_s;
	c->probed_at = sky_clock_unix();
	c->mem_bytes = (int64_t)r.mem_budget;
	SKY_INFO("probe: %s layer fwd %.3f ms bwd %.3f ms (median of %d at batch %d x seq %d%s, "
		 "cv %.3f), int8 fwd %.3f ms (attention %.3f ms), serving ends: first stage %.3f "
		 "ms, last %.3f ms, in %.2f s",
		 o->model.name, 1e3 * (r.fp32.fwd_attn_s + r.fp32.fwd_ffn_s),
		 1e3 * (r.fp32.bwd_attn_s + r.fp32.bwd_ffn_s), r.runs, r.timed_batch, r.timed_seq,
		 r.scale_attn == 1 ? "" : ", scaled to the job's shape", r.layer_cv,
		 r.has_int8 ? 1e3 * r.int8_fwd_s : 0.0, 1e3 * c->int8_attn_s, 1e3 * c->int8_embed_s,
		 1e3 * c->int8_head_s, r.probe_s);
	cache_write(path, key, c);
	return 0;
}

/* ---- stage arena ------------------------------------------------------------ */

static void carve_stage(sky_arena *a, const sky_model_cfg *c, int first, int last, int n_units,
			int in_flight)
{
	int64_t h = c->hidden, f = c->ffn;
	int64_t params = 0;
	size_t saved = 0;
	for (int u = first; u <= last; u++) {
		int attn = u % 2 == 0;
		/* attention: Wqkv, bqkv, Wo, bo, LN1; feed-forward: W1, b1, W2, b2, LN2 */
		params += attn ? 4 * h * h + 6 * h : 2 * h * f + f + 3 * h;
		saved += sky_layer_saved_floats(c, attn ? SKY_BLOCK_ATTN : SKY_BLOCK_FFN);
	}
	if (first == 0)
		params += sky_model_embed_params(c);
	if (last == n_units - 1)
		params += sky_model_head_params(c);
	/* weights, gradients, Adam's first and second moments */
	for (int k = 0; k < 4; k++)
		sky_arena_floats(a, (size_t)params, SKY_LIFE_PERSIST);
	for (int m = 0; m < in_flight; m++)
		sky_arena_floats(a, saved, SKY_LIFE_ACT);
	size_t th = (size_t)sky_model_tokens(c) * (size_t)c->hidden;
	for (int k = 0; k < 4; k++) /* activation in/out, gradient in/out */
		sky_arena_floats(a, th, SKY_LIFE_ACT);
	sky_arena_floats(a, sky_layer_scratch_floats(c), SKY_LIFE_SCRATCH);
}

int64_t sky_probe_stage_bytes(const sky_model_cfg *c, int first, int last, int n_units,
			      int in_flight, void *buf, uint64_t cap)
{
	if (first < 0 || last < first || last >= n_units || in_flight < 1)
		return SKY_EINVAL;
	sky_arena a;
	sky_arena_init(&a, NULL, 0);
	carve_stage(&a, c, first, last, n_units, in_flight);
	size_t need = sky_arena_required(&a);
	if (buf && cap >= need) {
		sky_arena_init(&a, buf, (size_t)cap);
		carve_stage(&a, c, first, last, n_units, in_flight);
		if (sky_arena_seal(&a) != 0)
			return SKY_ENOMEM;
	}
	return (int64_t)need;
}
