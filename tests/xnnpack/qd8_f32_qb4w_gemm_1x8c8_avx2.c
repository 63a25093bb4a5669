/* lowp's own qd8-f32-qb4w GEMM micro-kernel, 1x8c8, AVX2 + FMA, computing the float order XNNPACK's AVX2 blockwise
 * kernels use (facts, not code: google/XNNPACK @75db3c0 src/qd8-f32-qb4w-gemm/gen/qd8-f32-qb4w-gemm-1x8c8-minmax-
 * avx2.c): per pair of columns one __m256, four int32 lanes a column (VPMADDWD: lane l holds the k with
 * (k mod 8) / 2 == l), each lane's block sum converted and fused-multiply-added with the block's bf16 scale, the
 * lanes summed by two VHADDPS after the last block, then one FMA with inv_scale and the bias, clamp. Lane 0 of each
 * column starts at the packer's vksum times the zero point, the others at 0 times it. Packing (kr = 8): per 8
 * columns, 8 float vksums, then per block of bl k its chunks of 16 k (8 bytes a column: k0 + j in the low nibble of
 * byte j, k0 + j + 8 in the high one) and 8 bf16 scales / 16, then 8 float biases. The lowp model it is checked
 * against: qb4w-fma-fused-lanes4 (lowp.kernels.models.quant). */
#include <assert.h>
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static __m256 column_pair(const uint16_t *scales, int p) {
  /* column 2p's scale in the low four lanes, column 2p + 1's in the high four: a bf16 is a float's high half */
  const __m128 lo = _mm_castsi128_ps(_mm_set1_epi32((int32_t) ((uint32_t) scales[2 * p] << 16)));
  const __m128 hi = _mm_castsi128_ps(_mm_set1_epi32((int32_t) ((uint32_t) scales[2 * p + 1] << 16)));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

void lowp_qd8_f32_qb4w_gemm_minmax_ukernel_1x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    float *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_f32_qb4w_minmax_params *params,
    const struct lowp_xnn_qd8_quantization_params *quantization_params) {
  const size_t bl = params->blocksize;
  assert(mr == 1 && nc != 0 && bl != 0 && bl % 16 == 0 && kc % bl == 0);
  (void) a_stride; (void) cm_stride;
  const __m128i vmask = _mm_set1_epi8((char) 0xF0);
  const __m256 vzp = _mm256_set1_ps((float) quantization_params[0].zero_point);
  const __m256 vinv = _mm256_set1_ps(quantization_params[0].inv_scale);
  do {
    const float *ksum = (const float *) w;
    __m256 vout[4];
    for (int p = 0; p < 4; p++) {
      vout[p] = _mm256_mul_ps(_mm256_setr_ps(ksum[2 * p], 0, 0, 0, ksum[2 * p + 1], 0, 0, 0), vzp);
    }
    w = ksum + 8;
    for (size_t kb = 0; kb < kc; kb += bl) {
      __m256i vacc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                         _mm256_setzero_si256()};
      for (size_t k = kb; k < kb + bl; k += 16) {
        int64_t lo8, hi8;
        memcpy(&lo8, a + k, 8);
        memcpy(&hi8, a + k + 8, 8);
        const __m256i valo = _mm256_cvtepi8_epi16(_mm_set1_epi64x(lo8));
        const __m256i vahi = _mm256_cvtepi8_epi16(_mm_set1_epi64x(hi8));
        for (int p = 0; p < 4; p++) {
          const __m128i vb = _mm_loadu_si128((const __m128i *) ((const uint8_t *) w + 16 * p));
          const __m256i vblo = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_slli_epi32(vb, 4), vmask));
          const __m256i vbhi = _mm256_cvtepi8_epi16(_mm_and_si128(vb, vmask));
          vacc[p] = _mm256_add_epi32(vacc[p], _mm256_madd_epi16(valo, vblo));
          vacc[p] = _mm256_add_epi32(vacc[p], _mm256_madd_epi16(vahi, vbhi));
        }
        w = (const uint8_t *) w + 64;
      }
      const uint16_t *scales = (const uint16_t *) w;
      for (int p = 0; p < 4; p++) {
        vout[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(vacc[p]), column_pair(scales, p), vout[p]);
      }
      w = scales + 8;
    }
    const __m256 v02 = _mm256_hadd_ps(_mm256_hadd_ps(vout[0], vout[1]), _mm256_hadd_ps(vout[2], vout[3]));
    __m256 v = _mm256_permutevar8x32_ps(v02, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    const float *bias = (const float *) w;
    v = _mm256_fmadd_ps(v, vinv, _mm256_loadu_ps(bias));
    v = _mm256_max_ps(v, _mm256_set1_ps(params->min));
    v = _mm256_min_ps(v, _mm256_set1_ps(params->max));
    w = bias + 8;
    float out[8];
    _mm256_storeu_ps(out, v);
    const size_t stored = nc < 8 ? nc : 8;
    memcpy(c, out, stored * sizeof(float));
    c = (float *) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
