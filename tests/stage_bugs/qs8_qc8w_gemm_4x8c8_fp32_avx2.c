/* tests/test_stage_families.py: lowp's qs8-qc8w 4x8c8 AVX2 kernel (kernels/quantized/qs8_qc8w_gemm_4x8c8_fp32_avx2.c,
 * whose header gives the facts it follows), with LOWP_BUG selecting one one-line bug of its fp32 output stage
 * (0: none, the correct kernel):
 *   1 VCVTTPS2DQ for VCVTPS2DQ (truncates)            2 no VPMAXSB with output_min
 *   3 no VMINPS with output_max - zp                  4 VPADDW for VPADDSW (the zero point wraps in int16)
 *   5 VPSUBSW for VPADDSW (the zero point subtracted) 6 the zero point never added
 *   7 VPADDB of the zero point after VPACKSSWB        8 output_min and output_max swapped
 *   9 VMINPS with output_max (not less the zero point) 10 every column's scale read from the block's first
 *   11 the biases of each column pair exchanged        12 VPADDD of the zero point before VPACKSSDW (known: the
 *      AVX-VNNI template's wrap) */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif

#define MR 4
#define NR 8
#define KR 8

static inline void store_u32(void *p, uint32_t v) { memcpy(p, &v, sizeof v); }
static inline void store_u16(void *p, uint16_t v) { memcpy(p, &v, sizeof v); }

/* The 8 int32 column biases of a block as 4 accumulators of two columns each: column 2j in element 0 of the low
 * 128-bit half, column 2j+1 in element 0 of the high half (the other elements start at 0). */
static inline __m256i bias_pair(const int32_t *bias, int j) {
#if LOWP_BUG == 11
  const __m128i lo = _mm_cvtsi32_si128(bias[2 * j + 1]);
  const __m128i hi = _mm_cvtsi32_si128(bias[2 * j]);
#else
  const __m128i lo = _mm_cvtsi32_si128(bias[2 * j]);
  const __m128i hi = _mm_cvtsi32_si128(bias[2 * j + 1]);
#endif
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* One row's 8 bytes of A, sign-extended to 16 bits and repeated in both halves (one half per column of a pair). */
static inline __m256i load_a(const int8_t *a) {
  return _mm256_cvtepi8_epi16(_mm_broadcastq_epi64(_mm_loadl_epi64((const __m128i *) a)));
}

/* Four partial-sum accumulators (columns 01, 23, 45, 67) into one vector of the 8 column sums, in column order:
 * VPHADDD twice gives columns 0 2 4 6 | 1 3 5 7, VPERMD interleaves them. */
static inline __m256i reduce(__m256i v01, __m256i v23, __m256i v45, __m256i v67) {
  const __m256i v0213 = _mm256_hadd_epi32(v01, v23);
  const __m256i v4657 = _mm256_hadd_epi32(v45, v67);
  const __m256i v02461357 = _mm256_hadd_epi32(v0213, v4657);
  return _mm256_permutevar8x32_epi32(v02461357, _mm256_set_epi32(7, 3, 6, 2, 5, 1, 4, 0));
}

/* The fp32 requantization up to the int32 VCVTPS2DQ gives: float(acc) * scale, capped at output_max - zero point. */
static inline __m256i scale_and_convert(__m256i vacc, __m256 vscale, __m256 vmax_less_zp) {
  __m256 vf = _mm256_mul_ps(_mm256_cvtepi32_ps(vacc), vscale);
#if LOWP_BUG != 3
  vf = _mm256_min_ps(vf, vmax_less_zp);
#endif
#if LOWP_BUG == 1
  return _mm256_cvttps_epi32(vf);
#else
  return _mm256_cvtps_epi32(vf);              /* round to nearest even (MXCSR default); INT_MIN if out of range */
#endif
}

void lowp_sb_qs8_qc8w_gemm_minmax_fp32_ukernel_4x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_params *params) {
  kc = (kc + KR - 1) & ~(size_t) (KR - 1);
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr < 2) { a1 = a0; c1 = c0; }
  const int8_t *a2 = (const int8_t *) ((uintptr_t) a1 + a_stride);
  int8_t *c2 = (int8_t *) ((uintptr_t) c1 + cm_stride);
  if (mr <= 2) { a2 = a1; c2 = c1; }
  const int8_t *a3 = (const int8_t *) ((uintptr_t) a2 + a_stride);
  int8_t *c3 = (int8_t *) ((uintptr_t) c2 + cm_stride);
  if (mr != 4) { a3 = a2; c3 = c2; }

#if LOWP_BUG == 8
  const __m256 vmax_less_zp =
      _mm256_set1_ps((float) ((int32_t) params->output_min - (int32_t) params->output_zero_point));
  const __m256i vmin = _mm256_set1_epi8((int8_t) params->output_max);
#elif LOWP_BUG == 9
  const __m256 vmax_less_zp = _mm256_set1_ps((float) params->output_max);
  const __m256i vmin = _mm256_set1_epi8((int8_t) params->output_min);
#else
  const __m256 vmax_less_zp =
      _mm256_set1_ps((float) ((int32_t) params->output_max - (int32_t) params->output_zero_point));
  const __m256i vmin = _mm256_set1_epi8((int8_t) params->output_min);
#endif
  const __m256i vzero_point = _mm256_set1_epi16(params->output_zero_point);

  do {
    const int32_t *bias = (const int32_t *) w;
    __m256i vacc0x01 = bias_pair(bias, 0), vacc0x23 = bias_pair(bias, 1);
    __m256i vacc0x45 = bias_pair(bias, 2), vacc0x67 = bias_pair(bias, 3);
    __m256i vacc1x01 = vacc0x01, vacc1x23 = vacc0x23, vacc1x45 = vacc0x45, vacc1x67 = vacc0x67;
    __m256i vacc2x01 = vacc0x01, vacc2x23 = vacc0x23, vacc2x45 = vacc0x45, vacc2x67 = vacc0x67;
    __m256i vacc3x01 = vacc0x01, vacc3x23 = vacc0x23, vacc3x45 = vacc0x45, vacc3x67 = vacc0x67;
    w = (const int32_t *) w + NR;

    for (size_t k = 0; k < kc; k += KR) {
      const __m256i vxa0 = load_a(a0), vxa1 = load_a(a1), vxa2 = load_a(a2), vxa3 = load_a(a3);
      a0 += KR; a1 += KR; a2 += KR; a3 += KR;
      const int8_t *wb = (const int8_t *) w;
      /* 16 bytes = 8 k of column 2j then 8 k of column 2j+1, sign-extended to the two halves */
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

    const __m256i vacc0 = reduce(vacc0x01, vacc0x23, vacc0x45, vacc0x67);
    const __m256i vacc1 = reduce(vacc1x01, vacc1x23, vacc1x45, vacc1x67);
    const __m256i vacc2 = reduce(vacc2x01, vacc2x23, vacc2x45, vacc2x67);
    const __m256i vacc3 = reduce(vacc3x01, vacc3x23, vacc3x45, vacc3x67);

#if LOWP_BUG == 10
    const __m256 vscale = _mm256_set1_ps(*(const float *) w);
#else
    const __m256 vscale = _mm256_loadu_ps((const float *) w);
#endif
    w = (const float *) w + NR;
    const __m256i vi0 = scale_and_convert(vacc0, vscale, vmax_less_zp);
    const __m256i vi1 = scale_and_convert(vacc1, vscale, vmax_less_zp);
    const __m256i vi2 = scale_and_convert(vacc2, vscale, vmax_less_zp);
    const __m256i vi3 = scale_and_convert(vacc3, vscale, vmax_less_zp);

    /* int32 -> int16 (saturating), + zero point (saturating), rows paired: [r0 0-3, r1 0-3 | r0 4-7, r1 4-7],
     * then the 64-bit quarters reordered to [r0 0-7 | r1 0-7] */
#if LOWP_BUG == 4
    __m256i v01 = _mm256_add_epi16(_mm256_packs_epi32(vi0, vi1), vzero_point);
    __m256i v23 = _mm256_add_epi16(_mm256_packs_epi32(vi2, vi3), vzero_point);
#elif LOWP_BUG == 5
    __m256i v01 = _mm256_subs_epi16(_mm256_packs_epi32(vi0, vi1), vzero_point);
    __m256i v23 = _mm256_subs_epi16(_mm256_packs_epi32(vi2, vi3), vzero_point);
#elif LOWP_BUG == 6 || LOWP_BUG == 7
    __m256i v01 = _mm256_packs_epi32(vi0, vi1);
    __m256i v23 = _mm256_packs_epi32(vi2, vi3);
#elif LOWP_BUG == 12
    const __m256i vzp32 = _mm256_set1_epi32(params->output_zero_point);
    __m256i v01 = _mm256_packs_epi32(_mm256_add_epi32(vi0, vzp32), _mm256_add_epi32(vi1, vzp32));
    __m256i v23 = _mm256_packs_epi32(_mm256_add_epi32(vi2, vzp32), _mm256_add_epi32(vi3, vzp32));
#else
    __m256i v01 = _mm256_adds_epi16(_mm256_packs_epi32(vi0, vi1), vzero_point);
    __m256i v23 = _mm256_adds_epi16(_mm256_packs_epi32(vi2, vi3), vzero_point);
#endif
    v01 = _mm256_permute4x64_epi64(v01, _MM_SHUFFLE(3, 1, 2, 0));
    v23 = _mm256_permute4x64_epi64(v23, _MM_SHUFFLE(3, 1, 2, 0));
    /* int16 -> int8 (saturating): [r0 0-7, r2 0-7 | r1 0-7, r3 0-7]; then the lower clamp */
    __m256i vout = _mm256_packs_epi16(v01, v23);
#if LOWP_BUG == 7
    vout = _mm256_add_epi8(vout, _mm256_set1_epi8((int8_t) params->output_zero_point));
#endif
#if LOWP_BUG != 2
    vout = _mm256_max_epi8(vout, vmin);
#endif
    __m128i vout02 = _mm256_castsi256_si128(vout);
    __m128i vout13 = _mm256_extracti128_si256(vout, 1);

    if (nc >= NR) {
      _mm_storel_epi64((__m128i *) c0, vout02);
      _mm_storel_epi64((__m128i *) c1, vout13);
      _mm_storeh_pi((__m64 *) c2, _mm_castsi128_ps(vout02));
      _mm_storeh_pi((__m64 *) c3, _mm_castsi128_ps(vout13));
      c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
      c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
      c2 = (int8_t *) ((uintptr_t) c2 + cn_stride);
      c3 = (int8_t *) ((uintptr_t) c3 + cn_stride);
      a0 -= kc; a1 -= kc; a2 -= kc; a3 -= kc;
      nc -= NR;
    } else {
      /* the last nc < 8 columns: 4, 2, 1 bytes at a time, shifting each row's 8 bytes down */
      if (nc & 4) {
        store_u32(c0, (uint32_t) _mm_cvtsi128_si32(vout02));
        store_u32(c1, (uint32_t) _mm_cvtsi128_si32(vout13));
        store_u32(c2, (uint32_t) _mm_extract_epi32(vout02, 2));
        store_u32(c3, (uint32_t) _mm_extract_epi32(vout13, 2));
        c0 += 4; c1 += 4; c2 += 4; c3 += 4;
        vout02 = _mm_srli_epi64(vout02, 32);
        vout13 = _mm_srli_epi64(vout13, 32);
      }
      if (nc & 2) {
        store_u16(c0, (uint16_t) _mm_extract_epi16(vout02, 0));
        store_u16(c1, (uint16_t) _mm_extract_epi16(vout13, 0));
        store_u16(c2, (uint16_t) _mm_extract_epi16(vout02, 4));
        store_u16(c3, (uint16_t) _mm_extract_epi16(vout13, 4));
        c0 += 2; c1 += 2; c2 += 2; c3 += 2;
        vout02 = _mm_srli_epi64(vout02, 16);
        vout13 = _mm_srli_epi64(vout13, 16);
      }
      if (nc & 1) {
        *c0 = (int8_t) _mm_extract_epi8(vout02, 0);
        *c1 = (int8_t) _mm_extract_epi8(vout13, 0);
        *c2 = (int8_t) _mm_extract_epi8(vout02, 8);
        *c3 = (int8_t) _mm_extract_epi8(vout13, 8);
      }
      nc = 0;
    }
  } while (nc != 0);
}
