/* A whole BERT for sequence classification on one board: embeddings, L
 * encoder layers and the classification head, fp32, with a training step
 * (forward, backward, optimizer) over micro-batches with gradient
 * accumulation, and evaluation.
 *
 * Memory comes from one arena, carved twice: once against a measuring
 * arena (to learn the size), once against the real one, which the caller
 * then seals. After that a step allocates nothing:
 *
 *   sky_arena m; sky_arena_init(&m, NULL, 0);
 *   sky_bert_carve(&bert, &cfg, &opts, &m);            // measure
 *   size_t n = sky_arena_required(&m);  void *buf = malloc(n);
 *   sky_arena a; sky_arena_init(&a, buf, n);
 *   sky_bert_carve(&bert, &cfg, &opts, &a);            // carve
 *   sky_arena_seal(&a); sky_bert_init(&bert, seed);
 *
 * Parameters, gradients and optimizer state are each one flat vector laid
 * out as [embeddings | layer 0 | ... | layer L-1 | head], so the optimizer
 * and gradient clipping are single passes. */
#ifndef SKY_BERT_H
#define SKY_BERT_H

#include "sky_arena.h"
#include "sky_dropout.h"
#include "sky_err.h"
#include "sky_model.h"
#include "sky_optim.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sky_bert_opts {
	sky_optim_cfg optim;
	int micro;       /* micro-batches per optimizer step (gradient accumulation), >= 1 */
	float clip_norm; /* global gradient norm clip; 0: off */
	/* keys the dropout masks (sky_dropout.h) when cfg has dropout: the run's
	 * seed, so a rerun, or the fleet, drops the same elements */
	uint64_t drop_seed;
	/* 1: the micro-batches' gradients are added in fixed point
	 * (sky_fx_accumulate, sky_fedsum.h), so the step does not depend on
	 * their order: what a fleet with stage replicas computes (`sky train
	 * --exact-sum`). 0: fp32, added in micro-batch order */
	int fx_sum;
	/* FedProx (sky_fedclient.h): after clipping, each step adds prox_mu *
	 * (w - prox_w0) to the gradients; prox_w0 NULL or prox_mu 0: off */
	float prox_mu;
	const float *prox_w0; /* (n_params), the caller's */
} sky_bert_opts;

/* One micro-batch of c->batch sequences of c->seq tokens. */
typedef struct sky_bert_batch {
	const int32_t *ids;    /* (B*S) token ids */
	const int32_t *types;  /* (B*S) token type ids, or NULL (all 0) */
	const int32_t *attn;   /* (B*S) 1 for a real token, 0 for padding; NULL: all real */
	const int32_t *labels; /* (B) classes; NULL for prediction only */
} sky_bert_batch;

typedef struct sky_bert {
	sky_model_cfg cfg;
	sky_bert_opts opts;
	size_t n_embed, n_layer, n_head; /* floats per block (before padding) */
	size_t off_layer0, stride_layer, off_head; /* block offsets in params */
	size_t n_params;                 /* length of params, grads (with padding) */
	float *params, *grads, *opt_state;
	float *emb_saved;   /* embeddings' saved activations */
	float *layer_saved; /* L x stride_saved floats */
	size_t stride_saved;
	float *head_saved;
	float *act[2], *dact[2]; /* (B*S, H) ping-pong activations and gradients */
	float *mask;             /* (B*S) additive attention mask */
	float *logits;           /* (B, classes) */
	float *scratch;
	long step;               /* optimizer steps taken */
	uint64_t *fx_acc;        /* (n_params) opts.fx_sum's sums, else NULL */
	long fx_clipped;         /* gradient elements clipped or NaN in fixed point, so far */
} sky_bert;

/* Carves the model from a (measuring or real) arena. Returns 0,
 * SKY_EINVAL (bad cfg or opts, logged) or the arena's status. */
int sky_bert_carve(sky_bert *m, const sky_model_cfg *c, const sky_bert_opts *o, sky_arena *a);
/* Bytes of arena sky_bert_carve needs (by a measuring carve). Returns 0 or
 * SKY_EINVAL. */
int sky_bert_arena_bytes(const sky_model_cfg *c, const sky_bert_opts *o, size_t *bytes);
/* BERT initialisation, deterministic from seed; zeroes optimizer state. */
void sky_bert_init(sky_bert *m, unsigned long long seed);

/* Pointers to each block's parameters (or gradients, with grads). */
float *sky_bert_embed_params(const sky_bert *m);
float *sky_bert_layer_params(const sky_bert *m, int layer);
float *sky_bert_head_params(const sky_bert *m);

/* One optimizer step over opts.micro micro-batches mb[0..micro): forward,
 * backward (loss of each scaled by 1/micro, gradients accumulated), clip,
 * optimizer. *loss gets the mean loss. Returns 0, or SKY_EINVAL for a bad
 * token id or label (logged; parameters are then unchanged). Allocates
 * nothing. */
int sky_bert_train_step(sky_bert *m, const sky_bert_batch *mb, float *loss);
/* Norm block b of the model in base (m->params, m->grads, or a vector laid
 * out alike): 0 the embeddings, 1 + 2l layer l's attention half, 2 + 2l its
 * feed-forward half, 2L + 1 the head, the blocks a pipeline's stages hold
 * (sky_stage_block). *n gets its floats. NULL for b outside [0, 2L + 1]. */
float *sky_bert_block(const sky_bert *m, float *base, int b, size_t *n);
/* Clips m->grads to global norm max_norm (0: only measures) and returns
 * the norm before clipping. The squared norm is summed per block
 * (embeddings, each half-layer, head; sky_optim.h) so that a pipeline of
 * stages computes the same float. */
float sky_bert_clip(sky_bert *m, float max_norm);
/* Inference on one micro-batch: pred (B) gets the argmax class, *loss the
 * mean loss when labels are given (loss may be NULL). Logits stay in
 * m->logits. Returns 0 or SKY_EINVAL. */
int sky_bert_predict(sky_bert *m, const sky_bert_batch *b, int32_t *pred, float *loss);

/* Gradients of the last step's micro-batches, for tests: forward and
 * backward of one micro-batch with the loss scaled by scale, ADDED into
 * m->grads, no optimizer step. Returns 0 or SKY_EINVAL; *loss as above. */
int sky_bert_accumulate(sky_bert *m, const sky_bert_batch *b, float scale, float *loss);
/* The same under dropout dr (NULL: none), as sky_bert_train_step runs each
 * micro-batch when the config has dropout. */
int sky_bert_accumulate_dr(sky_bert *m, const sky_bert_batch *b, float scale, float *loss,
			   const sky_dropout *dr);

/* Writes the parameters to path as safetensors (F32), with HuggingFace
 * BertForSequenceClassification names: "bert.embeddings.*",
 * "bert.encoder.layer.N.*", "bert.pooler.dense.*", "classifier.*".
 * Returns 0 or the sky_st_write errors (d says what). Uses the heap: call
 * it outside training steps. */
int sky_bert_save(const sky_bert *m, const char *path, sky_diag *d);
/* Reads parameters saved by sky_bert_save (or any file with those names
 * and shapes) into m->params. Returns 0, SKY_ENOTFOUND, SKY_EIO or
 * SKY_EFORMAT (d names the tensor). */
int sky_bert_load(sky_bert *m, const char *path, sky_diag *d);

#endif
