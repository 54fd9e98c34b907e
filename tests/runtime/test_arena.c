#include "sky_test.h"

#include "sky_arena.h"
#include "sky_err.h"

#include <stdint.h>
#include <stdlib.h>

static void carve(sky_arena *a, float **w, float **act, float **tmp)
{
	*w = sky_arena_floats(a, 1000, SKY_LIFE_PERSIST);
	*act = sky_arena_floats(a, 3, SKY_LIFE_ACT);
	*tmp = sky_arena_alloc(a, 1, SKY_LIFE_SCRATCH);
}

SKY_TEST(measure_then_allocate_then_seal)
{
	sky_arena m;
	float *w, *act, *tmp;
	sky_arena_init(&m, NULL, 0);
	carve(&m, &w, &act, &tmp);
	SKY_EXPECT(w == NULL && act == NULL);
	SKY_EXPECT_EQ(sky_arena_status(&m), 0);
	SKY_EXPECT_EQ(m.by_life[SKY_LIFE_PERSIST], 4032);
	SKY_EXPECT_EQ(m.by_life[SKY_LIFE_ACT], 64);
	SKY_EXPECT_EQ(m.by_life[SKY_LIFE_SCRATCH], 64);

	size_t need = sky_arena_required(&m);
	unsigned char *buf = malloc(need);
	sky_arena a;
	sky_arena_init(&a, buf + 3, need - 3); /* a misaligned buffer still works */
	carve(&a, &w, &act, &tmp);
	SKY_EXPECT_EQ(sky_arena_seal(&a), 0);
	SKY_EXPECT(w && act && tmp);
	SKY_EXPECT((uintptr_t)w % 64 == 0 && (uintptr_t)act % 64 == 0 && (uintptr_t)tmp % 64 == 0);
	SKY_EXPECT((unsigned char *)act >= (unsigned char *)(w + 1000));
	SKY_EXPECT_EQ(sky_arena_used(&a), sky_arena_used(&m));

	/* sealed: fails with an error code, never grows */
	SKY_EXPECT(sky_arena_alloc(&a, 1, SKY_LIFE_SCRATCH) == NULL);
	SKY_EXPECT_EQ(sky_arena_status(&a), SKY_ENOMEM);
	free(buf);
}

SKY_TEST(too_small_fails_and_sticks)
{
	static unsigned char buf[256] __attribute__((aligned(64)));
	sky_arena a;
	sky_arena_init(&a, buf, sizeof buf);
	SKY_EXPECT(sky_arena_alloc(&a, 150, SKY_LIFE_PERSIST) != NULL); /* 192 with padding */
	SKY_EXPECT(sky_arena_alloc(&a, 100, SKY_LIFE_PERSIST) == NULL);
	SKY_EXPECT_EQ(sky_arena_status(&a), SKY_ENOMEM);
	SKY_EXPECT(sky_arena_alloc(&a, 1, SKY_LIFE_PERSIST) != NULL); /* room left, status stays */
	SKY_EXPECT_EQ(sky_arena_seal(&a), SKY_ENOMEM);
	SKY_EXPECT(sky_arena_alloc(&a, (size_t)-1, SKY_LIFE_PERSIST) == NULL);
}
