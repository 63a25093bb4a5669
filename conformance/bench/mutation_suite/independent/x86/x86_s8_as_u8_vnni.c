/* X8: s8 x s8 -> s32 with 512-bit VPDPBUSD, one output at a time, 64 k per step with masked loads for the tail.
 * BUG (signed/unsigned): VPDPBUSD reads its first multiplicand as UNSIGNED bytes; the s8 A is fed in directly,
 * without the +128 shift and the -128 * colsum(B) compensation, so a negative a counts as a + 256. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define KB 64
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_s8_as_u8_vnni_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)N * RUP(K, KB);
}

void x86_s8_as_u8_vnni_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, KB);
    int8_t *Bt = work;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            __m512i acc = _mm512_setzero_si512();
            for (int64_t k = 0; k < K; k += KB) {
                int64_t n = K - k < KB ? K - k : KB;
                __mmask64 m = n == 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
                __m512i a = _mm512_maskz_loadu_epi8(m, A + i * K + k);
                acc = _mm512_dpbusd_epi32(acc, a, _mm512_loadu_si512(Bt + j * Kp + k));
            }
            C[i * N + j] = _mm512_reduce_add_epi32(acc);
        }
}
