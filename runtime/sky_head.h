/* The sequence-classification head in fp32, forward and backward, as
 * HuggingFace's BertPooler + classifier of BertForSequenceClassification
 * (dropout on the pooled output through the _dr functions):
 *
 *   pooled[b] = tanh(Wp x[b, 0] + bp)        the first token of sequence b
 *   logits[b] = Wc pooled[b] + bc
 *   loss      = mean_b cross_entropy(softmax(logits[b]), labels[b])
 *
 * Parameters are one flat block of sky_model_head_params(cfg) floats:
 *   Wp (H, H) | bp (H) | Wc (classes, H) | bc (classes)
 * named "pooler.dense.weight/bias", "classifier.weight/bias". */
#ifndef SKY_HEAD_H
#define SKY_HEAD_H

#include "sky_dropout.h"
#include "sky_model.h"
#include "sky_tensor.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_HEAD_NTENSORS 4

typedef struct sky_head_view {
	float *wp, *bp; /* (H, H), (H) pooler.dense */
	float *wc, *bc; /* (classes, H), (classes) classifier */
} sky_head_view;

int sky_head_tensors(const sky_model_cfg *c, sky_tensor_info *out);
void sky_head_bind(const sky_model_cfg *c, float *flat, sky_head_view *v);
/* Weights N(0, 0.02), biases 0. */
void sky_head_init(const sky_model_cfg *c, float *flat, unsigned long long seed);

/* Floats forward keeps for backward; scratch for forward (inference) and
 * backward. Both are small: a few (B, H) matrices. */
size_t sky_head_saved_floats(const sky_model_cfg *c);
size_t sky_head_scratch_floats(const sky_model_cfg *c);

/* x (B*S, H): the last layer's output. Writes logits (B, classes) if not
 * NULL, and *loss if labels is not NULL. saved may be NULL (inference; then
 * scratch holds the intermediates). Returns 0, or SKY_EINVAL for a label
 * outside [0, classes) (logged). */
int sky_head_forward(const sky_model_cfg *c, const float *w, const float *x,
		     const int32_t *labels, float *logits, float *loss, float *saved,
		     float *scratch);
/* Backward of scale * loss after a forward with the same labels and saved:
 * dx (B*S, H) written (zero except each sequence's first token), dw added.
 * scale is 1 for one batch, 1/n when n micro-batches make one step. */
void sky_head_backward(const sky_model_cfg *c, const float *w, const int32_t *labels,
		       const float *saved, float scale, float *dx, float *dw, float *scratch);

/* The same in training with dropout on the pooled output before the
 * classifier (hidden_dropout_prob, sky_dropout.h; forward drops only when
 * saved is given); dr NULL is the functions above. */
int sky_head_forward_dr(const sky_model_cfg *c, const float *w, const float *x,
			const int32_t *labels, float *logits, float *loss, float *saved,
			float *scratch, const sky_dropout *dr);
void sky_head_backward_dr(const sky_model_cfg *c, const float *w, const int32_t *labels,
			  const float *saved, float scale, float *dx, float *dw, float *scratch,
			  const sky_dropout *dr);

#endif
