/* s8 x s8 -> s32 GEMM for AArch64 with SDOT (FEAT_DotProd), by element: exact products, int32 accumulation
 * wrapping mod 2^32.
 *
 * B is packed in panels of NR = 8 columns, k in groups of 4: 16 bytes hold 4 columns x 4 k (column-major within
 * the group), so one SDOT lane is one column. A row's 16 bytes (4 k-groups) are loaded once and each group is
 * selected with vdotq_laneq_s32's lane index. Micro-kernel: 4 rows x 8 columns, 8 int32x4 accumulators. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define NR 8
#define KB 16
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t lowp_sdot_s8_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, KB);
}

static void micro(int64_t mr, int64_t nc, int64_t Kp, const int8_t *a, const int8_t *panel, int32_t *C, int64_t ldc) {
    int32x4_t acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    for (int64_t k = 0; k < Kp; k += KB) {
        int8x16_t av[MR];
        for (int r = 0; r < MR; ++r) av[r] = vld1q_s8(a + r * Kp + k);
        const int8_t *bp = panel + k * NR;          /* 4 groups x 2 halves x 16 bytes */
#define GROUP(g)                                                                          \
        {                                                                                 \
            int8x16_t b0 = vld1q_s8(bp + (g) * 32), b1 = vld1q_s8(bp + (g) * 32 + 16);    \
            for (int r = 0; r < MR; ++r) {                                                \
                acc[r][0] = vdotq_laneq_s32(acc[r][0], b0, av[r], g);                     \
                acc[r][1] = vdotq_laneq_s32(acc[r][1], b1, av[r], g);                     \
            }                                                                             \
        }
        GROUP(0) GROUP(1) GROUP(2) GROUP(3)
#undef GROUP
    }
    for (int r = 0; r < mr; ++r) {
        int32_t out[NR];
        vst1q_s32(out, acc[r][0]);
        vst1q_s32(out + 4, acc[r][1]);
        for (int c = 0; c < nc; ++c) C[r * ldc + c] = out[c];
    }
}

void lowp_sdot_s8_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    int8_t *pa = (int8_t *)work, *pb = pa + Mp * Kp;
    for (int64_t i = 0; i < Mp; ++i)
        for (int64_t k = 0; k < Kp; ++k) pa[i * Kp + k] = (i < M && k < K) ? A[i * K + k] : 0;
    for (int64_t j0 = 0; j0 < Np; j0 += NR)          /* panel: [k/4][column][4] */
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < NR; ++c)
                pb[j0 * Kp + (k / 4) * NR * 4 + c * 4 + (k % 4)] = (j0 + c < N && k < K) ? B[k * N + j0 + c] : 0;
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
