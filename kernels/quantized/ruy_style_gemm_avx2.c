/* lowp's own ruy/TFLite-style quantized GEMM, AVX2, through lowp's driver ABI 'quant-gemm'
 * (kernels/include/lowp/quant.h): C = clamp(MBQM(sum_k (A - a_zp)(B - b_zp) + bias, multiplier, shift) + c_zp),
 * s8 x s8 -> s8, per output channel (= column of C) bias, multiplier and shift.
 *
 * In the style of ruy's x86 8-bit kernels (facts, not code, from google/ruy ruy/kernel_avx2_fma.cc @18e34fa):
 * packing computes the sums (rhs_sums = column sums of B, lhs_sums = row sums of A), the accumulators start at
 * bias + K * a_zp * b_zp - a_zp * colsum - b_zp * rowsum (ruy's prod_zp_depth and sums offsets, int32 wrapping),
 * the products come from VPMADDWD of sign-extended pairs of k, the fixed-point multiplier goes through 64-bit
 * VPMULDQ, the zero point is added with a wrapping VPADDD, then VPMINSD / VPMAXSD clamp (max first, as ruy).
 * The multiplier is TFLite's single rounding (TFLITE_SINGLE_ROUNDING, ruy's reference apply_multiplier.cc since
 * 2021; lowp.isa_models.fixedpoint flavour 'S'): (int64(x) * m + 2^(30 - shift)) >> (31 - shift), shift in
 * [-31, 30], taking the low 32 bits of the result (TFLite's static_cast<int32_t>). (ruy's AVX2 kernel itself
 * differs for shift > 0: it shifts x left by shift in 32 bits first (VPSLLVD, wrapping), then rounds once by
 * 2^31; equal to this unless that left shift overflows.)
 *
 * The workspace (size from ruy_style_avx2_workspace): B packed in blocks of 8 columns, each pair of k as 8
 * (B[k][n], B[k+1][n]) int16 pairs (32 bytes); the 8-padded column sums; A as int16 pairs (one int32 per pair of k)
 * per row; the row sums. Odd K pads with a zero k. Everything read from it is written first (it arrives poisoned).
 *
 * Tile: 4 rows x 8 columns of C per step, k in pairs. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/quant.h"

#define MR 4
#define NR 8

static inline int64_t cdiv(int64_t x, int64_t d) { return (x + d - 1) / d; }

size_t ruy_style_avx2_workspace(int64_t M, int64_t N, int64_t K) {
  const int64_t pairs = cdiv(K, 2), blocks = cdiv(N, NR);
  return (size_t) (blocks * pairs * 32 + blocks * NR * 4 + M * pairs * 4 + M * 4 + 32);
}

static inline uint32_t pair16(int8_t lo, int8_t hi) {
  return (uint32_t) (uint16_t) (int16_t) lo | (uint32_t) (uint16_t) (int16_t) hi << 16;
}

/* B (K x N, row-major) into blocks of 8 columns of k pairs, and its column sums (0 past N). */
static void pack_b(int64_t N, int64_t K, const int8_t *B, uint32_t *Bp, int32_t *colsum) {
  const int64_t pairs = cdiv(K, 2), blocks = cdiv(N, NR);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int64_t j = 0; j < NR; ++j) {
      const int64_t n = b * NR + j;
      uint32_t sum = 0;
      for (int64_t p = 0; p < pairs; ++p) {
        const int64_t k = 2 * p;
        const int8_t lo = n < N ? B[k * N + n] : 0;
        const int8_t hi = n < N && k + 1 < K ? B[(k + 1) * N + n] : 0;
        Bp[(b * pairs + p) * NR + j] = pair16(lo, hi);
        sum += (uint32_t) (int32_t) lo + (uint32_t) (int32_t) hi;
      }
      colsum[n] = (int32_t) sum;
    }
  }
}

/* A (M x K, row-major) as int16 pairs of k per row, and its row sums. */
static void pack_a(int64_t M, int64_t K, const int8_t *A, uint32_t *Ap, int32_t *rowsum) {
  const int64_t pairs = cdiv(K, 2);
  for (int64_t m = 0; m < M; ++m) {
    uint32_t sum = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      const int64_t k = 2 * p;
      const int8_t lo = A[m * K + k], hi = k + 1 < K ? A[m * K + k + 1] : 0;
      Ap[m * pairs + p] = pair16(lo, hi);
      sum += (uint32_t) (int32_t) lo + (uint32_t) (int32_t) hi;
    }
    rowsum[m] = (int32_t) sum;
  }
}

/* Arithmetic 64-bit right shift by per-lane counts (AVX2 has only the logical VPSRLVQ): complement the negative
 * lanes, shift, complement back: ~((~v) >>> s) = floor(v / 2^s) for v < 0. */
static inline __m256i srav_epi64(__m256i v, __m256i count) {
  const __m256i sign = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
  return _mm256_xor_si256(_mm256_srlv_epi64(_mm256_xor_si256(v, sign), count), sign);
}

/* MultiplyByQuantizedMultiplier, single rounding, per lane: (int64(x) * m + 2^(ts - 1)) >> ts with ts = 31 - shift,
 * low 32 bits kept. Even lanes through VPMULDQ directly, odd lanes shifted down into the even positions first. */
static inline __m256i multiply_by_quantized_multiplier(__m256i x, __m256i m, __m256i total_shift) {
  const __m256i one = _mm256_set1_epi64x(1);
  const __m256i low32 = _mm256_set1_epi64x(0xFFFFFFFF);
  const __m256i ts_even = _mm256_and_si256(total_shift, low32);
  const __m256i ts_odd = _mm256_srli_epi64(total_shift, 32);
  __m256i even = _mm256_mul_epi32(x, m);
  __m256i odd = _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32));
  even = _mm256_add_epi64(even, _mm256_sllv_epi64(one, _mm256_sub_epi64(ts_even, one)));
  odd = _mm256_add_epi64(odd, _mm256_sllv_epi64(one, _mm256_sub_epi64(ts_odd, one)));
  even = srav_epi64(even, ts_even);
  odd = srav_epi64(odd, ts_odd);
  return _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

/* 8 int32 (already within int8 after the clamp) to 8 bytes, columns in order. */
static inline uint64_t narrow_to_s8(__m256i v) {
  const __m256i w16 = _mm256_packs_epi32(v, v);             /* [0-3 0-3 | 4-7 4-7] */
  const __m256i b8 = _mm256_packs_epi16(w16, w16);          /* [0-3 x4 | 4-7 x4] */
  const __m256i lo = _mm256_permutevar8x32_epi32(b8, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  return (uint64_t) _mm_cvtsi128_si64(_mm256_castsi256_si128(lo));
}

void ruy_style_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, void *C_, void *work,
                         const struct lowp_requant *q) {
  const int8_t *A = A_, *B = B_;
  int8_t *C = C_;
  const int64_t pairs = cdiv(K, 2), blocks = cdiv(N, NR);
  uint32_t *Bp = work;
  int32_t *colsum = (int32_t *) (Bp + blocks * pairs * NR);
  uint32_t *Ap = (uint32_t *) (colsum + blocks * NR);
  int32_t *rowsum = (int32_t *) (Ap + M * pairs);
  pack_b(N, K, B, Bp, colsum);
  pack_a(M, K, A, Ap, rowsum);

  const int32_t *bias = LOWP_BIAS(q), *multiplier = LOWP_MULTIPLIER(q), *shift = LOWP_SHIFT(q);
  const __m256i va_zp = _mm256_set1_epi32(q->a_zero_point), vb_zp = _mm256_set1_epi32(q->b_zero_point);
  const __m256i vprod_zp_depth =
      _mm256_set1_epi32((int32_t) ((uint32_t) K * (uint32_t) q->a_zero_point * (uint32_t) q->b_zero_point));
  const __m256i vc_zp = _mm256_set1_epi32(q->output_zero_point);
  const __m256i vmin = _mm256_set1_epi32(q->output_min), vmax = _mm256_set1_epi32(q->output_max);

  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n0 = b * NR, cols = N - n0 < NR ? N - n0 : NR;
    /* the per-channel arrays have N entries: copy the block's (zeros past N) rather than read past them */
    int32_t bias_b[NR] = {0}, m_b[NR] = {0}, s_b[NR] = {0};
    memcpy(bias_b, bias + n0, (size_t) cols * 4);
    memcpy(m_b, multiplier + n0, (size_t) cols * 4);
    memcpy(s_b, shift + n0, (size_t) cols * 4);
    const __m256i vm = _mm256_loadu_si256((const __m256i *) m_b);
    const __m256i vts = _mm256_sub_epi32(_mm256_set1_epi32(31), _mm256_loadu_si256((const __m256i *) s_b));
    /* the terms common to every row of the block: bias + K a_zp b_zp - a_zp colsum */
    const __m256i vcol = _mm256_sub_epi32(
        _mm256_add_epi32(_mm256_loadu_si256((const __m256i *) bias_b), vprod_zp_depth),
        _mm256_mullo_epi32(va_zp, _mm256_loadu_si256((const __m256i *) (colsum + n0))));
    const uint32_t *bp = Bp + b * pairs * NR;

    for (int64_t m0 = 0; m0 < M; m0 += MR) {
      const int64_t rows = M - m0 < MR ? M - m0 : MR;
      int64_t r[MR];
      for (int i = 0; i < MR; ++i) r[i] = m0 + (i < rows ? i : rows - 1);   /* rows past M repeat the last */
      __m256i acc[MR];
      for (int i = 0; i < MR; ++i)
        acc[i] = _mm256_sub_epi32(vcol, _mm256_mullo_epi32(vb_zp, _mm256_set1_epi32(rowsum[r[i]])));
      const uint32_t *a0 = Ap + r[0] * pairs, *a1 = Ap + r[1] * pairs;
      const uint32_t *a2 = Ap + r[2] * pairs, *a3 = Ap + r[3] * pairs;
      for (int64_t p = 0; p < pairs; ++p) {
        const __m256i vb = _mm256_loadu_si256((const __m256i *) (bp + p * NR));   /* 8 columns x 2 k */
        acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(_mm256_set1_epi32((int32_t) a0[p]), vb));
        acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(_mm256_set1_epi32((int32_t) a1[p]), vb));
        acc[2] = _mm256_add_epi32(acc[2], _mm256_madd_epi16(_mm256_set1_epi32((int32_t) a2[p]), vb));
        acc[3] = _mm256_add_epi32(acc[3], _mm256_madd_epi16(_mm256_set1_epi32((int32_t) a3[p]), vb));
      }
      for (int64_t i = 0; i < rows; ++i) {
        __m256i v = multiply_by_quantized_multiplier(acc[i], vm, vts);
        v = _mm256_add_epi32(v, vc_zp);                       /* wraps, as ruy's and TFLite's int32 add */
        v = _mm256_max_epi32(_mm256_min_epi32(v, vmax), vmin);
        const uint64_t bytes = narrow_to_s8(v);
        memcpy(C + (m0 + i) * N + n0, &bytes, (size_t) cols);
      }
    }
  }
}
