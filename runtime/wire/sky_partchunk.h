/* A trained part too big for one message. A stage's part (its tensors as
 * a safetensors image) normally goes whole, retained on
 * sky/v1/job/<job>/part/<board>. Over the message limit (a data owner's
 * part with a 30,522-entry vocabulary's embeddings is 38 MB at hidden 256)
 * the board cuts it into hashed chunks (sky_chunk.h, kind SKY_CHUNK_PART,
 * SKY_PART_CHUNK_BYTES each) and retains chunk i on
 * sky/v1/job/<job>/part/<board>/<i>: retained, so a collector that comes
 * after the job ended still finds every chunk, as it finds a whole part.
 * The ACL lets only <board> write under part/<board>/; skyplan checks each
 * chunk (sky_partchunk_check) before it relays it to the job's owner, and
 * the collector rebuilds the image (sky_part_rx) and takes it only when
 * its SHA-256 is the one every chunk named. */
#ifndef SKY_PARTCHUNK_H
#define SKY_PARTCHUNK_H

#include "sky_chunk.h"
#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

/* sky_topics.h sizes a part chunk's topic with these figures */
_Static_assert(SKY_CHUNK_MAX_BYTES == 96u + (4u << 20), "part chunk size in sky_topics.h");

#define SKY_PART_CHUNK_BYTES SKY_CHUNK_MAX_PAYLOAD /* 4 MiB */
#define SKY_PART_MAX_BYTES (1ull << 30)           /* largest part sent in chunks */
#define SKY_PART_MAX_CHUNKS ((uint32_t)(SKY_PART_MAX_BYTES / SKY_PART_CHUNK_BYTES))

/* The chunk index a topic's last level names: decimal, no leading zero,
 * below SKY_PART_MAX_CHUNKS. Returns 0 or SKY_EINVAL. */
int sky_partchunk_index(const char *seg, uint32_t *index);

/* Decodes buf (sky_chunk_decode: layout and payload hash) and checks it is
 * a part's chunk as a board sends one: kind SKY_CHUNK_PART, chunks of
 * SKY_PART_CHUNK_BYTES, a part of at most SKY_PART_MAX_BYTES, and the
 * index its topic names. Returns 0 with c filled, or SKY_E* with d saying
 * what is wrong. */
int sky_partchunk_check(const unsigned char *buf, size_t len, uint32_t topic_index, sky_chunk *c,
			sky_diag *d);

/* One part being rebuilt from its chunks, in any order (retained messages
 * come in no fixed one). The buffer is the heap's: a collector's. */
typedef struct sky_part_rx {
	unsigned char sha[32]; /* the whole part's, as its chunks name it */
	uint64_t bytes;
	uint32_t total, got;
	unsigned char *buf;  /* bytes */
	unsigned char *have; /* total flags */
} sky_part_rx;

void sky_part_rx_init(sky_part_rx *rx);
void sky_part_rx_free(sky_part_rx *rx);
/* 1 when rx is rebuilding the part c is a chunk of (same SHA-256 and size). */
int sky_part_rx_same(const sky_part_rx *rx, const sky_chunk *c);
/* Takes one checked chunk (sky_partchunk_check) of rx's part, or of a new
 * one when rx is empty. Returns 1 when the part is whole and hashes to the
 * SHA-256 its chunks name (rx->buf holds it), 0 when chunks are missing (a
 * chunk seen before is taken again harmlessly), or SKY_EINVAL (a chunk of
 * another part), SKY_ENOMEM, SKY_EAUTH (whole, but another hash: rx is
 * emptied) with d saying what. */
int sky_part_rx_take(sky_part_rx *rx, const sky_chunk *c, sky_diag *d);
/* Hands the whole part's buffer over (the caller frees it) and empties rx. */
unsigned char *sky_part_rx_release(sky_part_rx *rx, size_t *len);

#endif
