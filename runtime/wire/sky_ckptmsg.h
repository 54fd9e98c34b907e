/* Checkpoint images: a stage's weights and optimizer state at a step, as a
 * safetensors file whose header metadata carries the job, plan epoch, step,
 * the norm blocks held (sky_stage.h: 0 embeddings, 1 + u half-layer u,
 * 2L + 1 head) and the SHA-256 of the tensor bytes (everything after the
 * header), so a part damaged on the way or on disk is refused by its hash.
 *
 * Tensors: "p.<b>" the parameters of block b, "s<k>.<b>" optimizer state
 * vector k of block b (AdamW: k 0 the first moment, 1 the second; SGD: 0
 * the momentum), each F32, shape [n]. The step says how many optimizer
 * steps the state has taken (AdamW's bias correction counts from it), so
 * parameters + state + step are all a stage needs to go on exactly.
 *
 * The same image travels both ways: a board publishes its blocks on
 * sky/v1/job/<job>/ckpt/<board> (QoS 1) every K steps; the planner's store
 * (planner/sky_ckpt.h) keeps them and, after a re-plan, assembles for each
 * board the blocks of its new range into one image, retained on
 * sky/v1/job/<job>/load/<board>. Shared by board and planner, so it sits in
 * wire/ and parses with cJSON through the bounded pool. */
#ifndef SKY_CKPTMSG_H
#define SKY_CKPTMSG_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_CKPT_MAX_VECS 2  /* optimizer state vectors (AdamW) */
#define SKY_CKPT_SHA_HEX 64
/* norm blocks of a model at most (2L + 2: 1023 layers) */
#define SKY_CKPT_MAX_BLOCKS 2048
/* header bytes at most: a tensor's entry is under 128 bytes (sky_ckpt_bound) */
#define SKY_CKPT_HEADER_MAX (1024u + 128u * SKY_CKPT_MAX_BLOCKS * (1 + SKY_CKPT_MAX_VECS))

typedef struct sky_ckpt_meta {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;   /* of the plan the image was made under (load: the new plan's) */
	int64_t step;    /* optimizer steps taken */
	int blk0, nblk;  /* norm blocks held: [blk0, blk0 + nblk) */
	int nvec;        /* optimizer state vectors per block (0..SKY_CKPT_MAX_VECS) */
	char sha[SKY_CKPT_SHA_HEX + 1]; /* filled by encode, checked by parse */
} sky_ckpt_meta;

typedef struct sky_ckpt_tensor {
	int vec;          /* -1 parameters, k >= 0 state vector k */
	int blk;          /* global norm block */
	const float *data;
	size_t n;         /* floats */
} sky_ckpt_tensor;

/* Bytes an image of nt tensors holding `floats` floats in all may take
 * (a bound, for carving its buffer before the first step). */
size_t sky_ckpt_bound(int nt, size_t floats);

/* Writes the image of m's fields and tensors t[0..nt) into buf; computes
 * the SHA-256 of the tensor bytes into m->sha and the header. Returns 0
 * with *len set, or SKY_ERANGE (does not fit) / SKY_ENOMEM (JSON pool). */
int sky_ckpt_encode(sky_ckpt_meta *m, const sky_ckpt_tensor *t, int nt, unsigned char *buf,
		    size_t cap, size_t *len, sky_diag *d);

/* Parses and checks an image's header without reading the tensor bytes
 * (no hashing, no copying): the header at most SKY_CKPT_HEADER_MAX bytes,
 * its JSON, every tensor F32 [n] with n >= 1, names of the form above
 * within [blk0, blk0 + nblk), each (vector, block) once, exactly
 * nblk x (1 + nvec) of them, a block's state vectors as long as its
 * parameters, and the tensors tiling the data in header order with nothing
 * after the last (the message is as long as its header says). Tensors go
 * to t (cap rows; their data point into img, possibly unaligned: copy with
 * memcpy). Returns 0 with *nt set, or SKY_EFORMAT (d says where). */
int sky_ckpt_parse_header(const unsigned char *img, size_t len, sky_ckpt_meta *m,
			  sky_ckpt_tensor *t, int cap, int *nt, sky_diag *d);

/* The SHA-256 of img's tensor bytes against m->sha (m from
 * sky_ckpt_parse_header of the same img). Returns 0, SKY_EAUTH ("SHA-256
 * mismatch") or SKY_EFORMAT (not an image). */
int sky_ckpt_verify(const unsigned char *img, size_t len, const sky_ckpt_meta *m, sky_diag *d);

/* sky_ckpt_parse_header, then sky_ckpt_verify. Returns 0 with *nt set,
 * SKY_EFORMAT (malformed; d says where) or SKY_EAUTH (the hash does not
 * match: d says "SHA-256 mismatch"). */
int sky_ckpt_parse(const unsigned char *img, size_t len, sky_ckpt_meta *m, sky_ckpt_tensor *t,
		   int cap, int *nt, sky_diag *d);

/* SHA-256 of buf as 64 lower-case hex digits (hex: 65 bytes). */
void sky_ckpt_sha256_hex(const void *buf, size_t len, char *hex);

#endif
