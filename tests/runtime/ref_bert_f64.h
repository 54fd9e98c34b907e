/* A double-precision reference of the BERT pieces, written as plain loops
 * straight from the equations and independent of the fp32 runtime (no
 * kernels, no BLAS). Tests differentiate it with central differences to get
 * true gradients, and compare the fp32 forward against it.
 *
 * Parameter blocks use the same flat layouts as the runtime (sky_layer.h,
 * sky_embed.h, sky_head.h), in double. */
#ifndef REF_BERT_F64_H
#define REF_BERT_F64_H

#include "sky_dropout.h"
#include "sky_model.h"

#include <stddef.h>
#include <stdint.h>

/* One encoder layer for blocks (1 attention, 2 FFN, 3 both); x, y (T, H);
 * mask (T) additive or NULL. */
void ref64_layer_forward(const sky_model_cfg *c, const double *w, const double *x,
			 const double *mask, double *y, int blocks);
/* The same with dropout at the layer's three sites, masks from
 * sky_dropout_keep (dr NULL: none). */
void ref64_layer_forward_dr(const sky_model_cfg *c, const double *w, const double *x,
			    const double *mask, double *y, int blocks, const sky_dropout *dr,
			    int layer);
/* Embeddings: y (T, H) = LN(word[ids] + pos[s] + type[types]); types may be NULL (0). */
void ref64_embed_forward(const sky_model_cfg *c, const double *w, const int32_t *ids,
			 const int32_t *types, double *y);
void ref64_embed_forward_dr(const sky_model_cfg *c, const double *w, const int32_t *ids,
			    const int32_t *types, double *y, const sky_dropout *dr);
/* Head: logits (B, classes) from the first token of each sequence of x (T, H);
 * returns the mean cross-entropy against labels. logits may be NULL. */
double ref64_head_forward(const sky_model_cfg *c, const double *w, const double *x,
			  const int32_t *labels, double *logits);
/* Both with dropout (embeddings' output; the pooled output), dr NULL: none. */
double ref64_head_forward_dr(const sky_model_cfg *c, const double *w, const double *x,
			     const int32_t *labels, double *logits, const sky_dropout *dr);

/* The row-wise pieces on their own, for kernel tests (y may equal x):
 * LayerNorm over each of n rows of h (biased variance, eps inside the
 * root); softmax over each of n rows of cols after adding mask[j] (NULL:
 * none); exact GELU x * Phi(x) element-wise. */
void ref64_layernorm(const double *x, int n, int h, const double *g, const double *b, double eps,
		     double *y);
void ref64_softmax(const double *x, int n, int cols, const double *mask, double *y);
void ref64_gelu(const double *x, size_t n, double *y);

/* Helpers for tests: float <-> double copies, and norms of differences. */
void ref64_from_f32(double *d, const float *s, size_t n);
void ref64_to_f32(float *d, const double *s, size_t n);
/* ||a - b||_2 / max(||b||_2, floor) with a in fp32 and b the reference. */
double ref64_rel_err(const float *a, const double *b, size_t n, double floor);
double ref64_norm2(const double *b, size_t n);
/* The same for two fp32 arrays, b the reference: ||a - b||_2 / ||b||_2
 * (1e-30 for a zero b); and ||a||_2, summed in double. */
double ref32_rel_err(const float *a, const float *b, size_t n);
double ref32_norm2(const float *a, size_t n);

#endif
