/* Model presets and the shape, FLOP and byte formulas per layer.
 *
 * Shared by the board runtime and the planner (one of the two runtime
 * corners the planner may include), so both sides agree on what a layer
 * costs. Shapes follow HuggingFace BERT: hidden H, heads, FFN width F. */
#ifndef SKY_MODEL_H
#define SKY_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct sky_model_cfg {
	char name[16];  /* preset name: tiny, mini, base, large */
	int hidden;     /* H */
	int heads;      /* attention heads; H % heads == 0 */
	int ffn;        /* F, intermediate width */
	int layers;     /* encoder layers */
	int seq;        /* S, tokens per sequence */
	int batch;      /* B, sequences per micro-batch */
	int vocab;      /* word embedding rows */
	int max_pos;    /* position embedding rows; seq <= max_pos */
	int type_vocab; /* token type embedding rows */
	int classes;    /* classification head outputs */
	/* The two numbers a BERT config may change beyond shapes. A zeroed field
	 * means BERT's default, so a cfg built field by field (tests, the
	 * planner) computes as before; read them through the accessors. */
	float ln_eps;   /* LayerNorm epsilon; 0: SKY_MODEL_LN_EPS */
	int act;        /* SKY_ACT_*: the FFN's GELU form; 0 is the exact (erf) form */
	/* Training only (runtime/sky_dropout.h), 0: none, as every preset. */
	float hidden_drop; /* hidden_dropout_prob, [0, 1) */
	float attn_drop;   /* attention_probs_dropout_prob, [0, 1) */
} sky_model_cfg;

/* BERT's LayerNorm epsilon (HuggingFace BertConfig.layer_norm_eps default). */
#define SKY_MODEL_LN_EPS 1e-12f

/* The FFN activation (HuggingFace hidden_act): "gelu" is x Phi(x) with erf;
 * "gelu_new" / "gelu_pytorch_tanh" the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
enum { SKY_ACT_GELU_ERF = 0, SKY_ACT_GELU_TANH = 1 };

/* 1 if training c drops anything (then backward needs a little more
 * scratch: runtime/layer.c, and the planner's cost). */
static inline int sky_model_has_dropout(const sky_model_cfg *c)
{
	return c->hidden_drop > 0 || c->attn_drop > 0;
}

/* c->ln_eps, or SKY_MODEL_LN_EPS when it is 0. */
static inline float sky_model_ln_eps(const sky_model_cfg *c)
{
	return c->ln_eps > 0 ? c->ln_eps : SKY_MODEL_LN_EPS;
}
/* "gelu" or "gelu_tanh", for logs. */
const char *sky_model_act_name(int act);

/* Fills *out with preset `name` (layers, seq and batch get the preset's
 * defaults; change them after). Returns 0 or SKY_ENOTFOUND. */
int sky_model_preset(const char *name, sky_model_cfg *out);
/* Comma-separated preset names, for --help and errors. */
const char *sky_model_preset_names(void);
/* Checks every field is positive, H % heads == 0, seq <= max_pos, the
 * sizes keep every tensor's element count below 2^31, ln_eps is 0 or in
 * (0, 1) and act is a known SKY_ACT_*. Returns 0 or
 * SKY_EINVAL (detail logged as an error naming the field). */
int sky_model_validate(const sky_model_cfg *c);

/* Tokens per micro-batch, B*S. */
static inline int64_t sky_model_tokens(const sky_model_cfg *c) { return (int64_t)c->batch * c->seq; }

/* Forward FLOPs of one encoder layer for one micro-batch, counting 2*M*N*K
 * per GEMM, attention scores and context included:
 *   B*S*(8*H^2 + 4*H*F) + 4*B*S^2*H.
 * Backward is twice this. */
double sky_model_layer_flops_fwd(const sky_model_cfg *c);
/* Parameters of one encoder layer: 4H^2 + 2HF + 9H + F. */
int64_t sky_model_layer_params(const sky_model_cfg *c);
/* Parameters of the embedding block and of the classification head. */
int64_t sky_model_embed_params(const sky_model_cfg *c);
int64_t sky_model_head_params(const sky_model_cfg *c);
/* Bytes crossing a cut between stages for one micro-batch: the H-wide fp32
 * activation forward, and the same-sized gradient backward. */
int64_t sky_model_cut_bytes(const sky_model_cfg *c);

#endif
