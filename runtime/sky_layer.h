/* One BERT encoder layer in fp32, forward and backward, exactly as
 * HuggingFace's BertLayer (post-LN, GELU in the erf form or, for a config that asks,
 * the tanh form; LayerNorm eps 1e-12 or the config's layer_norm_eps;
 * additive attention mask; dropout only through the _dr functions):
 *
 *   q,k,v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv          (T, H), T = B*S
 *   ctx   = softmax(q_h k_h^T / sqrt(H/heads) + mask) v_h   per batch and head
 *   h1    = LayerNorm1(ctx Wo^T + bo + x)                   <- end of the attention block
 *   y     = LayerNorm2(gelu(h1 W1^T + b1) W2^T + b2 + h1)   <- end of the feed-forward block
 *
 * A stage may end after either block (both pass an H-wide activation), so
 * forward and backward take a mask of the blocks to run.
 *
 * The layer's parameters are one flat block of sky_model_layer_params(cfg)
 * floats, in this order (Wq, Wk, Wv adjacent, so they are one fused (3H, H)
 * QKV weight, and bq, bk, bv one (3H) bias):
 *   Wq Wk Wv (H,H each) | bq bk bv (H each) | Wo (H,H) | bo | ln1 gamma, beta |
 *   W1 (F,H) | b1 (F) | W2 (H,F) | b2 | ln2 gamma, beta
 * sky_layer_tensors() names each part as HuggingFace does. Weights are
 * row-major [out][in] like torch.nn.Linear. */
#ifndef SKY_LAYER_H
#define SKY_LAYER_H

#include "sky_dropout.h"
#include "sky_model.h"
#include "sky_tensor.h"

#include <stddef.h>

enum { SKY_BLOCK_ATTN = 1, SKY_BLOCK_FFN = 2, SKY_BLOCK_ALL = 3 };

#define SKY_LAYER_NTENSORS 16
#define SKY_LN_EPS SKY_MODEL_LN_EPS /* the default; a model's own is sky_model_ln_eps(c) */

/* Pointers into a flat parameter (or gradient) block. */
typedef struct sky_layer_view {
	float *wqkv; /* (3H, H): Wq, Wk, Wv stacked */
	float *bqkv; /* (3H) */
	float *wo;   /* (H, H) attention.output.dense */
	float *bo;   /* (H) */
	float *ln1_g, *ln1_b; /* (H) attention.output.LayerNorm */
	float *w1;   /* (F, H) intermediate.dense */
	float *b1;   /* (F) */
	float *w2;   /* (H, F) output.dense */
	float *b2;   /* (H) */
	float *ln2_g, *ln2_b; /* (H) output.LayerNorm */
} sky_layer_view;

/* Fills out[0..SKY_LAYER_NTENSORS) with the HuggingFace names, shapes and
 * offsets of the layer's tensors (names relative to "encoder.layer.N.").
 * Returns SKY_LAYER_NTENSORS. */
int sky_layer_tensors(const sky_model_cfg *c, sky_tensor_info *out);
/* Points v into flat (sky_model_layer_params(c) floats). */
void sky_layer_bind(const sky_model_cfg *c, float *flat, sky_layer_view *v);
/* Half-layers (a pipeline stage may hold just one block of a layer): the
 * attention block's parameters are the first sky_layer_half_floats(c,
 * SKY_BLOCK_ATTN) floats of the layer's flat block, the feed-forward
 * block's the rest, from sky_layer_half_offset(c, SKY_BLOCK_FFN) on. */
size_t sky_layer_half_floats(const sky_model_cfg *c, int block);
size_t sky_layer_half_offset(const sky_model_cfg *c, int block);
/* sky_layer_init of the whole layer, but only block's half is written to
 * half (sky_layer_half_floats floats): equal, float for float, to that part
 * of what sky_layer_init(c, flat, seed) writes. block is ATTN or FFN. */
void sky_layer_init_half(const sky_model_cfg *c, float *half, unsigned long long seed, int block);
/* Deterministic init as BERT does: weights N(0, 0.02), biases 0,
 * LayerNorm gamma 1, beta 0. */
void sky_layer_init(const sky_model_cfg *c, float *flat, unsigned long long seed);

/* Floats of activations forward keeps for backward, per micro-batch, for
 * the given blocks: for attention a copy of x, q|k|v, the probabilities
 * (B*heads*S*S), the context and LayerNorm1's normalised input; for the
 * FFN its input h1, gelu(u), gelu'(u) and LayerNorm2's normalised input.
 * Parts are padded to 16 floats: each is 64-byte aligned when saved is. */
size_t sky_layer_saved_floats(const sky_model_cfg *c, int blocks);
/* Floats of scratch forward or backward needs (reused between calls, and
 * by any blocks mask; nothing in it survives a call). */
size_t sky_layer_scratch_floats(const sky_model_cfg *c);

/* Forward for one micro-batch. x, y: (B*S, H); mask: (B*S) additive, per
 * key position (0 for tokens; for padding any value whose exp underflows,
 * e.g. -1e9, or HuggingFace's torch.finfo(float32).min) or NULL. saved:
 * sky_layer_saved_floats() floats that backward will read, or NULL for
 * inference (then nothing is kept). y must not alias x. If blocks is
 * SKY_BLOCK_FFN alone, x is h1 (the attention block's output). */
void sky_layer_forward(const sky_model_cfg *c, const float *w, const float *x, const float *mask,
		       float *y, float *saved, float *scratch, int blocks);

/* Backward for one micro-batch after a forward with the same blocks and
 * saved. dy: (B*S, H) gradient of the output; dx: (B*S, H) gradient of the
 * input (written); dw: gradient block, ADDED to (so micro-batches
 * accumulate). dx must not alias dy. */
void sky_layer_backward(const sky_model_cfg *c, const float *w, const float *mask,
			const float *saved, const float *dy, float *dx, float *dw, float *scratch,
			int blocks);

/* Forward / backward of one block (ATTN or FFN) whose parameters (and
 * gradients) are that half alone (sky_layer_half_floats), as a stage that
 * holds half a layer keeps them; otherwise as sky_layer_forward/backward
 * with that block, with the same arithmetic. */
void sky_layer_half_forward(const sky_model_cfg *c, const float *w, const float *x,
			    const float *mask, float *y, float *saved, float *scratch, int block);
void sky_layer_half_backward(const sky_model_cfg *c, const float *w, const float *mask,
			     const float *saved, const float *dy, float *dx, float *dw,
			     float *scratch, int block);

/* Training with dropout: as the four functions above, dropping at the
 * layer's three sites (attention probabilities, attention output, FFN
 * output; sky_dropout.h) as dr says, with masks keyed by `layer`, the
 * layer's index in the encoder. Backward takes the dr and layer its
 * forward took. dr NULL computes exactly what the functions above do. */
void sky_layer_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			  const float *mask, float *y, float *saved, float *scratch, int blocks,
			  const sky_dropout *dr, int layer);
void sky_layer_backward_dr(const sky_model_cfg *c, const float *w, const float *mask,
			   const float *saved, const float *dy, float *dx, float *dw,
			   float *scratch, int blocks, const sky_dropout *dr, int layer);
void sky_layer_half_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			       const float *mask, float *y, float *saved, float *scratch, int block,
			       const sky_dropout *dr, int layer);
void sky_layer_half_backward_dr(const sky_model_cfg *c, const float *w, const float *mask,
				const float *saved, const float *dy, float *dx, float *dw,
				float *scratch, int block, const sky_dropout *dr, int layer);
#endif
