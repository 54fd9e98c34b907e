/* sky layer: runs one encoder layer on tensors from safetensors files, so a
 * board's numbers can be checked against a reference (HuggingFace's
 * BertLayer, or another board).
 *
 *   sky layer --model M --weights W --input X --out Y [--grad G] [--prefix P]
 *   sky layer --compare REF GOT [--tol T]
 *   sky layer --make-example DIR [--model M] [--batch B] [--seq S] [--prefix P]
 *
 * The common part (options, files, batch and sequence from the input's
 * shape, the mask, writing the result) is shared; each precision is one
 * function in k_precisions that loads its weights, computes and calls
 * job_write(). */
#include "sky_cli.h"

#include "sky_arena.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_json.h"
#include "sky_layer.h"
#include "sky_model.h"
#include "sky_opt.h"
#include "sky_profile.h"
#include "sky_rng.h"
#include "sky_safetensors.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 256

/* What every precision gets: the options and the opened, checked inputs. */
typedef struct layer_job {
	const char *weights_path, *input_path, *out_path, *grad_path;
	const char *prefix;    /* before each weight name, e.g. "encoder.layer.0." */
	const char *precision; /* "fp32", ... */
	int json;
	sky_model_cfg cfg;     /* the preset, with batch and seq from the input */
	sky_st_file weights, input, grad; /* grad is open only with --grad */
	int has_grad;
	const sky_st_tensor *mask; /* attention_mask, or NULL */
	double load_s;         /* opening and checking the files, copying into the arena */
	double fwd_s, bwd_s;   /* filled by the precision's run function */
	size_t arena_bytes;
} layer_job;

static void help(FILE *to)
{
	fprintf(to,
		"usage: sky layer --model M --weights W.safetensors --input X.safetensors\n"
		"                 --out Y.safetensors [--grad G.safetensors] [--prefix P]\n"
		"                 [--precision fp32] [--profile FILE] [--json]\n"
		"       sky layer --compare REF.safetensors GOT.safetensors [--tol T] [--atol A]\n"
		"                 [--json]\n"
		"       sky layer --make-example DIR [--model M] [--batch B] [--seq S] [--prefix P]\n"
		"                 [--seed N]\n"
		"\n"
		"Runs one BERT encoder layer (HuggingFace BertLayer: post-LN, erf GELU, no dropout)\n"
		"forward, and with --grad also backward, on tensors read from safetensors files.\n"
		"\n"
		"  --model M        preset for hidden size, heads and FFN width (%s)\n"
		"  --weights W      the layer's 16 tensors, F32, named as HuggingFace names them\n"
		"                   (attention.self.query.weight (H, H), ... output.LayerNorm.bias (H)),\n"
		"                   each preceded by --prefix (e.g. encoder.layer.0.; default none)\n"
		"  --input X        hidden_states F32 (B, S, H): batch and sequence come from here;\n"
		"                   optional attention_mask (B, S) of 0/1 (F32, I64, I32, I8, U8 or BOOL),\n"
		"                   applied as HuggingFace does: (1 - mask) * float32 min\n"
		"  --grad G         grad.output F32 (B, S, H): also run backward\n"
		"  --out Y          written: output (B, S, H); with --grad also grad.hidden_states\n"
		"                   (B, S, H) and grad.<weight name as in W> for every weight\n"
		"  --precision P    fp32 (default) or int8 (forward only; weights as sky quantize\n"
		"                   writes them, or F32 weights quantised with ranges from the input)\n"
		"  --profile FILE   board profile (threads); default $SKY_PROFILE or the installed one\n"
		"  --json           print one JSON object instead of a line of text: model, precision,\n"
		"                   batch, seq, hidden, backward, load_ms (open, check, copy into the\n"
		"                   arena), fwd_ms, bwd_ms (one run each), arena_bytes, threads, out\n"
		"  --compare R G    check every tensor of G against R (same names, F32, same shapes);\n"
		"                   a tensor of n elements passes if\n"
		"                   ||G - R|| <= tol * ||R|| + atol * sqrt(n)  (L2 norms;\n"
		"                   --tol default 1e-4, --atol default 1e-6); exit 1 if any fails\n"
		"  --make-example D write D/weights.safetensors, D/input.safetensors (with padding in\n"
		"                   the mask), D/grad.safetensors and the in-process results\n"
		"                   D/expected.safetensors (fwd+bwd) and D/expected_fwd.safetensors;\n"
		"                   --model (default tiny), --batch, --seq (default 2, 8), --seed (1)\n",
		sky_model_preset_names());
}

/* ---- shared by every precision ------------------------------------------ */

/* Copies hidden_states (checked in job_open) into x. */
static int job_input(const layer_job *j, float *x, sky_diag *d)
{
	int shape[3] = {j->cfg.batch, j->cfg.seq, j->cfg.hidden};
	return sky_st_copy_f32(&j->input, "hidden_states", 3, shape, x, d);
}

/* Copies grad.output into dy. */
static int job_dy(const layer_job *j, float *dy, sky_diag *d)
{
	int shape[3] = {j->cfg.batch, j->cfg.seq, j->cfg.hidden};
	return sky_st_copy_f32(&j->grad, "grad.output", 3, shape, dy, d);
}

/* The attention mask as the layer wants it: additive, (B*S), 0 to keep a
 * token and float32 min to drop it, as HuggingFace's
 * (1 - mask) * torch.finfo(float32).min. Values other than 0 and 1 are an
 * error. Returns 0 (no mask tensor: fills nothing) or SKY_EFORMAT. */
static int job_mask(const layer_job *j, float *mask, sky_diag *d)
{
	const sky_st_tensor *t = j->mask;
	if (!t)
		return 0;
	for (uint64_t i = 0; i < t->count; i++) {
		const unsigned char *p = t->data + i * sky_st_dtype_size(t->dtype);
		double v;
		switch (t->dtype) {
		case SKY_ST_F32: {
			float f;
			memcpy(&f, p, 4);
			v = f;
			break;
		}
		case SKY_ST_I64: {
			int64_t k;
			memcpy(&k, p, 8);
			v = (double)k;
			break;
		}
		case SKY_ST_I32: {
			int32_t k;
			memcpy(&k, p, 4);
			v = k;
			break;
		}
		case SKY_ST_I8:
			v = (signed char)*p;
			break;
		default: /* U8, BOOL (checked in job_open) */
			v = *p;
			break;
		}
		if (v != 0.0 && v != 1.0)
			return sky_diag_set(d, SKY_EFORMAT,
					    "tensor attention_mask: element %llu is %g, expected 0 or 1",
					    (unsigned long long)i, v);
		mask[i] = v == 1.0 ? 0.0f : -FLT_MAX;
	}
	return 0;
}

/* Writes path: output, and when dx is not NULL grad.hidden_states and
 * grad.<prefix><name> for each weight in table. */
static int write_result(const char *path, const sky_model_cfg *c, const char *prefix,
			const char *precision, const float *y, const float *dx, const float *dw,
			sky_diag *d)
{
	sky_tensor_info tab[SKY_LAYER_NTENSORS];
	sky_st_entry e[2 + SKY_LAYER_NTENSORS];
	static char names[SKY_LAYER_NTENSORS][NAME_CAP];
	char gprefix[NAME_CAP];
	int n = 0;
	memset(e, 0, sizeof e);
	const int64_t bsh[3] = {c->batch, c->seq, c->hidden};
	e[n] = (sky_st_entry){.name = "output", .dtype = SKY_ST_F32, .ndim = 3, .data = y};
	memcpy(e[n++].shape, bsh, sizeof bsh);
	if (dx) {
		e[n] = (sky_st_entry){
			.name = "grad.hidden_states", .dtype = SKY_ST_F32, .ndim = 3, .data = dx};
		memcpy(e[n++].shape, bsh, sizeof bsh);
		sky_layer_tensors(c, tab);
		if (snprintf(gprefix, sizeof gprefix, "grad.%s", prefix) >= (int)sizeof gprefix)
			return sky_diag_set(d, SKY_ERANGE, "--prefix is too long");
		int rc = sky_st_block_entries(gprefix, tab, SKY_LAYER_NTENSORS, dw, e + n,
					      &names[0][0], NAME_CAP, d);
		if (rc)
			return rc;
		n += SKY_LAYER_NTENSORS;
	}
	char b[16], s[16];
	snprintf(b, sizeof b, "%d", c->batch);
	snprintf(s, sizeof s, "%d", c->seq);
	sky_st_meta meta[5] = {{"producer", "sky layer"}, {"model", c->name},
			       {"precision", precision}, {"batch", b}, {"seq", s}};
	return sky_st_write(path, e, n, meta, 5, d);
}

static int job_write(const layer_job *j, const float *y, const float *dx, const float *dw,
		     sky_diag *d)
{
	return write_result(j->out_path, &j->cfg, j->prefix, j->precision, y, dx, dw, d);
}

/* ---- fp32 ---------------------------------------------------------------- */

typedef struct fp32_bufs {
	float *w, *x, *y, *mask, *saved, *scratch; /* forward */
	float *dy, *dx, *dw;                        /* backward (with --grad) */
} fp32_bufs;

static void fp32_carve(sky_arena *a, const layer_job *j, fp32_bufs *b)
{
	const sky_model_cfg *c = &j->cfg;
	size_t p = (size_t)sky_model_layer_params(c);
	size_t th = (size_t)sky_model_tokens(c) * (size_t)c->hidden;
	memset(b, 0, sizeof *b);
	b->w = sky_arena_floats(a, p, SKY_LIFE_PERSIST);
	b->x = sky_arena_floats(a, th, SKY_LIFE_ACT);
	b->y = sky_arena_floats(a, th, SKY_LIFE_ACT);
	if (j->mask)
		b->mask = sky_arena_floats(a, (size_t)sky_model_tokens(c), SKY_LIFE_ACT);
	b->scratch = sky_arena_floats(a, sky_layer_scratch_floats(c), SKY_LIFE_SCRATCH);
	if (j->has_grad) {
		b->saved = sky_arena_floats(a, sky_layer_saved_floats(c, SKY_BLOCK_ALL),
					    SKY_LIFE_ACT);
		b->dy = sky_arena_floats(a, th, SKY_LIFE_ACT);
		b->dx = sky_arena_floats(a, th, SKY_LIFE_ACT);
		b->dw = sky_arena_floats(a, p, SKY_LIFE_PERSIST);
	}
}

static int run_fp32(layer_job *j, sky_diag *d)
{
	const sky_model_cfg *c = &j->cfg;
	sky_arena a;
	fp32_bufs b;
	void *mem = NULL;
	int rc;

	/* measure, allocate once, carve, seal */
	sky_arena_init(&a, NULL, 0);
	fp32_carve(&a, j, &b);
	j->arena_bytes = sky_arena_required(&a);
	mem = malloc(j->arena_bytes);
	if (!mem)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for the %zu-byte arena",
				    j->arena_bytes);
	sky_arena_init(&a, mem, j->arena_bytes);
	fp32_carve(&a, j, &b);
	if ((rc = sky_arena_seal(&a)) != 0) {
		sky_diag_set(d, rc, "arena carving failed");
		goto exit;
	}

	sky_tensor_info tab[SKY_LAYER_NTENSORS];
	sky_layer_tensors(c, tab);
	double t0 = sky_clock_s();
	if ((rc = sky_st_load_block(&j->weights, j->prefix, tab, SKY_LAYER_NTENSORS, b.w, d)) ||
	    (rc = job_input(j, b.x, d)) || (rc = job_mask(j, b.mask, d)) ||
	    (j->has_grad && (rc = job_dy(j, b.dy, d))))
		goto exit;
	j->load_s += sky_clock_s() - t0;

	t0 = sky_clock_s();
	sky_layer_forward(c, b.w, b.x, b.mask, b.y, b.saved, b.scratch, SKY_BLOCK_ALL);
	j->fwd_s = sky_clock_s() - t0;
	if (j->has_grad) {
		memset(b.dw, 0, (size_t)sky_model_layer_params(c) * sizeof(float));
		t0 = sky_clock_s();
		sky_layer_backward(c, b.w, b.mask, b.saved, b.dy, b.dx, b.dw, b.scratch,
				   SKY_BLOCK_ALL);
		j->bwd_s = sky_clock_s() - t0;
	}
	rc = job_write(j, b.y, j->has_grad ? b.dx : NULL, b.dw, d);
exit:
	free(mem);
	return rc;
}

/* ---- int8 (tools/sky/layer_s8_cli.c) ---------------------------------------- */

int sky_layer_s8_cli_run(const sky_model_cfg *c, const sky_st_file *weights, const char *prefix,
			 const float *x, const float *mask, float *y, double *load_s, double *fwd_s,
			 size_t *arena_bytes, sky_diag *d);

static int run_int8(layer_job *j, sky_diag *d)
{
	if (j->has_grad)
		return sky_diag_set(d, SKY_EUNSUPPORTED, "--grad: the int8 layer is inference only");
	size_t t = (size_t)sky_model_tokens(&j->cfg), th = t * (size_t)j->cfg.hidden;
	float *x = malloc(th * sizeof(float)), *y = malloc(th * sizeof(float));
	float *mask = j->mask ? malloc(t * sizeof(float)) : NULL;
	int rc = SKY_ENOMEM;
	double t0 = sky_clock_s();
	if (x && y && (mask || !j->mask) && !(rc = job_input(j, x, d)) &&
	    !(rc = job_mask(j, mask, d))) {
		j->load_s += sky_clock_s() - t0;
		rc = sky_layer_s8_cli_run(&j->cfg, &j->weights, j->prefix, x, mask, y, &j->load_s,
					  &j->fwd_s, &j->arena_bytes, d);
	}
	if (!rc)
		rc = job_write(j, y, NULL, NULL, d);
	free(x), free(y), free(mask);
	return rc;
}

/* One entry per precision; an int8 path adds a line here. */
static const struct {
	const char *name;
	int (*run)(layer_job *j, sky_diag *d);
} k_precisions[] = {
	{"fp32", run_fp32},
	{"int8", run_int8},
};
#define N_PRECISIONS (sizeof k_precisions / sizeof k_precisions[0])

/* ---- opening the inputs ---------------------------------------------------- */

static int open_file(sky_st_file *f, const char *path, const char *what, sky_diag *d)
{
	sky_diag fd;
	sky_diag_clear(&fd);
	int rc = sky_st_open(f, path, &fd);
	if (rc)
		sky_diag_set(d, rc, "%s %s: %s", what, path, fd.msg);
	return rc;
}

/* Prefixes a tensor-level diagnostic with the file it concerns. */
static int in_file(int rc, const char *path, sky_diag *inner, sky_diag *d)
{
	if (rc)
		sky_diag_set(d, rc, "%s: %s", path, inner->msg);
	return rc;
}

static int job_open(layer_job *j, const char *model, sky_diag *d)
{
	sky_diag in;
	sky_diag_clear(&in);
	int rc;
	if (sky_model_preset(model, &j->cfg) != 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "unknown model '%s' (presets: %s)", model,
				    sky_model_preset_names());
	if ((rc = open_file(&j->weights, j->weights_path, "weights", d)) ||
	    (rc = open_file(&j->input, j->input_path, "input", d)) ||
	    (j->grad_path && (rc = open_file(&j->grad, j->grad_path, "grad", d))))
		return rc;
	j->has_grad = j->grad_path != NULL;

	const int64_t want[3] = {-1, -1, j->cfg.hidden};
	const sky_st_tensor *x;
	/* checked, not viewed: it is copied into the arena, so alignment is moot */
	rc = sky_st_check(&j->input, "hidden_states", SKY_ST_F32, 3, want, &x, &in);
	if (in_file(rc, j->input_path, &in, d))
		return rc;
	if (x->shape[0] < 1 || x->shape[1] < 1 || x->shape[0] > 65536 || x->shape[1] > 65536)
		return sky_diag_set(d, SKY_ERANGE,
				    "%s: tensor hidden_states: batch %lld and sequence %lld must be 1 "
				    "to 65536",
				    j->input_path, (long long)x->shape[0], (long long)x->shape[1]);
	j->cfg.batch = (int)x->shape[0];
	j->cfg.seq = (int)x->shape[1];
	/* a lone layer has no position embeddings, so the preset's limit does not apply */
	if (j->cfg.max_pos < j->cfg.seq)
		j->cfg.max_pos = j->cfg.seq;
	if (sky_model_validate(&j->cfg) != 0)
		return sky_diag_set(d, SKY_ERANGE, "%s: batch %d x seq %d is too large for %s",
				    j->input_path, j->cfg.batch, j->cfg.seq, j->cfg.name);

	j->mask = sky_st_find(&j->input, "attention_mask");
	if (j->mask) {
		const sky_st_tensor *m = j->mask;
		int ok = m->ndim == 2 && m->shape[0] == j->cfg.batch && m->shape[1] == j->cfg.seq;
		ok = ok && (m->dtype == SKY_ST_F32 || m->dtype == SKY_ST_I64 ||
			    m->dtype == SKY_ST_I32 || m->dtype == SKY_ST_I8 ||
			    m->dtype == SKY_ST_U8 || m->dtype == SKY_ST_BOOL);
		if (!ok)
			return sky_diag_set(d, SKY_EFORMAT,
					    "%s: tensor attention_mask: expected F32/I64/I32/I8/U8/BOOL "
					    "(%d, %d), found %s with %d dims",
					    j->input_path, j->cfg.batch, j->cfg.seq,
					    sky_st_dtype_name(m->dtype), m->ndim);
	}
	if (j->has_grad) {
		const int64_t gs[3] = {j->cfg.batch, j->cfg.seq, j->cfg.hidden};
		const sky_st_tensor *g;
		sky_diag_clear(&in);
		rc = sky_st_check(&j->grad, "grad.output", SKY_ST_F32, 3, gs, &g, &in);
		if (in_file(rc, j->grad_path, &in, d))
			return rc;
	}
	return 0;
}

static void job_close(layer_job *j)
{
	sky_st_close(&j->weights);
	sky_st_close(&j->input);
	sky_st_close(&j->grad);
}

/* ---- --compare ------------------------------------------------------------- */

static int compare(const char *ref_path, const char *got_path, double tol, double atol, int json)
{
	sky_st_file r, g;
	sky_diag d;
	sky_diag_clear(&d);
	sky_st_init(&r);
	sky_st_init(&g);
	int bad = 0, rc;
	cJSON *doc = NULL, *arr = NULL;
	if ((rc = open_file(&r, ref_path, "reference", &d)) ||
	    (rc = open_file(&g, got_path, "result", &d))) {
		fprintf(stderr, "sky layer: %s\n", d.msg);
		goto exit;
	}
	if (json) {
		doc = sky_json_new_object();
		arr = doc ? cJSON_AddArrayToObject(doc, "tensors") : NULL;
	}
	for (int i = 0; i < r.ntensors; i++) {
		const sky_st_tensor *a = &r.tensors[i];
		const sky_st_tensor *b = sky_st_find(&g, a->name);
		const char *why = NULL;
		double num = 0, den = 0, maxabs = 0, rel = 0;
		if (!b)
			why = "missing from the result";
		else if (a->dtype != SKY_ST_F32 || b->dtype != SKY_ST_F32)
			why = "not F32 in both files";
		else if (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof a->shape) != 0)
			why = "shapes differ";
		if (!why) {
			for (uint64_t k = 0; k < a->count; k++) {
				float x, y;
				memcpy(&x, a->data + 4 * k, 4);
				memcpy(&y, b->data + 4 * k, 4);
				/* equal values (infinities too) agree; a NaN never does */
				double e = x == y ? 0.0 : (double)y - (double)x;
				num += e * e;
				den += (double)x * x;
				if (!(fabs(e) <= maxabs))
					maxabs = fabs(e);
			}
			rel = den > 0 ? sqrt(num / den) : sqrt(num);
			/* relative, with an absolute floor for tensors that are ~0
			 * (the key bias gradient is exactly 0 in theory: softmax
			 * ignores a constant added to a row) */
			if (!(sqrt(num) <= tol * sqrt(den) + atol * sqrt((double)a->count)))
				why = "error above tolerance";
		}
		bad += why != NULL;
		if (json && arr) {
			cJSON *o = cJSON_CreateObject();
			if (o) {
				cJSON_AddStringToObject(o, "name", a->name);
				cJSON_AddNumberToObject(o, "rel_l2", rel);
				cJSON_AddNumberToObject(o, "max_abs", maxabs);
				cJSON_AddBoolToObject(o, "ok", why == NULL);
				if (why)
					cJSON_AddStringToObject(o, "why", why);
				cJSON_AddItemToArray(arr, o);
			}
		} else {
			printf("%-60s rel_l2 %.3g max_abs %.3g %s%s\n", a->name, rel, maxabs,
			       why ? "FAIL: " : "ok", why ? why : "");
		}
	}
	for (int i = 0; i < g.ntensors; i++) {
		if (!sky_st_find(&r, g.tensors[i].name)) {
			bad++;
			if (!json)
				printf("%-60s FAIL: not in the reference\n", g.tensors[i].name);
		}
	}
	if (json && doc) {
		cJSON_AddNumberToObject(doc, "tol", tol);
		cJSON_AddNumberToObject(doc, "atol", atol);
		cJSON_AddNumberToObject(doc, "failed", bad);
		cJSON_AddBoolToObject(doc, "ok", bad == 0);
		static char out[1 << 20];
		if (sky_json_print(doc, out, sizeof out) >= 0)
			printf("%s\n", out);
	} else {
		printf("%d of %d tensors outside tolerance (rel %g, atol %g)\n", bad, r.ntensors,
		       tol, atol);
	}
	rc = bad ? SKY_EFORMAT : 0;
exit:
	sky_json_free(doc);
	sky_st_close(&r);
	sky_st_close(&g);
	return rc ? 1 : 0;
}

/* ---- --make-example ------------------------------------------------------ */

static int write_one(const char *dir, const char *file, sky_st_entry *e, int n, sky_diag *d)
{
	char path[1024];
	if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
		return sky_diag_set(d, SKY_ERANGE, "directory name too long");
	return sky_st_write(path, e, n, NULL, 0, d);
}

/* Writes a complete example for a tiny case, and the results computed in
 * this process straight from the arrays (no files in between), so a test
 * can check that `sky layer` reading the files gets the same numbers. */
static int make_example(const char *dir, const char *model, int batch, int seq,
			const char *prefix, unsigned long long seed)
{
	sky_model_cfg c;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_model_preset(model, &c) != 0) {
		fprintf(stderr, "sky layer: unknown model '%s' (presets: %s)\n", model,
			sky_model_preset_names());
		return 1;
	}
	c.batch = batch;
	c.seq = seq;
	if (c.max_pos < seq)
		c.max_pos = seq;
	if (sky_model_validate(&c) != 0)
		return 1;
	size_t p = (size_t)sky_model_layer_params(&c), t = (size_t)batch * seq;
	size_t th = t * (size_t)c.hidden;
	size_t nsaved = sky_layer_saved_floats(&c, SKY_BLOCK_ALL);
	size_t nscratch = sky_layer_scratch_floats(&c);
	float *mem = calloc(2 * p + 5 * th + 2 * t + nsaved + nscratch, sizeof(float));
	int64_t *mask_i = calloc(t, sizeof *mask_i);
	int rc = SKY_ENOMEM;
	if (!mem || !mask_i)
		goto exit;
	float *w = mem, *dw = w + p, *x = dw + p, *y = x + th, *dy = y + th, *dx = dy + th;
	float *y2 = dx + th, *mask = y2 + th, *saved = mask + t, *scratch = saved + nsaved;

	/* BERT's init, then every bias and LayerNorm parameter moved off 0 and 1
	 * so that the check covers each of them */
	sky_layer_init(&c, w, seed);
	sky_tensor_info tab[SKY_LAYER_NTENSORS];
	sky_layer_tensors(&c, tab);
	sky_rng r;
	sky_rng_seed(&r, seed ^ 0x5eedull);
	for (int i = 0; i < SKY_LAYER_NTENSORS; i++)
		if (tab[i].ndim == 1)
			for (size_t k = 0; k < tab[i].count; k++)
				w[tab[i].offset + k] += 0.1f * sky_rng_normal(&r);
	for (size_t k = 0; k < th; k++) {
		x[k] = sky_rng_normal(&r);
		dy[k] = sky_rng_normal(&r);
	}
	/* the last sequence has its final third padded */
	for (size_t k = 0; k < t; k++) {
		int b = (int)(k / (size_t)seq), s = (int)(k % (size_t)seq);
		int pad = b == batch - 1 && s >= seq - seq / 3;
		mask_i[k] = pad ? 0 : 1;
		mask[k] = pad ? -FLT_MAX : 0.0f;
	}

	sky_layer_forward(&c, w, x, mask, y2, NULL, scratch, SKY_BLOCK_ALL); /* inference path */
	sky_layer_forward(&c, w, x, mask, y, saved, scratch, SKY_BLOCK_ALL);
	sky_layer_backward(&c, w, mask, saved, dy, dx, dw, scratch, SKY_BLOCK_ALL);

	if ((rc = sky_file_mkdirs(dir, 0755)) != 0) {
		sky_diag_set(&d, rc, "cannot create %s", dir);
		goto exit;
	}
	char path[1024];
	snprintf(path, sizeof path, "%s/weights.safetensors", dir);
	if ((rc = sky_st_save_block(path, prefix, tab, SKY_LAYER_NTENSORS, w, NULL, 0, &d)))
		goto exit;
	sky_st_entry e[2];
	memset(e, 0, sizeof e);
	e[0] = (sky_st_entry){.name = "hidden_states", .dtype = SKY_ST_F32, .ndim = 3,
			      .shape = {batch, seq, c.hidden}, .data = x};
	e[1] = (sky_st_entry){.name = "attention_mask", .dtype = SKY_ST_I64, .ndim = 2,
			      .shape = {batch, seq}, .data = mask_i};
	if ((rc = write_one(dir, "input.safetensors", e, 2, &d)))
		goto exit;
	e[0] = (sky_st_entry){.name = "grad.output", .dtype = SKY_ST_F32, .ndim = 3,
			      .shape = {batch, seq, c.hidden}, .data = dy};
	if ((rc = write_one(dir, "grad.safetensors", e, 1, &d)))
		goto exit;
	snprintf(path, sizeof path, "%s/expected.safetensors", dir);
	if ((rc = write_result(path, &c, prefix, "fp32", y, dx, dw, &d)))
		goto exit;
	snprintf(path, sizeof path, "%s/expected_fwd.safetensors", dir);
	rc = write_result(path, &c, prefix, "fp32", y2, NULL, NULL, &d);
exit:
	if (rc)
		fprintf(stderr, "sky layer: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
	free(mem);
	free(mask_i);
	return rc ? 1 : 0;
}

/* ---- the command ------------------------------------------------------------- */

int sky_cmd_layer(int argc, char **argv)
{
	layer_job j;
	memset(&j, 0, sizeof j);
	sky_st_init(&j.weights);
	sky_st_init(&j.input);
	sky_st_init(&j.grad);
	const char *model = NULL, *profile = NULL, *example = NULL;
	const char *cmp_ref = NULL, *cmp_got = NULL;
	double tol = 1e-4, atol = 1e-6;
	long batch = 2, seq = 8, seed = 1;
	j.prefix = "";
	j.precision = "fp32";

	enum {
		O_JSON = SKY_OPT_FIRST, O_MODEL, O_WEIGHTS, O_INPUT, O_OUT, O_GRAD, O_PREFIX,
		O_PRECISION, O_PROFILE, O_MAKE_EXAMPLE, O_COMPARE, O_TOL, O_ATOL, O_BATCH, O_SEQ,
		O_SEED
	};
	static const struct option k_opts[] = {{"json", no_argument, NULL, O_JSON},
					       {"model", required_argument, NULL, O_MODEL},
					       {"weights", required_argument, NULL, O_WEIGHTS},
					       {"input", required_argument, NULL, O_INPUT},
					       {"out", required_argument, NULL, O_OUT},
					       {"grad", required_argument, NULL, O_GRAD},
					       {"prefix", required_argument, NULL, O_PREFIX},
					       {"precision", required_argument, NULL, O_PRECISION},
					       {"profile", required_argument, NULL, O_PROFILE},
					       {"make-example", required_argument, NULL, O_MAKE_EXAMPLE},
					       {"compare", required_argument, NULL, O_COMPARE},
					       {"tol", required_argument, NULL, O_TOL},
					       {"atol", required_argument, NULL, O_ATOL},
					       {"batch", required_argument, NULL, O_BATCH},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"seed", required_argument, NULL, O_SEED},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky layer", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *v = op.arg;
		switch (c) {
		case SKY_OPT_HELP:
			help(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JSON:
			j.json = 1;
			break;
		case O_MODEL:
			model = v;
			break;
		case O_WEIGHTS:
			j.weights_path = v;
			break;
		case O_INPUT:
			j.input_path = v;
			break;
		case O_OUT:
			j.out_path = v;
			break;
		case O_GRAD:
			j.grad_path = v;
			break;
		case O_PREFIX:
			j.prefix = v;
			break;
		case O_PRECISION:
			j.precision = v;
			break;
		case O_PROFILE:
			profile = v;
			break;
		case O_MAKE_EXAMPLE:
			example = v;
			break;
		case O_COMPARE:
			cmp_ref = v; /* the second file is the positional argument */
			break;
		case O_TOL:
			if (sky_cli_double("layer", "--tol", v, 0, 1e30, &tol))
				return 2;
			break;
		case O_ATOL:
			if (sky_cli_double("layer", "--atol", v, 0, 1e30, &atol))
				return 2;
			break;
		case O_BATCH:
			if (sky_cli_int("layer", "--batch", v, 1, 4096, &batch))
				return 2;
			break;
		case O_SEQ:
			if (sky_cli_int("layer", "--seq", v, 1, 4096, &seq))
				return 2;
			break;
		case O_SEED:
			if (sky_cli_int("layer", "--seed", v, 0, 2147483647L, &seed))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (cmp_ref && op.next + 1 == argc) {
		cmp_got = argv[op.next];
	} else if (cmp_ref) {
		fprintf(stderr, "sky layer: --compare needs two files\n");
		return 2;
	} else if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (cmp_ref)
		return compare(cmp_ref, cmp_got, tol, atol, j.json);
	if (example)
		return make_example(example, model ? model : "tiny", (int)batch, (int)seq, j.prefix,
				    (unsigned long long)seed);

	const char *missing = !model ? "--model" : !j.weights_path ? "--weights"
				   : !j.input_path	   ? "--input"
				   : !j.out_path	   ? "--out"
							   : NULL;
	if (missing) {
		fprintf(stderr, "sky layer: %s is required (sky layer --help)\n", missing);
		return 2;
	}
	int (*run)(layer_job *, sky_diag *) = NULL;
	for (size_t i = 0; i < N_PRECISIONS; i++)
		if (strcmp(j.precision, k_precisions[i].name) == 0)
			run = k_precisions[i].run;
	if (!run) {
		fprintf(stderr, "sky layer: unknown --precision '%s' (fp32, int8)\n", j.precision);
		return 2;
	}

	sky_diag d;
	sky_diag_clear(&d);
	sky_profile prof;
	int rc = sky_profile_load(&prof, profile, &d);
	if (rc == 0) {
		sky_profile_apply_threads(&prof);
		double t0 = sky_clock_s();
		rc = job_open(&j, model, &d);
		j.load_s = sky_clock_s() - t0;
	}
	if (rc == 0)
		rc = run(&j, &d);
	if (rc) {
		fprintf(stderr, "sky layer: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
	} else if (j.json) {
		cJSON *o = sky_json_new_object();
		char buf[1024];
		if (o) {
			cJSON_AddStringToObject(o, "model", j.cfg.name);
			cJSON_AddStringToObject(o, "precision", j.precision);
			cJSON_AddNumberToObject(o, "batch", j.cfg.batch);
			cJSON_AddNumberToObject(o, "seq", j.cfg.seq);
			cJSON_AddNumberToObject(o, "hidden", j.cfg.hidden);
			cJSON_AddBoolToObject(o, "backward", j.has_grad);
			cJSON_AddNumberToObject(o, "load_ms", j.load_s * 1e3);
			cJSON_AddNumberToObject(o, "fwd_ms", j.fwd_s * 1e3);
			cJSON_AddNumberToObject(o, "bwd_ms", j.bwd_s * 1e3);
			cJSON_AddNumberToObject(o, "arena_bytes", (double)j.arena_bytes);
			cJSON_AddNumberToObject(o, "threads", prof.threads);
			cJSON_AddStringToObject(o, "out", j.out_path);
			if (sky_json_print(o, buf, sizeof buf) >= 0)
				printf("%s\n", buf);
			sky_json_free(o);
		}
	} else {
		char bwd[64] = "";
		if (j.has_grad)
			snprintf(bwd, sizeof bwd, ", backward %.3f ms", j.bwd_s * 1e3);
		printf("sky layer: %s %s batch %d seq %d: load %.3f ms, forward %.3f ms%s, arena %zu "
		       "bytes, wrote %s\n",
		       j.precision, j.cfg.name, j.cfg.batch, j.cfg.seq, j.load_s * 1e3, j.fwd_s * 1e3, bwd,
		       j.arena_bytes, j.out_path);
	}
	job_close(&j);
	return rc ? 1 : 0;
}
