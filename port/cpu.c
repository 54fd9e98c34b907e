#define _GNU_SOURCE
#include "sky_cpu.h"

#include "sky_thread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
/* Linux arch/x86 uapi prctl.h and fpu/xstate.h: a process must ask for the
 * AMX tile data state before its first tile instruction (else SIGILL). */
#define SKY_ARCH_REQ_XCOMP_PERM 0x1023
#define SKY_XFEATURE_XTILEDATA 18
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20) /* Linux arch/arm64 uapi hwcap.h */
#endif
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7) /* Linux arch/arm64 uapi hwcap.h */
#endif
#ifndef HWCAP_AES
#define HWCAP_AES (1 << 3)
#endif
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1 << 4)
#endif
#ifndef HWCAP_CPUID
#define HWCAP_CPUID (1 << 11) /* MIDR_EL1 readable from EL0 (kernel-emulated) */
#endif
#endif

static int has_name(const char *tok, size_t n, const char *name)
{
	return strlen(name) == n && strncmp(tok, name, n) == 0;
}

static sky_cpu_features query(void)
{
	sky_cpu_features f = {0};
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (__get_cpuid_count(1, 0, &a, &b, &c, &d)) {
		int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1;
		f.crc32c = (c >> 20) & 1; /* SSE4.2 */
		/* AES-NI (25), PCLMULQDQ (1), SSSE3 (9), SSE4.1 (19) */
		f.aesgcm = ((c >> 25) & 1) && ((c >> 1) & 1) && ((c >> 9) & 1) && ((c >> 19) & 1);
		unsigned long long xcr0 = 0;
		if (osxsave) {
			unsigned lo, hi;
			__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
			xcr0 = ((unsigned long long)hi << 32) | lo;
		}
		int ymm_ok = (xcr0 & 0x6) == 0x6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
		int tile_ok = (xcr0 & 0x60000) == 0x60000; /* XTILECFG (17), XTILEDATA (18) */
		if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
			f.avx2 = ymm_ok && fma && ((b >> 5) & 1);
			f.avx512 = zmm_ok && ((b >> 16) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
			f.avx512vnni = f.avx512 && ((c >> 11) & 1);
			/* AMX-TILE (edx 24), AMX-INT8 (edx 25); the permission is asked below */
			f.amx = f.avx512vnni && tile_ok && ((d >> 24) & 1) && ((d >> 25) & 1);
		}
	}
#elif defined(__aarch64__)
	unsigned long hw = getauxval(AT_HWCAP);
	f.neon = 1;
	f.dotprod = (hw & HWCAP_ASIMDDP) != 0;
	f.crc32c = (hw & HWCAP_CRC32) != 0;
	f.aesgcm = (hw & HWCAP_AES) && (hw & HWCAP_PMULL);
#endif
	const char *off = getenv("SKY_CPU_DISABLE");
	while (off && *off) {
		size_t n = strcspn(off, ",");
		if (has_name(off, n, "avx2"))
			f.avx2 = f.avx512 = f.avx512vnni = f.amx = 0;
		if (has_name(off, n, "avx512"))
			f.avx512 = f.avx512vnni = f.amx = 0;
		if (has_name(off, n, "avx512vnni"))
			f.avx512vnni = f.amx = 0;
		if (has_name(off, n, "amx"))
			f.amx = 0;
		if (has_name(off, n, "neon"))
			f.neon = f.dotprod = 0;
		if (has_name(off, n, "dotprod"))
			f.dotprod = 0;
		if (has_name(off, n, "crc32c"))
			f.crc32c = 0;
		if (has_name(off, n, "aesgcm"))
			f.aesgcm = 0;
		off += n + (off[n] == ',');
	}
#if defined(__x86_64__)
	/* asked only when the feature is wanted: the grant is for the whole
	 * process and makes its signal frames larger */
	if (f.amx && syscall(SYS_arch_prctl, SKY_ARCH_REQ_XCOMP_PERM, SKY_XFEATURE_XTILEDATA) != 0)
		f.amx = 0;
#endif
	return f;
}

static int g_features_once;
static sky_cpu_features g_features; /* written once, under sky_once */

static void features_init(void) { g_features = query(); }

sky_cpu_features sky_cpu_get_features(void)
{
	/* kernels on any thread may ask first; sky_once makes the others wait
	 * for the one query (and the one AMX permission request) */
	sky_once(&g_features_once, features_init);
	return g_features;
}

void sky_cpu_features_str(sky_cpu_features f, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s%s%s%s%s%s", f.avx2 ? "avx2," : "", f.avx512 ? "avx512," : "",
		 f.avx512vnni ? "avx512vnni," : "", f.amx ? "amx," : "", f.neon ? "neon," : "",
		 f.dotprod ? "dotprod," : "", f.crc32c ? "crc32c," : "", f.aesgcm ? "aesgcm," : "");
	size_t n = strlen(buf);
	if (n > 0)
		buf[n - 1] = '\0';
}

const char *sky_cpu_arch(void)
{
#if defined(__x86_64__)
	return "x86_64";
#elif defined(__aarch64__)
	return "aarch64";
#else
	return "unknown";
#endif
}

void sky_cpu_model(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	FILE *fp = fopen("/proc/cpuinfo", "r");
	if (!fp)
		return;
	char line[512];
	while (fgets(line, sizeof line, fp)) {
		/* x86 says "model name", arm64 kernels say "CPU part" at best */
		if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
			char *colon = strchr(line, ':');
			if (colon) {
				colon++;
				while (*colon == ' ' || *colon == '\t')
					colon++;
				colon[strcspn(colon, "\n")] = '\0';
				snprintf(buf, len, "%s", colon);
				break;
			}
		}
	}
	fclose(fp);
}

int sky_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

uint64_t sky_mem_available(void)
{
	FILE *fp = fopen("/proc/meminfo", "r");
	if (!fp)
		return 0;
	char line[256];
	uint64_t kb = 0;
	while (fgets(line, sizeof line, fp)) {
		if (sscanf(line, "MemAvailable: %llu kB", (unsigned long long *)&kb) == 1)
			break;
	}
	fclose(fp);
	return kb * 1024u;
}

void sky_host_name(char *buf, size_t len)
{
	if (gethostname(buf, len) != 0)
		snprintf(buf, len, "unknown");
	buf[len - 1] = '\0';
}

/* The clock measured: 64 dependent integer adds a round, which every
 * x86_64 and Armv8 core of the last decade retires at one a cycle (an
 * add's latency is one cycle), timed (2.56 M adds, under 1 ms at 3 GHz); the best of five
 * tries (the others may have been descheduled). 0 where there is no such
 * chain to build (another architecture). Under an emulator it measures the
 * emulator, which is what a board there runs at. */
static double g_measured_mhz; /* written once under g_measured_once */
static int g_measured_once;

static void measure_mhz(void)
{
#if defined(__x86_64__) || defined(__aarch64__)
	double best = 0;
	for (int t = 0; t < 5; t++) {
		unsigned long x = 0;
		const long rounds = 40000;
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long r = 0; r < rounds; r++) {
#if defined(__x86_64__)
#define ADD8 "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t" \
	     "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
#else
#define ADD8 "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\t" \
	     "add %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\tadd %0, %0, #1\n\t"
#endif
			__asm__ volatile(ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 : "+r"(x));
#undef ADD8
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
		double mhz = s > 0 && x == 64ul * rounds ? 64.0 * rounds / s / 1e6 : 0;
		best = mhz > best ? mhz : best;
	}
	g_measured_mhz = best;
#endif
}

static double measured_mhz(void)
{
	sky_once(&g_measured_once, measure_mhz);
	return g_measured_mhz;
}

/* The clock: the higher of what the OS says ("cpu MHz" in /proc/cpuinfo,
 * else cpufreq's maximum) and the one measured. The OS's is often the
 * nominal clock (a VM's /proc/cpuinfo, the TSC's rate) while the core
 * runs boosted: on this project's EPYC, 2596 MHz reported and ~3700
 * measured, and a peak from the nominal clock read sgemm at 1.1 of it.
 * from says which. */
static double cpu_mhz(char *from, size_t cap)
{
	double mhz = 0;
	const char *src = "";
	FILE *fp = fopen("/proc/cpuinfo", "r");
	if (fp) {
		char line[256];
		while (mhz <= 0 && fgets(line, sizeof line, fp))
			if (sscanf(line, "cpu MHz : %lf", &mhz) != 1)
				mhz = 0;
		fclose(fp);
		src = mhz > 0 ? "cpuinfo" : src;
	}
	if (!(mhz > 0) && (fp = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r"))) {
		long khz = 0;
		if (fscanf(fp, "%ld", &khz) == 1 && khz > 0)
			mhz = (double)khz / 1000.0, src = "cpufreq";
		fclose(fp);
	}
	double m = measured_mhz();
	if (m > mhz)
		mhz = m, src = "measured";
	snprintf(from, cap, "%s", src);
	return mhz;
}

#if defined(__x86_64__)
static void describe_x86(sky_cpu_desc *d)
{
	unsigned a, b, c, e;
	d->x86 = 1;
	if (__get_cpuid(0, &a, &b, &c, &e))
		d->amd = b == 0x68747541; /* "Auth" of AuthenticAMD */
	if (!__get_cpuid_count(1, 0, &a, &b, &c, &e))
		return;
	unsigned fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
	if (fam == 0xf)
		fam += (a >> 20) & 0xff;
	if (fam == 0x6 || fam >= 0xf)
		mod |= ((a >> 16) & 0xf) << 4;
	d->family = (int)fam;
	d->model = (int)mod;
	int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1;
	unsigned long long xcr0 = 0;
	if (osxsave) {
		unsigned lo, hi;
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
		xcr0 = ((unsigned long long)hi << 32) | lo;
	}
	if (__get_cpuid_count(7, 0, &a, &b, &c, &e)) {
		d->avx2 = (xcr0 & 0x6) == 0x6 && fma && ((b >> 5) & 1);
		/* F (16), DQ (17), CD (28), BW (30), VL (31): what OpenBLAS's
		 * SkylakeX kernels use */
		d->avx512 = (xcr0 & 0xe6) == 0xe6 && ((b >> 16) & 1) && ((b >> 17) & 1) &&
			    ((b >> 28) & 1) && ((b >> 30) & 1) && ((b >> 31) & 1);
	}
	if (d->avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &e))
		d->bf16 = (a >> 5) & 1;
}
#endif

void sky_cpu_describe(sky_cpu_desc *d)
{
	memset(d, 0, sizeof *d);
#if defined(__x86_64__)
	describe_x86(d);
#elif defined(__aarch64__)
	if (getauxval(AT_HWCAP) & HWCAP_CPUID) {
		unsigned long midr;
		__asm__ volatile("mrs %0, MIDR_EL1" : "=r"(midr));
		d->arm_implementer = (unsigned)(midr >> 24) & 0xff;
		d->arm_part = (unsigned)(midr >> 4) & 0xfff;
	}
#endif
	d->mhz = cpu_mhz(d->mhz_from, sizeof d->mhz_from);
}
