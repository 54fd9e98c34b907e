/* sky layer --precision int8: the int8 layer on tensors from files.
 *
 * The weights are either an int8 layer as `sky quantize` writes it (I8
 * weights with "_scale" tensors and "quant.act_absmax", under the same
 * --prefix), or plain fp32 weights, which are then quantised here with
 * activation ranges calibrated on the given input itself (so a board can
 * check its int8 path against the fp32 one on the same files). */
#include "sky_arena.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_model.h"
#include "sky_safetensors.h"

#include <stdio.h>
#include <stdlib.h>

int sky_layer_s8_cli_run(const sky_model_cfg *c, const sky_st_file *weights, const char *prefix,
			 const float *x, const float *mask, float *y, double *load_s, double *fwd_s,
			 size_t *arena_bytes, sky_diag *d);

int sky_layer_s8_cli_run(const sky_model_cfg *c, const sky_st_file *weights, const char *prefix,
			 const float *x, const float *mask, float *y, double *load_s, double *fwd_s,
			 size_t *arena_bytes, sky_diag *d)
{
	char name[256];
	if (!prefix)
		prefix = "";
	snprintf(name, sizeof name, "%sattention.self.query.weight", prefix);
	const sky_st_tensor *t = sky_st_find(weights, name);
	if (!t)
		return sky_diag_set(d, SKY_ENOTFOUND, "weights: no tensor %s", name);
	if (t->dtype != SKY_ST_I8 && t->dtype != SKY_ST_F32)
		return sky_diag_set(d, SKY_EFORMAT, "weights: tensor %s is %s, expected I8 or F32", name,
				    sky_st_dtype_name(t->dtype));
	int from_f32 = t->dtype == SKY_ST_F32;
	int rc = SKY_ENOMEM;
	void *mem = NULL, *tmp = malloc(sky_layer_s8_tmp_bytes(c));
	float *w = NULL, *cs = NULL;
	double t0 = sky_clock_s();
	sky_layer_s8 L;
	sky_arena a;
	int v = sky_k_s8_variant_active();
	sky_arena_init(&a, NULL, 0);
	sky_layer_s8_carve(&L, c, v, &a);
	*arena_bytes = sky_arena_required(&a);
	if (!tmp || !(mem = malloc(*arena_bytes))) {
		sky_diag_set(d, rc, "no memory for the %zu-byte arena", *arena_bytes);
		goto exit;
	}
	sky_arena_init(&a, mem, *arena_bytes);
	sky_layer_s8_carve(&L, c, v, &a);
	if ((rc = sky_arena_seal(&a)) != 0) {
		sky_diag_set(d, rc, "arena carving failed");
		goto exit;
	}
	if (from_f32) {
		sky_tensor_info tab[SKY_LAYER_NTENSORS];
		sky_layer_tensors(c, tab);
		w = malloc((size_t)sky_model_layer_params(c) * sizeof(float));
		cs = malloc(sky_layer_s8_calib_scratch_floats(c) * sizeof(float));
		if (!w || !cs) {
			rc = sky_diag_set(d, SKY_ENOMEM, "no memory for the fp32 weights");
			goto exit;
		}
		sky_layer_s8_calib cal;
		sky_layer_s8_calib_init(&cal);
		if ((rc = sky_st_load_block(weights, prefix, tab, SKY_LAYER_NTENSORS, w, d)) ||
		    (rc = sky_layer_s8_calibrate(c, w, x, mask, cs, &cal, d)) ||
		    (rc = sky_layer_s8_from_f32(&L, w, &cal, tmp, d)))
			goto exit;
	} else if ((rc = sky_layer_s8_load(&L, weights, prefix, tmp, d)) != 0) {
		goto exit;
	}
	*load_s += sky_clock_s() - t0;
	t0 = sky_clock_s();
	rc = sky_layer_s8_forward(&L, x, mask, y);
	*fwd_s = sky_clock_s() - t0;
	if (rc)
		sky_diag_set(d, rc, "input: hidden_states holds NaN or infinity");
exit:
	free(mem), free(tmp), free(w), free(cs);
	return rc;
}
