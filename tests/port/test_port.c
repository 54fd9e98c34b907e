#include "sky_test.h"
#include "sky_thread.h"

#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_rng.h"

#include <stdlib.h>
#include <string.h>

SKY_TEST(clock_is_monotonic)
{
	uint64_t a = sky_clock_ns();
	sky_sleep_ms(2);
	uint64_t b = sky_clock_ns();
	SKY_EXPECT(b >= a + 2000000u);
	char iso[32];
	sky_clock_utc_iso(iso, sizeof iso);
	SKY_EXPECT_EQ(strlen(iso), 24);
	SKY_EXPECT(iso[23] == 'Z');
}

SKY_TEST(rng_is_deterministic_and_uniform)
{
	sky_rng a, b;
	sky_rng_seed(&a, 42);
	sky_rng_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		SKY_EXPECT(sky_rng_u64(&a) == sky_rng_u64(&b));
	/* a value fixed by the algorithm: same on every machine */
	sky_rng_seed(&a, 1);
	SKY_EXPECT(sky_rng_u64(&a) == 0xb3f2af6d0fc710c5ull);
	double sum = 0, sq = 0;
	int counts[10] = {0};
	for (int i = 0; i < 100000; i++) {
		float n = sky_rng_normal(&a);
		sum += n;
		sq += (double)n * n;
		counts[sky_rng_below(&a, 10)]++;
		float u = sky_rng_uniform(&a);
		SKY_EXPECT(u >= 0.0f && u < 1.0f);
	}
	SKY_EXPECT_NEAR(sum / 1e5, 0.0, 0.02);
	SKY_EXPECT_NEAR(sq / 1e5, 1.0, 0.02);
	for (int i = 0; i < 10; i++)
		SKY_EXPECT(counts[i] > 9500 && counts[i] < 10500);
}

SKY_TEST(file_write_read_map)
{
	char path[300];
	snprintf(path, sizeof path, "%s/a/b/key.pem", sky_test_tmp_dir());
	char dir[300];
	snprintf(dir, sizeof dir, "%s/a/b", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_file_mkdirs(dir, 0700), 0);
	SKY_EXPECT_EQ(sky_file_write(path, "secret", 6, 0600), 0);
	SKY_EXPECT_EQ(sky_file_mode(path), 0600);
	char buf[16];
	SKY_EXPECT_EQ(sky_file_read(path, buf, sizeof buf), 6);
	SKY_EXPECT(memcmp(buf, "secret", 6) == 0);
	SKY_EXPECT_EQ(sky_file_read(path, buf, 3), SKY_ERANGE);
	sky_file_map m;
	SKY_EXPECT_EQ(sky_file_map_open(&m, path), 0);
	SKY_EXPECT(m.size == 6 && memcmp(m.data, "secret", 6) == 0);
	sky_file_map_close(&m);
	sky_file_map_close(&m); /* twice is fine */
	SKY_EXPECT_EQ(sky_file_map_open(&m, "/nonexistent/sky"), SKY_ENOTFOUND);
	SKY_EXPECT_EQ(sky_file_read("/nonexistent/sky", buf, 1), SKY_ENOTFOUND);
}

SKY_TEST(cpu_facts)
{
	SKY_EXPECT(sky_cpu_count() >= 1);
	SKY_EXPECT(sky_mem_available() > 0);
	sky_cpu_features f = sky_cpu_get_features();
#if defined(__aarch64__)
	SKY_EXPECT(f.neon);
	SKY_EXPECT(!f.avx2);
#else
	SKY_EXPECT(!f.neon && !f.dotprod);
#endif
	char s[64];
	sky_cpu_features_str(f, s, sizeof s);
	SKY_EXPECT(s[strlen(s) > 0 ? strlen(s) - 1 : 0] != ',');
}

SKY_TEST(errors_have_words)
{
	SKY_EXPECT(strcmp(sky_strerror(SKY_ENOMEM), "out of planned memory") == 0);
	SKY_EXPECT(sky_strerror(-999) != NULL);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_diag_set(&d, SKY_EFORMAT, "tensor %s", "x"), SKY_EFORMAT);
	sky_diag_set(&d, SKY_EIO, "later");
	SKY_EXPECT(strcmp(d.msg, "tensor x") == 0); /* the first cause is kept */
	SKY_EXPECT_EQ(sky_diag_set(NULL, SKY_EIO, "x"), SKY_EIO);
}

static int g_outer_flag, g_inner_flag, g_outer_runs, g_inner_runs;
static void inner_once(void) { g_inner_runs++; }
static void outer_once(void)
{
	g_outer_runs++;
	sky_once(&g_inner_flag, inner_once); /* nested, another flag: must not deadlock */
}

SKY_TEST(once_runs_once_and_nests)
{
	sky_once(&g_outer_flag, outer_once);
	sky_once(&g_outer_flag, outer_once);
	sky_once(&g_inner_flag, inner_once);
	SKY_EXPECT_EQ(g_outer_runs, 1);
	SKY_EXPECT_EQ(g_inner_runs, 1);
}
