/* R4: s8 x s8 -> s32 with SDOT by element (vdotq_laneq_s32), 4x8 micro-kernel. A packed per 4-row block, k in
 * groups of 4 (16 bytes: row r at bytes 4r..4r+3); B packed in panels of 8 columns (two registers of 4 columns x
 * 4 k). Tails: missing rows packed as zeros, partial panels stored through a stack tile.
 * BUG (copy-paste): row 3 uses lane 2 of A, so row 3 of every full 4-row block gets row 2's result. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define NR 8
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_sdot_lane_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * RUP(K, 4) + (size_t)MR * RUP(K, 4);
}

void arm_sdot_lane_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const int8_t *A = A_, *B = B_;
    const int64_t Kp = RUP(K, 4), Np = RUP(N, NR);
    int8_t *Bp = work;                      /* panel p, group g: 32 bytes, column c at 4c (c < 4) or 16 + 4(c-4) */
    int8_t *Ap = (int8_t *)work + Np * Kp;  /* group g: 16 bytes, row r at 4r */
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < Kp; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[p * Kp * NR + (k / 4) * 32 + 4 * c + (k % 4)] = (k < K && j < N) ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; i += MR) {
        int64_t mr = M - i < MR ? M - i : MR;
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t r = 0; r < MR; ++r) Ap[(k / 4) * 16 + 4 * r + (k % 4)] = (r < mr && k < K) ? A[(i + r) * K + k] : 0;
        for (int64_t p = 0; p < Np / NR; ++p) {
            int32x4_t z = vdupq_n_s32(0);
            int32x4_t c0l = z, c0h = z, c1l = z, c1h = z, c2l = z, c2h = z, c3l = z, c3h = z;
            const int8_t *b = Bp + p * Kp * NR;
            for (int64_t g = 0; g < Kp / 4; ++g) {
                int8x16_t a = vld1q_s8(Ap + g * 16);
                int8x16_t bl = vld1q_s8(b + g * 32), bh = vld1q_s8(b + g * 32 + 16);
                c0l = vdotq_laneq_s32(c0l, bl, a, 0); c0h = vdotq_laneq_s32(c0h, bh, a, 0);
                c1l = vdotq_laneq_s32(c1l, bl, a, 1); c1h = vdotq_laneq_s32(c1h, bh, a, 1);
                c2l = vdotq_laneq_s32(c2l, bl, a, 2); c2h = vdotq_laneq_s32(c2h, bh, a, 2);
                c3l = vdotq_laneq_s32(c3l, bl, a, 2); c3h = vdotq_laneq_s32(c3h, bh, a, 2);
            }
            int32_t t[MR][NR];
            vst1q_s32(t[0], c0l); vst1q_s32(t[0] + 4, c0h);
            vst1q_s32(t[1], c1l); vst1q_s32(t[1] + 4, c1h);
            vst1q_s32(t[2], c2l); vst1q_s32(t[2] + 4, c2h);
            vst1q_s32(t[3], c3l); vst1q_s32(t[3] + 4, c3h);
            int64_t cols = N - p * NR < NR ? N - p * NR : NR;
            for (int64_t r = 0; r < mr; ++r)
                for (int64_t c = 0; c < cols; ++c) C[(i + r) * N + p * NR + c] = t[r][c];
        }
    }
}
