/* What the processor and the machine offer: feature flags for kernel
 * dispatch, core count, memory the OS says is available, and names for
 * benchmark records. */
#ifndef SKY_CPU_H
#define SKY_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef struct sky_cpu_features {
	unsigned avx2 : 1;       /* x86: AVX2 + FMA */
	unsigned avx512 : 1;     /* x86: AVX-512 F + BW + VL */
	unsigned avx512vnni : 1; /* x86: AVX-512 VNNI (vpdpbusd) */
	unsigned amx : 1;        /* x86: AMX-TILE + AMX-INT8, OS-enabled, permission granted
				  * (implies avx512vnni: its kernels' epilogue is AVX-512) */
	unsigned neon : 1;       /* aarch64: Advanced SIMD (always on aarch64) */
	unsigned dotprod : 1;    /* aarch64: sdot/udot (Armv8.2 DotProd) */
	unsigned crc32c : 1;     /* x86: SSE4.2 crc32 instruction; aarch64: CRC32 extension
				  * (crc32c{b,h,w,x}); used by runtime/wire/sky_crc32c.h */
	unsigned aesgcm : 1;     /* x86: AES-NI + PCLMULQDQ + SSSE3 + SSE4.1; aarch64: AES +
				  * PMULL (Armv8 Crypto Extension); for sealed frames
				  * (runtime/wire/aesgcm_internal.h) */
} sky_cpu_features;

/* What identifies a core's microarchitecture, enough to say which BLAS
 * kernels suit it and what its fp32 peak is (runtime/sky_blas_core.h). A
 * test may fill one in by hand for a CPU it does not run on. */
typedef struct sky_cpu_desc {
	int x86;              /* 1: x86_64, 0: aarch64 */
	int amd;              /* x86: AuthenticAMD (0: GenuineIntel or other) */
	int family, model;    /* x86: display family and model (cpuid leaf 1) */
	unsigned avx2 : 1;    /* x86: AVX2 + FMA, OS-enabled */
	unsigned avx512 : 1;  /* x86: AVX-512 F + BW + VL + DQ + CD, OS-enabled */
	unsigned bf16 : 1;    /* x86: AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4+) */
	unsigned arm_implementer; /* aarch64: MIDR_EL1 implementer (0x41 Arm Ltd) */
	unsigned arm_part;    /* aarch64: MIDR_EL1 part number (0xd08 Cortex-A72, 0xd0b A76) */
	double mhz;           /* clock: what the OS reports, else measured (0: unknown) */
	char mhz_from[16];    /* where mhz came from: "cpuinfo" (/proc/cpuinfo "cpu MHz"),
				 "cpufreq" (cpuinfo_max_freq), "measured" (a chain of
				 dependent adds, one a cycle, timed), "" unknown */
} sky_cpu_desc;

/* Describes the CPU this process runs on (no SKY_CPU_DISABLE masking: this
 * is what the hardware is, not what the kernels may use). aarch64 reads
 * MIDR_EL1, which Linux emulates for user space (HWCAP_CPUID); without it
 * the part stays 0 (unknown). */
void sky_cpu_describe(sky_cpu_desc *d);

/* Features of the CPU this process runs on (queried once, then cached).
 * SKY_CPU_DISABLE="avx512vnni,dotprod,..." masks features off, so tests and
 * benchmarks can force a slower kernel variant. */
sky_cpu_features sky_cpu_get_features(void);
/* Comma-separated names of the set features ("avx2,avx512,avx512vnni,amx,crc32c"). */
void sky_cpu_features_str(sky_cpu_features f, char *buf, size_t len);
/* "x86_64" or "aarch64" (the build's architecture). */
const char *sky_cpu_arch(void);
/* CPU model name from the OS, or "unknown". */
void sky_cpu_model(char *buf, size_t len);
/* Online logical CPUs (>= 1). */
int sky_cpu_count(void);
/* MemAvailable from the OS in bytes, or 0 if unknown. */
uint64_t sky_mem_available(void);
/* Host name into buf (truncated, always terminated). */
void sky_host_name(char *buf, size_t len);

#endif
