/* An int8 layer in a safetensors file: int8 weights (unpacked, row-major
 * as torch would hold them) with per-channel F32 scales, F32 biases and
 * LayerNorm parameters, and the calibrated activation ranges. */
#include "sky_layer_s8.h"

#include "sky_layer.h"
#include "sky_safetensors.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NAME_CAP 96

/* The four Linear weights: table index of each HuggingFace tensor, which
 * packed matrix holds it and from which row, and its scales. */
typedef struct wslot {
	int table;
	int row0; /* first row inside the packed matrix */
} wslot;

static const wslot k_w[6] = {{0, 0}, {1, 1}, {2, 2}, {6, 0}, {10, 0}, {12, 0}};

static sky_k_s8_packed *packed_of(sky_layer_s8 *L, int i)
{
	return i < 3 ? &L->wqkv : i == 3 ? &L->wo : i == 4 ? &L->w1 : &L->w2;
}

static float *scales_of(sky_layer_s8 *L, int i)
{
	int H = L->cfg.hidden;
	return i < 3 ? L->sw_qkv + i * H : i == 3 ? L->sw_o : i == 4 ? L->sw_1 : L->sw_2;
}

/* offset in fvec of 1-D table tensor t (fvec keeps them in table order) */
static size_t fvec_offset(const sky_tensor_info *tab, int t)
{
	size_t off = 0;
	for (int i = 0; i < t; i++)
		if (tab[i].ndim == 1)
			off += tab[i].count;
	return off;
}

int sky_layer_s8_entries(const sky_layer_s8 *Lc, const char *prefix, int8_t *wbuf, char *names,
			 sky_st_entry *e, sky_diag *d)
{
	sky_layer_s8 *L = (sky_layer_s8 *)Lc; /* only read */
	sky_tensor_info tab[SKY_LAYER_NTENSORS];
	sky_layer_tensors(&L->cfg, tab);
	int n = 0, H = L->cfg.hidden;
	int8_t *wp = wbuf;
	char *nm = names;
	if (!prefix)
		prefix = "";
#define NAME(...) \
	do { \
		if (snprintf(nm, NAME_CAP, __VA_ARGS__) >= NAME_CAP) \
			return sky_diag_set(d, SKY_ERANGE, "tensor name too long (prefix %s)", prefix); \
		e[n].name = nm; \
		nm += NAME_CAP; \
	} while (0)
	for (int i = 0; i < 6; i++) {
		const sky_tensor_info *t = &tab[k_w[i].table];
		const sky_k_s8_packed *p = packed_of(L, i);
		int rows = t->shape[0], cols = t->shape[1], r0 = k_w[i].row0 * H;
		for (int r = 0; r < rows; r++)
			for (int k = 0; k < cols; k++)
				wp[(size_t)r * cols + k] = sky_k_packed_get(p, r0 + r, k);
		NAME("%s%s", prefix, t->name);
		e[n].dtype = SKY_ST_I8, e[n].ndim = 2, e[n].shape[0] = rows, e[n].shape[1] = cols;
		e[n].data = wp;
		n++;
		wp += (size_t)rows * cols;
		NAME("%s%s_scale", prefix, t->name);
		e[n].dtype = SKY_ST_F32, e[n].ndim = 1, e[n].shape[0] = rows;
		e[n].data = scales_of(L, i);
		n++;
	}
	for (int t = 0; t < SKY_LAYER_NTENSORS; t++) {
		if (tab[t].ndim != 1)
			continue;
		NAME("%s%s", prefix, tab[t].name);
		e[n].dtype = SKY_ST_F32, e[n].ndim = 1, e[n].shape[0] = tab[t].shape[0];
		e[n].data = L->fvec + fvec_offset(tab, t);
		n++;
	}
	NAME("%squant.act_absmax", prefix);
	e[n].dtype = SKY_ST_F32, e[n].ndim = 1, e[n].shape[0] = SKY_Q_NPOINTS;
	e[n].data = L->absmax;
	n++;
#undef NAME
	return n;
}

int sky_layer_s8_load(sky_layer_s8 *L, const sky_st_file *f, const char *prefix, void *tmp,
		      sky_diag *d)
{
	sky_tensor_info tab[SKY_LAYER_NTENSORS];
	sky_layer_tensors(&L->cfg, tab);
	int H = L->cfg.hidden, rc;
	char name[NAME_CAP];
	if (!prefix)
		prefix = "";
	for (int i = 0; i < 6; i++) {
		const sky_tensor_info *t = &tab[k_w[i].table];
		const sky_st_tensor *st;
		int64_t shape[2] = {t->shape[0], t->shape[1]};
		snprintf(name, sizeof name, "%s%s", prefix, t->name);
		if ((rc = sky_st_get(f, name, SKY_ST_I8, 2, shape, &st, d)) != 0)
			return rc;
		int scale_shape = t->shape[0];
		snprintf(name, sizeof name, "%s%s_scale", prefix, t->name);
		float *sc = scales_of(L, i);
		if ((rc = sky_st_copy_f32(f, name, 1, &scale_shape, sc, d)) != 0)
			return rc;
		for (int r = 0; r < t->shape[0]; r++)
			if (!(sc[r] > 0) || !isfinite(sc[r]))
				return sky_diag_set(d, SKY_EINVAL,
						    "tensor %s: scale %d is %g (must be positive and finite)",
						    name, r, sc[r]);
		/* the q, k and v parts go into one packed (3H, H) matrix: stage
		 * all three in tmp, then pack once */
		sky_k_s8_packed *p = packed_of(L, i);
		size_t part = (size_t)t->shape[0] * t->shape[1];
		memcpy((int8_t *)tmp + (size_t)k_w[i].row0 * part, st->data, part);
		if (i < 2)
			continue;
		sky_k_pack_s8(L->variant, tmp, p->n, p->k, p->k, 1, p->data, p);
	}
	for (int t = 0; t < SKY_LAYER_NTENSORS; t++) {
		if (tab[t].ndim != 1)
			continue;
		snprintf(name, sizeof name, "%s%s", prefix, tab[t].name);
		int shape = tab[t].shape[0];
		float *dst = L->fvec + fvec_offset(tab, t);
		if ((rc = sky_st_copy_f32(f, name, 1, &shape, dst, d)) != 0)
			return rc;
		for (int j = 0; j < shape; j++)
			if (!isfinite(dst[j]))
				return sky_diag_set(d, SKY_EINVAL, "tensor %s: value %d is not finite",
						    name, j);
	}
	int np = SKY_Q_NPOINTS;
	snprintf(name, sizeof name, "%squant.act_absmax", prefix);
	if ((rc = sky_st_copy_f32(f, name, 1, &np, L->absmax, d)) != 0)
		return rc;
	(void)H;
	return sky_layer_s8_setup(L, d);
}
