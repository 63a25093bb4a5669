/* lowp's own qdu8-f32-qc8w GEMM micro-kernel, 1x16c4, AVX-512 VNNI: the kind of kernel XNNPACK registers for its
 * qdu8_f32_qc8w configuration (google/XNNPACK @75db3c0 src/configs/gemm-config.c L4043-4073; test YAML entries with
 * `unsigned-inputs: True`): A is uint8 with a uint8 zero point per row (the operator's quantization shifts both
 * by 128), so VPDPBUSD multiplies it with the signed weights as they are, and the packing is the plain qs8 one
 * (xnn_pack_qs8_gemm_goi_w with input_zero_point 1: -column sums, which the kernel multiplies by the row's zero
 * point). Facts, not code; the tail is XNNPACK's qd8 one: VCVTDQ2PS, VMULPS inv_scale, VFMADD(filter scale,
 * bias), VMAXPS min, VMINPS max (src/qs8-gemm/MRx16c4-avx512vnni.c.in).
 *
 * Packed weights (kr = 4): per 16 columns, 16 int32 (-column sums), per 4-deep k block 4 int8 of each of the 16
 * columns, 16 float filter scales, 16 float biases. kc is rounded up to 4 and A read that far. */
#include <immintrin.h>
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

void lowp_qdu8_f32_qc8w_gemm_minmax_ukernel_1x16c4__avx512vnni(
    size_t mr, size_t nc, size_t kc, const uint8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  assert(mr == 1 && nc != 0 && kc != 0);
  (void) a_stride; (void) cm_stride;
  kc = (kc + 3) & ~(size_t) 3;
  const __m512i vzp = _mm512_set1_epi32(quantization_params[0].zero_point);
  const __m512 vinv_scale = _mm512_set1_ps(quantization_params[0].inv_scale);
  const __m512 vmin = _mm512_set1_ps(params->min), vmax = _mm512_set1_ps(params->max);
  do {
    __m512i vacc = _mm512_mullo_epi32(_mm512_loadu_si512(w), vzp);       /* -colsum * zero point */
    w = (const int32_t *) w + 16;
    for (size_t k = 0; k < kc; k += 4) {
      uint32_t a4;
      memcpy(&a4, a + k, sizeof a4);
      vacc = _mm512_dpbusd_epi32(vacc, _mm512_set1_epi32((int32_t) a4), _mm512_loadu_si512(w));
      w = (const int8_t *) w + 64;
    }
    __m512 vout = _mm512_mul_ps(_mm512_cvtepi32_ps(vacc), vinv_scale);
    vout = _mm512_fmadd_ps(vout, _mm512_loadu_ps(w), _mm512_loadu_ps((const float *) w + 16));
    w = (const float *) w + 32;
    vout = _mm512_min_ps(_mm512_max_ps(vout, vmin), vmax);
    if (nc >= 16) {
      _mm512_storeu_ps(c, vout);
      c = (float *) ((uintptr_t) c + cn_stride);
      nc -= 16;
    } else {
      _mm512_mask_storeu_ps(c, (__mmask16) ((1u << nc) - 1), vout);
      nc = 0;
    }
  } while (nc != 0);
}
