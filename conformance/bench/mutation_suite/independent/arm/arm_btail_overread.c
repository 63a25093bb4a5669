/* R5: s8 x s8 -> s32 on NEON without packing ("GEMV-like", k outer): for each row and each panel of 16 columns, B's
 * row k is loaded with one 16-byte vld1q_s8, multiplied by the broadcast a[i][k] with SMULL/SMULL2 and widened
 * into four int32x4 accumulators (SADDW/SADDW2). Partial panels are stored through a stack tile.
 * BUG: the last, partial panel (N % 16 columns) is loaded with the same 16-byte vld1q_s8: at k = K-1 it reads up
 * to 15 bytes past the end of B (no overread declared; B is the caller's buffer, not a padded packing). */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define NR 16

size_t arm_btail_overread_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M; (void)N; (void)K;
    return 0;
}

void arm_btail_overread_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    (void)work;
    const int8_t *A = A_, *B = B_;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j0 = 0; j0 < N; j0 += NR) {
            int32x4_t acc0 = vdupq_n_s32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
            for (int64_t k = 0; k < K; ++k) {
                int8x16_t bv = vld1q_s8(B + k * N + j0);
                int8x16_t av = vdupq_n_s8(A[i * K + k]);
                int16x8_t lo = vmull_s8(vget_low_s8(bv), vget_low_s8(av));
                int16x8_t hi = vmull_high_s8(bv, av);
                acc0 = vaddw_s16(acc0, vget_low_s16(lo));
                acc1 = vaddw_high_s16(acc1, lo);
                acc2 = vaddw_s16(acc2, vget_low_s16(hi));
                acc3 = vaddw_high_s16(acc3, hi);
            }
            int32_t t[NR];
            vst1q_s32(t, acc0); vst1q_s32(t + 4, acc1); vst1q_s32(t + 8, acc2); vst1q_s32(t + 12, acc3);
            int64_t cols = N - j0 < NR ? N - j0 : NR;
            for (int64_t c = 0; c < cols; ++c) C[i * N + j0 + c] = t[c];
        }
}
