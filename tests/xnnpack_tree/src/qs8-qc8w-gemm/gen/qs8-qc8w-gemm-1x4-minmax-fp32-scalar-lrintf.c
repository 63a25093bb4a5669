// lowp's test tree: a 1x4 qs8-qc8w GEMM micro-kernel in portable C, XNNPACK's prototype and packing (per 4 columns:
// 4 int32 biases, kc x 4 int8 weights, 4 float scales), fp32 requantization with lrintf. Written for lowp.
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

void xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr == 1);
  (void) a_stride;
  (void) cm_stride;
  const float vmin = (float) ((int32_t) params->fp32_scalar.output_min - params->fp32_scalar.output_zero_point);
  const float vmax = (float) ((int32_t) params->fp32_scalar.output_max - params->fp32_scalar.output_zero_point);
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n];
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < kc; k++) {
      for (int n = 0; n < 4; n++) vacc[n] += (int32_t) a[k] * (int32_t) wk[n];
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    int8_t out[4];
    for (int n = 0; n < 4; n++) {
      float vf = (float) vacc[n] * vscale[n];
      vf = vf < vmin ? vmin : vf;
      vf = vf > vmax ? vmax : vf;
      out[n] = (int8_t) ((int32_t) lrintf(vf) + params->fp32_scalar.output_zero_point);
    }
    w = (const void*) (vscale + 4);
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) c[n] = out[n];
    c = (int8_t*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
