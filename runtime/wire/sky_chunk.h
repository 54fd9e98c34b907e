/* Hashed chunks: how a file too big for one message crosses the broker.
 * Used for the model an operator uploads to the planner
 * (sky/v1/jobs/<op>/weights), for the slice the planner sends a board
 * (sky/v1/job/<job>/slice/<board>) and for a trained part over the message
 * limit (sky/v1/job/<job>/part/<board>/<index>, sky_partchunk.h). Each chunk names the whole file (its
 * SHA-256 and size), its own place in it (index of total, the nominal
 * chunk size) and carries the SHA-256 of its own payload, so a receiver
 * verifies every chunk on arrival, writes only verified bytes, and after a
 * restart asks again from its first missing chunk.
 *
 * Layout (little-endian, SKY_CHUNK_HEADER_BYTES then the payload):
 *   0   4  magic "SKYC"
 *   4   1  version (1)
 *   5   1  kind (SKY_CHUNK_MODEL, SKY_CHUNK_SLICE, SKY_CHUNK_PART)
 *   6   2  reserved, 0
 *   8   4  index            0 .. total-1
 *   12  4  total            ceil(file_bytes / chunk_bytes), >= 1
 *   16  4  chunk_bytes      nominal payload size (every chunk but the last)
 *   20  4  payload bytes    chunk_bytes, or the remainder for the last
 *   24  8  file_bytes
 *   32  32 SHA-256 of the whole file
 *   64  32 SHA-256 of this chunk's payload
 *   96  payload
 * Everything a chunk says about itself is checked against everything else
 * it says (sky_chunk_decode), and against what the receiver expects
 * (sky_chunk_expect). */
#ifndef SKY_CHUNK_H
#define SKY_CHUNK_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_CHUNK_HEADER_BYTES 96u
#define SKY_CHUNK_MIN_BYTES 64u          /* smallest nominal chunk (tests use ~1 KiB) */
#define SKY_CHUNK_MAX_PAYLOAD (4u << 20) /* largest nominal chunk */
#define SKY_CHUNK_MAX_BYTES (SKY_CHUNK_HEADER_BYTES + SKY_CHUNK_MAX_PAYLOAD)
#define SKY_CHUNK_DEFAULT_BYTES (256u << 10)
/* largest file sent in chunks (a large preset's int8 model is ~0.4 GB) */
#define SKY_CHUNK_MAX_FILE (1ull << 34)

enum { SKY_CHUNK_MODEL = 1, SKY_CHUNK_SLICE = 2, SKY_CHUNK_PART = 3 };

/* Why a chunk was dropped (counted per reason by its receiver). */
typedef enum {
	SKY_CHUNK_OK = 0,
	SKY_CHUNK_OVERSIZE,  /* more bytes than any chunk may have */
	SKY_CHUNK_MALFORMED, /* bad magic, version, kind, or sizes that disagree */
	SKY_CHUNK_BAD_HASH,  /* payload SHA-256 differs from the one it carries */
	SKY_CHUNK_UNASKED,   /* for a file the receiver is not fetching */
	SKY_CHUNK_BAD_INDEX, /* not the chunk the receiver needs next */
	SKY_CHUNK_NREASONS
} sky_chunk_reason;

/* "oversize", "malformed", "bad_hash", "unasked", "bad_index"; "ok". */
const char *sky_chunk_reason_name(sky_chunk_reason r);

typedef struct sky_chunk {
	int kind;
	uint32_t index, total, chunk_bytes;
	uint64_t file_bytes;
	unsigned char file_sha[32];
	unsigned char sha[32];
	const unsigned char *data; /* into the decoded buffer */
	size_t len;
} sky_chunk;

/* Chunks of chunk_bytes a file of file_bytes takes (an empty file: 1). */
uint32_t sky_chunk_count(uint64_t file_bytes, uint32_t chunk_bytes);

/* Writes chunk index of file (file_bytes bytes at file, whose SHA-256 is
 * file_sha) into out. Returns the message length, or SKY_EINVAL (index,
 * sizes) / SKY_ERANGE (cap). */
int sky_chunk_encode(int kind, const unsigned char *file, uint64_t file_bytes,
		     const unsigned char file_sha[32], uint32_t chunk_bytes, uint32_t index,
		     unsigned char *out, size_t cap);

/* Parses and verifies one message: layout, sizes that agree, and the
 * payload's hash. Returns 0 with c filled (c->data points into buf), or
 * SKY_ERANGE (oversize) / SKY_EFORMAT (malformed) / SKY_EAUTH (hash) with
 * *why set and d saying what. */
int sky_chunk_decode(const unsigned char *buf, size_t len, sky_chunk *c, sky_chunk_reason *why,
		     sky_diag *d);

/* Checks a decoded chunk against the file the receiver fetches (kind,
 * file hash, size, chunk size) and the index it needs next. Returns 0, or
 * SKY_EINVAL with *why UNASKED or BAD_INDEX and d saying what. */
int sky_chunk_expect(const sky_chunk *c, int kind, const unsigned char file_sha[32],
		     uint64_t file_bytes, uint32_t chunk_bytes, uint32_t next, sky_chunk_reason *why,
		     sky_diag *d);

/* ---- SHA-256 in hex ------------------------------------------------------- */

/* 64 lower-case hex digits and a NUL into hex. */
void sky_sha256_hex(const unsigned char sha[32], char hex[65]);
/* Parses 64 hex digits (either case). Returns 0 or SKY_EFORMAT. */
int sky_sha256_parse(const char *hex, unsigned char sha[32]);
/* SHA-256 of len bytes. */
void sky_sha256(const void *data, size_t len, unsigned char sha[32]);
/* SHA-256 of the file at path (mapped, not read into memory), and its size
 * when bytes is not NULL. Returns 0, SKY_ENOTFOUND or SKY_EIO. */
int sky_sha256_file(const char *path, unsigned char sha[32], uint64_t *bytes);

/* ---- slice request (board -> planner, sky/v1/board/<id>/slice-req) --------
 *   {"job":"j1","sha256":"<64 hex>","from":3}
 * from: the first chunk the board lacks (0: all). */
/* SKY_SLICE_REQ_MAX_BYTES: sky_topics.h */
typedef struct sky_slice_req {
	char job[65];
	unsigned char sha[32];
	uint32_t from;
} sky_slice_req;
/* Returns the length or SKY_ERANGE / SKY_EINVAL (bad job id). */
int sky_slice_req_encode(const sky_slice_req *r, char *buf, size_t cap);
/* Returns 0 or SKY_ERANGE / SKY_EFORMAT / SKY_EINVAL naming the field. */
int sky_slice_req_decode(const char *buf, size_t len, sky_slice_req *r, sky_diag *d);

#endif
