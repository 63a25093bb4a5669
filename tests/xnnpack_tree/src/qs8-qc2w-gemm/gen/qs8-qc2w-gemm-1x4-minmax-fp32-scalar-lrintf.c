// lowp's test tree: a 1x4 qs8-qc2w GEMM micro-kernel in portable C: 2-bit weights in XNNPACK's planar packing
// (planes 4, kr 1: per 4 columns, 4 int32 (the bias less the input zero point times the column sums), then per 4 k
// one byte a column, k + p in bits 2p and 2p + 1 as a two's complement crumb, then 4 float scales). The sums are
// plain (no 16x), so the fp32 requantization (lrintf) takes the int32 as it is. Written for lowp.
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

static int32_t crumb(uint8_t byte, int p) {
  return (int32_t) ((int8_t) (uint8_t) (byte << (6 - 2 * p)) >> 6);     // bits 2p, 2p + 1, sign-extended
}

void xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr == 1);
  assert(kc % 4 == 0);              // XNNPACK hands a qc2w kernel whole bytes of crumbs
  (void) a_stride;
  (void) cm_stride;
  const int32_t zp = params->fp32_scalar.output_zero_point;
  const float vmin = (float) ((int32_t) params->fp32_scalar.output_min - zp);
  const float vmax = (float) ((int32_t) params->fp32_scalar.output_max - zp);
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n];
    const uint8_t* wk = (const uint8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < kc; k += 4) {
      for (int n = 0; n < 4; n++) {
        for (int p = 0; p < 4; p++) vacc[n] += (int32_t) a[k + p] * crumb(wk[n], p);
      }
      wk += 4;
    }
    const float* vscale = (const float*) wk;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      float vf = (float) vacc[n] * vscale[n];
      vf = vf < vmin ? vmin : vf;
      vf = vf > vmax ? vmax : vf;
      c[n] = (int8_t) ((int32_t) lrintf(vf) + zp);
    }
    w = (const void*) (vscale + 4);
    c = (int8_t*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
