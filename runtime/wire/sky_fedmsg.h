/* The messages of a federated job (docs/federation.md), shared by the
 * aggregator (planner/svc_fed.c), the owners (runtime/agent_fed.c) and the
 * operator's tools:
 *
 *   sky/v1/job/<job>/fedround        planner -> owners, retained, a signed
 *                                    envelope (sky_sign.h) of the round JSON
 *   sky/v1/job/<job>/fedmodel        planner -> owners: the round's global
 *                                    model bundle in hashed chunks (sky_chunk.h,
 *                                    kind SKY_CHUNK_MODEL), the hash the signed
 *                                    round names
 *   sky/v1/job/<job>/fedupd/<owner>  owner -> planner: its weights after the
 *                                    round's local steps, in update chunks;
 *                                    <owner> is the sender's CN (ACL %u)
 *   sky/v1/jobs/<op>/job/<job>/fedmodel planner -> operator, retained: the
 *                                    final global bundle (sky job collect)
 *
 * The model bundle is what a round's global model is on the wire and in the
 * planner's store: the model's config.json as it came, then its flat
 * parameters (sky_bert's params vector, n_params floats, little-endian):
 *   0   8  magic "SKYFEDM1"
 *   8   4  config bytes C (<= SKY_FEDB_MAX_CONFIG)
 *   12  4  reserved, 0
 *   16  8  words W (floats)
 *   24  C  config.json, then zero bytes up to a multiple of 4
 *   ..  4W the parameters
 * The planner never reads the config: it sums and steps the words.
 *
 * An update chunk (little-endian):
 *   0   4  magic "SKYU"
 *   4   1  version 1
 *   5   1  mode: 1 plain (float32 words), 2 masked (uint64 words)
 *   6   2  reserved, 0
 *   8   8  round
 *   16  4  chunk index (elements [index * SKY_FED_CHUNK_WORDS, ...))
 *   20  4  words in this chunk
 *   24  8  the model's words
 *   32  payload: words x 4 (plain) or x 8 (masked) */
#ifndef SKY_FEDMSG_H
#define SKY_FEDMSG_H

#include "sky_err.h"
#include "sky_fedround.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FEDB_HEADER 24u
#define SKY_FEDB_MAX_CONFIG (256u << 10)
#define SKY_FEDU_HEADER 32u
#define SKY_FEDU_MAX_BYTES (SKY_FEDU_HEADER + 8u * SKY_FED_CHUNK_WORDS)
#define SKY_FEDROUND_MAX_BYTES (48u << 10) /* the round's JSON */
#define SKY_FED_CERT_CAP 1280u /* a board certificate's PEM (P-256: ~700 bytes) */

/* Bytes of a bundle of config_len config bytes and words floats. */
uint64_t sky_fedb_bytes(size_t config_len, uint64_t words);
/* Writes the header and config into out (sky_fedb_bytes(..) bytes); the
 * caller writes the words at *words_at (an offset into out). Returns 0 or
 * SKY_EINVAL (config too long, words 0 or over 2^35). */
int sky_fedb_write_head(unsigned char *out, const char *config, size_t config_len,
			uint64_t words, size_t *words_at);
/* Checks a bundle's layout: the magic, the sizes against len. Sets the
 * config's place and length and the words' offset and count. Returns 0 or
 * SKY_EFORMAT with d saying what. */
int sky_fedb_parse(const unsigned char *b, size_t len, const char **config, size_t *config_len,
		   size_t *words_at, uint64_t *words, sky_diag *d);
/* Little-endian float32 words at p into out (n of them), and back. */
void sky_fedb_get_words(const unsigned char *p, float *out, uint64_t n);
void sky_fedb_put_words(unsigned char *p, const float *x, uint64_t n);

/* One round as the aggregator announces it (signed). */
typedef struct sky_fedround_msg {
	char job[65];
	uint64_t round, rounds; /* rounds: the job's total */
	int done;		/* 1: the job ended; model_sha256 is its final model */
	char model_sha256[65];
	uint64_t model_bytes, words;
	uint32_t chunk_bytes;
	char dataset[65];
	int local_steps, batch, micro;
	char optim[8];
	double lr, clip, prox_mu, dp_clip;
	int seed, warmup;
	int nown;
	char owner[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	unsigned char sampled[SKY_FED_MAX_OWNERS];
	/* secure rounds (sky_fedsecmsg.h): the fixed point the aggregator's
	 * sum uses (sky_fedsum.h), each owner's weight, and each sampled
	 * owner's certificate (PEM, "" for the others) for the pair keys */
	int secure, fx_bits;
	double fx_clip;
	uint32_t weight[SKY_FED_MAX_OWNERS];
	char cert[SKY_FED_MAX_OWNERS][SKY_FED_CERT_CAP];
} sky_fedround_msg;

/* Returns the JSON's length or SKY_ERANGE. */
int sky_fedround_msg_encode(const sky_fedround_msg *m, char *buf, size_t cap);
/* Returns 0 or SKY_EFORMAT / SKY_ERANGE / SKY_EINVAL naming the field. */
int sky_fedround_msg_decode(const char *buf, size_t len, sky_fedround_msg *m, sky_diag *d);
/* The index of id among m's owners, or -1. */
int sky_fedround_msg_owner(const sky_fedround_msg *m, const char *id);

typedef struct sky_fedupd {
	int mode; /* 1 plain, 2 masked */
	uint64_t round, words;
	uint32_t chunk, n;
	const unsigned char *payload; /* into the decoded message */
} sky_fedupd;

/* Writes a plain chunk's message (the floats x[0..n)) into out. Returns
 * its length or SKY_ERANGE / SKY_EINVAL. */
int sky_fedupd_encode_plain(uint64_t round, uint32_t chunk, uint64_t words, const float *x,
			    uint32_t n, unsigned char *out, size_t cap);
/* Writes a masked chunk's message (the 64-bit words w[0..n)). As above. */
int sky_fedupd_encode_masked(uint64_t round, uint32_t chunk, uint64_t words, const uint64_t *w,
			     uint32_t n, unsigned char *out, size_t cap);
/* Parses a chunk message: magic, version, mode, sizes that agree with len.
 * Returns 0 or SKY_EFORMAT with d saying what. */
int sky_fedupd_decode(const unsigned char *p, size_t len, sky_fedupd *u, sky_diag *d);

#endif
