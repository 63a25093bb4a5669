// lowp's test tree: a 1x4 qs8-qc8w IGEMM (convolution) micro-kernel in portable C, XNNPACK's IGEMM prototype and
// goki packing (per 4 columns: 4 int32 biases, then per tap kc x 4 int8 weights, then 4 float scales). Each tap's
// row pointer is read at itself + a_offset unless it is the zero buffer. Written for lowp.
#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

void xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, size_t a_offset, const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr == 1 && ks % sizeof(void*) == 0);
  (void) cm_stride;
  const int32_t zp = params->fp32_scalar.output_zero_point;
  const float vmin = (float) ((int32_t) params->fp32_scalar.output_min - zp);
  const float vmax = (float) ((int32_t) params->fp32_scalar.output_max - zp);
  do {
    int32_t vacc[4];
    for (int n = 0; n < 4; n++) vacc[n] = ((const int32_t*) w)[n];
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + 4);
    for (size_t tap = 0; tap < ks / sizeof(void*); tap++) {
      const int8_t* a0 = a[tap] == zero ? zero : (const int8_t*) ((uintptr_t) a[tap] + a_offset);
      for (size_t k = 0; k < kc; k++) {
        for (int n = 0; n < 4; n++) vacc[n] += (int32_t) a0[k] * (int32_t) wk[n];
        wk += 4;
      }
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
