/* tests/test_stage_families.py: a qs8 (per-tensor) GEMM micro-kernel, 2x4, rndnu requantization with XNNPACK's
 * rndnu_neon params (kernels/include/lowp/xnnpack.h), the NEON sequence written out in scalar C the way its
 * instructions compute it (src/qs8-gemm/c4-neondot.c.in: SQSHL by right_pre_shift, SQDMULH by the multiplier,
 * SRSHL by right_post_shift, SQXTN, SQADD the zero point, SQXTN, SMAX, SMIN). Packed weights (kr = 1): per 4
 * columns, 4 int32 biases, then K times 4 int8 weights.
 *
 * LOWP_BUG selects one one-line bug of the output stage (0: none, the correct kernel):
 *   1 SQRDMULH for SQDMULH                             2 SSHL for SRSHL (the right shift does not round)
 *   3 SRSHL by right_post_shift - 1 (one bit too far)  4 ADD for SQADD of the zero point (wraps in int16)
 *   5 no SMAX with output_min                          6 the zero point added after the narrowing to 8 bits
 *   7 SMAX with output_max and SMIN with output_min */
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif

#define NR 4

static int32_t sat32(int64_t x) { return x > INT32_MAX ? INT32_MAX : x < INT32_MIN ? INT32_MIN : (int32_t) x; }
static int32_t sat16(int32_t x) { return x > INT16_MAX ? INT16_MAX : x < INT16_MIN ? INT16_MIN : x; }
static int32_t sat8(int32_t x) { return x > INT8_MAX ? INT8_MAX : x < INT8_MIN ? INT8_MIN : x; }

/* SQSHL by a non-negative count: a saturating left shift. */
static int32_t sqshl(int32_t x, int32_t n) { return sat32((int64_t) x * ((int64_t) 1 << n)); }
/* SQDMULH: the high half of the doubled product, 2ab >> 32 (saturating only for INT32_MIN * INT32_MIN). */
static int32_t sqdmulh(int32_t a, int32_t b) { return sat32(((int64_t) a * b) >> 31); }
/* SQRDMULH: the same rounded, (2ab + 2^31) >> 32. */
static int32_t sqrdmulh(int32_t a, int32_t b) { return sat32(((int64_t) a * b + ((int64_t) 1 << 30)) >> 31); }
/* SRSHL by a negative count: a rounding right shift by -n (ties up); SSHL: the same without the rounding. */
static int32_t srshl(int32_t x, int32_t n) { return (int32_t) (((int64_t) x + ((int64_t) 1 << (-n - 1))) >> -n); }
static int32_t sshl(int32_t x, int32_t n) { return x >> -n; }

static int8_t requantize(uint32_t acc, const struct lowp_xnn_qs8_rndnu_neon_params *p) {
  int32_t x = sqshl((int32_t) acc, p->right_pre_shift);
#if LOWP_BUG == 1
  x = sqrdmulh(x, p->multiplier);
#else
  x = sqdmulh(x, p->multiplier);
#endif
#if LOWP_BUG == 2
  x = sshl(x, p->right_post_shift);
#elif LOWP_BUG == 3
  x = srshl(x, p->right_post_shift - 1);
#else
  x = srshl(x, p->right_post_shift);
#endif
  int32_t s = sat16(x);
#if LOWP_BUG == 4
  s = (int16_t) (uint16_t) (s + p->output_zero_point);
#elif LOWP_BUG != 6
  s = sat16(s + p->output_zero_point);
#endif
  int32_t o = sat8(s);
#if LOWP_BUG == 6
  o = (int8_t) (uint8_t) (o + p->output_zero_point);
#endif
#if LOWP_BUG == 7
  o = o > p->output_max ? o : p->output_max;
  o = o < p->output_min ? o : p->output_min;
#else
#if LOWP_BUG != 5
  o = o > p->output_min ? o : p->output_min;
#endif
  o = o < p->output_max ? o : p->output_max;
#endif
  return (int8_t) o;
}

void lowp_qs8_gemm_minmax_rndnu_ukernel_2x4__scalar_neon(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_rndnu_neon_params *params) {
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  do {
    const int32_t *bias = (const int32_t *) w;
    uint32_t vacc0[NR], vacc1[NR];
    for (size_t n = 0; n < NR; n++) vacc0[n] = vacc1[n] = (uint32_t) bias[n];
    w = bias + NR;
    for (size_t k = 0; k < kc; k++) {
      const int8_t *wb = (const int8_t *) w;
      for (size_t n = 0; n < NR; n++) {
        vacc0[n] += (uint32_t) ((int32_t) a0[k] * (int32_t) wb[n]);
        vacc1[n] += (uint32_t) ((int32_t) a1[k] * (int32_t) wb[n]);
      }
      w = wb + NR;
    }
    const size_t cols = nc < NR ? nc : NR;
    for (size_t n = 0; n < cols; n++) {
      c0[n] = requantize(vacc0[n], params);
      c1[n] = requantize(vacc1[n], params);
    }
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= cols;
  } while (nc != 0);
}
