/* lowp's own qd8-f32-qc8w GEMM micro-kernel, 4x8c8, AVX2 + FMA: dynamically quantized int8 A (one zero point and
 * inverse scale per row), per-channel int8 weights, float output. XNNPACK's ukernel ABI
 * (kernels/include/lowp/xnnpack.h), in the style of XNNPACK's MRx8c8 AVX2 qd8 kernels. Facts, not code, from
 * XNNPACK's src/qs8-gemm/MRx8c8-avx2.c.in @a9fefe7: the accumulators start at (-column sum) * the row's zero point
 * (VPMULLD), VPMADDWD of sign-extended bytes, two VPHADDD and a VPERMD, then VCVTDQ2PS, VMULPS by the row's
 * inv_scale, VFMADD by the column's scale and bias, VMAXPS with min, VMINPS with max.
 *
 * Packed weights, per block of 8 columns (lowp.kernels.xnnpack.pack_weights, kr = 8, sr = 1): 8 int32 (-column
 * sums), the weights in 8 deep slices (8 bytes of column 0, 8 of column 1, ...), 8 float32 column scales, 8 float32
 * biases. `quantization_params` starts at the call's first row.
 *
 * One departure from XNNPACK: its kernels read quantization_params[0..MR-1] whatever mr is, relying on the caller's
 * XNN_EXTRA_QUANTIZATION_PARAMS (15; 10 before 2024-11) entries of slack, which XNNPACK fills with copies of the last row
 * (src/operator-run.c xnn_compute_pad_qd8_params @f196d01): a row past mr then aliases the last row for A, C and its
 * parameters alike. This one reads only the mr rows it is handed and aliases the same way, so it needs no slack. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#define MR 4
#define NR 8
#define KR 8

/* The 8 int32 of a block for columns 2j, 2j+1 (element 0 of each 128-bit half), times a row's zero point. */
static inline __m256i ksum_pair(const int32_t *ksum, int j) {
  const __m128i lo = _mm_cvtsi32_si128(ksum[2 * j]);
  const __m128i hi = _mm_cvtsi32_si128(ksum[2 * j + 1]);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

static inline __m256i load_a(const int8_t *a) {
  return _mm256_cvtepi8_epi16(_mm_broadcastq_epi64(_mm_loadl_epi64((const __m128i *) a)));
}

static inline __m256i reduce(__m256i v01, __m256i v23, __m256i v45, __m256i v67) {
  const __m256i v0213 = _mm256_hadd_epi32(v01, v23);
  const __m256i v4657 = _mm256_hadd_epi32(v45, v67);
  const __m256i v02461357 = _mm256_hadd_epi32(v0213, v4657);
  return _mm256_permutevar8x32_epi32(v02461357, _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0));
}

/* fma(float(acc) * inv_scale, b_scale, bias), clamped: max with min first, then min with max (XNNPACK's order). */
static inline __m256 dequantize(__m256i vacc, __m256 vinv_scale, __m256 vb_scale, __m256 vbias, __m256 vmin,
                                __m256 vmax) {
  __m256 vout = _mm256_mul_ps(_mm256_cvtepi32_ps(vacc), vinv_scale);
  vout = _mm256_fmadd_ps(vout, vb_scale, vbias);
  vout = _mm256_max_ps(vout, vmin);
  return _mm256_min_ps(vout, vmax);
}

void lowp_qd8_f32_qc8w_gemm_minmax_ukernel_4x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  kc = (kc + KR - 1) & ~(size_t) (KR - 1);
  const struct lowp_xnn_qd8_quantization_params *q0 = quantization_params, *q1 = q0 + 1, *q2, *q3;
  const int8_t *a0 = a;
  float *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  float *c1 = (float *) ((uintptr_t) c0 + cm_stride);
  if (mr < 2) { a1 = a0; c1 = c0; q1 = q0; }
  const int8_t *a2 = (const int8_t *) ((uintptr_t) a1 + a_stride);
  float *c2 = (float *) ((uintptr_t) c1 + cm_stride);
  q2 = q1 + 1;
  if (mr <= 2) { a2 = a1; c2 = c1; q2 = q1; }
  const int8_t *a3 = (const int8_t *) ((uintptr_t) a2 + a_stride);
  float *c3 = (float *) ((uintptr_t) c2 + cm_stride);
  q3 = q2 + 1;
  if (mr != 4) { a3 = a2; c3 = c2; q3 = q2; }

  const __m256i vzp0 = _mm256_set1_epi32(q0->zero_point), vzp1 = _mm256_set1_epi32(q1->zero_point);
  const __m256i vzp2 = _mm256_set1_epi32(q2->zero_point), vzp3 = _mm256_set1_epi32(q3->zero_point);
  const __m256 vinv0 = _mm256_broadcast_ss(&q0->inv_scale), vinv1 = _mm256_broadcast_ss(&q1->inv_scale);
  const __m256 vinv2 = _mm256_broadcast_ss(&q2->inv_scale), vinv3 = _mm256_broadcast_ss(&q3->inv_scale);
  const __m256 vmin = _mm256_set1_ps(params->min);
  const __m256 vmax = _mm256_set1_ps(params->max);

  do {
    const int32_t *ksum = (const int32_t *) w;
    const __m256i vk01 = ksum_pair(ksum, 0), vk23 = ksum_pair(ksum, 1);
    const __m256i vk45 = ksum_pair(ksum, 2), vk67 = ksum_pair(ksum, 3);
    /* sum_k (a - zp) * b = sum_k a * b + zp * (-sum_k b): start from the second term (mod 2^32, VPMULLD) */
    __m256i vacc0x01 = _mm256_mullo_epi32(vk01, vzp0), vacc0x23 = _mm256_mullo_epi32(vk23, vzp0);
    __m256i vacc0x45 = _mm256_mullo_epi32(vk45, vzp0), vacc0x67 = _mm256_mullo_epi32(vk67, vzp0);
    __m256i vacc1x01 = _mm256_mullo_epi32(vk01, vzp1), vacc1x23 = _mm256_mullo_epi32(vk23, vzp1);
    __m256i vacc1x45 = _mm256_mullo_epi32(vk45, vzp1), vacc1x67 = _mm256_mullo_epi32(vk67, vzp1);
    __m256i vacc2x01 = _mm256_mullo_epi32(vk01, vzp2), vacc2x23 = _mm256_mullo_epi32(vk23, vzp2);
    __m256i vacc2x45 = _mm256_mullo_epi32(vk45, vzp2), vacc2x67 = _mm256_mullo_epi32(vk67, vzp2);
    __m256i vacc3x01 = _mm256_mullo_epi32(vk01, vzp3), vacc3x23 = _mm256_mullo_epi32(vk23, vzp3);
    __m256i vacc3x45 = _mm256_mullo_epi32(vk45, vzp3), vacc3x67 = _mm256_mullo_epi32(vk67, vzp3);
    w = (const int32_t *) w + NR;

    for (size_t k = 0; k < kc; k += KR) {
      const __m256i vxa0 = load_a(a0), vxa1 = load_a(a1), vxa2 = load_a(a2), vxa3 = load_a(a3);
      a0 += KR; a1 += KR; a2 += KR; a3 += KR;
      const int8_t *wb = (const int8_t *) w;
      const __m256i vxb01 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) wb));
      const __m256i vxb23 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (wb + 16)));
      const __m256i vxb45 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (wb + 32)));
      const __m256i vxb67 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (wb + 48)));
      vacc0x01 = _mm256_add_epi32(vacc0x01, _mm256_madd_epi16(vxa0, vxb01));
      vacc0x23 = _mm256_add_epi32(vacc0x23, _mm256_madd_epi16(vxa0, vxb23));
      vacc0x45 = _mm256_add_epi32(vacc0x45, _mm256_madd_epi16(vxa0, vxb45));
      vacc0x67 = _mm256_add_epi32(vacc0x67, _mm256_madd_epi16(vxa0, vxb67));
      vacc1x01 = _mm256_add_epi32(vacc1x01, _mm256_madd_epi16(vxa1, vxb01));
      vacc1x23 = _mm256_add_epi32(vacc1x23, _mm256_madd_epi16(vxa1, vxb23));
      vacc1x45 = _mm256_add_epi32(vacc1x45, _mm256_madd_epi16(vxa1, vxb45));
      vacc1x67 = _mm256_add_epi32(vacc1x67, _mm256_madd_epi16(vxa1, vxb67));
      vacc2x01 = _mm256_add_epi32(vacc2x01, _mm256_madd_epi16(vxa2, vxb01));
      vacc2x23 = _mm256_add_epi32(vacc2x23, _mm256_madd_epi16(vxa2, vxb23));
      vacc2x45 = _mm256_add_epi32(vacc2x45, _mm256_madd_epi16(vxa2, vxb45));
      vacc2x67 = _mm256_add_epi32(vacc2x67, _mm256_madd_epi16(vxa2, vxb67));
      vacc3x01 = _mm256_add_epi32(vacc3x01, _mm256_madd_epi16(vxa3, vxb01));
      vacc3x23 = _mm256_add_epi32(vacc3x23, _mm256_madd_epi16(vxa3, vxb23));
      vacc3x45 = _mm256_add_epi32(vacc3x45, _mm256_madd_epi16(vxa3, vxb45));
      vacc3x67 = _mm256_add_epi32(vacc3x67, _mm256_madd_epi16(vxa3, vxb67));
      w = (const int8_t *) w + NR * KR;
    }

    const __m256 vb_scale = _mm256_loadu_ps((const float *) w);
    const __m256 vbias = _mm256_loadu_ps((const float *) w + NR);
    w = (const float *) w + 2 * NR;
    __m256 vout0 = dequantize(reduce(vacc0x01, vacc0x23, vacc0x45, vacc0x67), vinv0, vb_scale, vbias, vmin, vmax);
    __m256 vout1 = dequantize(reduce(vacc1x01, vacc1x23, vacc1x45, vacc1x67), vinv1, vb_scale, vbias, vmin, vmax);
    __m256 vout2 = dequantize(reduce(vacc2x01, vacc2x23, vacc2x45, vacc2x67), vinv2, vb_scale, vbias, vmin, vmax);
    __m256 vout3 = dequantize(reduce(vacc3x01, vacc3x23, vacc3x45, vacc3x67), vinv3, vb_scale, vbias, vmin, vmax);

    if (nc >= NR) {
      _mm256_storeu_ps(c0, vout0);
      _mm256_storeu_ps(c1, vout1);
      _mm256_storeu_ps(c2, vout2);
      _mm256_storeu_ps(c3, vout3);
      c0 = (float *) ((uintptr_t) c0 + cn_stride);
      c1 = (float *) ((uintptr_t) c1 + cn_stride);
      c2 = (float *) ((uintptr_t) c2 + cn_stride);
      c3 = (float *) ((uintptr_t) c3 + cn_stride);
      a0 -= kc; a1 -= kc; a2 -= kc; a3 -= kc;
      nc -= NR;
    } else {
      __m128 v0 = _mm256_castps256_ps128(vout0), v1 = _mm256_castps256_ps128(vout1);
      __m128 v2 = _mm256_castps256_ps128(vout2), v3 = _mm256_castps256_ps128(vout3);
      if (nc & 4) {
        _mm_storeu_ps(c0, v0); _mm_storeu_ps(c1, v1); _mm_storeu_ps(c2, v2); _mm_storeu_ps(c3, v3);
        v0 = _mm256_extractf128_ps(vout0, 1); v1 = _mm256_extractf128_ps(vout1, 1);
        v2 = _mm256_extractf128_ps(vout2, 1); v3 = _mm256_extractf128_ps(vout3, 1);
        c0 += 4; c1 += 4; c2 += 4; c3 += 4;
      }
      if (nc & 2) {
        _mm_storel_pi((__m64 *) c0, v0); _mm_storel_pi((__m64 *) c1, v1);
        _mm_storel_pi((__m64 *) c2, v2); _mm_storel_pi((__m64 *) c3, v3);
        v0 = _mm_movehl_ps(v0, v0); v1 = _mm_movehl_ps(v1, v1);
        v2 = _mm_movehl_ps(v2, v2); v3 = _mm_movehl_ps(v3, v3);
        c0 += 2; c1 += 2; c2 += 2; c3 += 2;
      }
      if (nc & 1) {
        _mm_store_ss(c0, v0); _mm_store_ss(c1, v1); _mm_store_ss(c2, v2); _mm_store_ss(c3, v3);
      }
      nc = 0;
    }
  } while (nc != 0);
}
