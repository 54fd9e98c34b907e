/* runtime/blas_core.c: the core a CPU should run, from a description. */
#include "sky_test.h"

#include "sky_blas_core.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sky_cpu_desc intel(int family, int model, int avx2, int avx512, int bf16)
{
	sky_cpu_desc d;
	memset(&d, 0, sizeof d);
	d.x86 = 1;
	d.family = family, d.model = model;
	d.avx2 = avx2, d.avx512 = avx512, d.bf16 = bf16;
	return d;
}

static sky_cpu_desc arm(unsigned implementer, unsigned part)
{
	sky_cpu_desc d;
	memset(&d, 0, sizeof d);
	d.arm_implementer = implementer, d.arm_part = part;
	return d;
}

SKY_TEST(x86_cores_follow_the_vector_units)
{
	/* the Xeon that 0.3.21 runs on Prescott: family 6, model 207, AVX-512
	 * with BF16 */
	sky_cpu_desc emr = intel(6, 207, 1, 1, 1);
	SKY_EXPECT(strcmp(sky_blas_core_for(&emr), "Cooperlake") == 0);
	SKY_EXPECT(sky_blas_core_rank("Prescott") < sky_blas_core_rank(sky_blas_core_for(&emr)));
	sky_cpu_desc skx = intel(6, 85, 1, 1, 0);
	SKY_EXPECT(strcmp(sky_blas_core_for(&skx), "SkylakeX") == 0);
	sky_cpu_desc hsw = intel(6, 63, 1, 0, 0);
	SKY_EXPECT(strcmp(sky_blas_core_for(&hsw), "Haswell") == 0);
	sky_cpu_desc zen2 = intel(0x17, 0x31, 1, 0, 0);
	zen2.amd = 1;
	SKY_EXPECT(strcmp(sky_blas_core_for(&zen2), "Zen") == 0);
	sky_cpu_desc old = intel(6, 15, 0, 0, 0);
	SKY_EXPECT(strcmp(sky_blas_core_for(&old), "Prescott") == 0);
	/* Cooperlake > SkylakeX > Haswell = Zen > Sandybridge > Prescott */
	SKY_EXPECT(sky_blas_core_rank("Cooperlake") > sky_blas_core_rank("SkylakeX"));
	SKY_EXPECT(sky_blas_core_rank("SkylakeX") > sky_blas_core_rank("Haswell"));
	SKY_EXPECT_EQ(sky_blas_core_rank("Haswell"), sky_blas_core_rank("Zen"));
	SKY_EXPECT(sky_blas_core_rank("Sandybridge") > sky_blas_core_rank("Prescott"));
}

SKY_TEST(arm_cores_from_the_midr_part)
{
	sky_cpu_desc a72 = arm(0x41, 0xd08); /* Raspberry Pi 4 */
	SKY_EXPECT(strcmp(sky_blas_core_for(&a72), "CORTEXA72") == 0);
	/* Raspberry Pi 5: OpenBLAS 0.3.21 has no A76 and runs generic armv8;
	 * its Neoverse N1 kernels are for the same microarchitecture */
	sky_cpu_desc a76 = arm(0x41, 0xd0b);
	SKY_EXPECT(strcmp(sky_blas_core_for(&a76), "NEOVERSEN1") == 0);
	SKY_EXPECT(sky_blas_core_rank("armv8") < sky_blas_core_rank("NEOVERSEN1"));
	sky_cpu_desc other = arm(0x61, 0x22); /* not an Arm Ltd part */
	SKY_EXPECT(strcmp(sky_blas_core_for(&other), "ARMV8") == 0);
	sky_cpu_desc none = arm(0, 0); /* MIDR not readable */
	SKY_EXPECT(strcmp(sky_blas_core_for(&none), "ARMV8") == 0);
}

SKY_TEST(core_names_match_in_any_case_and_unknown_ones_are_left_alone)
{
	/* OpenBLAS names aarch64 cores in lower case, x86 ones in mixed case */
	SKY_EXPECT_EQ(sky_blas_core_rank("cortexa72"), sky_blas_core_rank("CORTEXA72"));
	SKY_EXPECT_EQ(sky_blas_core_rank("cooperlake"), sky_blas_core_rank("Cooperlake"));
	SKY_EXPECT_EQ(sky_blas_core_rank("SapphireRapids"), -1);
	SKY_EXPECT_EQ(sky_blas_core_rank("Haswel"), -1);
	SKY_EXPECT_EQ(sky_blas_core_rank(NULL), -1);
}

SKY_TEST(peak_is_clock_times_pipes_times_lanes_times_two)
{
	sky_cpu_desc x = intel(6, 207, 1, 1, 1);
	x.mhz = 2000;
	SKY_EXPECT(fabs(sky_cpu_peak_gflops(&x) - 2.0 * 2 * 16 * 2) < 1e-9);
	x.amd = 1, x.family = 0x19; /* Zen 4: 512-bit FMAs on 256-bit pipes */
	SKY_EXPECT(fabs(sky_cpu_peak_gflops(&x) - 2.0 * 2 * 8 * 2) < 1e-9);
	sky_cpu_desc a = arm(0x41, 0xd08);
	a.mhz = 1500;
	SKY_EXPECT(fabs(sky_cpu_peak_gflops(&a) - 1.5 * 2 * 4 * 2) < 1e-9);
	a.mhz = 0;
	SKY_EXPECT_EQ(sky_cpu_peak_gflops(&a), 0.0);
}

SKY_TEST(peak_says_how_it_is_derived)
{
	char buf[160];
	sky_cpu_desc x = intel(6, 207, 1, 1, 1);
	x.mhz = 2000;
	snprintf(x.mhz_from, sizeof x.mhz_from, "cpuinfo");
	sky_cpu_peak_explain(&x, 2, buf, sizeof buf);
	SKY_EXPECT_MSG(!strcmp(buf, "2 FMA pipes x 16 fp32 lanes x 2 flops x 2000 MHz (cpuinfo) x 2 threads"),
		       "%s", buf);
	sky_cpu_desc a55 = arm(0x41, 0xd05);
	a55.mhz = 1800;
	snprintf(a55.mhz_from, sizeof a55.mhz_from, "measured");
	sky_cpu_peak_explain(&a55, 1, buf, sizeof buf);
	SKY_EXPECT_MSG(!strcmp(buf, "1 FMA pipe x 4 fp32 lanes x 2 flops x 1800 MHz (measured) x 1 thread"),
		       "%s", buf);
	a55.mhz = 0;
	sky_cpu_peak_explain(&a55, 1, buf, sizeof buf);
	SKY_EXPECT_MSG(!strncmp(buf, "unknown: no clock", 17), "%s", buf);
	/* this CPU's clock is known, and where it came from */
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	SKY_EXPECT_MSG(d.mhz > 0 && d.mhz_from[0], "%.0f MHz from '%s'", d.mhz, d.mhz_from);
}

SKY_TEST(this_cpu_is_described_and_openblas_core_is_known)
{
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	const char *best = sky_blas_core_for(&d);
	SKY_EXPECT(sky_blas_core_rank(best) >= 0);
	/* OpenBLAS runs a core Sky knows, whatever it picked or was told */
	SKY_EXPECT_MSG(sky_blas_core_rank(sky_blas_core_running()) >= 0, "OpenBLAS runs '%s'",
		       sky_blas_core_running());
	char line[128];
	sky_blas_core_describe(line, sizeof line);
	SKY_EXPECT(strncmp(line, sky_blas_core_running(), strlen(sky_blas_core_running())) == 0);
}
