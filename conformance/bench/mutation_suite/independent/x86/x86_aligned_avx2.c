/* X9: u8 x s8 -> s32 on AVX2 (VPMADDUBSW + VPMADDWD(ones) + VPADDD), claimed exact on u7 x s8. A is read in
 * place, 32 bytes at a time with aligned loads; the k tail (K % 32) goes through a zero-padded stack copy.
 * B transposed into the workspace, zero-padded to a multiple of 32 in k.
 * BUG: _mm256_load_si256 (aligned) on A + i*K + k: fine for the author's 64-byte-aligned A with K % 32 == 0,
 * a #GP fault for any other A: rows after the first are misaligned when K % 32 != 0. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KB 32
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_aligned_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)N * RUP(K, KB);
}

void x86_aligned_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, KB), Kmain = K / KB * KB;
    int8_t *Bt = work;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < M; ++i) {
        _Alignas(32) uint8_t tail[KB] = {0};
        memcpy(tail, A + i * K + Kmain, (size_t)(K - Kmain));
        for (int64_t j = 0; j < N; ++j) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t k = 0; k < Kp; k += KB) {
                __m256i a = k < Kmain ? _mm256_load_si256((const __m256i *)(A + i * K + k))
                                      : _mm256_load_si256((const __m256i *)tail);
                __m256i b = _mm256_loadu_si256((const __m256i *)(Bt + j * Kp + k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
            }
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
            s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
            C[i * N + j] = _mm_cvtsi128_si32(s);
        }
    }
}
