// lowp's test tree: a 2x8c8 qs8-qc8w GEMM micro-kernel for AVX2 with XNNPACK's prototype and packing (per 8 columns:
// 8 int32 biases, then per 8 k the 8 columns' 8 weights, then 8 float scales), written for lowp. A and the weights
// are sign-extended to int16 and multiplied in pairs with VPMADDWD (exact: two int8 products fit int32), two
// columns per 256-bit register; the x86 fp32 requantization: VCVTDQ2PS, VMULPS, VMINPS (max - zp), VCVTPS2DQ,
// VPACKSSDW, VPADDSW zp, VPACKSSWB, VPMAXSB min. kc is rounded up to 8: A is read up to 7 bytes past a row.
#include <assert.h>
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/xnnpack/gemm.h"


void xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  assert(mr != 0 && mr <= 2);
  kc = (kc + 7) & ~(size_t) 7;
  const int8_t* a0 = a;
  int8_t* c0 = c;
  const int8_t* a1 = (const int8_t*) ((uintptr_t) a0 + a_stride);
  int8_t* c1 = (int8_t*) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) {
    a1 = a0;
    c1 = c0;
  }
  const __m256 vmax_less_zp = _mm256_set1_ps((float) ((int32_t) params->fp32_scalar.output_max -
                                                      (int32_t) params->fp32_scalar.output_zero_point));
  const __m256i vzero_point = _mm256_set1_epi16(params->fp32_scalar.output_zero_point);
  const __m128i vmin = _mm_set1_epi8((int8_t) params->fp32_scalar.output_min);
  do {
    int32_t bias[8];
    memcpy(bias, w, sizeof(bias));
    const int8_t* wk = (const int8_t*) w + 8 * sizeof(int32_t);
    __m256i vacc0[4], vacc1[4];
    for (int p = 0; p < 4; p++) vacc0[p] = vacc1[p] = _mm256_setzero_si256();
    for (size_t k = 0; k < kc; k += 8) {
      const __m256i va0 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*) (a0 + k))));
      const __m256i va1 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*) (a1 + k))));
      for (int p = 0; p < 4; p++) {
        const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*) (wk + 16 * p)));   // columns 2p, 2p+1
        vacc0[p] = _mm256_add_epi32(vacc0[p], _mm256_madd_epi16(va0, vb));
        vacc1[p] = _mm256_add_epi32(vacc1[p], _mm256_madd_epi16(va1, vb));
      }
      wk += 64;
    }
    // Sum each column's partial sums: store and add (clear beats clever in a test kernel).
    int32_t acc0[8], acc1[8];
    for (int p = 0; p < 4; p++) {
      int32_t lanes0[8], lanes1[8];
      _mm256_storeu_si256((__m256i*) lanes0, vacc0[p]);
      _mm256_storeu_si256((__m256i*) lanes1, vacc1[p]);
      acc0[2 * p] = bias[2 * p] + lanes0[0] + lanes0[1] + lanes0[2] + lanes0[3];
      acc0[2 * p + 1] = bias[2 * p + 1] + lanes0[4] + lanes0[5] + lanes0[6] + lanes0[7];
      acc1[2 * p] = bias[2 * p] + lanes1[0] + lanes1[1] + lanes1[2] + lanes1[3];
      acc1[2 * p + 1] = bias[2 * p + 1] + lanes1[4] + lanes1[5] + lanes1[6] + lanes1[7];
    }
    const __m256 vscale = _mm256_loadu_ps((const float*) wk);
    w = (const void*) (wk + 8 * sizeof(float));
    __m256 vf0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i*) acc0)), vscale);
    __m256 vf1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i*) acc1)), vscale);
    vf0 = _mm256_min_ps(vf0, vmax_less_zp);
    vf1 = _mm256_min_ps(vf1, vmax_less_zp);
    // rows 0 and 1 packed to int16 per 128-bit lane: [r0 c0-3, r1 c0-3 | r0 c4-7, r1 c4-7]
    __m256i v16 = _mm256_packs_epi32(_mm256_cvtps_epi32(vf0), _mm256_cvtps_epi32(vf1));
    v16 = _mm256_adds_epi16(v16, vzero_point);
    const __m128i v8 = _mm_packs_epi16(_mm256_castsi256_si128(v16), _mm256_extracti128_si256(v16, 1));
    // bytes: r0 c0-3, r1 c0-3, r0 c4-7, r1 c4-7
    const __m128i vout = _mm_max_epi8(v8, vmin);
    int8_t bytes[16];
    _mm_storeu_si128((__m128i*) bytes, vout);
    const int8_t row0[8] = {bytes[0], bytes[1], bytes[2], bytes[3], bytes[8], bytes[9], bytes[10], bytes[11]};
    const int8_t row1[8] = {bytes[4], bytes[5], bytes[6], bytes[7], bytes[12], bytes[13], bytes[14], bytes[15]};
    const size_t stored = nc < 8 ? nc : 8;
    memcpy(c1, row1, stored);
    memcpy(c0, row0, stored);
    c0 = (int8_t*) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t*) ((uintptr_t) c1 + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
