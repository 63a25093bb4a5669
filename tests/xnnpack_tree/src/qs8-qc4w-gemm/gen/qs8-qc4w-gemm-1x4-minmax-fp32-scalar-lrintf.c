// lowp's test tree: a 1x4 qs8-qc4w GEMM micro-kernel in portable C: 4-bit weights in XNNPACK's planar packing
// (planes 2, kr 1: per 4 columns, 4 int32 (16 x the bias terms), then per 2 k one byte a column, k in the low
// nibble and k + 1 in the high one, then 4 float scales). The nibble is placed in a byte's high half, so each
// product is 16x and the sum is shifted right by 4 before the fp32 requantization (lrintf). Written for lowp.
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

void xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr == 1);
  (void) a_stride;
  (void) cm_stride;
  kc = (kc + 1) & ~(size_t) 1;      // the packing rounds k up to 2 planes; A's extra byte is XNNPACK's over-read
  const int32_t zp = params->fp32_scalar.output_zero_point;
  const float vmin = (float) ((int32_t) params->fp32_scalar.output_min - zp);
  const float vmax = (float) ((int32_t) params->fp32_scalar.output_max - zp);
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n];
    const uint8_t* wk = (const uint8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < kc; k += 2) {
      for (int n = 0; n < 4; n++) {
        const int32_t low = (int8_t) (uint8_t) (wk[n] << 4);
        const int32_t high = (int8_t) (wk[n] & 0xF0);
        vacc[n] += (int32_t) a[k] * low + (int32_t) a[k + 1] * high;
      }
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      const int32_t sum = vacc[n] >= 0 ? vacc[n] >> 4 : ~(~vacc[n] >> 4);
      float vf = (float) sum * vscale[n];
      vf = vf < vmin ? vmin : vf;
      vf = vf > vmax ? vmax : vf;
      c[n] = (int8_t) ((int32_t) lrintf(vf) + zp);
    }
    w = (const void*) (vscale + 4);
    c = (int8_t*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
