#include "sky_model.h"

#include "sky_err.h"
#include "sky_log.h"

#include <stdio.h>
#include <string.h>

static const sky_model_cfg k_presets[] = {
	/* name H heads F L S B vocab pos types classes, eps act, dropouts (none) */
	{"tiny", 32, 2, 64, 2, 16, 8, 64, 64, 2, 2, SKY_MODEL_LN_EPS, SKY_ACT_GELU_ERF, 0, 0},
	{"mini", 256, 4, 1024, 4, 128, 8, 30522, 512, 2, 2, SKY_MODEL_LN_EPS, SKY_ACT_GELU_ERF, 0, 0},
	{"base", 768, 12, 3072, 12, 128, 8, 30522, 512, 2, 2, SKY_MODEL_LN_EPS, SKY_ACT_GELU_ERF, 0, 0},
	{"large", 1024, 16, 4096, 24, 128, 8, 30522, 512, 2, 2, SKY_MODEL_LN_EPS, SKY_ACT_GELU_ERF, 0, 0},
};

int sky_model_preset(const char *name, sky_model_cfg *out)
{
	for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++) {
		if (name && strcmp(name, k_presets[i].name) == 0) {
			*out = k_presets[i];
			return 0;
		}
	}
	return SKY_ENOTFOUND;
}

const char *sky_model_preset_names(void) { return "tiny, mini, base, large"; }

const char *sky_model_act_name(int act)
{
	return act == SKY_ACT_GELU_TANH ? "gelu_tanh" : act == SKY_ACT_GELU_ERF ? "gelu" : "?";
}

int sky_model_validate(const sky_model_cfg *c)
{
	const struct {
		const char *name;
		int v;
	} f[] = {{"hidden", c->hidden}, {"heads", c->heads}, {"ffn", c->ffn},
		 {"layers", c->layers}, {"seq", c->seq}, {"batch", c->batch},
		 {"vocab", c->vocab}, {"max_pos", c->max_pos}, {"type_vocab", c->type_vocab},
		 {"classes", c->classes}};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].v <= 0) {
			SKY_ERROR("model %s: %s must be positive, got %d", c->name, f[i].name, f[i].v);
			return SKY_EINVAL;
		}
	}
	if (c->hidden % c->heads != 0) {
		SKY_ERROR("model %s: hidden %d is not a multiple of heads %d", c->name, c->hidden,
			  c->heads);
		return SKY_EINVAL;
	}
	if (!(c->ln_eps >= 0 && c->ln_eps < 1)) {
		SKY_ERROR("model %s: layer_norm_eps must be in (0, 1), got %g", c->name,
			  (double)c->ln_eps);
		return SKY_EINVAL;
	}
	if (!(c->hidden_drop >= 0 && c->hidden_drop < 1) || !(c->attn_drop >= 0 && c->attn_drop < 1)) {
		SKY_ERROR("model %s: dropout probabilities must be in [0, 1), got hidden %g, "
			  "attention %g",
			  c->name, (double)c->hidden_drop, (double)c->attn_drop);
		return SKY_EINVAL;
	}
	if (c->act != SKY_ACT_GELU_ERF && c->act != SKY_ACT_GELU_TANH) {
		SKY_ERROR("model %s: unknown activation %d", c->name, c->act);
		return SKY_EINVAL;
	}
	if (c->seq > c->max_pos) {
		SKY_ERROR("model %s: seq %d exceeds the %d positions the model has", c->name, c->seq,
			  c->max_pos);
		return SKY_EINVAL;
	}
	/* the largest per-micro-batch tensors: B*S*F activations, B*heads*S*S scores */
	int64_t tokens = sky_model_tokens(c);
	int64_t big = tokens * (c->ffn > c->hidden ? c->ffn : c->hidden);
	int64_t scores = (int64_t)c->batch * c->heads * c->seq * c->seq;
	int64_t words = (int64_t)c->vocab * c->hidden;
	if (big >= (1ll << 31) || scores >= (1ll << 31) || words >= (1ll << 31) ||
	    c->layers > 100000) {
		SKY_ERROR("model %s: shapes too large (batch %d x seq %d, %d layers)", c->name,
			  c->batch, c->seq, c->layers);
		return SKY_EINVAL;
	}
	return 0;
}

double sky_model_layer_flops_fwd(const sky_model_cfg *c)
{
	double tokens = (double)sky_model_tokens(c), h = c->hidden, f = c->ffn;
	return tokens * (8.0 * h * h + 4.0 * h * f) + 4.0 * tokens * c->seq * h;
}

int64_t sky_model_layer_params(const sky_model_cfg *c)
{
	int64_t h = c->hidden, f = c->ffn;
	return 4 * h * h + 2 * h * f + 9 * h + f;
}

int64_t sky_model_embed_params(const sky_model_cfg *c)
{
	int64_t h = c->hidden;
	return ((int64_t)c->vocab + c->max_pos + c->type_vocab) * h + 2 * h;
}

int64_t sky_model_head_params(const sky_model_cfg *c)
{
	int64_t h = c->hidden;
	return h * h + h + (int64_t)c->classes * h + c->classes;
}

int64_t sky_model_cut_bytes(const sky_model_cfg *c)
{
	return sky_model_tokens(c) * c->hidden * (int64_t)sizeof(float);
}
