/* BERT embeddings in fp32, forward and backward, as HuggingFace's
 * BertEmbeddings (absolute positions; dropout through the _dr functions):
 *
 *   y[t] = LayerNorm(word[ids[t]] + position[t mod S] + token_type[types[t]])
 *
 * Parameters are one flat block of sky_model_embed_params(cfg) floats:
 *   word (vocab, H) | position (max_pos, H) | token_type (type_vocab, H) |
 *   LayerNorm gamma (H) | beta (H)
 * sky_embed_tensors() names them as HuggingFace does ("embeddings.*"). */
#ifndef SKY_EMBED_H
#define SKY_EMBED_H

#include "sky_dropout.h"
#include "sky_model.h"
#include "sky_tensor.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_EMBED_NTENSORS 5

typedef struct sky_embed_view {
	float *word; /* (vocab, H) embeddings.word_embeddings.weight */
	float *pos;  /* (max_pos, H) embeddings.position_embeddings.weight */
	float *type; /* (type_vocab, H) embeddings.token_type_embeddings.weight */
	float *ln_g, *ln_b; /* (H) embeddings.LayerNorm.weight / .bias */
} sky_embed_view;

/* Fills out[0..SKY_EMBED_NTENSORS) with names (full HuggingFace names,
 * "embeddings.word_embeddings.weight" ...), shapes and offsets. Returns
 * SKY_EMBED_NTENSORS. */
int sky_embed_tensors(const sky_model_cfg *c, sky_tensor_info *out);
void sky_embed_bind(const sky_model_cfg *c, float *flat, sky_embed_view *v);
/* Tables N(0, 0.02), LayerNorm gamma 1, beta 0. */
void sky_embed_init(const sky_model_cfg *c, float *flat, unsigned long long seed);

/* Floats forward keeps for backward, and the scratch backward needs. */
size_t sky_embed_saved_floats(const sky_model_cfg *c);
size_t sky_embed_scratch_floats(const sky_model_cfg *c);

/* Checks ids in [0, vocab) and types (NULL: all 0) in [0, type_vocab) for
 * the B*S tokens. Returns 0 or SKY_EINVAL (logged, naming the token). */
int sky_embed_check(const sky_model_cfg *c, const int32_t *ids, const int32_t *types);

/* y (B*S, H). saved: sky_embed_saved_floats() floats or NULL (inference).
 * Returns 0, or SKY_EINVAL from sky_embed_check() (y untouched). */
int sky_embed_forward(const sky_model_cfg *c, const float *w, const int32_t *ids,
		      const int32_t *types, float *y, float *saved);
/* Adds the gradient of the parameters for dy (B*S, H) into dw, after a
 * forward with the same ids, types and saved. Rows of tokens that appear
 * several times accumulate. There is no input gradient (ids are integers). */
void sky_embed_backward(const sky_model_cfg *c, const float *w, const int32_t *ids,
			const int32_t *types, const float *saved, const float *dy, float *dw,
			float *scratch);

/* The same in training with dropout on the output (hidden_dropout_prob,
 * sky_dropout.h); dr NULL is the functions above. */
int sky_embed_forward_dr(const sky_model_cfg *c, const float *w, const int32_t *ids,
			 const int32_t *types, float *y, float *saved, const sky_dropout *dr);
void sky_embed_backward_dr(const sky_model_cfg *c, const float *w, const int32_t *ids,
			   const int32_t *types, const float *saved, const float *dy, float *dw,
			   float *scratch, const sky_dropout *dr);

#endif
