/* tests/test_stage_edges.py: a qu8 GEMM micro-kernel, 2x4, rndnu16 requantization (XNNPACK's rndnu16_scalar
 * params, kernels/include/lowp/xnnpack.h), written from xnn_qu8_requantize_rndnu16's arithmetic (facts, not code:
 * google/XNNPACK @75db3c0 src/xnnpack/requantization.h L107-138): a saturating rounding shift by left_pre_shift, a
 * saturating narrowing to int16, the rounded high half of the product with a 15-bit multiplier (SQRDMULH), + zero
 * point saturating in int16 (SQADD), clamp. The weights' zero point is taken off each weight.
 *
 * LOWP_BUG selects one one-line bug of the output stage (0: none, the correct kernel):
 *   1 the zero point added wrapping in int16 (ADD for SQADD)   2 the narrowing to int16 wrapping (XTN for SQXTN) */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif
static inline int32_t sat32(int64_t x) { return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t) x; }
static inline int16_t sat16(int32_t x) { return x > INT16_MAX ? INT16_MAX : x < INT16_MIN ? INT16_MIN : (int16_t) x; }

static inline uint8_t requantize(int32_t acc, const struct lowp_xnn_qu8_rndnu16_scalar_params *p) {
  const int32_t shift = p->left_pre_shift;
  const int32_t pre = shift >= 0 ? sat32((int64_t) acc << shift)
                                 : (int32_t) (((int64_t) acc + ((int64_t) 1 << (-shift - 1))) >> -shift);
#if LOWP_BUG == 2
  const int16_t x16 = (int16_t) pre;
#else
  const int16_t x16 = sat16(pre);
#endif
  const int16_t high = (int16_t) (((int32_t) x16 * p->multiplier + (1 << 14)) >> 15);
#if LOWP_BUG == 1
  int16_t out = (int16_t) ((int32_t) high + p->output_zero_point);
#else
  int16_t out = sat16((int32_t) high + p->output_zero_point);
#endif
  if (out < p->output_min) out = p->output_min;
  if (out > p->output_max) out = p->output_max;
  return (uint8_t) out;
}

void lowp_sb_qu8_gemm_minmax_rndnu16_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const uint8_t *restrict a, size_t a_stride, const void *restrict w,
    uint8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qu8_rndnu16_scalar_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  const uint8_t *a0 = a;
  uint8_t *c0 = c;
  const uint8_t *a1 = (const uint8_t *) ((uintptr_t) a0 + a_stride);
  uint8_t *c1 = (uint8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const int32_t kzp = params->kernel_zero_point;
  do {
    int32_t acc0[4], acc1[4];
    memcpy(acc0, w, sizeof acc0);
    memcpy(acc1, w, sizeof acc1);
    w = (const int32_t *) w + 4;
    for (size_t k = 0; k < kc; k++) {
      const uint8_t *wk = (const uint8_t *) w;
      for (int n = 0; n < 4; n++) {
        acc0[n] += (int32_t) a0[k] * ((int32_t) wk[n] - kzp);
        acc1[n] += (int32_t) a1[k] * ((int32_t) wk[n] - kzp);
      }
      w = (const uint8_t *) w + 4;
    }
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
      c1[n] = requantize(acc1[n], params);
      c0[n] = requantize(acc0[n], params);
    }
    if (nc <= 4) break;
    c0 = (uint8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (uint8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= 4;
  } while (nc != 0);
}
