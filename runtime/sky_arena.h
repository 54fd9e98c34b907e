/* The arena: the only memory a board uses for a job.
 *
 * Memory is planned, not found. A caller first runs its carving code against
 * a measuring arena (buf == NULL), which hands out nothing but adds up what
 * each lifetime class needs; then allocates that many bytes once, carves the
 * same way into the real arena, and seals it. After sky_arena_seal() an
 * allocation fails with SKY_ENOMEM instead of growing.
 *
 * Carving code never checks each pointer: the arena keeps the first failure
 * (sticky, like a stream error) and the caller checks sky_arena_status()
 * once after carving. Every block is 64-byte aligned (a cache line, and the
 * widest SIMD load). */
#ifndef SKY_ARENA_H
#define SKY_ARENA_H

#include <stddef.h>

#define SKY_ARENA_ALIGN 64

typedef enum {
	SKY_LIFE_PERSIST, /* weights, gradients, optimizer state */
	SKY_LIFE_ACT,     /* activations kept for backward, per micro-batch in flight */
	SKY_LIFE_SCRATCH, /* reused between ops within a step */
	SKY_LIFE_COUNT
} sky_life;

typedef struct sky_arena {
	unsigned char *base; /* NULL: measuring */
	size_t size;
	size_t used;
	size_t by_life[SKY_LIFE_COUNT]; /* bytes handed out per lifetime class */
	int sealed;
	int status; /* 0, or the first failure */
} sky_arena;

/* buf may be NULL (measuring arena: counts, hands out NULL). Cannot fail. */
void sky_arena_init(sky_arena *a, void *buf, size_t size);
/* Returns a 64-byte aligned block, or NULL when measuring or on failure
 * (no room: SKY_ENOMEM; after seal: SKY_ENOMEM, logged). */
void *sky_arena_alloc(sky_arena *a, size_t bytes, sky_life life);
/* Same, for n floats. */
float *sky_arena_floats(sky_arena *a, size_t n, sky_life life);
/* No allocation succeeds afterwards. Returns the arena's status. */
int sky_arena_seal(sky_arena *a);
/* 0 while every allocation so far succeeded, else the first error code. */
int sky_arena_status(const sky_arena *a);
/* Bytes handed out (with alignment padding), or needed when measuring. */
size_t sky_arena_used(const sky_arena *a);
/* Bytes needed to hold everything a measuring arena was asked for, plus
 * slack for aligning the buffer itself. */
size_t sky_arena_required(const sky_arena *a);

#endif
