/* lowp's own qs8-qc8w GEMM micro-kernel, 2x8c4, fp32 requantization with XNNPACK's fp32_neonv8 params (facts, not
 * code: google/XNNPACK @75db3c0 src/xnnpack/microparams.h L249-253: int16 output_zero_point, then the int8 clamp
 * in two uint8 fields; src/microparams-init.c L62-73 fills them; src/qs8-gemm/c4-neondot.c.in's tail: FCVTNS
 * (round to nearest even, saturating), SQXTN, SQADD zp, SQXTN, SMAX/SMIN). The dot products are plain C; the
 * tail uses NEON's scalar forms of those instructions. AArch64 only.
 *
 * Packed weights (kr = 4): per 8 columns, 8 int32, then per 4-deep k block 4 int8 of column 0, 4 of column 1, ...,
 * then 8 float scales. kc is rounded up to 4 and A read that far (XNNPACK's documented over-read). */
#include <arm_neon.h>
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline int8_t requantize(int32_t acc, float scale, int16_t zp, int8_t vmin, int8_t vmax) {
  const int32_t rounded = vcvtns_s32_f32((float) acc * scale);        /* FCVTNS */
  const int16_t narrow = vqmovns_s32(rounded);                         /* SQXTN */
  const int8_t out = vqmovnh_s16(vqaddh_s16(narrow, zp));             /* SQADD, SQXTN */
  return out < vmin ? vmin : out > vmax ? vmax : out;                  /* SMAX, SMIN */
}

void lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c4__neonv8(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_neonv8_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  kc = (kc + 3) & ~(size_t) 3;
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const int16_t zp = params->output_zero_point;
  const int8_t vmin = (int8_t) params->output_min, vmax = (int8_t) params->output_max;   /* the bits are int8 */
  do {
    int32_t acc0[8], acc1[8];
    memcpy(acc0, w, sizeof acc0);
    memcpy(acc1, w, sizeof acc1);
    w = (const int32_t *) w + 8;
    for (size_t k = 0; k < kc; k += 4) {
      const int8_t *wk = (const int8_t *) w;
      for (int n = 0; n < 8; n++)
        for (int j = 0; j < 4; j++) {
          acc0[n] += (int32_t) a0[k + j] * (int32_t) wk[4 * n + j];
          acc1[n] += (int32_t) a1[k + j] * (int32_t) wk[4 * n + j];
        }
      w = (const int8_t *) w + 32;
    }
    float scale[8];
    memcpy(scale, w, sizeof scale);
    w = (const float *) w + 8;
    const size_t n_out = nc < 8 ? nc : 8;
    for (size_t n = 0; n < n_out; n++) {
      c1[n] = requantize(acc1[n], scale[n], zp, vmin, vmax);
      c0[n] = requantize(acc0[n], scale[n], zp, vmin, vmax);
    }
    if (nc <= 8) break;
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= 8;
  } while (nc != 0);
}
