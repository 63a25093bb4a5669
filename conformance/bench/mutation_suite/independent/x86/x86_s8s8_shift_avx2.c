/* X1: s8 x s8 -> s32 on AVX2 via the oneDNN trick: (A + 128) as u8 times s8 B with VPMADDUBSW, VPMADDWD(ones),
 * VPADDD, minus 128 * colsum(B). One output at a time, k in blocks of 32.
 * BUG (claim): claimed exact on the full s8 x s8 range; VPMADDUBSW's pair sums of (a+128)*b saturate. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KB 32
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_s8s8_shift_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)(N + 1) * RUP(K, KB) + (size_t)N * sizeof(int32_t);
}

void x86_s8s8_shift_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, KB);
    int8_t *Bt = work;
    uint8_t *arow = (uint8_t *)work + N * Kp;
    int32_t *comp = (int32_t *)(arow + Kp);
    for (int64_t j = 0; j < N; ++j) {
        int32_t s = 0;
        for (int64_t k = 0; k < Kp; ++k) {
            int8_t b = k < K ? B[k * N + j] : 0;
            Bt[j * Kp + k] = b;
            s += b;
        }
        memcpy(comp + j, &s, sizeof s);
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? (uint8_t)(A[i * K + k] ^ 0x80) : 0;
        for (int64_t j = 0; j < N; ++j) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t k = 0; k < Kp; k += KB) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(arow + k));
                __m256i b = _mm256_loadu_si256((const __m256i *)(Bt + j * Kp + k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
            }
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
            int32_t cj;
            memcpy(&cj, comp + j, sizeof cj);
            C[i * N + j] = (int32_t)((uint32_t)_mm_cvtsi128_si32(s) - 128u * (uint32_t)cj);
        }
    }
}
