/* R3: s8 x s8 -> s32 with SDOT, 4x4 micro-kernel. B packed in panels of 4 columns, k in groups of 4 (16 bytes:
 * column c holds b[k..k+3] in its 32-bit lane); A rows of a 4-row block copied into the workspace zero-padded to
 * a multiple of 4; each row's 4-byte group is duplicated to all lanes. M % 4 handled XNNPACK-style by clamping
 * the row pointers onto the previous row.
 * BUG: `a2 = mr <= 2 ? a1 : a1 + Kp` (should be mr < 3): with mr == 3 row 2 is computed from row 1's A. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define NR 4
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_sdot_clamp_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 4) + (size_t)MR * RUP(K, 4);
}

void arm_sdot_clamp_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work, *Ap = (int8_t *)work + Np * Kp;
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 16 + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; i += MR) {
        int64_t mr = M - i < MR ? M - i : MR;
        for (int64_t r = 0; r < mr; ++r)
            for (int64_t k = 0; k < Kp; ++k) Ap[r * Kp + k] = k < K ? A[(i + r) * K + k] : 0;
        const int8_t *a0 = Ap;
        const int8_t *a1 = mr < 2 ? a0 : a0 + Kp;
        const int8_t *a2 = mr <= 2 ? a1 : a1 + Kp;
        const int8_t *a3 = mr < 4 ? a2 : a2 + Kp;
        int32_t *c0 = C + i * N;
        int32_t *c1 = mr < 2 ? c0 : c0 + N;
        int32_t *c2 = mr < 3 ? c1 : c1 + N;
        int32_t *c3 = mr < 4 ? c2 : c2 + N;
        for (int64_t p = 0; p < Np / NR; ++p) {
            int32x4_t acc0 = vdupq_n_s32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
            const int8_t *b = Bp + p * Kp * NR;
            for (int64_t k = 0; k < Kp; k += 4) {
                int8x16_t bv = vld1q_s8(b + k * NR);
                acc0 = vdotq_s32(acc0, bv, vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(a0 + k))));
                acc1 = vdotq_s32(acc1, bv, vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(a1 + k))));
                acc2 = vdotq_s32(acc2, bv, vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(a2 + k))));
                acc3 = vdotq_s32(acc3, bv, vreinterpretq_s8_s32(vld1q_dup_s32((const int32_t *)(a3 + k))));
            }
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            int32_t t[4][NR];
            vst1q_s32(t[0], acc0); vst1q_s32(t[1], acc1); vst1q_s32(t[2], acc2); vst1q_s32(t[3], acc3);
            for (int64_t c = 0; c < cols; ++c) {
                c3[p * NR + c] = t[3][c];
                c2[p * NR + c] = t[2][c];
                c1[p * NR + c] = t[1][c];
                c0[p * NR + c] = t[0][c];
            }
        }
    }
}
