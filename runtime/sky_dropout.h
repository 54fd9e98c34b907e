/* Dropout whose masks are a function of where they are, not of a random
 * stream: the mask of element i at site s of layer l in micro-batch m of
 * step t is a hash of (seed, t, m, l, s, i). Any board that computes that
 * element draws the same mask, whatever else it computed before, so a
 * pipeline split anywhere (and a stage redone after a fault) trains the
 * same bits as one board, and backward recomputes the mask instead of
 * storing it.
 *
 * The sites are HuggingFace BertForSequenceClassification's: the
 * embeddings' output and each layer's attention output and FFN output
 * (hidden_dropout_prob), the attention probabilities
 * (attention_probs_dropout_prob), and the pooled output before the
 * classifier (hidden_dropout_prob). An element is kept with probability
 * 1 - p and then scaled by 1 / (1 - p), so the expectation is unchanged;
 * inference passes no sky_dropout and nothing is dropped. The masks are not
 * PyTorch's (its generator is a stream), only their law is.
 *
 * The hash is splitmix64's finaliser over a Weyl sequence started at a key
 * of (seed, step, micro-batch, layer, site): the same integer arithmetic
 * on every machine. */
#ifndef SKY_DROPOUT_H
#define SKY_DROPOUT_H

#include "sky_model.h"

#include <stddef.h>
#include <stdint.h>

enum {
	SKY_DROP_EMBED = 1,     /* the embeddings' LayerNorm output */
	SKY_DROP_ATTN_PROBS = 2, /* softmax(q k^T / sqrt d + mask), per head */
	SKY_DROP_ATTN_OUT = 3,  /* ctx Wo^T + bo, before the residual */
	SKY_DROP_FFN_OUT = 4,   /* gelu(u) W2^T + b2, before the residual */
	SKY_DROP_POOLED = 5,    /* the pooler's output, before the classifier */
};

/* What one micro-batch of one training step drops. */
typedef struct sky_dropout {
	uint64_t key;  /* sky_dropout_key(seed, step, micro) */
	float hidden;  /* hidden_dropout_prob, [0, 1) */
	float attn;    /* attention_probs_dropout_prob, [0, 1) */
} sky_dropout;

/* The key of micro-batch `micro` of step `step` (the optimizer step about
 * to be taken, counted from 1) under `seed`. */
uint64_t sky_dropout_key(uint64_t seed, uint64_t step, uint32_t micro);

/* A dropout context for cfg's probabilities, or NULL in *out's place when
 * both are 0 (then callers pass NULL and nothing changes): returns out or
 * NULL. */
const sky_dropout *sky_dropout_make(sky_dropout *out, const sky_model_cfg *c, uint64_t seed,
				    uint64_t step, uint32_t micro);

/* x[i] = keep(i) ? x[i] / (1 - p) : 0 for i in [0, n), elements numbered
 * from base (their index in the site's whole tensor for this micro-batch),
 * at `site` of `layer` (-1 for sites outside the encoder). Applied to a
 * gradient with the same arguments it is dropout's backward. p 0 leaves x
 * as it is. */
void sky_dropout_apply(const sky_dropout *d, float p, int layer, int site, uint64_t base,
		       float *x, size_t n);

/* Whether element i is kept (for tests and references). */
int sky_dropout_keep(const sky_dropout *d, float p, int layer, int site, uint64_t i);

#endif
