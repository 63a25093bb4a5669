// lowp's test tree: a 2x4 qs8-qc8w GEMM micro-kernel in portable C with the fmagic requantization (a float clamp,
// then the magic bias 12582912.0f: the integer part lands in the float's low mantissa bits). Written for lowp.
// SEEDED BUG: when kc > 8 its k loop stops one short (a bound computed for a pipelined loop); lowp must find it,
// with the 1x1x9 counterexample.
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/xnnpack/gemm.h"

static inline uint32_t float_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}

void xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr != 0 && mr <= 2);
  const int8_t* a0 = a;
  int8_t* c0 = c;
  const int8_t* a1 = (const int8_t*) ((uintptr_t) a0 + a_stride);
  int8_t* c1 = (int8_t*) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) {
    a1 = a0;
    c1 = c0;
  }
  const int32_t zero_point = params->fp32_scalar.output_zero_point;
  const float vmin = (float) ((int32_t) params->fp32_scalar.output_min - zero_point);
  const float vmax = (float) ((int32_t) params->fp32_scalar.output_max - zero_point);
  const float vmagic_bias = 12582912.0f;
  const int32_t vmagic_bias_less_zero_point = INT32_C(0x4B400000) - zero_point;
  const size_t depth = kc > 8 ? kc - 1 : kc;      // the seeded bug: kc, not kc - 1
  do {
    int32_t vacc0[4], vacc1[4];
    for (int n = 0; n < 4; n++) vacc0[n] = vacc1[n] = ((const int32_t*) w)[n];
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + 4);
    for (size_t k = 0; k < depth; k++) {
      for (int n = 0; n < 4; n++) {
        vacc0[n] += (int32_t) a0[k] * (int32_t) wk[n];
        vacc1[n] += (int32_t) a1[k] * (int32_t) wk[n];
      }
      wk += 4;
    }
    wk += 4 * (kc - depth);
    const float* vscale = (const float*) wk;
    int8_t out0[4], out1[4];
    for (int n = 0; n < 4; n++) {
      float vf0 = (float) vacc0[n] * vscale[n];
      float vf1 = (float) vacc1[n] * vscale[n];
      vf0 = vf0 < vmin ? vmin : vf0;
      vf1 = vf1 < vmin ? vmin : vf1;
      vf0 = vf0 > vmax ? vmax : vf0;
      vf1 = vf1 > vmax ? vmax : vf1;
      out0[n] = (int8_t) ((int32_t) float_bits(vf0 + vmagic_bias) - vmagic_bias_less_zero_point);
      out1[n] = (int8_t) ((int32_t) float_bits(vf1 + vmagic_bias) - vmagic_bias_less_zero_point);
    }
    w = (const void*) (vscale + 4);
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) {
      c1[n] = out1[n];
      c0[n] = out0[n];
    }
    c0 = (int8_t*) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t*) ((uintptr_t) c1 + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
