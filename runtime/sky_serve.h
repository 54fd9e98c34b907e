/* A serving stage: a board's half-layer range of an int8 model, loaded
 * from its slice file (sky_slice.h), run on batches of requests.
 *
 * Half-layer 2i is layer i's attention half, 2i+1 its FFN half
 * (sky_layer_s8_forward_attn / _ffn). The first stage embeds token ids
 * (fp32, as sky_qmodel_forward does); the last computes the logits
 * (pooler and classifier, fp32, one sequence at a time so a row's logits
 * do not depend on the batch it came in). Between stages travels exactly
 * what the next half consumes, so a cut costs no bits:
 *   a cut after a layer (the next stage starts with an attention half):
 *     y8, the layer's int8 output, with its scale s_y; the receiver
 *     dequantises it (y = y8 * s_y, as the layer's own exit does) and the
 *     next layer quantises that at its entry, as on one board;
 *   a cut in the middle of a layer (the next stage starts with an FFN
 *     half): h1_8, the LayerNorm1 output (int8, scale s_h1).
 *
 * The payload of a serving frame (sky_frameseal.h; dtype s8, ndim 1,
 * shape [sky_serve_payload_bytes()]), little-endian, fixed size per plan:
 *   off  size
 *     0     4  magic "SKYS"
 *     4     4  version 1
 *     8     8  batch number (the first stage's counter)
 *    16     4  n: requests in the batch, 1..B
 *    20     4  kind: 0 y8 (after a layer), 1 h1_8 (mid-layer)
 *    24     4  scale, float32
 *    28     4  zero
 *    32  B*136 the request table, one row per sequence (rows >= n zero):
 *              client CN (65 bytes, NUL-padded), request id (65 bytes,
 *              NUL-padded), tokens given (u16), 4 bytes zero
 *     .   B*S  the mask, one byte per token: 1 real, 0 padding
 *     .  B*S*H the int8 activations, row-major (B, S, H)
 *
 * Memory: one arena, measured, allocated once and sealed at open; a batch
 * allocates nothing. */
#ifndef SKY_SERVE_H
#define SKY_SERVE_H

#include "sky_err.h"
#include "sky_infermsg.h"
#include "sky_layer_s8.h"
#include "sky_model.h"
#include "sky_pool.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SERVE_MAGIC "SKYS"
#define SKY_SERVE_VERSION 1
#define SKY_SERVE_HDR_BYTES 32
#define SKY_SERVE_ENTRY_BYTES 136
enum { SKY_SERVE_Y8 = 0, SKY_SERVE_H1 = 1 };

typedef struct sky_serve_req {
	char client[SKY_TOPIC_SEGMENT_MAX + 1];
	char id[SKY_INFER_ID_MAX + 1];
	int n; /* tokens given (1..S) */
} sky_serve_req;

/* The batch a stage is working on. */
typedef struct sky_serve_table {
	uint64_t batch;      /* the first stage's batch number */
	int n;               /* requests: rows 0..n-1 of the batch */
	sky_serve_req *req;  /* (B) */
	uint8_t *mask;       /* (B*S) 1 real token, 0 padding */
} sky_serve_table;

typedef struct sky_serve {
	sky_model_cfg cfg;      /* the whole model's (layers = L), batch B, seq S */
	int first, last;        /* half-layer range, inclusive */
	int l0, l1;             /* layers touched */
	int is_first, is_last;
	float *embed, *head;    /* fp32 blocks (first / last stage only) */
	sky_layer_s8 *q;        /* (l1 - l0 + 1), one scratch shared */
	float *act, *mask;      /* (B*S, H) fp32 activations; (B*S) additive mask */
	float *head_scratch;    /* the head for one sequence */
	float *logits;          /* (B, classes), last stage */
	int32_t *ids;           /* (B*S) token ids, first stage */
	sky_serve_table tab;
	void *tmp;              /* load-time scratch (sky_layer_s8_tmp_bytes) */
	sky_pool *pool;         /* NULL: one thread */
	int threads;
	void *mem;
	size_t arena_bytes, weight_bytes;
} sky_serve;

/* Bytes of a serving frame's payload for B sequences of S tokens of width H. */
size_t sky_serve_payload_bytes(const sky_model_cfg *c);

/* Bytes of arena the stage of half-layers [first, last] needs with
 * `threads` threads (1..SKY_POOL_MAX_THREADS). Returns the count, or
 * SKY_EINVAL / SKY_ERANGE (a bad range or shape; d says). */
int64_t sky_serve_bytes(const sky_model_cfg *c, int first, int last, int threads, sky_diag *d);

/* Opens the stage from its slice file: measures, allocates once, carves,
 * seals, loads every tensor (dtype and shape checked) and starts a pool of
 * `threads` threads. c is the whole model (layers L; B, S the plan's).
 * Returns 0, or SKY_ENOTFOUND / SKY_EFORMAT (the slice lacks a tensor or
 * holds a wrong one: d names it), SKY_ENOMEM, SKY_EINVAL. */
int sky_serve_open(sky_serve *s, const char *slice_path, const sky_model_cfg *c, int first,
		   int last, int threads, sky_diag *d);
/* Frees the arena and stops the pool. NULL-safe; may be called twice. */
void sky_serve_close(sky_serve *s);

/* Runs one batch through the stage.
 *   first stage: in is NULL; the caller has filled s->ids (B*S, padded with
 *                0) and s->tab (batch, n, req, mask);
 *   other stages: in is a received payload; its table goes to s->tab.
 *   out: the payload for the next stage (sky_serve_payload_bytes), or NULL
 *        on the last stage, whose logits are then in s->logits (rows 0..n-1).
 * Returns 0, SKY_EFORMAT (a payload that is not one this stage can take: d
 * says what) or SKY_EINVAL (a token id out of the vocabulary, NaN). */
int sky_serve_forward(sky_serve *s, const unsigned char *in, unsigned char *out, sky_diag *d);

/* Reads a payload's table into tab (caller's req (B) and mask (B*S)) and
 * returns its kind, scale and a pointer to its activations. Returns 0 or
 * SKY_EFORMAT (bad magic, version, n, kind, scale, string, mask byte). */
int sky_serve_payload_read(const sky_model_cfg *c, const unsigned char *p, sky_serve_table *tab,
			   int *kind, float *scale, const int8_t **act, sky_diag *d);
/* Writes a payload from a table, kind, scale and B*S*H activations. */
void sky_serve_payload_write(const sky_model_cfg *c, const sky_serve_table *tab, int kind,
			     float scale, const int8_t *act, unsigned char *p);

#endif
