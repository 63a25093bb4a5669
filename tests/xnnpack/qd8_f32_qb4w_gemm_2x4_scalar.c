/* lowp's own qd8-f32-qb4w GEMM micro-kernel, 2x4, in the style of XNNPACK's scalar blockwise 4-bit kernels (facts,
 * not code: google/XNNPACK @75db3c0 src/qd8-f32-qb4w-gemm/gen/qd8-f32-qb4w-gemm-1x2-minmax-scalar.c; packing
 * src/reference/packing.cc L1306-1420 and the operator's scale fill, src/microparams-init.c L462-487). Per 4
 * columns: 4 float (the packer's -sum of block scale x chunk column sums), then per block of bl k (params'
 * blocksize) its nibbles (kr = 1: one byte per column per 2 k) and 4 bf16 scales already divided by 16, then 4
 * float biases. Per block the int32 sum (16x, the nibbles shifted left by 4) is converted and scaled in float and
 * added to the float result that started at vksum * zero point; then * inv_scale, + bias, clamp. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }
static inline float bf16_to_f32(uint16_t x) { uint32_t u = (uint32_t) x << 16; float f; memcpy(&f, &u, 4); return f; }

void lowp_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_qb4w_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  const size_t bl = params->blocksize;
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0 && bl != 0 && bl % 32 == 0);
  kc = (kc + 1) & ~(size_t) 1;
  const int8_t *a0 = a;
  float *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  float *c1 = (float *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const float zp0 = (float) quantization_params[0].zero_point, zp1 = (float) quantization_params[1].zero_point;
  do {
    float ksum[4], out0[4], out1[4];
    memcpy(ksum, w, sizeof ksum);
    for (int n = 0; n < 4; n++) { out0[n] = ksum[n] * zp0; out1[n] = ksum[n] * zp1; }
    w = (const float *) w + 4;
    for (size_t kb = 0; kb < kc; kb += bl) {
      int32_t acc0[4] = {0, 0, 0, 0}, acc1[4] = {0, 0, 0, 0};
      for (size_t k = kb; k < kb + bl; k += 2) {
        const uint8_t *wk = (const uint8_t *) w;
        for (int n = 0; n < 4; n++) {
          const int32_t lo = (int8_t) (uint8_t) (wk[n] << 4), hi = (int8_t) (wk[n] & 0xF0);
          acc0[n] += (int32_t) a0[k] * lo + (int32_t) a0[k + 1] * hi;
          acc1[n] += (int32_t) a1[k] * lo + (int32_t) a1[k + 1] * hi;
        }
        w = (const uint8_t *) w + 4;
      }
      uint16_t scale[4];
      memcpy(scale, w, sizeof scale);
      w = (const uint16_t *) w + 4;
      for (int n = 0; n < 4; n++) {
        out0[n] += (float) acc0[n] * bf16_to_f32(scale[n]);
        out1[n] += (float) acc1[n] * bf16_to_f32(scale[n]);
      }
    }
    float bias[4];
    memcpy(bias, w, sizeof bias);
    w = (const float *) w + 4;
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
      const float v0 = out0[n] * quantization_params[0].inv_scale + bias[n];
      const float v1 = out1[n] * quantization_params[1].inv_scale + bias[n];
      c1[n] = min_f32(max_f32(v1, params->min), params->max);
      c0[n] = min_f32(max_f32(v0, params->min), params->max);
    }
    if (nc <= 4) break;
    c0 = (float *) ((uintptr_t) c0 + cn_stride);
    c1 = (float *) ((uintptr_t) c1 + cn_stride);
    nc -= 4;
  } while (nc != 0);
}
