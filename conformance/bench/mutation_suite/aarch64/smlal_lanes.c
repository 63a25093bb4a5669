/* Mutation suite, AArch64 family 1: s8 x s8 -> s32 GEMM with SMLAL into int16 lanes (one lane per row of C),
 * widened into int32 (SADDW/SADDW2) every `flush` depth steps. Exact while flush * max|a * b| <= 32767: flush 256 for
 * |a|, |b| <= 11 (256 * 121 = 30976). Single-bug mutants are -D switches (conformance/bench/mutation_suite/expected.toml).
 *
 * A is packed in blocks of MR = 8 rows (per k, one int8x8 of the 8 rows), B in panels of NR = 4 columns (per k, the
 * 4 columns). K runs in blocks of `flush`: every block of every tile adds its widened int16 lanes into that tile's
 * int32 accumulators, which live in the workspace (one per element of C, padded to the tiles) and are copied to C
 * at the end. Freestanding (lowp's emulator runtime has no libc headers).
 */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 8
#define NR 4
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t mut_smlal_workspace(int64_t M, int64_t N, int64_t K) {
    int64_t Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    return (size_t)(ROUND_UP((Mp + Np) * K, 16) + Mp * Np * 4);
}

/* acc (NR columns x MR rows, int32, column-major) += one flush block of one tile. */
static void micro(int64_t kc, const int8_t *a, const int8_t *b, int32_t *acc) {
    int16x8_t lanes[NR];
    for (int c = 0; c < NR; ++c) lanes[c] = vdupq_n_s16(0);
    for (int64_t k = 0; k < kc; ++k) {
        int8x8_t av = vld1_s8(a + k * MR);
        for (int c = 0; c < NR; ++c) lanes[c] = vmlal_s8(lanes[c], av, vdup_n_s8(b[k * NR + c]));
    }
    for (int c = 0; c < NR; ++c) {
        int32_t *t = acc + c * MR;
        int32x4_t lo = vld1q_s32(t), hi = vld1q_s32(t + 4);
        lo = vaddw_s16(lo, vget_low_s16(lanes[c]));
#ifdef MUT_WIDEN_LANE
        hi = vaddw_s16(hi, vget_low_s16(lanes[c]));
#else
        hi = vaddw_high_s16(hi, lanes[c]);
#endif
        vst1q_s32(t, lo);
        vst1q_s32(t + 4, hi);
    }
}

void mut_smlal_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work,
                    int64_t flush) {
    int64_t Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    int8_t *pa = work, *pb = pa + Mp * K;
    int32_t *acc = (int32_t *)((int8_t *)work + ROUND_UP((Mp + Np) * K, 16));
    if (flush < 1) flush = 1;
    for (int64_t i0 = 0; i0 < Mp; i0 += MR)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t r = 0; r < MR; ++r) pa[i0 * K + k * MR + r] = i0 + r < M ? A[(i0 + r) * K + k] : 0;
    for (int64_t j0 = 0; j0 < Np; j0 += NR)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t c = 0; c < NR; ++c) pb[j0 * K + k * NR + c] = j0 + c < N ? B[k * N + j0 + c] : 0;
#ifndef MUT_ACC_UNINIT
    for (int64_t t = 0; t < Mp * Np; ++t) acc[t] = 0;
#endif
    for (int64_t k0 = 0; k0 < K; k0 += flush) {
        int64_t kc = K - k0 < flush ? K - k0 : flush;
        for (int64_t i0 = 0; i0 < Mp; i0 += MR)
            for (int64_t j0 = 0; j0 < Np; j0 += NR)
                micro(kc, pa + i0 * K + k0 * MR, pb + j0 * K + k0 * NR, acc + (i0 / MR * (Np / NR) + j0 / NR) * MR * NR);
    }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
            C[i * N + j] = acc[((i / MR) * (Np / NR) + j / NR) * MR * NR + (j % NR) * MR + i % MR];
}
