/* C2 (control, correct): u8 x s8 -> s32 on AVX2, 4x8 dot4 micro-kernel (FBGEMM acc32 style): A's 4-byte k group
 * broadcast, B packed in panels of 8 columns (one 32-bit lane per column holds b[k..k+3]); VPMADDUBSW,
 * VPMADDWD(ones), VPADDD. Exact on u7 x s8 (each pair sum fits int16), pair-saturating elsewhere.
 * A rows zero-padded into the workspace; N % 8 through VPMASKMOVD stores. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MR 4
#define NR 8
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_ctl_maddubs_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)RUP(N, NR) * RUP(K, 4) + (size_t)MR * RUP(K, 4);
}

void x86_ctl_maddubs_avx2_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work;
    uint8_t *Ap = (uint8_t *)work + Np * Kp;                 /* MR rows x Kp */
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 4 * NR + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < M; i += MR) {
        int64_t mr = M - i < MR ? M - i : MR;
        for (int64_t r = 0; r < MR; ++r)
            for (int64_t k = 0; k < Kp; ++k) Ap[r * Kp + k] = (r < mr && k < K) ? A[(i + r) * K + k] : 0;
        for (int64_t p = 0; p < Np / NR; ++p) {
            __m256i acc[MR];
            for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_si256();
            const int8_t *b = Bp + p * Kp * NR;
            for (int64_t k = 0; k < Kp; k += 4) {
                __m256i bv = _mm256_loadu_si256((const __m256i *)(b + k * NR));
                for (int r = 0; r < MR; ++r) {
                    int32_t a4;
                    memcpy(&a4, Ap + r * Kp + k, 4);
                    __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi32(a4), bv);
                    acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pairs, ones));
                }
            }
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            for (int r = 0; r < mr; ++r) _mm256_maskstore_epi32(C + (i + r) * N + p * NR, mask, acc[r]);
        }
    }
}
