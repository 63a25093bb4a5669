/* lowp's own qu8 GEMM micro-kernel, 2x8c8, fp32 requantization, AVX2: written against XNNPACK's ukernel ABI
 * (kernels/include/lowp/xnnpack.h) in the style of XNNPACK's qu8 AVX2 c8 kernels. Facts, not code, from XNNPACK's
 * src/qu8-gemm (MRx8c8-avx2 template) and src/xnnpack/microparams.h (xnn_qu8_conv_minmax_params.fp32_scalar):
 * A and the weights are uint8, zero-extended to 16 bits; the kernel zero point (from the params) is subtracted from
 * each weight before VPMADDWD, so every pair sum is (a)(w - kzp) with a in [0, 255] and w - kzp in [-255, 255]:
 * exact in int32. The per-tensor scale is in the params; the output is uint8: VPACKSSDW, VPADDSW zero point,
 * VPACKUSWB, VPMAXUB output_min.
 *
 * Packed weights, per block of 8 columns (lowp.kernels.xnnpack.pack_weights with pad = kernel zero point, as
 * xnn_pack_qu8_gemm_goi_w): 8 int32 (bias - izp * column sum + K * izp * kzp), then for each 8 deep slice of k,
 * 8 bytes of column 0, ..., 8 of column 7. Padding is the kernel zero point, so a padded weight less it is 0 and
 * the bytes of A read past K (the documented over-read) add nothing. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

#define MR 2
#define NR 8
#define KR 8

static inline void store_u32(void *p, uint32_t v) { memcpy(p, &v, sizeof v); }
static inline void store_u16(void *p, uint16_t v) { memcpy(p, &v, sizeof v); }

/* Column 2j's bias in element 0 of the low 128-bit half, column 2j+1's in element 0 of the high half. */
static inline __m256i bias_pair(const int32_t *bias, int j) {
  const __m128i lo = _mm_cvtsi32_si128(bias[2 * j]);
  const __m128i hi = _mm_cvtsi32_si128(bias[2 * j + 1]);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* One row's 8 bytes of A, zero-extended to 16 bits, in both halves. */
static inline __m256i load_a(const uint8_t *a) {
  return _mm256_cvtepu8_epi16(_mm_broadcastq_epi64(_mm_loadl_epi64((const __m128i *) a)));
}

/* 8 k of two columns, zero-extended, less the kernel zero point. */
static inline __m256i load_b(const uint8_t *w, __m256i vkzp) {
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *) w)), vkzp);
}

static inline __m256i reduce(__m256i v01, __m256i v23, __m256i v45, __m256i v67) {
  const __m256i v0213 = _mm256_hadd_epi32(v01, v23);
  const __m256i v4657 = _mm256_hadd_epi32(v45, v67);
  const __m256i v02461357 = _mm256_hadd_epi32(v0213, v4657);
  return _mm256_permutevar8x32_epi32(v02461357, _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0));
}

static inline __m256i scale_and_convert(__m256i vacc, __m256 vscale, __m256 vmax_less_zp) {
  __m256 vf = _mm256_mul_ps(_mm256_cvtepi32_ps(vacc), vscale);
  vf = _mm256_min_ps(vf, vmax_less_zp);
  return _mm256_cvtps_epi32(vf);
}

void lowp_qu8_gemm_minmax_fp32_ukernel_2x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const uint8_t *restrict a, size_t a_stride, const void *restrict w,
    uint8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qu8_fp32_params *params) {
  kc = (kc + KR - 1) & ~(size_t) (KR - 1);
  const uint8_t *a0 = a;
  uint8_t *c0 = c;
  const uint8_t *a1 = (const uint8_t *) ((uintptr_t) a0 + a_stride);
  uint8_t *c1 = (uint8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }

  const __m256i vkzp = _mm256_set1_epi16((int16_t) params->kernel_zero_point);
  const __m256 vscale = _mm256_set1_ps(params->scale);
  const __m256 vmax_less_zp =
      _mm256_set1_ps((float) ((int32_t) params->output_max - (int32_t) params->output_zero_point));
  const __m256i vzero_point = _mm256_set1_epi16(params->output_zero_point);
  const __m128i vmin = _mm_set1_epi8((char) (uint8_t) params->output_min);

  do {
    const int32_t *bias = (const int32_t *) w;
    __m256i vacc0x01 = bias_pair(bias, 0), vacc0x23 = bias_pair(bias, 1);
    __m256i vacc0x45 = bias_pair(bias, 2), vacc0x67 = bias_pair(bias, 3);
    __m256i vacc1x01 = vacc0x01, vacc1x23 = vacc0x23, vacc1x45 = vacc0x45, vacc1x67 = vacc0x67;
    w = (const int32_t *) w + NR;

    for (size_t k = 0; k < kc; k += KR) {
      const __m256i vxa0 = load_a(a0), vxa1 = load_a(a1);
      a0 += KR; a1 += KR;
      const uint8_t *wb = (const uint8_t *) w;
      const __m256i vxb01 = load_b(wb, vkzp), vxb23 = load_b(wb + 16, vkzp);
      const __m256i vxb45 = load_b(wb + 32, vkzp), vxb67 = load_b(wb + 48, vkzp);
      vacc0x01 = _mm256_add_epi32(vacc0x01, _mm256_madd_epi16(vxa0, vxb01));
      vacc0x23 = _mm256_add_epi32(vacc0x23, _mm256_madd_epi16(vxa0, vxb23));
      vacc0x45 = _mm256_add_epi32(vacc0x45, _mm256_madd_epi16(vxa0, vxb45));
      vacc0x67 = _mm256_add_epi32(vacc0x67, _mm256_madd_epi16(vxa0, vxb67));
      vacc1x01 = _mm256_add_epi32(vacc1x01, _mm256_madd_epi16(vxa1, vxb01));
      vacc1x23 = _mm256_add_epi32(vacc1x23, _mm256_madd_epi16(vxa1, vxb23));
      vacc1x45 = _mm256_add_epi32(vacc1x45, _mm256_madd_epi16(vxa1, vxb45));
      vacc1x67 = _mm256_add_epi32(vacc1x67, _mm256_madd_epi16(vxa1, vxb67));
      w = (const uint8_t *) w + NR * KR;
    }

    const __m256i vi0 = scale_and_convert(reduce(vacc0x01, vacc0x23, vacc0x45, vacc0x67), vscale, vmax_less_zp);
    const __m256i vi1 = scale_and_convert(reduce(vacc1x01, vacc1x23, vacc1x45, vacc1x67), vscale, vmax_less_zp);

    /* [r0 0-3, r1 0-3 | r0 4-7, r1 4-7] + zp, reordered to [r0 0-7 | r1 0-7], then uint8 (saturating) */
    __m256i v01 = _mm256_adds_epi16(_mm256_packs_epi32(vi0, vi1), vzero_point);
    v01 = _mm256_permute4x64_epi64(v01, _MM_SHUFFLE(3, 1, 2, 0));
    __m128i vout = _mm_packus_epi16(_mm256_castsi256_si128(v01), _mm256_extracti128_si256(v01, 1));
    vout = _mm_max_epu8(vout, vmin);        /* [r0 0-7 | r1 0-7] */

    if (nc >= NR) {
      _mm_storel_epi64((__m128i *) c0, vout);
      _mm_storeh_pi((__m64 *) c1, _mm_castsi128_ps(vout));
      c0 = (uint8_t *) ((uintptr_t) c0 + cn_stride);
      c1 = (uint8_t *) ((uintptr_t) c1 + cn_stride);
      a0 -= kc; a1 -= kc;
      nc -= NR;
    } else {
      if (nc & 4) {
        store_u32(c0, (uint32_t) _mm_cvtsi128_si32(vout));
        store_u32(c1, (uint32_t) _mm_extract_epi32(vout, 2));
        c0 += 4; c1 += 4;
        vout = _mm_srli_epi64(vout, 32);
      }
      if (nc & 2) {
        store_u16(c0, (uint16_t) _mm_extract_epi16(vout, 0));
        store_u16(c1, (uint16_t) _mm_extract_epi16(vout, 4));
        c0 += 2; c1 += 2;
        vout = _mm_srli_epi64(vout, 16);
      }
      if (nc & 1) {
        *c0 = (uint8_t) _mm_extract_epi8(vout, 0);
        *c1 = (uint8_t) _mm_extract_epi8(vout, 8);
      }
      nc = 0;
    }
  } while (nc != 0);
}
