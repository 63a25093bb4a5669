/* Mutation suite, AArch64 family 4: s8 x s8 -> s32 GEMM in gemmlowp's style. Per 16-k block, SMULL of k..k+7 and
 * SMLAL2 of k+8..k+15 sum two products in each int16 lane, SADALP adds lane pairs into int32, ADDV reduces at the
 * end. A lane can only overflow when both of its products are (-128) * (-128): 32768 wraps to -32768, which is why
 * gemmlowp asks for A in [-127, 127] ("LhsNonzero"). The control claims that domain; the mutant claims all of s8.
 *
 * A and B^T are packed k-contiguous, zero-padded to a multiple of 16 and to the tile (MR = 2, NR = 2).
 * Freestanding (lowp's emulator runtime has no libc headers).
 */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 2
#define NR 2
#define KB 16
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t mut_pair_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, KB);
}

static void micro(int64_t mr, int64_t nc, int64_t Kp, const int8_t *a, const int8_t *b, int32_t *C, int64_t ldc) {
    int32x4_t acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) acc[r][c] = vdupq_n_s32(0);
    for (int64_t k = 0; k < Kp; k += KB) {
        int8x16_t av[MR], bv[NR];
        for (int r = 0; r < MR; ++r) av[r] = vld1q_s8(a + r * Kp + k);
        for (int c = 0; c < NR; ++c) bv[c] = vld1q_s8(b + c * Kp + k);
        for (int r = 0; r < MR; ++r)
            for (int c = 0; c < NR; ++c) {
                int16x8_t p = vmull_s8(vget_low_s8(av[r]), vget_low_s8(bv[c]));
                p = vmlal_high_s8(p, av[r], bv[c]);
                acc[r][c] = vpadalq_s16(acc[r][c], p);
            }
    }
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nc; ++c) C[r * ldc + c] = vaddvq_s32(acc[r][c]);
}

void mut_pair_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    int8_t *pa = work, *pb = pa + Mp * Kp;
    for (int64_t i = 0; i < Mp; ++i)
        for (int64_t k = 0; k < Kp; ++k) pa[i * Kp + k] = (i < M && k < K) ? A[i * K + k] : 0;
    for (int64_t j = 0; j < Np; ++j)
        for (int64_t k = 0; k < Kp; ++k) pb[j * Kp + k] = (j < N && k < K) ? B[k * N + j] : 0;
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
