/* R8: s8 x s8 -> s32 with SDOT, one output at a time: A read in place, B transposed into the workspace and
 * zero-padded to a multiple of 4 in k. 16 k per vdotq_s32, then 8 k per vdot_s32, then a scalar tail.
 * BUG: the scalar tail stops at K & ~3 (the author reasoned "Bt is padded to 4, the last partial group is
 * padding"), so the last K % 4 products are dropped. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_ktail_drop_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)N * RUP(K, 4);
}

void arm_ktail_drop_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, 4);
    int8_t *Bt = work;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    for (int64_t i = 0; i < M; ++i) {
        const int8_t *a = A + i * K;
        for (int64_t j = 0; j < N; ++j) {
            const int8_t *bt = Bt + j * Kp;
            int32x4_t acc = vdupq_n_s32(0);
            int32x2_t acc2 = vdup_n_s32(0);
            int64_t k = 0;
            for (; k + 16 <= K; k += 16) acc = vdotq_s32(acc, vld1q_s8(a + k), vld1q_s8(bt + k));
            for (; k + 8 <= K; k += 8) acc2 = vdot_s32(acc2, vld1_s8(a + k), vld1_s8(bt + k));
            uint32_t s = (uint32_t)vaddvq_s32(acc) + (uint32_t)vaddv_s32(acc2);
            for (; k < (K & ~(int64_t)3); ++k) s += (uint32_t)(a[k] * bt[k]);
            C[i * N + j] = (int32_t)s;
        }
    }
}
