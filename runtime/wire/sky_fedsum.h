/* Federated sums in fixed point: the owners' updates of a round, each
 * weighted by its sample count, added exactly.
 *
 * Floating-point addition depends on its order, so an aggregator adding
 * updates as they arrive would give different bits run to run, and the
 * masks of secure aggregation (sky_secagg.h) could not cancel in floats at
 * all. Here each element is encoded as a 64-bit integer q = round(w * x *
 * 2^bits) (w the owner's weight, x clipped to [-clip, clip]) and the
 * encodings are added modulo 2^64: the sum is exact and the same in any
 * order, on any machine, masked or not. bits is chosen (sky_fx_bits) so
 * that total_weight * clip * 2^bits < 2^62: the true sum of every owner's
 * encodings then fits an int64 with room to spare, so reading the modular
 * sum as signed gives it back.
 *
 * Rounding: w * x is exact in double (x has a 24-bit significand, w <=
 * 2^29); scaling by 2^bits is exact; llrint rounds half to even under the
 * default rounding mode on x86-64 and AArch64 alike. Decoding converts the
 * integer sum to double, scales it by 2^-bits, divides by total_weight and
 * rounds to float: IEEE operations in one fixed order, so one sum decodes
 * to the same floats on every machine.
 *
 * Thread safety: no state. */
#ifndef SKY_FEDSUM_H
#define SKY_FEDSUM_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

/* Largest weight of one owner (its sample count), so w * x stays exact. */
#define SKY_FX_MAX_WEIGHT ((uint32_t)1 << 29)
/* Fewer fraction bits than this would round away most of an update. */
#define SKY_FX_MIN_BITS 16

/* Sets *bits to the most fraction bits with which total_weight owners'
 * weight, each element clipped to clip, sums without overflow. Returns 0,
 * SKY_EINVAL (clip not finite and > 0, total_weight 0) or SKY_ERANGE (fewer
 * than SKY_FX_MIN_BITS bits would remain: the clip or the weights are too
 * large). */
int sky_fx_bits(float clip, uint64_t total_weight, int *bits, sky_diag *d);

/* Encodes n elements of one owner's update x with weight w into out.
 * Elements beyond +-clip are clipped and counted in *nclipped (may be
 * NULL). Returns 0, SKY_EINVAL (a NaN or infinity, named by index; w 0 or
 * above SKY_FX_MAX_WEIGHT; bits outside [SKY_FX_MIN_BITS, 62]); out is
 * then incomplete. */
int sky_fx_encode(const float *x, size_t n, uint32_t w, float clip, int bits, uint64_t *out,
		  size_t *nclipped, sky_diag *d);

/* Gradient sums (sky_bert_opts.fx_sum, sky_stage_cfg.fx_sum): the
 * micro-batches' gradients of a step added in fixed point, so the sum is
 * the same bits whatever order or on whichever replica each micro-batch
 * ran. An element of one micro-batch's gradient (already scaled by 1 /
 * micro) is clipped to +-SKY_FX_GRAD_CLIP; the fraction bits are
 * sky_fx_grad_bits(micro): 50 for 4 micro-batches, 42 for 1024, i.e. a
 * resolution of 2^-50 (9e-16) to 2^-42 (2e-13) per element. */
#define SKY_FX_GRAD_CLIP 1024.0f
int sky_fx_grad_bits(int micro);
/* acc[i] += round(x[i] * 2^bits) (modulo 2^64), x clipped to +-clip; a
 * NaN adds nothing. Both are counted in *nclipped (may be NULL). */
void sky_fx_accumulate(uint64_t *acc, const float *x, size_t n, float clip, int bits,
		       size_t *nclipped);

/* acc[i] += v[i] modulo 2^64. */
void sky_fx_add(uint64_t *acc, const uint64_t *v, size_t n);

/* The weighted mean of the encoded updates: out[i] = sum[i] / 2^bits /
 * total_weight, as floats. Returns 0 or SKY_EINVAL. */
int sky_fx_decode(const uint64_t *sum, size_t n, uint64_t total_weight, int bits, float *out,
		  sky_diag *d);

#endif
