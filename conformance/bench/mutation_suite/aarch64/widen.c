/* Mutation suite, AArch64 family 3: u8 x s8 -> s32 GEMM by widening, for cores without a mixed-sign dot product:
 * A to int16 with UXTL, B with SXTL, then SMLAL/SMLAL2 (int16 x int16 -> int32 lanes): exact on all of u8 x s8.
 * Single-bug mutants are -D switches (conformance/bench/mutation_suite/expected.toml).
 *
 * A and B^T are packed k-contiguous into the workspace, zero-padded to a multiple of KB = 16 in k and to the tile
 * (MR = 2 rows, NR = 4 columns); every output has one int32x4 accumulator, reduced by ADDV at the end.
 * Freestanding (lowp's emulator runtime has no libc headers).
 */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 2
#define NR 4
#define KB 16
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#ifdef MUT_WORK_SHORT
#define WORK_KB 8
#else
#define WORK_KB KB
#endif

size_t mut_widen_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, WORK_KB);
}

static inline int16x8_t widen_a(uint8x8_t a) {
#ifdef MUT_A_SIGNED
    return vmovl_s8(vreinterpret_s8_u8(a));
#else
    return vreinterpretq_s16_u16(vmovl_u8(a));
#endif
}

static void micro(int64_t mr, int64_t nc, int64_t Kp, const uint8_t *a, const int8_t *b, int32_t *C, int64_t ldc) {
    int32x4_t acc[MR][NR];
    for (int r = 0; r < MR; ++r)
        for (int c = 0; c < NR; ++c) acc[r][c] = vdupq_n_s32(0);
    for (int64_t k = 0; k < Kp; k += KB) {
        int16x8_t alo[MR], ahi[MR];
        for (int r = 0; r < MR; ++r) {
            uint8x16_t av = vld1q_u8(a + r * Kp + k);
            alo[r] = widen_a(vget_low_u8(av));
            ahi[r] = widen_a(vget_high_u8(av));
        }
        for (int c = 0; c < NR; ++c) {
            int8x16_t bv = vld1q_s8(b + c * Kp + k);
            int16x8_t blo = vmovl_s8(vget_low_s8(bv)), bhi = vmovl_high_s8(bv);
            for (int r = 0; r < MR; ++r) {
#ifdef MUT_PAIR16
                int16x8_t p = vmlaq_s16(vmulq_s16(alo[r], blo), ahi[r], bhi);     /* k and k + 8 in one lane */
                acc[r][c] = vpadalq_s16(acc[r][c], p);
#else
                acc[r][c] = vmlal_s16(acc[r][c], vget_low_s16(alo[r]), vget_low_s16(blo));
                acc[r][c] = vmlal_high_s16(acc[r][c], alo[r], blo);
                acc[r][c] = vmlal_s16(acc[r][c], vget_low_s16(ahi[r]), vget_low_s16(bhi));
                acc[r][c] = vmlal_high_s16(acc[r][c], ahi[r], bhi);
#endif
            }
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nc; ++c) {
            int32_t v = vaddvq_s32(acc[r][c]);
#ifdef MUT_C_ACCUM
            C[r * ldc + c] = (int32_t)((uint32_t)C[r * ldc + c] + (uint32_t)v);
#else
            C[r * ldc + c] = v;
#endif
        }
}

void mut_widen_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    uint8_t *pa = work;
    int8_t *pb = (int8_t *)pa + Mp * Kp;
    for (int64_t i = 0; i < Mp; ++i)
        for (int64_t k = 0; k < Kp; ++k) pa[i * Kp + k] = (i < M && k < K) ? A[i * K + k] : 0;
    for (int64_t j = 0; j < Np; ++j)
        for (int64_t k = 0; k < Kp; ++k) pb[j * Kp + k] = (j < N && k < K) ? B[k * N + j] : 0;
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
