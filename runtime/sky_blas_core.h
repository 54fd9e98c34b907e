/* Which OpenBLAS kernels a board runs, and whether they are the best its
 * CPU can take.
 *
 * OpenBLAS picks its kernels ("core") once, when the library loads, from
 * the CPU it finds. Debian's 0.3.21 does not know every CPU: on an Intel
 * Xeon of family 6 model 207 it falls back to Prescott (SSE3, about a third
 * of the speed of its SkylakeX or Cooperlake kernels), and on a Cortex-A76
 * (Raspberry Pi 5) to generic armv8. A layer's efficiency against sgemm
 * cannot see that: both slow down together. So at start skyd and sky
 * compare the core OpenBLAS runs with the best one this CPU can take
 * (sky_blas_core_for), and when OpenBLAS picked a weaker one, set
 * OPENBLAS_CORETYPE to the better core and execute the program again
 * (the library reads it only while loading), once. An OPENBLAS_CORETYPE
 * the user set is kept, with a warning if it is weaker than the CPU's. */
#ifndef SKY_BLAS_CORE_H
#define SKY_BLAS_CORE_H

#include "sky_cpu.h"

#include <stddef.h>

/* The strongest core name Debian's OpenBLAS 0.3.21 accepts in
 * OPENBLAS_CORETYPE for the described CPU ("Cooperlake", "SkylakeX",
 * "Haswell", "Zen", "Prescott"; "CORTEXA72", "NEOVERSEN1", "ARMV8", ...).
 * Never NULL. */
const char *sky_blas_core_for(const sky_cpu_desc *d);

/* Where a core name (any case) stands among its architecture's: higher
 * runs fp32 GEMM faster on a CPU that can take it; -1 for a name Sky does
 * not know (then Sky changes nothing). */
int sky_blas_core_rank(const char *name);

/* Estimated fp32 peak of one core in GFLOP/s: clock x FMA pipes x lanes x
 * 2 for the described CPU (the hardware's, whatever kernels run); 0 when
 * the clock is unknown. An estimate from the microarchitecture family: it
 * says how far sgemm is from the machine, not a datasheet figure. */
double sky_cpu_peak_gflops(const sky_cpu_desc *d);
/* How that peak is derived, for people and the benchmarks' JSON, at
 * `threads` cores: "2 FMA pipes x 16 fp32 lanes x 2 flops x 2595 MHz
 * (cpuinfo) x 1 thread" (the clock's source as sky_cpu_desc.mhz_from says). */
void sky_cpu_peak_explain(const sky_cpu_desc *d, int threads, char *buf, size_t cap);

/* The check above, at the very start of main (argv as main got it). Returns
 * only when the program goes on in this process: the core is already the
 * best, the user's OPENBLAS_CORETYPE is kept, or the re-execution failed
 * (logged). Logs what it did once: info when it changed the core, debug
 * when it kept a weaker one the user set, warn when it could not run the
 * program again. SKY_BLAS_PICK_AS=NAME makes it treat OpenBLAS's pick as NAME, so
 * tests can take the re-execution path on a CPU OpenBLAS knows. */
void sky_blas_core_ensure(char **argv);

/* The core OpenBLAS runs (openblas_get_corename). */
const char *sky_blas_core_running(void);

/* One line for sky version and the probe's log: "Cooperlake (best for this
 * CPU)", "Cooperlake (set by Sky: OpenBLAS picked Prescott)", "Haswell
 * (OPENBLAS_CORETYPE; this CPU takes Cooperlake)". */
void sky_blas_core_describe(char *buf, size_t cap);

#endif
