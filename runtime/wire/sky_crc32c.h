/* CRC32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78): the
 * payload checksum of tensor frames (sky_frame.h, header offset 120).
 *
 * The same CRC as iSCSI (RFC 3720 §12.1, test vectors in its appendix B.4),
 * SCTP and ext4: initial value all ones, final value inverted, reflected in
 * and out. "123456789" gives 0xE3069283.
 *
 * Speed: the CPU's own CRC32C instruction where port/ reports it
 * (sky_cpu_features.crc32c: x86 SSE4.2 `crc32`, aarch64 CRC32 extension
 * `crc32cx`), three independent streams interleaved so the instruction's
 * latency is hidden, recombined with precomputed "append N zero bytes"
 * tables; otherwise slicing-by-8 in plain C. Every path gives the same
 * value for the same bytes (tests/wire/test_crc32c.c compares them at
 * every length and alignment). SKY_CPU_DISABLE=crc32c forces plain C.
 *
 * Thread safety: all functions may run on any thread at any time (the
 * tables and the choice of path are set up once, under pthread_once). */
#ifndef SKY_CRC32C_H
#define SKY_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (the value a previous call returned, 0 to start) with
 * p[0..n): sky_crc32c(sky_crc32c(0, a, na), b, nb) == CRC of a followed by
 * b. p may be NULL when n is 0. Cannot fail. */
uint32_t sky_crc32c(uint32_t crc, const void *p, size_t n);

/* The plain-C slicing-by-8 path, whatever the CPU (for tests and
 * benchmarks; same contract as sky_crc32c). */
uint32_t sky_crc32c_sw(uint32_t crc, const void *p, size_t n);

/* Which path sky_crc32c takes on this CPU: "sse4.2x3", "armv8-crc32x3" or
 * "slice8" (static string). */
const char *sky_crc32c_impl(void);

#endif
