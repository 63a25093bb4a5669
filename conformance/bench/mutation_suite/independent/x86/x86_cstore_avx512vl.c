/* X4: u8 x s8 -> s32 with 256-bit VPDPBUSD (AVX-512 VNNI + VL), 1x8 tiles. B packed in panels of 8 columns,
 * k in groups of 4 (32 bytes per group); A's 4-byte k group broadcast (A rows zero-padded in the workspace).
 * BUG: the last, partial panel is stored with the same full _mm256_storeu_si256 as the others ("C rows are
 * padded"): on the last row it writes up to 7 int32 past the end of C. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NR 8
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_cstore_avx512vl_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 4) + RUP(K, 4);
}

void x86_cstore_avx512vl_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work;
    uint8_t *arow = (uint8_t *)work + Np * Kp;
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 4 * NR + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? A[i * K + k] : 0;
        for (int64_t p = 0; p < Np / NR; ++p) {
            __m256i acc = _mm256_setzero_si256();
            const int8_t *b = Bp + p * Kp * NR;
            for (int64_t k = 0; k < Kp; k += 4) {
                int32_t a4;
                memcpy(&a4, arow + k, 4);
                acc = _mm256_dpbusd_epi32(acc, _mm256_set1_epi32(a4), _mm256_loadu_si256((const __m256i *)(b + k * NR)));
            }
            _mm256_storeu_si256((__m256i *)(C + i * N + p * NR), acc);
        }
    }
}
