// lowp's test tree: a 1x4 qd8-f16-qc8w GEMM micro-kernel in portable C. Packed per 4 columns: 4 int32 (minus the
// column sums: XNNPACK's qs8 packer with input zero point 1), the int8 weights a k at a time, 4 float filter
// scales, 4 float biases. The qd8 float tail (unfused: f32(acc) * inv_scale, * scale, + bias; clamped to the
// params' half bounds), then each result stored as an IEEE half rounded to nearest even, by integer arithmetic.
// Written for lowp; the 2x4 entry's file includes this one and stores truncating instead.
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/xnnpack/gemm.h"

static float f32_from_f16(uint16_t h) {
  const uint32_t sign = (uint32_t) (h & 0x8000) << 16, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float magnitude;
  if (exponent == 0x1F) {
    uint32_t bits = 0x7F800000 | (mantissa << 13);
    memcpy(&magnitude, &bits, sizeof magnitude);
  } else {                                   // subnormal halves are mantissa * 2^-24, normal ones carry the 1
    magnitude = (float) (exponent ? mantissa | 0x400 : mantissa) * 0x1.0p-24f * (float) (1u << (exponent ? exponent - 1 : 0));
  }
  uint32_t bits;
  memcpy(&bits, &magnitude, sizeof bits);
  bits |= sign;
  memcpy(&magnitude, &bits, sizeof bits);
  return magnitude;
}

static uint16_t f16_from_f32(float f, int truncate) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return (uint16_t) (sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 | ((ax >> 13) & 0x3FF) : 0));
  const uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
  const uint32_t shift = e >= 113 ? 13 : 126 - e;   // the half's grid: 2^(e - 137), or 2^-24 below 2^-14
  if (e == 0 || shift > 24) return (uint16_t) sign;  // below 2^-25: zero
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (!truncate && (rem > half || (rem == half && (r & 1)))) r++;
  uint32_t bits = e >= 113 ? ((e - 112) << 10) + r - 1024 : r;
  if (bits >= 0x7C00) bits = truncate ? 0x7BFF : 0x7C00;
  return (uint16_t) (sign | bits);
}

static void row(size_t nc, size_t kc, const int8_t* a, const void* w, uint16_t* c, size_t cn_stride, float vmin,
                float vmax, const struct xnn_qd8_quantization_params* quantization_params, int truncate)
{
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n] * quantization_params->zero_point;
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < kc; k++) {
      for (int n = 0; n < 4; n++) vacc[n] += (int32_t) a[k] * (int32_t) wk[n];
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    const float* vbias = vscale + 4;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      float vf = (float) vacc[n] * quantization_params->inv_scale;
      vf = vf * vscale[n];
      vf = vf + vbias[n];
      vf = vf < vmin ? vmin : vf;
      vf = vf > vmax ? vmax : vf;
      c[n] = f16_from_f32(vf, truncate);
    }
    w = (const void*) (vbias + 4);
    c = (uint16_t*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}

static void gemm(size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, uint16_t* c,
                 size_t cm_stride, size_t cn_stride, const struct xnn_f16_minmax_params* params,
                 const struct xnn_qd8_quantization_params* quantization_params, int truncate)
{
  const float vmin = f32_from_f16(params->scalar.min), vmax = f32_from_f16(params->scalar.max);
  for (size_t m = 0; m < mr; m++) {
    row(nc, kc, (const int8_t*) ((uintptr_t) a + m * a_stride), w, (uint16_t*) ((uintptr_t) c + m * cm_stride),
        cn_stride, vmin, vmax, &quantization_params[m], truncate);
  }
}

void xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, uint16_t* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f16_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 0);
}
