/* tests/test_stage_families.py: a qd8-f32-qc8w GEMM micro-kernel, 2x4, written against XNNPACK's ukernel ABI
 * (kernels/include/lowp/xnnpack.h) in the style of XNNPACK's scalar qd8 kernels (src/qs8-gemm/scalar.c.in L307-335:
 * the accumulators start at the packed -colsum times the row's zero point, then float(acc) * the row's inv_scale,
 * * the filter scale, + the bias, clamped). Packed weights (kr = 1): per 4 columns, 4 int32 (-colsum), K times 4
 * int8 weights, 4 float filter scales, 4 float biases.
 *
 * LOWP_BUG selects one one-line bug of the output stage (0: none, the correct kernel):
 *   1 every column's filter scale read from column 0   2 every row's inv_scale read from row 0
 *   3 no min with output_max                           4 the filter scale before the row's inv_scale */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif

#define NR 4

static float output(uint32_t acc, float inv_scale, float filter_scale, float bias,
                    const struct lowp_xnn_f32_minmax_params *p) {
#if LOWP_BUG == 4
  float v = (float) (int32_t) acc * filter_scale;
  v = v * inv_scale + bias;
#else
  float v = (float) (int32_t) acc * inv_scale;
  v = v * filter_scale + bias;
#endif
  v = fmaxf(v, p->min);
#if LOWP_BUG != 3
  v = fminf(v, p->max);
#endif
  return v;
}

void lowp_qd8_f32_qc8w_gemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  const int8_t *a0 = a;
  float *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  float *c1 = (float *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const int32_t zp0 = quantization_params[0].zero_point, zp1 = quantization_params[1].zero_point;
  const float inv0 = quantization_params[0].inv_scale;
#if LOWP_BUG == 2
  const float inv1 = quantization_params[0].inv_scale;
#else
  const float inv1 = quantization_params[1].inv_scale;
#endif
  do {
    const int32_t *ksum = (const int32_t *) w;
    uint32_t vacc0[NR], vacc1[NR];
    for (size_t n = 0; n < NR; n++) {
      vacc0[n] = (uint32_t) ksum[n] * (uint32_t) zp0;
      vacc1[n] = (uint32_t) ksum[n] * (uint32_t) zp1;
    }
    w = ksum + NR;
    for (size_t k = 0; k < kc; k++) {
      const int8_t *wb = (const int8_t *) w;
      for (size_t n = 0; n < NR; n++) {
        vacc0[n] += (uint32_t) ((int32_t) a0[k] * (int32_t) wb[n]);
        vacc1[n] += (uint32_t) ((int32_t) a1[k] * (int32_t) wb[n]);
      }
      w = wb + NR;
    }
    const float *filter_scale = (const float *) w, *bias = filter_scale + NR;
    w = bias + NR;
    const size_t cols = nc < NR ? nc : NR;
    for (size_t n = 0; n < cols; n++) {
#if LOWP_BUG == 1
      const float fs = filter_scale[0];
#else
      const float fs = filter_scale[n];
#endif
      c0[n] = output(vacc0[n], inv0, fs, bias[n], params);
      c1[n] = output(vacc1[n], inv1, fs, bias[n], params);
    }
    c0 = (float *) ((uintptr_t) c0 + cn_stride);
    c1 = (float *) ((uintptr_t) c1 + cn_stride);
    nc -= cols;
  } while (nc != 0);
}
