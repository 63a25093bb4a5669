/* R9b (R9 with the fallback not auto-vectorised): s8 x s8 -> s32: SDOT path (16 k per vdotq_s32 on a zero-padded transposed B and a zero-padded A row) when
 * `use_dotprod` is set, else a portable scalar loop (exact too).
 * BUG: `use_dotprod` is set by arm_dispatch_dead_novec_init() from HWCAP_ASIMDDP, which was meant to run as a library
 * constructor; the gemm entry point never calls it, so the claimed SDOT path never runs. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define KB 16
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))
#define HWCAP_ASIMDDP (1ul << 20)

static int use_dotprod;

void arm_dispatch_dead_novec_init(unsigned long hwcap) { use_dotprod = (hwcap & HWCAP_ASIMDDP) != 0; }

size_t arm_dispatch_dead_novec_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)(N + 1) * RUP(K, KB);
}

__attribute__((noinline)) static void gemm_scalar(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t s = 0;
#pragma clang loop vectorize(disable) interleave(disable)
            for (int64_t k = 0; k < K; ++k) s += (uint32_t)(A[i * K + k] * B[k * N + j]);
            C[i * N + j] = (int32_t)s;
        }
}

static void gemm_sdot(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    const int64_t Kp = RUP(K, KB);
    int8_t *Bt = work, *arow = (int8_t *)work + N * Kp;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? A[i * K + k] : 0;
        for (int64_t j = 0; j < N; ++j) {
            int32x4_t acc = vdupq_n_s32(0);
            for (int64_t k = 0; k < Kp; k += KB) acc = vdotq_s32(acc, vld1q_s8(arow + k), vld1q_s8(Bt + j * Kp + k));
            C[i * N + j] = vaddvq_s32(acc);
        }
    }
}

void arm_dispatch_dead_novec_gemm(int64_t M, int64_t N, int64_t K, const void *A, const void *B, int32_t *C, void *work) {
    if (use_dotprod) gemm_sdot(M, N, K, A, B, C, work);
    else gemm_scalar(M, N, K, A, B, C);
}
