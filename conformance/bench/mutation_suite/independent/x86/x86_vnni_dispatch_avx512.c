/* X7: u8 x s8 -> s32 with a runtime dispatch: AVX-512 VNNI (VPDPBUSD, 16 columns per register) when the CPU
 * has it, else a portable scalar loop (exact too).
 * BUG: the CPUID test reads leaf 7 SUBLEAF 1, EAX bit 4 -- that is AVX-VNNI (VEX) -- instead of leaf 7
 * subleaf 0, ECX bit 11 (AVX512_VNNI). On a CPU with AVX512_VNNI but not AVX-VNNI (this one) the claimed
 * VPDPBUSD path never runs; every call takes the scalar fallback. */
#include <cpuid.h>
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NR 16
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_vnni_dispatch_avx512_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 4) + RUP(K, 4);
}

static int has_avx512vnni(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return 0;
    return (eax >> 4) & 1;
}

__attribute__((optimize("no-tree-vectorize")))
static void gemm_scalar(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (uint32_t)((int32_t)A[i * K + k] * B[k * N + j]);
            C[i * N + j] = (int32_t)s;
        }
}

static void gemm_vnni(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
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
            __m512i acc = _mm512_setzero_si512();
            for (int64_t k = 0; k < Kp; k += 4) {
                int32_t a4;
                memcpy(&a4, arow + k, 4);
                acc = _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(a4), _mm512_loadu_si512(Bp + p * Kp * NR + k * NR));
            }
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            _mm512_mask_storeu_epi32(C + i * N + p * NR, (__mmask16)((1u << cols) - 1), acc);
        }
    }
}

void x86_vnni_dispatch_avx512_gemm(int64_t M, int64_t N, int64_t K, const void *A, const void *B, int32_t *C, void *work) {
    static int vnni = -1;
    if (vnni < 0) vnni = has_avx512vnni();
    if (vnni) gemm_vnni(M, N, K, A, B, C, work);
    else gemm_scalar(M, N, K, A, B, C);
}
