/* tests/test_half_conversions.py: float32 -> binary16 (F16C VCVTPS2PH, rounding to nearest even and toward zero)
 * and float32 -> bfloat16 (AVX512-BF16 VCVTNEPS2BF16), run on arrays by the host CPU. Each file is built with its
 * own flags (-mf16c; -mavx512bf16 -mavx512vl): a CPU without AVX512-BF16 never calls the second. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifdef LOWP_F16C
void lowp_vcvtps2ph_rne(const float *a, uint16_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4)
    _mm_storel_epi64((__m128i *) (out + i), _mm_cvtps_ph(_mm_loadu_ps(a + i), _MM_FROUND_TO_NEAREST_INT));
}
void lowp_vcvtps2ph_trunc(const float *a, uint16_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4)
    _mm_storel_epi64((__m128i *) (out + i), _mm_cvtps_ph(_mm_loadu_ps(a + i), _MM_FROUND_TO_ZERO));
}
#endif

#ifdef LOWP_AVX512BF16
void lowp_vcvtneps2bf16(const float *a, uint16_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4) {
    __m128bh r = _mm_cvtneps_pbh(_mm_loadu_ps(a + i));
    _mm_storel_epi64((__m128i *) (out + i), (__m128i) r);
  }
}
#endif
