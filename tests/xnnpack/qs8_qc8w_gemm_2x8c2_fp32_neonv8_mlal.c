/* lowp's own qs8-qc8w GEMM micro-kernel, 2x8c2, MLAL: two s8 products per int16 lane before SADALP widens them,
 * as XNNPACK's NEON MLAL kernels do (facts, not code: google/XNNPACK @75db3c0 src/qs8-gemm/c2-neon-mull-dup.c.in
 * L51, L83-133: kc rounded up to 2; per whole 16-k step, SMULL of k-block c (k 2c, 2c+1) and SMLAL of k-block c + 4
 * (k 2c + 8, 2c + 9) into the same int16 lanes, then SADALP into int32; the remainder SMULL alone). The pair
 * (k, k + 8) wraps in int16 only when both products are -128 * -128, so the kernel claims weights in [-127, 127]
 * (XNNPACK's tester draws them there).
 * Output stage: XNNPACK's fp32_neonv8 params (FCVTNS, SQXTN, SQADD zp, SQXTN, SMAX/SMIN).
 *
 * LOWP_BUG_PAIRS: the one-bug version: each 16-k step pairs k-block c with c + 1 (k, k + 2) instead of c + 4; every
 * product is still right, only the int16 pair sums differ (a wrap where two -128 * -128 products meet).
 *
 * Packed weights (kr = 2, sr = 1): per 8 columns, 8 int32, then per 2-deep k block 2 int8 of column 0, 2 of column
 * 1, ..., then 8 float scales. kc is rounded up to 2; A is read no further. AArch64 only. */
#include <arm_neon.h>
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

#ifdef LOWP_BUG_PAIRS
#define FIRST_BLOCK(i) (2 * (i))     /* k-blocks 0, 2, 4, 6 ...     */
#define PARTNER_BLOCK(c) ((c) + 1)   /* ... each with the next one  */
#else
#define FIRST_BLOCK(i) (i)           /* k-blocks 0, 1, 2, 3 ...      */
#define PARTNER_BLOCK(c) ((c) + 4)   /* ... each with the one 8 k on */
#endif

/* the two k of k-block c of a row, repeated in every int16 lane (LD1R .4H) */
static inline int8x8_t a_block(const int8_t *a, int c) {
  int16_t pair;
  memcpy(&pair, a + 2 * c, sizeof pair);
  return vreinterpret_s8_s16(vdup_n_s16(pair));
}

/* SMULL of one k-block, SMLAL of its partner, SADALP into the two int32x4 accumulators of 8 columns */
static inline void mlal_pair(int32x4_t acc[2], const int8_t *w, const int8_t *a, int c, int d) {
  const int8x8_t va_c = a_block(a, c), va_d = a_block(a, d);
  for (int n = 0; n < 2; n++) {
    int16x8_t prod = vmull_s8(vld1_s8(w + 16 * c + 8 * n), va_c);
    prod = vmlal_s8(prod, vld1_s8(w + 16 * d + 8 * n), va_d);
    acc[n] = vpadalq_s16(acc[n], prod);
  }
}

static inline int8x8_t requantize(const int32x4_t acc[2], const float *scale,
                                  const struct lowp_xnn_qs8_qc8w_fp32_neonv8_params *params) {
  int32x4_t r[2];
  for (int n = 0; n < 2; n++)
    r[n] = vcvtnq_s32_f32(vmulq_f32(vcvtq_f32_s32(acc[n]), vld1q_f32(scale + 4 * n)));   /* FCVTNS */
  int16x8_t h = vqmovn_high_s32(vqmovn_s32(r[0]), r[1]);                                  /* SQXTN(2) */
  h = vqaddq_s16(h, vdupq_n_s16(params->output_zero_point));                             /* SQADD */
  int8x8_t out = vqmovn_s16(h);                                                           /* SQXTN */
  out = vmax_s8(out, vdup_n_s8((int8_t) params->output_min));
  return vmin_s8(out, vdup_n_s8((int8_t) params->output_max));
}

void lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c2__neonv8_mlal(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_neonv8_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  kc = (kc + 1) & ~(size_t) 1;
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  do {
    int32x4_t acc0[2] = {vld1q_s32((const int32_t *) w), vld1q_s32((const int32_t *) w + 4)};
    int32x4_t acc1[2] = {acc0[0], acc0[1]};
    const int8_t *wk = (const int8_t *) w + 32;
    size_t k = 0;
    for (; k + 16 <= kc; k += 16, wk += 128)
      for (int i = 0; i < 4; i++) {
        const int cb = FIRST_BLOCK(i), db = PARTNER_BLOCK(cb);
        mlal_pair(acc0, wk, a0 + k, cb, db);
        mlal_pair(acc1, wk, a1 + k, cb, db);
      }
    for (; k < kc; k += 2, wk += 16)
      for (int n = 0; n < 2; n++) {
        const int8x8_t vb = vld1_s8(wk + 8 * n);
        acc0[n] = vpadalq_s16(acc0[n], vmull_s8(vb, a_block(a0 + k, 0)));
        acc1[n] = vpadalq_s16(acc1[n], vmull_s8(vb, a_block(a1 + k, 0)));
      }
    const float *scale = (const float *) wk;
    w = scale + 8;
    int8_t out0[8], out1[8];
    vst1_s8(out1, requantize(acc1, scale, params));
    vst1_s8(out0, requantize(acc0, scale, params));
    const size_t n_out = nc < 8 ? nc : 8;
    memcpy(c1, out1, n_out);
    memcpy(c0, out0, n_out);
    if (nc <= 8) break;
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= 8;
  } while (nc != 0);
}
