/* lowp's own qs8-qc8w GEMM micro-kernel, 4x16c4, fp32 requantization, AVX-512 VNNI: XNNPACK's ukernel ABI
 * (kernels/include/lowp/xnnpack.h), in the style of XNNPACK's MRx16c4 AVX-512 VNNI kernels. Facts, not code, from
 * XNNPACK's src/qs8-gemm/MRx16c4-avx512vnni.c.in @ad7560b: kc rounded up to 4 and A read 4 bytes at a time (the
 * over-read), each row's 4 bytes broadcast and XORed with 0x80 so VPDPBUSD (u8 x s8) can take a signed A (the packed
 * bias carries the compensation: XNNPACK packs qs8 weights for these kernels with input_zero_point + 128, lowp with
 * a_shift = 128), one zmm accumulator of 16 columns per row, then VCVTDQ2PS, VMULPS by the column scales, VMINPS with
 * output_max - output_zero_point, VCVTPS2DQ.
 *
 * Packed weights, per block of 16 columns (lowp.kernels.xnnpack.pack_weights, kr = 4, sr = 1): 16 int32 (bias less
 * (input_zero_point + 128) * column sum), per 4 deep slice of k 16 x 4 bytes (column 0's 4 bytes first), then 16
 * float32 scales.
 *
 * SEEDED CORNER (on purpose: the AVX-VNNI bug of lowp issue 11, for the conformance run to find): after VCVTPS2DQ
 * the output zero point is added with a plain 32-bit VPADDD, as XNNPACK's template does (_mm512_add_epi32 before its
 * saturating VPMOVSDB). It wraps: a scaled value <= -2^31 converts to INT_MIN (0x80000000), INT_MIN + a negative
 * zero point is a large positive number, and VPACKSSDW / VPACKSSWB saturate it to 127, where the contract (and this
 * kernel's AVX2 sibling, which adds the zero point after VPACKSSDW with the saturating VPADDSW) give -128 (or
 * output_min). Any other value is right: every float VCVTPS2DQ takes above -2^31 is at least -2^31 + 128, so adding
 * a zero point >= -128 cannot wrap, and VMINPS keeps the top at output_max - zero point. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

#define MR 4
#define NR 16
#define KR 4

static inline int32_t load_u32(const int8_t *p) { int32_t v; memcpy(&v, p, sizeof v); return v; }

/* One row's 4 bytes of A as u8 for VPDPBUSD: broadcast to every dword and the sign bit flipped (a + 128). */
static inline __m512i load_a(const int8_t *a, __m512i vsign_mask) {
  return _mm512_xor_si512(_mm512_set1_epi32(load_u32(a)), vsign_mask);
}

/* float(acc) * scale, capped at output_max - zero point, converted (round to nearest even; INT_MIN if out of
 * range), and the zero point added: the seeded VPADDD. */
static inline __m512i requantize(__m512i vacc, __m512 vscale, __m512 vmax_less_zp, __m512i vzero_point) {
  __m512 vf = _mm512_mul_ps(_mm512_cvtepi32_ps(vacc), vscale);
  vf = _mm512_min_ps(vf, vmax_less_zp);
  const __m512i vi = _mm512_cvtps_epi32(vf);
  return _mm512_add_epi32(vi, vzero_point);   /* SEEDED: wraps at INT_MIN + negative zero point */
}

void lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__avx512vnni(
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

  const __m512i vsign_mask = _mm512_set1_epi8((char) 0x80);
  const __m512 vmax_less_zp =
      _mm512_set1_ps((float) ((int32_t) params->output_max - (int32_t) params->output_zero_point));
  const __m512i vzero_point = _mm512_set1_epi32(params->output_zero_point);
  const __m512i vmin = _mm512_set1_epi8((char) (int8_t) params->output_min);
  /* after the packs, 128-bit lane l holds rows 0..3's columns 4l..4l+3 (4 bytes each): gather each row's dwords */
  const __m512i vrows = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);

  do {
    __m512i vacc0 = _mm512_loadu_si512(w);
    __m512i vacc1 = vacc0, vacc2 = vacc0, vacc3 = vacc0;
    w = (const int32_t *) w + NR;

    for (size_t k = 0; k < kc; k += KR) {
      const __m512i va0 = load_a(a0, vsign_mask), va1 = load_a(a1, vsign_mask);
      const __m512i va2 = load_a(a2, vsign_mask), va3 = load_a(a3, vsign_mask);
      a0 += KR; a1 += KR; a2 += KR; a3 += KR;
      const __m512i vb = _mm512_loadu_si512(w);      /* 16 columns x 4 k */
      vacc0 = _mm512_dpbusd_epi32(vacc0, va0, vb);
      vacc1 = _mm512_dpbusd_epi32(vacc1, va1, vb);
      vacc2 = _mm512_dpbusd_epi32(vacc2, va2, vb);
      vacc3 = _mm512_dpbusd_epi32(vacc3, va3, vb);
      w = (const int8_t *) w + NR * KR;
    }

    const __m512 vscale = _mm512_loadu_ps(w);
    w = (const float *) w + NR;
    const __m512i vi0 = requantize(vacc0, vscale, vmax_less_zp, vzero_point);
    const __m512i vi1 = requantize(vacc1, vscale, vmax_less_zp, vzero_point);
    const __m512i vi2 = requantize(vacc2, vscale, vmax_less_zp, vzero_point);
    const __m512i vi3 = requantize(vacc3, vscale, vmax_less_zp, vzero_point);

    /* int32 -> int16 -> int8, saturating (VPACKSSDW, VPACKSSWB, per 128-bit lane), then the lower clamp (VPMAXSB);
     * the upper one was the VMINPS */
    __m512i vout = _mm512_packs_epi16(_mm512_packs_epi32(vi0, vi1), _mm512_packs_epi32(vi2, vi3));
    vout = _mm512_max_epi8(vout, vmin);
    vout = _mm512_permutexvar_epi32(vrows, vout);     /* lane r: row r's 16 columns */
    const __m128i vout0 = _mm512_castsi512_si128(vout);
    const __m128i vout1 = _mm512_extracti32x4_epi32(vout, 1);
    const __m128i vout2 = _mm512_extracti32x4_epi32(vout, 2);
    const __m128i vout3 = _mm512_extracti32x4_epi32(vout, 3);

    if (nc >= NR) {
      _mm_storeu_si128((__m128i *) c0, vout0);
      _mm_storeu_si128((__m128i *) c1, vout1);
      _mm_storeu_si128((__m128i *) c2, vout2);
      _mm_storeu_si128((__m128i *) c3, vout3);
      c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
      c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
      c2 = (int8_t *) ((uintptr_t) c2 + cn_stride);
      c3 = (int8_t *) ((uintptr_t) c3 + cn_stride);
      a0 -= kc; a1 -= kc; a2 -= kc; a3 -= kc;
      nc -= NR;
    } else {
      const __mmask16 vmask = _cvtu32_mask16((UINT32_C(1) << nc) - 1);   /* the last nc < 16 columns */
      _mm_mask_storeu_epi8(c0, vmask, vout0);
      _mm_mask_storeu_epi8(c1, vmask, vout1);
      _mm_mask_storeu_epi8(c2, vmask, vout2);
      _mm_mask_storeu_epi8(c3, vmask, vout3);
      nc = 0;
    }
  } while (nc != 0);
}
