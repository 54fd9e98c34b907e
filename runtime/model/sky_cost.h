/* What a piece of the model costs in memory and work while training, per
 * half-layer block, shared by the planner (to split a model) and the board
 * (to size its arena), so both sides agree.
 *
 * The unit of a split is half an encoder layer: the attention block (QKV,
 * scores, context, output projection, residual, LayerNorm1) or the
 * feed-forward block (two dense layers, GELU, residual, LayerNorm2). Both
 * end on an H-wide activation, so a stage may end after either.
 *
 * Activation counts follow what runtime/layer.c keeps for backward
 * (sky_layer_saved_floats), without its 16-float padding:
 *   attention: x, q|k|v, probabilities, ctx, LN1 x-hat (T*H each but qkv 3T*H,
 *              probabilities B*heads*S*S) and LN1 1/std (T)
 *   feed-forward: h1, LN2 x-hat (T*H), pre-GELU u and gelu(u) (T*F), 1/std (T)
 * with T = B*S tokens of one micro-batch; dropout is not applied, nothing is
 * recomputed. tests/planner/test_cost.c checks this against the runtime. */
#ifndef SKY_COST_H
#define SKY_COST_H

#include "sky_model.h"

#include <stdint.h>

enum { SKY_HALF_ATTN = 0, SKY_HALF_FFN = 1 };

typedef enum { SKY_OPTIM_SGD = 0, SKY_OPTIM_MOMENTUM = 1, SKY_OPTIM_ADAM = 2 } sky_optim;

/* "sgd", "momentum", "adam" -> *out; returns 0 or SKY_EINVAL. */
int sky_cost_optim_parse(const char *name, sky_optim *out);
const char *sky_cost_optim_name(sky_optim o);
/* Bytes per trained parameter: fp32 weight + fp32 gradient + optimizer
 * state (SGD none, momentum one float, Adam two). */
int64_t sky_cost_train_bytes_per_param(sky_optim o);
/* Bytes per parameter of a checkpoint image: the fp32 weight and each
 * optimizer state vector (no gradient), 4 * (1 + state vectors). */
int64_t sky_cost_ckpt_bytes_per_param(sky_optim o);
/* Optimizer state vectors per parameter: SGD 0, momentum 1, Adam 2. */
int sky_cost_optim_vectors(sky_optim o);

/* Parameters of one half block: attention 4H^2 + 6H (QKV and output weights
 * and biases, LN1), feed-forward 2HF + F + 3H (W1, b1, W2, b2, LN2). The two
 * add up to sky_model_layer_params(). */
int64_t sky_cost_half_params(const sky_model_cfg *c, int half);
/* Forward FLOPs of one half block for one micro-batch: attention
 * 8*T*H^2 + 4*T*S*H, feed-forward 4*T*H*F. Backward is twice this. The two
 * add up to sky_model_layer_flops_fwd(). */
double sky_cost_half_flops_fwd(const sky_model_cfg *c, int half);
/* Floats forward keeps for backward in one half block, per micro-batch
 * (see the list above). */
int64_t sky_cost_half_saved_floats(const sky_model_cfg *c, int half);
/* Floats of scratch a stage needs while running any block (reused between
 * blocks and micro-batches): (T,3H) + 2 (T,H) + (T,F) + (S,S), plus one
 * head's q|k|v block (3, S, H/heads) that attention keeps in cache. */
int64_t sky_cost_layer_scratch_floats(const sky_model_cfg *c);
/* Floats the embedding block keeps for backward per micro-batch (its
 * LayerNorm x-hat and 1/std), and the classification head (pooled (B,H)
 * and its tanh output). */
int64_t sky_cost_embed_saved_floats(const sky_model_cfg *c);
int64_t sky_cost_head_saved_floats(const sky_model_cfg *c);

#endif
