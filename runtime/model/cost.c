#include "sky_cost.h"

#include "sky_err.h"

#include <string.h>

static const char *const k_optim[] = {"sgd", "momentum", "adam"};

int sky_cost_optim_parse(const char *name, sky_optim *out)
{
	for (int i = 0; i < 3; i++) {
		if (name && strcmp(name, k_optim[i]) == 0) {
			*out = (sky_optim)i;
			return 0;
		}
	}
	return SKY_EINVAL;
}

const char *sky_cost_optim_name(sky_optim o)
{
	return (unsigned)o < 3 ? k_optim[o] : "unknown";
}

int sky_cost_optim_vectors(sky_optim o)
{
	return o == SKY_OPTIM_ADAM ? 2 : o == SKY_OPTIM_MOMENTUM ? 1 : 0;
}

int64_t sky_cost_train_bytes_per_param(sky_optim o)
{
	return (int64_t)sizeof(float) * (2 + sky_cost_optim_vectors(o));
}

int64_t sky_cost_ckpt_bytes_per_param(sky_optim o)
{
	return (int64_t)sizeof(float) * (1 + sky_cost_optim_vectors(o));
}

int64_t sky_cost_half_params(const sky_model_cfg *c, int half)
{
	int64_t h = c->hidden, f = c->ffn;
	return half == SKY_HALF_ATTN ? 4 * h * h + 6 * h : 2 * h * f + f + 3 * h;
}

double sky_cost_half_flops_fwd(const sky_model_cfg *c, int half)
{
	double t = (double)sky_model_tokens(c), h = c->hidden, f = c->ffn;
	return half == SKY_HALF_ATTN ? t * 8.0 * h * h + 4.0 * t * c->seq * h : t * 4.0 * h * f;
}

int64_t sky_cost_half_saved_floats(const sky_model_cfg *c, int half)
{
	int64_t t = sky_model_tokens(c), h = c->hidden, f = c->ffn, s = c->seq;
	if (half == SKY_HALF_ATTN)
		return 6 * t * h + (int64_t)c->batch * c->heads * s * s + t;
	return 2 * t * h + 2 * t * f + t;
}

int64_t sky_cost_layer_scratch_floats(const sky_model_cfg *c)
{
	int64_t t = sky_model_tokens(c), h = c->hidden, f = c->ffn, s = c->seq;
	/* with dropout, backward's dropped probabilities and dense gradient */
	int64_t drop = sky_model_has_dropout(c) ? s * s + t * h : 0;
	return 3 * t * h + 2 * t * h + t * f + s * s + 3 * s * (h / c->heads) + drop;
}

int64_t sky_cost_embed_saved_floats(const sky_model_cfg *c)
{
	int64_t t = sky_model_tokens(c);
	return t * c->hidden + t;
}

int64_t sky_cost_head_saved_floats(const sky_model_cfg *c)
{
	return 2 * (int64_t)c->batch * c->hidden;
}
