/* R7: s8 x s8 -> s32 with SDOT, k outer: for each row, a row of int32 accumulators in the workspace is cleared,
 * then every k group of 4 adds SDOT(B group for 4 columns, a[i][4g..4g+3] in every lane) to 4 accumulators at a
 * time (load, SDOT, store); the accumulator row is copied to C. B packed as (group, column, 4 bytes), zero-padded.
 * BUG: memset(acc, 0, Np) clears Np BYTES, not Np int32: columns >= Np/4 start from whatever the workspace held
 * (from the previous row, or the workspace's initial contents for the first row). */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_memset_work_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, 4) * RUP(K, 4) + (size_t)RUP(N, 4) * 4 + RUP(K, 4) + 16;
}

void arm_memset_work_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, 4);
    int8_t *Bp = work;
    int32_t *acc = (int32_t *)(((uintptr_t)(Bp + Np * Kp) + 15) & ~(uintptr_t)15);
    int8_t *arow = (int8_t *)(acc + Np);
    for (int64_t g = 0; g < Kp / 4; ++g)
        for (int64_t j = 0; j < Np; ++j)
            for (int t = 0; t < 4; ++t) {
                int64_t k = 4 * g + t;
                Bp[(g * Np + j) * 4 + t] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? A[i * K + k] : 0;
        __builtin_memset(acc, 0, (size_t)Np);
        for (int64_t g = 0; g < Kp / 4; ++g) {
            int8x16_t av = vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(arow + 4 * g)));
            for (int64_t j = 0; j < Np; j += 4)
                vst1q_s32(acc + j, vdotq_s32(vld1q_s32(acc + j), vld1q_s8(Bp + (g * Np + j) * 4), av));
        }
        for (int64_t j = 0; j < N; ++j) C[i * N + j] = acc[j];
    }
}
