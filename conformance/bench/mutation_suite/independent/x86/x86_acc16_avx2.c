/* X2: FBGEMM-acc16-style u8 x s8 kernel for 4-bit data (A in [0,15], B in [-8,7]).
 * A's k pair is broadcast, B is packed in panels of 16 columns (one int16 lane per column holds b[k], b[k+1]);
 * VPMADDUBSW gives the pair sum per column, VPADDW accumulates it in int16, and every FLUSH k the int16 lanes are
 * sign-extended (VPMOVSXWD) and added into two int32 registers.
 * BUG: FLUSH = 512 came from the unsigned 16-bit bound 65535 / (2*15*8) = 273 pairs (546 k), forgetting that the
 * lanes are signed int16: with a = 15, b = -8 a pair is -240 and int16 wraps after 136 pairs (272 k). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NR 16
#define FLUSH 512
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_acc16_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 2);
}

void x86_acc16_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, 2), Np = RUP(N, NR);
    int8_t *Bp = work;   /* panel p, pair q: 32 bytes at (p * Kp/2 + q) * 32: column c -> bytes 2c, 2c+1 */
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t q = 0; q < Kp / 2; ++q)
            for (int c = 0; c < NR; ++c)
                for (int t = 0; t < 2; ++t) {
                    int64_t k = 2 * q + t, j = p * NR + c;
                    Bp[(p * (Kp / 2) + q) * 32 + 2 * c + t] = (k < K && j < N) ? B[k * N + j] : 0;
                }
    for (int64_t i = 0; i < M; ++i) {
        const uint8_t *a = A + i * K;
        for (int64_t p = 0; p < Np / NR; ++p) {
            const int8_t *bp = Bp + p * (Kp / 2) * 32;
            __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256(), acc16 = _mm256_setzero_si256();
            for (int64_t q = 0; q < Kp / 2; ++q) {
                uint16_t pair = a[2 * q] | (uint16_t)((2 * q + 1 < K ? a[2 * q + 1] : 0) << 8);
                __m256i av = _mm256_set1_epi16((short)pair);
                __m256i bv = _mm256_loadu_si256((const __m256i *)(bp + q * 32));
                acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(av, bv));
                if ((2 * q + 2) % FLUSH == 0 || q == Kp / 2 - 1) {
                    lo = _mm256_add_epi32(lo, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(acc16)));
                    hi = _mm256_add_epi32(hi, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(acc16, 1)));
                    acc16 = _mm256_setzero_si256();
                }
            }
            int32_t out[NR];
            _mm256_storeu_si256((__m256i *)out, lo);
            _mm256_storeu_si256((__m256i *)(out + 8), hi);
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            memcpy(C + i * N + p * NR, out, (size_t)cols * sizeof(int32_t));
        }
    }
}
