/* An example user kernel for AArch64 (docs/getting-started.md), run under lowp's emulator: s8 x s8 -> s32 GEMM
 * with SDOT (FEAT_DotProd). SDOT sums four exact products into each int32 lane, so the kernel is exact (int32
 * wrap-around) on the whole s8 range. Same "gemm" signature as the x86 example. Freestanding: no libc headers
 * (the emulator's runtime supplies memset/memcpy for the compiler, not string.h). */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define KB 16
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t my_sdot_neon_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(N + 1) * (size_t)ROUND_UP(K, KB);
}

void my_sdot_neon_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = ROUND_UP(K, KB);
    int8_t *Bt = work, *arow = (int8_t *)work + N * Kp;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? A[i * K + k] : 0;
        for (int64_t j = 0; j < N; ++j) {
            int32x4_t acc = vdupq_n_s32(0);
            for (int64_t k = 0; k < Kp; k += KB)
                acc = vdotq_s32(acc, vld1q_s8(arow + k), vld1q_s8(Bt + j * Kp + k));
            C[i * N + j] = vaddvq_s32(acc);
        }
    }
}
