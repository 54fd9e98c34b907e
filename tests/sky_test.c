#define _GNU_SOURCE
#include "sky_test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TESTS 512

static struct {
	const char *name;
	sky_test_fn fn;
} g_tests[MAX_TESTS];
static int g_count;
static int g_failed_now;
static unsigned long g_allocs;
static char g_tmp[256]; /* made on first use, removed at exit */

void sky_test_register(const char *name, sky_test_fn fn)
{
	if (g_count < MAX_TESTS) {
		g_tests[g_count].name = name;
		g_tests[g_count].fn = fn;
		g_count++;
	}
}

void sky_test_fail(const char *file, int line, const char *fmt, ...)
{
	if (g_failed_now < 5) { /* the first few say enough */
		va_list ap;
		va_start(ap, fmt);
		fprintf(stdout, "  %s:%d: ", file, line);
		vfprintf(stdout, fmt, ap);
		fputc('\n', stdout);
		va_end(ap);
	}
	g_failed_now++;
}

/* link-time wrappers: count allocator calls from objects linked with --wrap */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n)
{
	g_allocs++;
	return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
	g_allocs++;
	return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
	g_allocs++;
	return __real_realloc(p, n);
}
void __wrap_free(void *p)
{
	if (p)
		g_allocs++;
	__real_free(p);
}
unsigned long sky_test_allocs(void) { return g_allocs; }

/* Every allocation in the process, shared libraries included (--wrap
 * above sees only calls from objects linked into the test, never from
 * libcjson, libmbedcrypto or libc itself). Without a sanitizer the test
 * binary defines malloc, calloc and realloc itself: the dynamic linker
 * binds every library's calls to the executable's definition first (glibc
 * supports replacing malloc this way), and they forward to glibc's. A
 * sanitizer owns malloc, so there its allocation hook counts instead. */
static _Atomic unsigned long g_heap_allocs;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) /* GCC */
#define SKY_TEST_SANITIZER 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SKY_TEST_SANITIZER 1
#endif
#endif
#ifdef SKY_TEST_SANITIZER
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t),
					      void (*f)(const volatile void *));
static void count_alloc(const volatile void *p, size_t n)
{
	(void)p, (void)n;
	g_heap_allocs++;
}
static void count_free(const volatile void *p) { (void)p; }
__attribute__((constructor)) static void install_heap_hook(void)
{
	/* both hooks, or the runtime installs neither */
	if (!__sanitizer_install_malloc_and_free_hooks(count_alloc, count_free)) {
		fprintf(stderr, "sky_test: could not install the sanitizer's allocation hook\n");
		exit(2);
	}
}
#else
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void *malloc(size_t n)
{
	g_heap_allocs++;
	return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
	g_heap_allocs++;
	return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
	g_heap_allocs++;
	return __libc_realloc(p, n);
}
#endif
unsigned long sky_test_heap_allocs(void) { return g_heap_allocs; }

const char *sky_test_data_dir(void)
{
	const char *d = getenv("SKY_TEST_DATA");
	return d ? d : "tests/data";
}

const char *sky_test_tmp_dir(void)
{
	if (!g_tmp[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(g_tmp, sizeof g_tmp, "%s/skytest.XXXXXX", t ? t : "/tmp");
		if (!mkdtemp(g_tmp)) {
			perror("mkdtemp");
			exit(2);
		}
	}
	return g_tmp;
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < g_count; i++) {
		if (argc > 1) {
			int wanted = 0;
			for (int a = 1; a < argc; a++)
				wanted |= strcmp(argv[a], g_tests[i].name) == 0;
			if (!wanted)
				continue;
		}
		g_failed_now = 0;
		g_tests[i].fn();
		if (g_failed_now) {
			printf("FAIL %s (%d failed expectations)\n", g_tests[i].name, g_failed_now);
			failed++;
		} else {
			printf("PASS %s\n", g_tests[i].name);
			passed++;
		}
	}
	if (g_tmp[0] && getenv("SKY_TEST_KEEP") == NULL) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g_tmp);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
