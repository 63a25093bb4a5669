/* s8 x s8 -> s32 GEMM for AArch64 with SMMLA (FEAT_I8MM): each instruction multiplies a 2x8 block of A by an
 * 8x2 block of B into a 2x2 int32 block, exact products, accumulation wrapping mod 2^32. Unicorn 2.1 lacks
 * I8MM; lowp's emulator executes SMMLA on lowp's own model (and counts it).
 *
 * A is packed in row pairs, B^T in column pairs, per 8-k block: 16 bytes = [row0 k0..7 | row1 k0..7], the layout
 * SMMLA reads (the right operand is stored transposed: row j of Vm is column j of B). Micro-kernel: 4 rows x
 * 4 columns = 2 x 2 SMMLA accumulators; zip the 2x2 blocks back into rows at the end. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define NR 4
#define KB 8
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t lowp_smmla_s8_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, KB);
}

/* rows/cols in pairs: [pair][k/8][2][8] */
static void pack_pairs(const int8_t *X, int64_t rows, int64_t K, int64_t row_stride, int64_t k_stride,
                       int64_t Rp, int64_t Kp, int8_t *out) {
    for (int64_t r = 0; r < Rp; ++r)
        for (int64_t k = 0; k < Kp; ++k)
            out[(r / 2) * Kp * 2 + (k / 8) * 16 + (r % 2) * 8 + k % 8] =
                (r < rows && k < K) ? X[r * row_stride + k * k_stride] : 0;
}

static void micro(int64_t mr, int64_t nc, int64_t Kp, const int8_t *a, const int8_t *b, int32_t *C, int64_t ldc) {
    int32x4_t acc[2][2];
    for (int i = 0; i < 2; ++i) acc[i][0] = acc[i][1] = vdupq_n_s32(0);
    for (int64_t k = 0; k < Kp; k += KB) {
        int8x16_t a0 = vld1q_s8(a + k * 2), a1 = vld1q_s8(a + Kp * 2 + k * 2);
        int8x16_t b0 = vld1q_s8(b + k * 2), b1 = vld1q_s8(b + Kp * 2 + k * 2);
        acc[0][0] = vmmlaq_s32(acc[0][0], a0, b0);
        acc[0][1] = vmmlaq_s32(acc[0][1], a0, b1);
        acc[1][0] = vmmlaq_s32(acc[1][0], a1, b0);
        acc[1][1] = vmmlaq_s32(acc[1][1], a1, b1);
    }
    int32_t out[MR][NR];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            int32_t blk[4];
            vst1q_s32(blk, acc[i][j]);                 /* [r0c0, r0c1, r1c0, r1c1] */
            out[2 * i][2 * j] = blk[0]; out[2 * i][2 * j + 1] = blk[1];
            out[2 * i + 1][2 * j] = blk[2]; out[2 * i + 1][2 * j + 1] = blk[3];
        }
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nc; ++c) C[r * ldc + c] = out[r][c];
}

void lowp_smmla_s8_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    int8_t *pa = (int8_t *)work, *pb = pa + Mp * Kp;
    pack_pairs(A, M, K, K, 1, Mp, Kp, pa);
    pack_pairs(B, N, K, 1, N, Np, Kp, pb);
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
