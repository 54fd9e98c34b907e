/* The GEMM epilogue on NEON for one row of 16 channels (shared by the NEON
 * and dot-product kernels): acc + bias, then requant(v, mult, rs) per
 * channel as vmull_s32 and vrshlq_s64 by -rs (which adds 2^(rs-1) before
 * the arithmetic shift: the ref's rounding exactly), saturating narrows as
 * the clamps. A partial block (fewer than 16 channels) takes the scalar
 * epilogue. */
#ifndef SKY_EPILOGUE_S8_NEON_H
#define SKY_EPILOGUE_S8_NEON_H

#include "sky_kernels_s8.h"

#include <arm_neon.h>

static inline void sky_neon_epilogue16(const int32x4_t acc[4], int n0, int nvalid,
				       const sky_k_gemm_out *o, long m)
{
	if (nvalid < 16) {
		int32_t s[16];
		for (int g = 0; g < 4; g++)
			vst1q_s32(s + 4 * g, acc[g]);
		sky_k_s8_epilogue_row(s, n0, nvalid, o, (int)m);
		return;
	}
	int32x4_t v[4];
	for (int g = 0; g < 4; g++) {
		v[g] = acc[g];
		if (o->bias) /* int32 wrap-around, as the ref's unsigned add */
			v[g] = vreinterpretq_s32_u32(vaddq_u32(vreinterpretq_u32_s32(v[g]),
							       vreinterpretq_u32_s32(vld1q_s32(o->bias + n0 + 4 * g))));
	}
	if (o->type == SKY_K_OUT_S32) {
		int32_t *c = (int32_t *)o->c + m * o->ldc + n0;
		for (int g = 0; g < 4; g++)
			vst1q_s32(c + 4 * g, v[g]);
		return;
	}
	int16x8_t sh16 = vmovl_s8(vld1_s8(o->rshift + n0));
	int16x8_t sh16b = vmovl_s8(vld1_s8(o->rshift + n0 + 8));
	int32x4_t nsh[4] = {vnegq_s32(vmovl_s16(vget_low_s16(sh16))), vnegq_s32(vmovl_high_s16(sh16)),
			    vnegq_s32(vmovl_s16(vget_low_s16(sh16b))), vnegq_s32(vmovl_high_s16(sh16b))};
	int16x4_t r16[4];
	for (int g = 0; g < 4; g++) {
		int32x4_t mu = vld1q_s32(o->mult + n0 + 4 * g);
		int64x2_t lo = vrshlq_s64(vmull_s32(vget_low_s32(v[g]), vget_low_s32(mu)),
					  vmovl_s32(vget_low_s32(nsh[g])));
		int64x2_t hi = vrshlq_s64(vmull_high_s32(v[g], mu), vmovl_high_s32(nsh[g]));
		r16[g] = vqmovn_s32(vcombine_s32(vqmovn_s64(lo), vqmovn_s64(hi)));
	}
	if (o->type == SKY_K_OUT_S16) {
		int16_t *c = (int16_t *)o->c + m * o->ldc + n0;
		for (int g = 0; g < 4; g++)
			vst1_s16(c + 4 * g, r16[g]);
	} else {
		int8_t *c = (int8_t *)o->c + m * o->ldc + n0;
		vst1_s8(c, vqmovn_s16(vcombine_s16(r16[0], r16[1])));
		vst1_s8(c + 8, vqmovn_s16(vcombine_s16(r16[2], r16[3])));
	}
}

#endif
