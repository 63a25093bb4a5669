/* lowp's own qd8-f32-qc8w IGEMM micro-kernel, 2x4, in the style of XNNPACK's scalar dynamically quantized IGEMMs
 * (facts, not code: google/XNNPACK @75db3c0 src/qd8-f32-qc8w-igemm/gen/qd8-f32-qc8w-igemm-2x2-minmax-scalar.c, the
 * prototype of src/xnnpack/igemm.h L1456-1462). One {zero_point, inv_scale} for all rows (the batch's); a pointer
 * equal to `zero` (a sentinel, never read) is replaced by `zero_data` (the zero point, repeated). Packed weights
 * (kr = 1, goki): per 4 columns, 4 int32 (-column sums over every tap), per tap per k 4 int8, 4 float filter
 * scales, 4 float biases. Accumulators start at -column sum * zero point; the float tail is unfused (multiply,
 * then add). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }

void lowp_qd8_f32_qc8w_igemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t **restrict a, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, size_t a_offset, const int8_t *zero,
    const int8_t *zero_data, const struct lowp_xnn_f32_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0 && ks != 0 && ks % (2 * sizeof(void *)) == 0);
  float *c0 = c;
  float *c1 = (float *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) c1 = c0;
  const int32_t zp = quantization_params->zero_point;
  do {
    int32_t ksum[4], acc0[4], acc1[4];
    memcpy(ksum, w, sizeof ksum);
    for (int n = 0; n < 4; n++) acc0[n] = acc1[n] = ksum[n] * zp;
    w = (const int32_t *) w + 4;
    size_t p = ks;
    do {
      const int8_t *a0 = a[0] != zero ? (const int8_t *) ((uintptr_t) a[0] + a_offset) : zero_data;
      const int8_t *a1 = a[1] != zero ? (const int8_t *) ((uintptr_t) a[1] + a_offset) : zero_data;
      a += 2;
      for (size_t k = 0; k < kc; k++) {
        const int8_t *wk = (const int8_t *) w;
        for (int n = 0; n < 4; n++) {
          acc0[n] += (int32_t) a0[k] * (int32_t) wk[n];
          acc1[n] += (int32_t) a1[k] * (int32_t) wk[n];
        }
        w = (const int8_t *) w + 4;
      }
      p -= 2 * sizeof(void *);
    } while (p != 0);
    float scale[4], bias[4];
    memcpy(scale, w, sizeof scale);
    memcpy(bias, (const float *) w + 4, sizeof bias);
    w = (const float *) w + 8;
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
      float v0 = (float) acc0[n] * quantization_params->inv_scale;
      float v1 = (float) acc1[n] * quantization_params->inv_scale;
      v0 = v0 * scale[n] + bias[n];
      v1 = v1 * scale[n] + bias[n];
      c1[n] = min_f32(max_f32(v1, params->min), params->max);
      c0[n] = min_f32(max_f32(v0, params->min), params->max);
    }
    if (nc <= 4) break;
    c0 = (float *) ((uintptr_t) c0 + cn_stride);
    c1 = (float *) ((uintptr_t) c1 + cn_stride);
    a = (const int8_t **) ((uintptr_t) a - ks);
    nc -= 4;
  } while (nc != 0);
}
