/* C1 (control, correct): u8 x s8 -> s32, AVX-512 VNNI 4x16 micro-kernel. B packed in panels of 16 columns, k in
 * groups of 4, zero-padded; A read in place with 4-byte broadcast loads, which read up to 3 bytes past the end
 * of a row (products with B's zero padding): declared overread A = 3. Rows clamped XNNPACK-style for M % 4,
 * masked stores for N % 16. */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MR 4
#define NR 16
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_ctl_vnni_avx512_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 4);
}

void x86_ctl_vnni_avx512_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work;
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 4 * NR + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; i += MR) {
        int64_t mr = M - i < MR ? M - i : MR;
        const uint8_t *a0 = A + i * K;
        const uint8_t *a1 = mr < 2 ? a0 : a0 + K;
        const uint8_t *a2 = mr < 3 ? a1 : a1 + K;
        const uint8_t *a3 = mr < 4 ? a2 : a2 + K;
        int32_t *c0 = C + i * N;
        int32_t *c1 = mr < 2 ? c0 : c0 + N;
        int32_t *c2 = mr < 3 ? c1 : c1 + N;
        int32_t *c3 = mr < 4 ? c2 : c2 + N;
        for (int64_t p = 0; p < Np / NR; ++p) {
            __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
            const int8_t *b = Bp + p * Kp * NR;
            for (int64_t k = 0; k < Kp; k += 4) {
                __m512i bv = _mm512_loadu_si512(b + k * NR);
                int32_t x0, x1, x2, x3;
                memcpy(&x0, a0 + k, 4); memcpy(&x1, a1 + k, 4); memcpy(&x2, a2 + k, 4); memcpy(&x3, a3 + k, 4);
                acc0 = _mm512_dpbusd_epi32(acc0, _mm512_set1_epi32(x0), bv);
                acc1 = _mm512_dpbusd_epi32(acc1, _mm512_set1_epi32(x1), bv);
                acc2 = _mm512_dpbusd_epi32(acc2, _mm512_set1_epi32(x2), bv);
                acc3 = _mm512_dpbusd_epi32(acc3, _mm512_set1_epi32(x3), bv);
            }
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            __mmask16 m = (__mmask16)((1u << cols) - 1);
            _mm512_mask_storeu_epi32(c3 + p * NR, m, acc3);
            _mm512_mask_storeu_epi32(c2 + p * NR, m, acc2);
            _mm512_mask_storeu_epi32(c1 + p * NR, m, acc1);
            _mm512_mask_storeu_epi32(c0 + p * NR, m, acc0);
        }
    }
}
