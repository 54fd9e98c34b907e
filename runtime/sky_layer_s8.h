/* One BERT encoder layer in int8 fixed point (inference): the same
 * computation as sky_layer.h's fp32 layer, with
 *   - weights int8, symmetric per output channel (scale = absmax / 127),
 *     int32 biases (scale = input scale * weight scale);
 *   - activations int8 (q, k, v, context, LayerNorm outputs, GELU output)
 *     or int16 (the outputs of the two H-wide projections and the FFN
 *     pre-activation, which feed the residual adds and GELU), each with a
 *     per-tensor scale from its absolute maximum on a calibration batch;
 *   - int32 accumulation and Q31 requantisation between them, integer
 *     softmax, GELU, LayerNorm and residual adds (sky_kernels_s8.h).
 * The input is quantised at entry and the output dequantised at exit; in
 * between no floating point runs. Setup (sky_layer_s8_setup) uses floating
 * point once to turn scales into multipliers.
 *
 * The data path, per micro-batch (T = B*S tokens, scale in brackets):
 *   x8 = quant(x)                                          int8  [s_x]
 *   q8|k8|v8 = requant(x8 Wqkv^T + bqkv)                    int8  [s_q, s_k, s_v]
 *   per sequence and head: scores = q8 k8^T (int32, [s_q s_k / sqrt d]);
 *     p = softmax_s8(scores, padding mask)                 u8    [2^-8]
 *     ctx8 = requant(p v8)                                 int8  [s_ctx]
 *   ao16 = requant(ctx8 Wo^T + bo)                          int16 [s_ao]
 *   h1_8 = LN_s8(ao16 + x8)                                 int8  [s_h1]
 *   u16  = requant(h1_8 W1^T + b1)                          int16 [sqrt2 2^-f] (Q f of u/sqrt2)
 *   g8   = gelu_s8(u16)                                     int8  [s_g]
 *   fo16 = requant(g8 W2^T + b2)                            int16 [s_fo]
 *   y8   = LN_s8(fo16 + h1_8)                               int8  [s_y];  y = dequant(y8)
 * The mask is treated as a padding mask: a key whose additive mask is
 * below -1 gets probability 0, others 0 added. */
#ifndef SKY_LAYER_S8_H
#define SKY_LAYER_S8_H

#include "sky_arena.h"
#include "sky_err.h"
#include "sky_kernels_s8.h"
#include "sky_model.h"
#include "sky_pool.h"

#include <stddef.h>
#include <stdint.h>

/* The quantisation points whose ranges calibration records. */
enum {
	SKY_Q_X,   /* layer input */
	SKY_Q_Q,   /* query projection */
	SKY_Q_K,   /* key projection */
	SKY_Q_V,   /* value projection */
	SKY_Q_CTX, /* attention context */
	SKY_Q_AO,  /* attention output dense, before the residual */
	SKY_Q_H1,  /* LayerNorm1 output */
	SKY_Q_U,   /* FFN pre-activation */
	SKY_Q_G,   /* GELU output */
	SKY_Q_FO,  /* FFN output dense, before the residual */
	SKY_Q_Y,   /* layer output */
	SKY_Q_NPOINTS
};
/* "x,q,k,v,ctx,ao,h1,u,g,fo,y" names, in enum order. */
const char *sky_q_point_name(int i);

/* Absolute maxima per quantisation point over every calibration batch. */
typedef struct sky_layer_s8_calib {
	float absmax[SKY_Q_NPOINTS];
	int batches;
} sky_layer_s8_calib;

void sky_layer_s8_calib_init(sky_layer_s8_calib *cal);
/* Whether the int8 layer can compute cfg's layer: its GELU is the integer
 * erf polynomial and its LayerNorm constants assume BERT's eps 1e-12, so a
 * model with the tanh GELU (gelu_new / gelu_pytorch_tanh) or another
 * layer_norm_eps is refused rather than computed differently. Shapes: any
 * the fp32 layer takes. Returns 0 or SKY_EUNSUPPORTED (d says why).
 * Calibration and setup call it. */
int sky_layer_s8_supports(const sky_model_cfg *c, sky_diag *d);
/* Floats of scratch sky_layer_s8_calibrate needs for cfg. */
size_t sky_layer_s8_calib_scratch_floats(const sky_model_cfg *c);
/* Runs the fp32 layer forward (the same operations as sky_layer_forward,
 * with every intermediate kept) on one calibration micro-batch x (B*S, H)
 * with additive mask (B*S or NULL) and raises cal's maxima. Fails with
 * SKY_EINVAL when x, the mask or an intermediate holds NaN or infinity
 * (d names the tensor, token and column). */
int sky_layer_s8_calibrate(const sky_model_cfg *c, const float *w, const float *x,
			   const float *mask, float *scratch, sky_layer_s8_calib *cal, sky_diag *d);

/* A quantised layer. Every pointer is carved from an arena. */
/* What one worker thread of a forward uses alone: an attention head's
 * packed keys and values, scores and probabilities, and a row block of the
 * FFN pre-activation. */
typedef struct sky_layer_s8_ws {
	int8_t *pbuf;              /* (S, S) probabilities as int8 */
	int16_t *u16;              /* (row block, F) FFN pre-activation */
	int32_t *r32;              /* (H) one row's residual sum */
	int32_t *scores, *cbias;   /* (S, S), (D) */
	sky_k_s8_packed kh, vh;    /* one head's keys and values, packed */
} sky_layer_s8_ws;

typedef struct sky_layer_s8 {
	sky_model_cfg cfg;
	int variant;                     /* kernel variant the weights are packed for */
	float absmax[SKY_Q_NPOINTS];     /* the calibration it was built from */
	/* persistent: what a weights file holds */
	float *sw_qkv, *sw_o, *sw_1, *sw_2; /* (3H), (H), (F), (H) per-channel weight scales */
	float *fvec;    /* every 1-D fp32 tensor (biases, LayerNorm), table order, 9H + F */
	sky_k_s8_packed wqkv, wo, w1, w2;   /* (3H,H) (H,H) (F,H) (H,F) packed int8 */
	/* persistent: derived at setup */
	int32_t *bqkv, *bo, *b1, *b2;       /* int32 biases */
	int32_t *mqkv, *mo, *m1, *m2, *mctx; /* Q31 multipliers per output channel */
	int8_t *rqkv, *ro, *r1, *r2, *rctx;  /* their right shifts */
	int32_t *ln1_g, *ln2_g;             /* (H) gamma / s_out * 2^15 */
	int64_t *ln1_b, *ln2_b;             /* (H) beta / s_out * 2^31 */
	int32_t res1_ma, res1_mb, res2_ma, res2_mb; /* residual adds (sky_k_add_s16_s8) */
	int res1_ra, res1_rb, res2_ra, res2_rb;
	sky_k_softmax_params sm;
	sky_k_gelu_params gelu;
	float inv_sx, s_y;                  /* entry and exit */
	/* scratch for one forward: the activations (row blocks of them are
	 * written by one task each), then one sky_layer_s8_ws per worker */
	int8_t *x8, *qkv8, *ctx8, *h1_8, *g8;
	int16_t *a16;
	uint8_t *maskbits;
	sky_layer_s8_ws *ws;                /* (workers) */
	int workers;                        /* carved for this many threads */
	sky_pool *pool;                     /* NULL: the caller's thread only */
} sky_layer_s8;

/* Carves every buffer of a layer for cfg (weights persistent, the rest
 * scratch) and records cfg and the kernel variant. Run it on a measuring
 * arena first to size the real one; check sky_arena_status() after. */
void sky_layer_s8_carve(sky_layer_s8 *L, const sky_model_cfg *c, int variant, sky_arena *a);
/* The same in parts, so layers run one after another can share one
 * scratch: weights only; the scratch only (after either); or the scratch
 * pointers of another layer of the same cfg. */
void sky_layer_s8_carve_persist(sky_layer_s8 *L, const sky_model_cfg *c, int variant, sky_arena *a);
void sky_layer_s8_carve_scratch(sky_layer_s8 *L, sky_arena *a);
void sky_layer_s8_share_scratch(sky_layer_s8 *L, const sky_layer_s8 *from);
/* carve_scratch for a forward on up to `workers` threads (1..SKY_POOL_MAX_THREADS):
 * the per-worker part (about 2 S^2 + 2 * 128 * F bytes for S tokens and FFN width F)
 * times workers. */
void sky_layer_s8_carve_scratch_mt(sky_layer_s8 *L, sky_arena *a, int workers);
/* Runs the forwards of L on pool's threads (NULL: the caller's only).
 * Returns 0, or SKY_EINVAL if the pool has more threads than L's scratch
 * was carved for. The result is the same bits for any thread count. */
int sky_layer_s8_use_pool(sky_layer_s8 *L, sky_pool *pool);
/* Bytes of temporary memory from_f32 and load need (the largest matrix). */
size_t sky_layer_s8_tmp_bytes(const sky_model_cfg *c);
/* Bytes of the packed int8 weights (the quarter of fp32's bytes). */
size_t sky_layer_s8_weight_bytes(const sky_model_cfg *c);

/* Quantises the fp32 parameter block w (sky_layer.h layout) with the
 * calibration into a carved layer, then runs sky_layer_s8_setup. Returns 0,
 * SKY_EINVAL (a non-finite weight, a calibration range that is zero, NaN
 * or infinite: d names it) or SKY_ERANGE (a bias or scale that int32 or the
 * Q formats cannot hold). tmp: sky_layer_s8_tmp_bytes() bytes of any memory. */
int sky_layer_s8_from_f32(sky_layer_s8 *L, const float *w, const sky_layer_s8_calib *cal,
			  void *tmp, sky_diag *d);
/* Derives multipliers, int32 biases and LayerNorm constants from the
 * persistent part (scales, fvec, absmax) already in L. Same errors. */
int sky_layer_s8_setup(sky_layer_s8 *L, sky_diag *d);

/* Forward for one micro-batch: x, y (B*S, H) fp32, mask (B*S) additive or
 * NULL. Returns 0, or SKY_EINVAL if x holds NaN or infinity (y untouched). */
int sky_layer_s8_forward(sky_layer_s8 *L, const float *x, const float *mask, float *y);

/* The same forward in its two halves, so a serving stage can start or end
 * at any half-layer (sky_stage.h's half-layer 2i is the attention half,
 * 2i+1 the FFN half). Chained, the halves give exactly the bits of
 * sky_layer_s8_forward, for any thread count:
 *   forward_attn: x (B*S, H) fp32 and mask as above -> L->h1_8 (int8, scale
 *                 absmax[SKY_Q_H1] / 127). Returns 0 or SKY_EINVAL (NaN or
 *                 infinity in x).
 *   forward_ffn:  h1 (B*S, H) int8 (NULL: L->h1_8 as forward_attn left it;
 *                 else copied there) -> L->x8 = y8 (int8, scale L->s_y) and,
 *                 when y is not NULL, y = dequant(y8). Returns 0.
 * L->h1_8 and L->x8 are scratch: read them before the next forward of any
 * layer sharing that scratch. */
int sky_layer_s8_forward_attn(sky_layer_s8 *L, const float *x, const float *mask);
int sky_layer_s8_forward_ffn(sky_layer_s8 *L, const int8_t *h1, float *y);

/* ---- weights files (runtime/quant_io.c) ---------------------------------- */
struct sky_st_file;
struct sky_st_entry;
/* Tensors of a quantised layer, named prefix + HuggingFace name:
 * each Linear weight as I8 (out, in) plus "<name>_scale" F32 (out); biases
 * and LayerNorm parameters F32; "<prefix>quant.act_absmax" F32
 * (SKY_Q_NPOINTS) in the order of sky_q_point_name(). */
#define SKY_LAYER_S8_NENTRIES 23
/* Fills entries (SKY_LAYER_S8_NENTRIES) for writing L; int8 weights are
 * unpacked into wbuf (sky_layer_s8_weight_bytes() bytes) and names built
 * in names (SKY_LAYER_S8_NENTRIES * 96 bytes). Returns the count or
 * SKY_ERANGE (a name too long). */
int sky_layer_s8_entries(const sky_layer_s8 *L, const char *prefix, int8_t *wbuf, char *names,
			 struct sky_st_entry *entries, sky_diag *d);
/* Loads a carved layer from f (dtypes and shapes checked: a wrong dtype, a
 * missing tensor, a scale that is zero, negative or not finite is an error
 * naming the tensor), then runs sky_layer_s8_setup. tmp: sky_layer_s8_tmp_bytes(). */
int sky_layer_s8_load(sky_layer_s8 *L, const struct sky_st_file *f, const char *prefix, void *tmp,
		      sky_diag *d);

#endif
