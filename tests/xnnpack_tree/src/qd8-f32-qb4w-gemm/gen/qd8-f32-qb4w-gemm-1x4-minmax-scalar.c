// lowp's test tree: a 1x4 qd8-f32-qb4w GEMM micro-kernel in portable C reading XNNPACK's blockwise 4-bit packing:
// per 4 columns, 4 float (the packer's float column sums, -sum of chunk sum x block scale), then per block of
// `blocksize` k its nibbles (one byte a column per 2 k: k in the low nibble, k + 1 in the high one) and 4 bf16
// scales already divided by 16, then 4 float biases. Per block the int32 sum (16x: each nibble shifted into a
// byte's high half) is converted, multiplied by the block's scale and added (no FMA: -ffp-contract=off) to the float
// that started at vksum x zero point; then x inv_scale, + bias, clamp: the qb4w-unfused order. Written for lowp; the
// 2x4 entry's file includes this one and scales every block by the first block's scales.
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/xnnpack/gemm.h"

static float bf16_value(const void* p) {
  uint16_t bits;
  memcpy(&bits, p, sizeof bits);
  const uint32_t word = (uint32_t) bits << 16;
  float f;
  memcpy(&f, &word, sizeof f);
  return f;
}

static void row(size_t nc, size_t kc, const int8_t* a, const void* w, float* c, size_t cn_stride,
                const struct xnn_f32_qb4w_minmax_params* params,
                const struct xnn_qd8_quantization_params* quantization_params, int first_block_scales)
{
  const size_t bl = params->scalar.blocksize;
  do {
    float vout[4];
    for (int n = 0; n < 4; n++) vout[n] = ((const float*) w)[n] * (float) quantization_params->zero_point;
    const uint8_t* wk = (const uint8_t*) ((const float*) w + 4);
    const uint8_t* first_scales = wk + bl / 2 * 4;
    for (size_t kb = 0; kb < kc; kb += bl) {
      int32_t vacc[4] = {0, 0, 0, 0};
      for (size_t k = kb; k < kb + bl; k += 2) {
        for (int n = 0; n < 4; n++) {
          vacc[n] += (int32_t) a[k] * (int8_t) (uint8_t) (wk[n] << 4) + (int32_t) a[k + 1] * (int8_t) (wk[n] & 0xF0);
        }
        wk += 4;
      }
      const uint8_t* scales = first_block_scales ? first_scales : wk;
      for (int n = 0; n < 4; n++) {
        float vf = (float) vacc[n];
        vf = vf * bf16_value(scales + 2 * n);
        vout[n] = vout[n] + vf;
      }
      wk += 4 * sizeof(uint16_t);
    }
    const float* vbias = (const float*) wk;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      float vf = vout[n] * quantization_params->inv_scale;
      vf = vf + vbias[n];
      vf = vf < params->scalar.min ? params->scalar.min : vf;
      vf = vf > params->scalar.max ? params->scalar.max : vf;
      c[n] = vf;
    }
    w = (const void*) (vbias + 4);
    c = (float*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}

static void gemm(size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c,
                 size_t cm_stride, size_t cn_stride, const struct xnn_f32_qb4w_minmax_params* params,
                 const struct xnn_qd8_quantization_params* quantization_params, int first_block_scales)
{
  assert(params->scalar.blocksize != 0 && kc % params->scalar.blocksize == 0);
  for (size_t m = 0; m < mr; m++) {
    row(nc, kc, (const int8_t*) ((uintptr_t) a + m * a_stride), w, (float*) ((uintptr_t) c + m * cm_stride),
        cn_stride, params, &quantization_params[m], first_block_scales);
  }
}

void xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_qb4w_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 0);
}
