/* An example user kernel (docs/getting-started.md): u8 x s8 -> s32 GEMM with AVX2's VPMADDUBSW + VPMADDWD.
 *
 * Each pair of products (k, k+1), k even, is summed and saturated to int16 by VPMADDUBSW, then widened exactly
 * by VPMADDWD(ones) and accumulated in int32 (wrapping). So it is exact only while no pair sum leaves int16:
 * for A in [0, 127] (u7) every pair sum lies in [-32512, 32258]. That is the domain it claims; on the full u8
 * range lowp finds the counterexample {255, 255} . {127, 127}.
 *
 * Signature (lowp's "gemm" kind): A is M x K row-major, B is K x N row-major, C is M x N row-major; `work` has
 * my_maddubs_avx2_workspace(M, N, K) bytes. C and `work` arrive filled with poison, not zeros, and every buffer
 * ends at a guard page: the kernel writes all of C and every byte of workspace it reads, and reads nothing past
 * its buffers. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define KB 32
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t my_maddubs_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(N + 1) * (size_t)ROUND_UP(K, KB);          /* B transposed, plus one padded row of A */
}

void my_maddubs_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = ROUND_UP(K, KB);
    int8_t *Bt = work;                                          /* N x Kp, zero-padded in k */
    uint8_t *arow = (uint8_t *)work + N * Kp;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < M; ++i) {
        memset(arow, 0, (size_t)Kp);
        memcpy(arow, A + i * K, (size_t)K);
        for (int64_t j = 0; j < N; ++j) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t k = 0; k < Kp; k += KB) {
                __m256i a = _mm256_loadu_si256((const __m256i *)(arow + k));
                __m256i b = _mm256_loadu_si256((const __m256i *)(Bt + j * Kp + k));
                __m256i pairs = _mm256_maddubs_epi16(a, b);    /* saturating pair sums */
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
            }
            uint32_t lanes[8], s = 0;                           /* unsigned: the int32 sum wraps, no UB */
            _mm256_storeu_si256((__m256i *)lanes, acc);
            for (int l = 0; l < 8; ++l) s += lanes[l];
            C[i * N + j] = (int32_t)s;
        }
    }
}
