/* A one-line mutant of kernels/quantized/qs8_gemm_4x8_rndnu_neon_mlal_lane.c for tests/test_prove_a64_quantized.py:
 * rndnu_scale's doubling high multiply rounds (SQRDMULH) where rndnu truncates (SQDMULH). Everything else is the
 * original, so lowp prove must refute it in the output stage, not in the accumulation. */
/* A qs8 GEMM micro-kernel in the style of XNNPACK's NEON "mlal-lane" ones (mr=4, nr=8, kr=1), with XNNPACK's
 * ukernel ABI (lowp/xnnpack.h) and its rndnu requantization. Written for lowp from XNNPACK's documented facts, not
 * from its code:
 *   - accumulation: A and B sign-extended to int16 (SXTL), then SMLAL by lane into int32 (vmlal_lane_s16): every
 *     product a*b (|a*b| <= 2^14) lands directly in an int32 lane, so the accumulation is exact modulo 2^32;
 *   - A is read 8 bytes at a time, also for the last 1..7 k of a row: the over-read XNNPACK declares with
 *     XNN_OOB_READS (up to 7 bytes past a row here); the weights are read exactly (kr=1: K rounded up to 1);
 *   - rndnu (src/xnnpack/microparams.h rndnu_neon, initialised by xnn_init_qs8_conv_minmax_rndnu_neon_params):
 *     SQSHL by right_pre_shift (>= 0: a saturating left shift, nonzero for scales >= 0.5), SQDMULH by the multiplier,
 *     SRSHL by right_post_shift (< 0: a rounding right shift), SQXTN to int16, SQADD the output zero point, SQXTN to
 *     int8, then SMAX/SMIN with output_min/output_max;
 *   - rows past mr alias the last real row (their loads stay in bounds, their stores rewrite the same bytes).
 * Packed weights per block of 8 columns: 8 int32 (bias less a_zero_point * column sums), then K x 8 int8. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#define MR 4
#define NR 8

/* One k: the 8 weights of this k, widened, times lane LANE of HALF (vget_low_s16 / vget_high_s16) of each row's
 * widened A, added into that row's two int32x4 accumulators (columns 0-3 and 4-7). */
#define MLAL_K(HALF, LANE)                                                                          \
  do {                                                                                              \
    const int16x8_t vb = vmovl_s8(vld1_s8(wb));                                                     \
    wb += NR;                                                                                       \
    for (int r = 0; r < MR; r++) {                                                                  \
      acc[r][0] = vmlal_lane_s16(acc[r][0], vget_low_s16(vb), HALF(va[r]), LANE);                   \
      acc[r][1] = vmlal_lane_s16(acc[r][1], vget_high_s16(vb), HALF(va[r]), LANE);                  \
    }                                                                                               \
  } while (0)

/* rndnu: pre-shift (saturating), doubling high multiply, rounding post-shift. */
static inline int32x4_t rndnu_scale(int32x4_t x, int32x4_t pre, int32x4_t mul, int32x4_t post) {
  x = vqshlq_s32(x, pre);
  x = vqrdmulhq_s32(x, mul);   /* the mutation: SQRDMULH (rounding) for rndnu's SQDMULH */
  return vrshlq_s32(x, post);
}

/* The first n (< 8) bytes of v to c: 4, 2 and 1 bytes at a time, shifting the stored bytes out. */
static inline void store_tail(int8_t *c, int8x8_t v, size_t n) {
  if (n & 4) {
    vst1_lane_u32((uint32_t *) c, vreinterpret_u32_s8(v), 0);
    c += 4;
    v = vext_s8(v, v, 4);
  }
  if (n & 2) {
    vst1_lane_u16((uint16_t *) c, vreinterpret_u16_s8(v), 0);
    c += 2;
    v = vext_s8(v, v, 2);
  }
  if (n & 1)
    vst1_lane_s8(c, v, 0);
}

void lowp_mut_qs8_gemm_rndnu_4x8_mlal_lane_sqrdmulh(size_t mr, size_t nc, size_t kc, const int8_t *a,
                                                         size_t a_stride, const void *w, int8_t *c,
                                                         size_t cm_stride, size_t cn_stride,
                                                         const struct lowp_xnn_qs8_rndnu_neon_params *params) {
  const int8_t *ar[MR];
  int8_t *cr[MR];
  ar[0] = a;
  cr[0] = c;
  for (int r = 1; r < MR; r++) {
    const int real = (size_t) r < mr;
    ar[r] = real ? ar[r - 1] + a_stride : ar[r - 1];
    cr[r] = real ? cr[r - 1] + cm_stride : cr[r - 1];
  }
  const int32x4_t vpre = vld1q_dup_s32(&params->right_pre_shift);
  const int32x4_t vmul = vld1q_dup_s32(&params->multiplier);
  const int32x4_t vpost = vld1q_dup_s32(&params->right_post_shift);
  const int16x8_t vzp = vld1q_dup_s16(&params->output_zero_point);
  const int8x8_t vmin = vld1_dup_s8(&params->output_min);
  const int8x8_t vmax = vld1_dup_s8(&params->output_max);

  const int8_t *wb = (const int8_t *) w;
  do {
    int32x4_t acc[MR][2];
    acc[0][0] = vld1q_s32((const int32_t *) wb);
    acc[0][1] = vld1q_s32((const int32_t *) wb + 4);
    wb += NR * sizeof(int32_t);
    for (int r = 1; r < MR; r++) {
      acc[r][0] = acc[0][0];
      acc[r][1] = acc[0][1];
    }

    size_t k = kc;
    const int8_t *ak[MR];
    for (int r = 0; r < MR; r++)
      ak[r] = ar[r];
    for (; k >= 8; k -= 8) {
      int16x8_t va[MR];
      for (int r = 0; r < MR; r++) {
        va[r] = vmovl_s8(vld1_s8(ak[r]));
        ak[r] += 8;
      }
      MLAL_K(vget_low_s16, 0);
      MLAL_K(vget_low_s16, 1);
      MLAL_K(vget_low_s16, 2);
      MLAL_K(vget_low_s16, 3);
      MLAL_K(vget_high_s16, 0);
      MLAL_K(vget_high_s16, 1);
      MLAL_K(vget_high_s16, 2);
      MLAL_K(vget_high_s16, 3);
    }
    if (k != 0) {                       /* 1..7 k left: one 8-byte load per row (the over-read), k weight rows */
      int16x8_t va[MR];
      for (int r = 0; r < MR; r++)
        va[r] = vmovl_s8(vld1_s8(ak[r]));
      MLAL_K(vget_low_s16, 0);
      if (k > 1) MLAL_K(vget_low_s16, 1);
      if (k > 2) MLAL_K(vget_low_s16, 2);
      if (k > 3) MLAL_K(vget_low_s16, 3);
      if (k > 4) MLAL_K(vget_high_s16, 0);
      if (k > 5) MLAL_K(vget_high_s16, 1);
      if (k > 6) MLAL_K(vget_high_s16, 2);
    }

    int8x8_t out[MR];
    for (int r = 0; r < MR; r++) {
      const int32x4_t lo = rndnu_scale(acc[r][0], vpre, vmul, vpost);
      const int32x4_t hi = rndnu_scale(acc[r][1], vpre, vmul, vpost);
      const int16x8_t v16 = vqaddq_s16(vqmovn_high_s32(vqmovn_s32(lo), hi), vzp);
      out[r] = vmin_s8(vmax_s8(vqmovn_s16(v16), vmin), vmax);
    }

    if (nc >= NR) {
      for (int r = MR - 1; r >= 0; r--) {
        vst1_s8(cr[r], out[r]);
        cr[r] += cn_stride;
      }
      nc -= NR;
    } else {
      for (int r = MR - 1; r >= 0; r--)
        store_tail(cr[r], out[r], nc);
      nc = 0;
    }
  } while (nc != 0);
}
