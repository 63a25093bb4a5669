/* tests/test_stage_families.py: a qs8-qc8w GEMM micro-kernel, 2x4, fp32 requantization with lrintf, written against
 * XNNPACK's ukernel ABI (kernels/include/lowp/xnnpack.h) in the style of XNNPACK's scalar "lrintf" kernels
 * (src/qs8-gemm/scalar.c.in: float(acc) * scale, clamped in float to [min - zp, max - zp], lrintf, + zp, a cast).
 * Packed weights (kr = 1): per 4 columns, 4 int32 biases, then K times 4 int8 weights, then 4 float scales.
 *
 * LOWP_BUG selects one one-line bug of the output stage (0: none, the correct kernel):
 *   1 an (int32_t) cast for lrintf (truncates)       2 lroundf for lrintf (ties away)
 *   3 floorf(v + 0.5f) for lrintf (ties up)          4 no max with output_min - zp
 *   5 clamped to [min, max] (not less the zero point) 6 clamped to the type's range less the zero point
 *   7 the zero point added twice                      8 the zero point subtracted
 *   9 every column's scale read from column 0         10 column n's scale read from column n + 1
 *   11 the biases of column pairs exchanged           12 no min with output_max - zp
 *   13 min with output_min - zp for output_max - zp (every output clamped to output_min)
 *   14 the block's upper half (columns 2, 3) stored from its lower half (columns 0, 1) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif

#define NR 4

static int32_t requantize(uint32_t acc, float scale, float vmin, float vmax, int32_t zp) {
  float v = (float) (int32_t) acc * scale;
#if LOWP_BUG != 4
  v = fmaxf(v, vmin);
#endif
#if LOWP_BUG == 13
  v = fminf(v, vmin);
#elif LOWP_BUG != 12
  v = fminf(v, vmax);
#endif
#if LOWP_BUG == 1
  int32_t out = (int32_t) v;
#elif LOWP_BUG == 2
  int32_t out = (int32_t) lroundf(v);
#elif LOWP_BUG == 3
  int32_t out = (int32_t) floorf(v + 0.5f);
#else
  int32_t out = (int32_t) lrintf(v);
#endif
#if LOWP_BUG == 7
  out += zp;
#endif
#if LOWP_BUG == 8
  return out - zp;
#else
  return out + zp;
#endif
}

void lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_lrintf(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_params *params) {
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const int32_t vzp = params->output_zero_point;
#if LOWP_BUG == 5
  const float vmin = (float) params->output_min, vmax = (float) params->output_max;
#elif LOWP_BUG == 6
  const float vmin = (float) (-128 - vzp), vmax = (float) (127 - vzp);
#else
  const float vmin = (float) ((int32_t) params->output_min - vzp);
  const float vmax = (float) ((int32_t) params->output_max - vzp);
#endif
  do {
    const int32_t *bias = (const int32_t *) w;
    uint32_t vacc0[NR], vacc1[NR];
    for (size_t n = 0; n < NR; n++) {
#if LOWP_BUG == 11
      vacc0[n] = vacc1[n] = (uint32_t) bias[n ^ 1];
#else
      vacc0[n] = vacc1[n] = (uint32_t) bias[n];
#endif
    }
    w = bias + NR;
    for (size_t k = 0; k < kc; k++) {
      const int8_t *wb = (const int8_t *) w;
      for (size_t n = 0; n < NR; n++) {
        vacc0[n] += (uint32_t) ((int32_t) a0[k] * (int32_t) wb[n]);
        vacc1[n] += (uint32_t) ((int32_t) a1[k] * (int32_t) wb[n]);
      }
      w = wb + NR;
    }
    const float *vscale = (const float *) w;
    w = vscale + NR;
    int32_t out0[NR], out1[NR];
    for (size_t n = 0; n < NR; n++) {
#if LOWP_BUG == 9
      const float s = vscale[0];
#elif LOWP_BUG == 10
      const float s = vscale[(n + 1) % NR];         /* the block's scales rotated by one */
#else
      const float s = vscale[n];
#endif
      out0[n] = requantize(vacc0[n], s, vmin, vmax, vzp);
      out1[n] = requantize(vacc1[n], s, vmin, vmax, vzp);
    }
    const size_t cols = nc < NR ? nc : NR;
    for (size_t n = 0; n < cols; n++) {
#if LOWP_BUG == 14
      c0[n] = (int8_t) out0[n % 2];
      c1[n] = (int8_t) out1[n % 2];
#else
      c0[n] = (int8_t) out0[n];
      c1[n] = (int8_t) out1[n];
#endif
    }
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= cols;
  } while (nc != 0);
}
