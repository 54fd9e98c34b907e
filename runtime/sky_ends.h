/* The fp32 ends of an int8 model (embeddings in, pooler and classifier
 * out) in arithmetic that gives the same bits on every machine, so a
 * serving fleet's logits are one board's whatever ISA each stage runs on
 * (the int8 layers in between already are: sky_layer_s8.h).
 *
 * What makes them portable: IEEE-754 double arithmetic in a fixed order
 * with no fused multiply-add contracted by the compiler (this file's
 * functions are built with fp-contract off); float x float products are
 * exact in double, so sums of them do not depend on FMA either; sqrt and
 * division are correctly rounded; tanh and exp are our own (range
 * reduction and a polynomial), not libm's, whose last bit differs between
 * implementations and ISAs. The results agree with sky_embed_forward and
 * sky_head_forward (OpenBLAS, tanhf) to a few float ulps.
 *
 * Used by sky_qmodel_forward for int8 models (sky eval --precision int8)
 * and by the serving stages (sky_serve.h). */
#ifndef SKY_ENDS_H
#define SKY_ENDS_H

#include "sky_model.h"

#include <stdint.h>


/* Embeddings of B*S tokens: y (B*S, H) = LayerNorm(word[id] + pos[t % S] +
 * type[0]) with the embedding block w (sky_embed.h layout). Returns 0 or
 * SKY_EINVAL (an id outside the vocabulary; y untouched). */
int sky_ends_embed(const sky_model_cfg *c, const float *w, const int32_t *ids, float *y);

/* Logits (classes) of one sequence from x0, its first token's hidden
 * state (H), with the head block w (sky_head.h layout); scratch: H floats. */
void sky_ends_head(const sky_model_cfg *c, const float *w, const float *x0, float *logits,
		   float *scratch);

/* tanh in portable double arithmetic (|error| below 1e-15). */
double sky_ends_tanh(double x);

#endif
