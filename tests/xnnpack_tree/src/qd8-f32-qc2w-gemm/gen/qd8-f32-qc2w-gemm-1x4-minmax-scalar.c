// lowp's test tree: a 1x4 qd8-f32-qc2w GEMM micro-kernel in portable C reading XNNPACK's qd8 2-bit packing: per 4
// columns, 4 int32 (minus the column sums, input zero point 1), 4 float weight zero points, then per 4 k one byte a
// column holding w + 2 of k + p in bits 2p and 2p + 1, then 4 float filter scales and 4 float biases. It multiplies
// A by the crumbs as they are (w + 2) and takes (zero point + 2) x the row's sum off in float, then adds the weight
// zero point x kc x the row's zero point: the scalar order, each float step rounded. Written for lowp; the 2x4
// entry's file includes this one and reads the crumbs of a byte in the reverse order (k + 3 - p in bits 2p).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

static void row(size_t nc, size_t kc, const int8_t* a, const void* w, float* c, size_t cn_stride,
                const struct xnn_f32_minmax_params* params, float row_sum,
                const struct xnn_qd8_quantization_params* quantization_params, int reversed)
{
  const int32_t zp = quantization_params->zero_point;
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n] * zp;
    const float* vkzp = (const float*) ((const int32_t*) w + 4);
    const uint8_t* wk = (const uint8_t*) (vkzp + 4);
    for (size_t k = 0; k < kc; k += 4) {
      for (int n = 0; n < 4; n++) {
        for (int p = 0; p < 4; p++) {
          const int shift = 2 * (reversed ? 3 - p : p);
          vacc[n] += (int32_t) a[k + p] * (int32_t) ((wk[n] >> shift) & 3);
        }
      }
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    const float* vbias = vscale + 4;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      float vf = (float) vacc[n];
      vf -= (vkzp[n] + 2.0f) * row_sum;
      vf += vkzp[n] * (float) kc * (float) zp;
      vf *= quantization_params->inv_scale;
      vf *= vscale[n];
      vf += vbias[n];
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
                 size_t cm_stride, size_t cn_stride, const struct xnn_f32_minmax_params* params,
                 const float* row_sum, const struct xnn_qd8_quantization_params* quantization_params, int reversed)
{
  assert(kc % 4 == 0);              // XNNPACK hands a qc2w kernel whole bytes of crumbs (and the rows' sums of them)
  for (size_t m = 0; m < mr; m++) {
    row(nc, kc, (const int8_t*) ((uintptr_t) a + m * a_stride), w, (float*) ((uintptr_t) c + m * cm_stride),
        cn_stride, params, row_sum[m], &quantization_params[m], reversed);
  }
}

void xnn_qd8_f32_qc2w_gemm_minmax_ukernel_1x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_minmax_params* params, const float* row_sum,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, row_sum, quantization_params, 0);
}
