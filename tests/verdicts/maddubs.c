/* tests/test_verdicts.py: a u8 x s8 GEMM through AVX2 VPMADDUBSW (pairs saturated to int16) + VPMADDWD with ones
 * (exact into int32): exact on u7 x s8 (2 * 127 * 128 < 32767), and no VPDPBUSD anywhere. B's column and A's row
 * are staged 32 k at a time, zero-padded. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

size_t vt_maddubs_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }

void vt_maddubs_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t k0 = 0; k0 < K; k0 += 32) {
                uint8_t a[32] = {0};
                int8_t b[32] = {0};
                for (int64_t k = k0; k < K && k < k0 + 32; ++k) a[k - k0] = A[i * K + k], b[k - k0] = B[k * N + j];
                __m256i pairs = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)a),
                                                     _mm256_loadu_si256((const __m256i *)b));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            }
            int32_t lanes[8];
            _mm256_storeu_si256((__m256i *)lanes, acc);
            uint32_t s = 0;
            for (int l = 0; l < 8; ++l) s += (uint32_t)lanes[l];
            C[i * N + j] = (int32_t)s;
        }
}
