/* lowp's own qd8-f32-qc4w GEMM micro-kernel, 2x4, in the style of XNNPACK's scalar one (facts, not code:
 * google/XNNPACK @75db3c0 src/qd8-f32-qc4w-gemm/gen/qd8-f32-qc4w-gemm-1x2-minmax-scalar.c): the packed int32 is
 * -16 x the column sums (xnn_pack_qs8_qc4w_gemm_goi_w with input_zero_point 1 and no bias), multiplied by each
 * row's zero point; nibbles shifted into the high half of a byte (16x the weight); the sum shifted right by 4,
 * then f32 * inv_scale * filter scale + bias, unfused, clamped (params: struct xnn_f32_qc4w_minmax_params, whose
 * kernel_zero_point no kernel reads). kc is rounded up to 2. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }
static inline int32_t asr4(int32_t x) { return x >= 0 ? x >> 4 : ~(~x >> 4); }

void lowp_qd8_f32_qc4w_gemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_qc4w_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  kc = (kc + 1) & ~(size_t) 1;
  const int8_t *a0 = a;
  float *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  float *c1 = (float *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  do {
    int32_t ksum[4], acc0[4], acc1[4];
    memcpy(ksum, w, sizeof ksum);
    for (int n = 0; n < 4; n++) {
      acc0[n] = ksum[n] * quantization_params[0].zero_point;
      acc1[n] = ksum[n] * quantization_params[1].zero_point;
    }
    w = (const int32_t *) w + 4;
    for (size_t k = 0; k < kc; k += 2) {
      const uint8_t *wk = (const uint8_t *) w;
      for (int n = 0; n < 4; n++) {
        const int32_t lo = (int8_t) (uint8_t) (wk[n] << 4), hi = (int8_t) (wk[n] & 0xF0);
        acc0[n] += (int32_t) a0[k] * lo + (int32_t) a0[k + 1] * hi;
        acc1[n] += (int32_t) a1[k] * lo + (int32_t) a1[k + 1] * hi;
      }
      w = (const uint8_t *) w + 4;
    }
    float scale[4], bias[4];
    memcpy(scale, w, sizeof scale);
    memcpy(bias, (const float *) w + 4, sizeof bias);
    w = (const float *) w + 8;
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
      float v0 = (float) asr4(acc0[n]) * quantization_params[0].inv_scale;
      float v1 = (float) asr4(acc1[n]) * quantization_params[1].inv_scale;
      v0 = v0 * scale[n] + bias[n];
      v1 = v1 * scale[n] + bias[n];
      c1[n] = min_f32(max_f32(v1, params->min), params->max);
      c0[n] = min_f32(max_f32(v0, params->min), params->max);
    }
    if (nc <= 4) break;
    c0 = (float *) ((uintptr_t) c0 + cn_stride);
    c1 = (float *) ((uintptr_t) c1 + cn_stride);
    nc -= 4;
  } while (nc != 0);
}
