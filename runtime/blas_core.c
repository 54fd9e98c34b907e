/* The OpenBLAS core check (sky_blas_core.h). */
#include "sky_blas_core.h"

#include "sky_log.h"
#include "sky_proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *openblas_get_corename(void);

typedef struct core_name {
	const char *name; /* as OPENBLAS_CORETYPE takes it */
	int rank;
} core_name;

/* x86 and aarch64 cores of OpenBLAS 0.3.21's DYNAMIC_ARCH builds (Debian's),
 * ranked by the widest vectors their sgemm kernels use; cores of one rank
 * run alike. */
static const core_name k_cores[] = {
	{"Prescott", 0},   {"Core2", 0},      {"Penryn", 0},     {"Dunnington", 0},
	{"Nehalem", 1},    {"Opteron", 0},    {"Barcelona", 1},  {"Bobcat", 1},
	{"Atom", 0},       {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2},
	{"Steamroller", 2}, {"Excavator", 3}, {"Haswell", 3},    {"Zen", 3},
	{"SkylakeX", 4},   {"Cooperlake", 5},
	{"ARMV8", 0},      {"CORTEXA53", 1},  {"CORTEXA55", 1},  {"CORTEXA57", 2},
	{"CORTEXA72", 2},  {"CORTEXA73", 2},  {"NEOVERSEN1", 3}, {"NEOVERSEV1", 4},
	{"NEOVERSEN2", 4},
};
#define N_CORES (sizeof k_cores / sizeof k_cores[0])

static int same_name(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
		char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
		if (x != y)
			return 0;
	}
	return *a == *b;
}

int sky_blas_core_rank(const char *name)
{
	for (size_t i = 0; name && i < N_CORES; i++)
		if (same_name(name, k_cores[i].name))
			return k_cores[i].rank;
	return -1;
}

/* Arm Ltd parts (MIDR_EL1 implementer 0x41) and the core OpenBLAS tunes for
 * them; 0.3.21 has no Cortex-A76 entry, and its Neoverse N1 is the same
 * microarchitecture (N1 was derived from A76). */
static const struct {
	unsigned part;
	const char *core;
} k_arm[] = {
	{0xd03, "CORTEXA53"}, {0xd05, "CORTEXA55"},  {0xd07, "CORTEXA57"},
	{0xd08, "CORTEXA72"}, {0xd09, "CORTEXA73"},  {0xd0b, "NEOVERSEN1"},
	{0xd0c, "NEOVERSEN1"}, {0xd40, "NEOVERSEV1"}, {0xd49, "NEOVERSEN2"},
};

const char *sky_blas_core_for(const sky_cpu_desc *d)
{
	if (d->x86) {
		if (d->avx512)
			return d->bf16 ? "Cooperlake" : "SkylakeX";
		if (d->avx2)
			return d->amd ? "Zen" : "Haswell";
		return "Prescott";
	}
	if (d->arm_implementer == 0x41)
		for (size_t i = 0; i < sizeof k_arm / sizeof k_arm[0]; i++)
			if (k_arm[i].part == d->arm_part)
				return k_arm[i].core;
	return "ARMV8";
}

/* The FMA pipes and fp32 lanes per pipe of the described core. */
static void fma_units(const sky_cpu_desc *d, int *pipes, int *lanes)
{
	*pipes = 2, *lanes = 4; /* two 128-bit FMA pipes: SSE cores, Cortex-A72/A76/N1 */
	if (d->x86) {
		if (d->avx512)
			/* Zen 4 (family 0x19) runs 512-bit FMAs on 256-bit pipes;
			 * Intel's AVX-512 Xeons and Zen 5 have full-width ones */
			*lanes = d->amd && d->family < 0x1a ? 8 : 16;
		else if (d->avx2)
			*lanes = 8;
	} else if (d->arm_implementer == 0x41 && (d->arm_part == 0xd03 || d->arm_part == 0xd05)) {
		*pipes = 1; /* Cortex-A53/A55: one 128-bit FMA a cycle */
	}
}

double sky_cpu_peak_gflops(const sky_cpu_desc *d)
{
	int pipes, lanes;
	fma_units(d, &pipes, &lanes);
	return d->mhz / 1000.0 * pipes * lanes * 2;
}

void sky_cpu_peak_explain(const sky_cpu_desc *d, int threads, char *buf, size_t cap)
{
	int pipes, lanes;
	fma_units(d, &pipes, &lanes);
	if (!(d->mhz > 0)) {
		snprintf(buf, cap, "unknown: no clock (neither /proc/cpuinfo, cpufreq nor a measurement)");
		return;
	}
	snprintf(buf, cap, "%d FMA pipe%s x %d fp32 lanes x 2 flops x %.0f MHz (%s) x %d thread%s",
		 pipes, pipes == 1 ? "" : "s", lanes, d->mhz, d->mhz_from[0] ? d->mhz_from : "given",
		 threads, threads == 1 ? "" : "s");
}

const char *sky_blas_core_running(void)
{
	const char *c = openblas_get_corename();
	return c ? c : "unknown";
}

static char g_picked[32]; /* OpenBLAS's own pick, when Sky re-executed with a better one */

void sky_blas_core_ensure(char **argv)
{
	const char *picked = getenv("SKY_BLAS_PICKED");
	if (picked) { /* this process is the re-execution */
		snprintf(g_picked, sizeof g_picked, "%s", picked);
		unsetenv("SKY_BLAS_PICKED"); /* a child program checks for itself */
		sky_log(SKY_LOG_INFO, "OpenBLAS picked the %s kernels for this CPU; running %s "
				      "instead (OPENBLAS_CORETYPE set by Sky)",
			g_picked, sky_blas_core_running());
		return;
	}
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	const char *best = sky_blas_core_for(&d);
	const char *have = getenv("SKY_BLAS_PICK_AS");
	if (!have || !*have)
		have = sky_blas_core_running();
	int r_have = sky_blas_core_rank(have), r_best = sky_blas_core_rank(best);
	if (r_have < 0 || r_have >= r_best)
		return;
	const char *env = getenv("OPENBLAS_CORETYPE");
	if (env && *env) {
		/* the user's choice: kept, and said at debug level only, so that
		 * every sky command does not repeat it; sky version and skyd's
		 * start-up line (sky_blas_core_describe) show it */
		sky_log(SKY_LOG_DEBUG, "OPENBLAS_CORETYPE=%s: OpenBLAS runs its %s kernels, and this "
				      "CPU takes %s (unset it to run at the CPU's speed)",
			env, have, best);
		return;
	}
	if (setenv("OPENBLAS_CORETYPE", best, 1) || setenv("SKY_BLAS_PICKED", have, 1))
		return;
	char why[512];
	sky_proc_reexec(argv, why, sizeof why); /* returns only on failure */
	unsetenv("OPENBLAS_CORETYPE");
	unsetenv("SKY_BLAS_PICKED");
	sky_log(SKY_LOG_WARN, "OpenBLAS runs its %s kernels, and this CPU takes %s: %s (to run "
			      "with OPENBLAS_CORETYPE=%s); going on with %s",
		have, best, why, best, have);
}

void sky_blas_core_describe(char *buf, size_t cap)
{
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	const char *run = sky_blas_core_running(), *best = sky_blas_core_for(&d);
	const char *env = getenv("OPENBLAS_CORETYPE");
	if (g_picked[0])
		snprintf(buf, cap, "%s (set by Sky: OpenBLAS picked %s)", run, g_picked);
	else if (sky_blas_core_rank(run) >= 0 && sky_blas_core_rank(run) < sky_blas_core_rank(best))
		snprintf(buf, cap, "%s (%s; this CPU takes %s)", run,
			 env && *env ? "OPENBLAS_CORETYPE" : "OpenBLAS's pick", best);
	else
		snprintf(buf, cap, "%s (%sbest for this CPU)", run,
			 env && *env ? "OPENBLAS_CORETYPE; " : "");
}
