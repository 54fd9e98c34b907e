#include "sky_arena.h"

#include "sky_err.h"
#include "sky_log.h"

#include <stdint.h>
#include <string.h>

static size_t round_up(size_t n) { return (n + SKY_ARENA_ALIGN - 1) & ~(size_t)(SKY_ARENA_ALIGN - 1); }

void sky_arena_init(sky_arena *a, void *buf, size_t size)
{
	memset(a, 0, sizeof *a);
	if (!buf)
		return;
	/* align the start so every block is aligned, whatever the caller gave */
	uintptr_t p = (uintptr_t)buf;
	size_t skip = round_up(p) - p;
	a->base = (unsigned char *)buf + (skip <= size ? skip : size);
	a->size = skip <= size ? size - skip : 0;
}

void *sky_arena_alloc(sky_arena *a, size_t bytes, sky_life life)
{
	if (a->sealed) {
		if (a->status == 0)
			SKY_ERROR("arena: allocation of %zu bytes after seal refused", bytes);
		a->status = a->status ? a->status : SKY_ENOMEM;
		return NULL;
	}
	size_t n = round_up(bytes ? bytes : 1);
	if (n < bytes) { /* wrapped */
		a->status = a->status ? a->status : SKY_ENOMEM;
		return NULL;
	}
	if ((unsigned)life < SKY_LIFE_COUNT)
		a->by_life[life] += n;
	if (!a->base) {
		a->used += n;
		return NULL;
	}
	if (n > a->size - a->used) {
		a->status = a->status ? a->status : SKY_ENOMEM;
		return NULL;
	}
	void *p = a->base + a->used;
	a->used += n;
	return p;
}

float *sky_arena_floats(sky_arena *a, size_t n, sky_life life)
{
	if (n > SIZE_MAX / sizeof(float)) {
		a->status = a->status ? a->status : SKY_ENOMEM;
		return NULL;
	}
	return sky_arena_alloc(a, n * sizeof(float), life);
}

int sky_arena_seal(sky_arena *a)
{
	a->sealed = 1;
	return a->status;
}

int sky_arena_status(const sky_arena *a) { return a->status; }
size_t sky_arena_used(const sky_arena *a) { return a->used; }
size_t sky_arena_required(const sky_arena *a) { return a->used + SKY_ARENA_ALIGN; }
