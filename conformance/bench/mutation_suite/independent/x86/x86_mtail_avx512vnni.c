/* X3: u8 x s8 -> s32, AVX-512 VNNI 4x16 micro-kernel. A rows copied into the workspace zero-padded to a multiple
 * of 4 in k; B packed in panels of 16 columns, k in groups of 4 (64 bytes per group). The M remainder is done
 * XNNPACK-style: a 2-row call if (rem & 2), then a 1-row call if (rem & 1).
 * BUG: the row index is not advanced after the 2-row call, so for M % 4 == 3 the 1-row call recomputes row i
 * and row i + 2 is never written. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MR 4
#define NR 16
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_mtail_avx512vnni_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)RUP(N, NR) * RUP(K, 4) + (size_t)M * RUP(K, 4);
}

static void ukernel(int mr, int64_t Np, int64_t N, int64_t Kp, const uint8_t *a, const int8_t *bp, int32_t *c) {
    for (int64_t p = 0; p < Np / NR; ++p) {
        __m512i acc[MR];
        for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_si512();
        const int8_t *b = bp + p * Kp * NR;
        for (int64_t k = 0; k < Kp; k += 4) {
            __m512i bv = _mm512_loadu_si512(b + k * NR);
            for (int r = 0; r < mr; ++r) {
                int32_t a4;
                memcpy(&a4, a + r * Kp + k, 4);
                acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(a4), bv);
            }
        }
        int64_t cols = N - p * NR < NR ? N - p * NR : NR;
        __mmask16 m = (__mmask16)((1u << cols) - 1);
        for (int r = 0; r < mr; ++r) _mm512_mask_storeu_epi32(c + r * N + p * NR, m, acc[r]);
    }
}

void x86_mtail_avx512vnni_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work;                                   /* panel p: Kp/4 groups x 16 columns x 4 bytes */
    uint8_t *Ap = (uint8_t *)work + Np * Kp;             /* M x Kp */
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 4 * NR + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < Kp; ++k) Ap[i * Kp + k] = k < K ? A[i * K + k] : 0;
    int64_t i = 0;
    for (; i + MR <= M; i += MR) ukernel(MR, Np, N, Kp, Ap + i * Kp, Bp, C + i * N);
    int64_t rem = M - i;
    if (rem & 2) ukernel(2, Np, N, Kp, Ap + i * Kp, Bp, C + i * N);
    if (rem & 1) ukernel(1, Np, N, Kp, Ap + i * Kp, Bp, C + i * N);
}
