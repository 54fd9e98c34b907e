/* A whole BERT classifier for inference from a safetensors file, with its
 * encoder layers in fp32 or int8: the embeddings and the classification
 * head stay fp32 (a small share of the work), every encoder layer is a
 * sky_layer (fp32) or a sky_layer_s8 (int8). Used by `sky quantize` (which
 * turns an fp32 file from `sky train --save` into an int8 one, calibrating
 * on the synthetic task) and `sky eval`.
 *
 * File names follow HuggingFace BertForSequenceClassification:
 * "bert.embeddings.*", "bert.encoder.layer.<i>.*", "bert.pooler.*",
 * "classifier.*"; an int8 file holds its layers as sky_layer_s8_entries()
 * writes them (int8 weights with "_scale" tensors and
 * "bert.encoder.layer.<i>.quant.act_absmax"). Memory comes from one arena
 * (measured, allocated once, sealed). */
#ifndef SKY_QUANT_MODEL_H
#define SKY_QUANT_MODEL_H

#include "sky_arena.h"
#include "sky_err.h"
#include "sky_layer_s8.h"
#include "sky_model.h"
#include "sky_safetensors.h"

#include <stdint.h>

enum { SKY_PREC_FP32 = 0, SKY_PREC_INT8 = 1 };

typedef struct sky_qmodel {
	sky_model_cfg cfg;
	int precision;       /* of the encoder layers */
	float *embed, *head; /* fp32 blocks */
	float *layers;       /* fp32: cfg.layers blocks of sky_model_layer_params() */
	sky_layer_s8 *q;     /* int8: cfg.layers layers */
	float *act[2], *mask, *scratch, *logits;
	void *mem;           /* the arena's buffer */
	size_t arena_bytes, weight_bytes;
} sky_qmodel;

/* Reads which precision the file's layers have and how many there are
 * (consecutive "bert.encoder.layer.<i>.attention.self.query.weight").
 * Returns 0, or SKY_EFORMAT / SKY_ENOTFOUND (d says what). */
int sky_qmodel_probe(const sky_st_file *f, int *precision, int *layers, sky_diag *d);
/* Opens a model from f for cfg (hidden, heads, ffn, vocab ... from the
 * preset; cfg->layers is replaced by the file's count; seq and batch are
 * the micro-batch shape). Every tensor's dtype and shape is checked.
 * Returns 0 or an error naming the tensor. */
int sky_qmodel_open(sky_qmodel *m, const sky_st_file *f, const sky_model_cfg *cfg, sky_diag *d);
/* Frees the arena. NULL-safe; may be called twice. */
void sky_qmodel_close(sky_qmodel *m);

/* One micro-batch: logits (B, classes). attn: 1 real token, 0 padding
 * (NULL: all real). Returns 0 or SKY_EINVAL (a bad token id). When
 * layer_in is not NULL, the input of every layer is copied there
 * (cfg.layers x B*S x H floats; calibration uses it). */
int sky_qmodel_forward(sky_qmodel *m, const int32_t *ids, const int32_t *attn, float *logits,
		       float *layer_in);

/* Writes m's embeddings and head (fp32) with the int8 layers q[0..layers)
 * to path. Returns 0 or the sky_st_write errors. */
int sky_qmodel_save_int8(const sky_qmodel *m, sky_layer_s8 *const *q, const char *path,
			 const char *calib_note, sky_diag *d);

#endif
