// lowp's test tree: a 1x4 qd8-f32-qc4w GEMM micro-kernel in portable C reading XNNPACK's unsigned 4-bit packing
// (qc4uw, for madd kernels): per 4 columns, 4 int32 (minus the column sums, input zero point 1, not scaled), then
// per 2 k one byte a column, w + 8 of k in the low nibble and of k + 1 in the high one, then 4 float filter scales
// and 4 float biases. The nibble less 8 is the weight; the qd8 float tail is unfused. Written for lowp; the 2x4
// entry's file includes this one and reads the nibbles as signed instead (a sign error).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

static int32_t weight(uint8_t nibble, int as_signed) {
  return as_signed ? (int32_t) ((int8_t) (uint8_t) (nibble << 4) >> 4) : (int32_t) nibble - 8;
}

static void row(size_t nc, size_t kc, const int8_t* a, const void* w, float* c, size_t cn_stride,
                const struct xnn_f32_qc4w_minmax_params* params,
                const struct xnn_qd8_quantization_params* quantization_params, int as_signed)
{
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n] * quantization_params->zero_point;
    const uint8_t* wk = (const uint8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < kc; k += 2) {
      for (int n = 0; n < 4; n++) {
        vacc[n] += (int32_t) a[k] * weight(wk[n] & 0xF, as_signed) + (int32_t) a[k + 1] * weight(wk[n] >> 4, as_signed);
      }
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    const float* vbias = vscale + 4;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      float vf = (float) vacc[n] * quantization_params->inv_scale;
      vf = vf * vscale[n];
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
                 size_t cm_stride, size_t cn_stride, const struct xnn_f32_qc4w_minmax_params* params,
                 const struct xnn_qd8_quantization_params* quantization_params, int as_signed)
{
  kc = (kc + 1) & ~(size_t) 1;      // the packing rounds k up to 2 planes; A's extra byte is XNNPACK's over-read
  for (size_t m = 0; m < mr; m++) {
    row(nc, kc, (const int8_t*) ((uintptr_t) a + m * a_stride), w, (float*) ((uintptr_t) c + m * cm_stride),
        cn_stride, params, &quantization_params[m], as_signed);
  }
}

void xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_qc4w_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 0);
}
