/* Sky's test runner: SKY_TEST(name) { SKY_EXPECT(cond); }
 *
 * Each tests/<area>/test_<module>.c links into its own binary with
 * tests/sky_test.c, which runs every test in the file (or those named on the
 * command line), prints "PASS name" or "FAIL name: file:line: what", and ends
 * with "N passed, N failed". tests/run.sh adds up the binaries.
 *
 * Test binaries are linked with -Wl,--wrap for malloc, calloc, realloc and
 * free, so sky_test_allocs() counts calls made from Sky's own code (not from
 * shared libraries such as OpenBLAS); sky_test_heap_allocs() counts every
 * allocation in the process, shared libraries included. */
#ifndef SKY_TEST_H
#define SKY_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

typedef void (*sky_test_fn)(void);
void sky_test_register(const char *name, sky_test_fn fn);
void sky_test_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Number of malloc/calloc/realloc/free calls from Sky's code so far. */
unsigned long sky_test_allocs(void);
/* Number of heap allocations (malloc, calloc, realloc) made so far by
 * anything in the process: Sky, shared libraries such as libcjson and
 * Mbed TLS, libc itself, and other threads. The aligned variants
 * (posix_memalign, aligned_alloc) are counted only under a sanitizer. */
unsigned long sky_test_heap_allocs(void);
/* Directory holding committed test data ("tests/data"), from SKY_TEST_DATA
 * or relative to the working directory. */
const char *sky_test_data_dir(void);
/* A fresh empty directory under $TMPDIR for this test binary. */
const char *sky_test_tmp_dir(void);

#define SKY_TEST(name) \
	static void name(void); \
	__attribute__((constructor)) static void name##_register(void) \
	{ \
		sky_test_register(#name, name); \
	} \
	static void name(void)

#define SKY_EXPECT(cond) \
	do { \
		if (!(cond)) \
			sky_test_fail(__FILE__, __LINE__, "%s", #cond); \
	} while (0)

#define SKY_EXPECT_MSG(cond, ...) \
	do { \
		if (!(cond)) \
			sky_test_fail(__FILE__, __LINE__, __VA_ARGS__); \
	} while (0)

#define SKY_EXPECT_EQ(a, b) \
	do { \
		long long sky_a_ = (long long)(a), sky_b_ = (long long)(b); \
		if (sky_a_ != sky_b_) \
			sky_test_fail(__FILE__, __LINE__, "%s == %s (%lld vs %lld)", #a, #b, sky_a_, \
				      sky_b_); \
	} while (0)

/* |a - b| <= tol */
#define SKY_EXPECT_NEAR(a, b, tol) \
	do { \
		double sky_a_ = (double)(a), sky_b_ = (double)(b); \
		if (!(fabs(sky_a_ - sky_b_) <= (double)(tol))) \
			sky_test_fail(__FILE__, __LINE__, "%s ~ %s (%.9g vs %.9g, tol %g)", #a, #b, \
				      sky_a_, sky_b_, (double)(tol)); \
	} while (0)

#endif
