/* The 24x8 micro-kernel of seed 004 (the 4.6-bit article's ARM kernel): VMLAL into int16 lanes, flushed into
 * int32 every FLUSH depth steps. With operands whose products are bounded by P, the int16 lanes cannot wrap
 * for FLUSH <= floor(32767 / P): 258 for the 4.6-bit pairs (P = 127), 145 for 4-bit u4 x u4 (P = 225).
 * Outside that domain the lanes wrap modulo 2^16 exactly as SMLAL/UMLAL do, and the behaviour model says so.
 *
 * Packing as the article's: A in blocks of 24 rows, per pair of k: 8 values of column k then 8 of column k+1
 * for each of the three 8-row groups (48 bytes); B in panels of 8 columns, per pair of k: (b[k][c], b[k+1][c])
 * for c = 0..7 (16 bytes). An odd K is padded with a zero k. c[i][col] holds rows 8i..8i+7 of one column.
 *
 * The including file defines NAME(x), ELEM (int8_t/uint8_t), VEC16 (int8x16), VEC8, ACC16 (int16x8),
 * LD16, DUP_LANEQ, MLAL, GET_LO, GET_HI, ZERO16, ACC32, WIDEN_ADD_LO / WIDEN_ADD_HI (int32x4 += half of ACC16),
 * LD32, ST32. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 24
#define NR 8
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t NAME(workspace)(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, 2) + MR * NR * 4;
}

static void NAME(micro)(int64_t Kp, const ELEM *a, const ELEM *b, int32_t *tile, int64_t flush) {
    for (int64_t r0 = 0; r0 < Kp; r0 += flush) {
        int64_t n = Kp - r0 < flush ? Kp - r0 : flush;
        ACC16 c[3][NR];
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < NR; ++j) c[i][j] = ZERO16();
        const ELEM *ap = a + r0 * MR, *bp = b + r0 * NR;
        for (int64_t r1 = 0; r1 < n; r1 += 2, ap += 2 * MR, bp += 2 * NR) {
            VEC16 bv = LD16(bp), av[3];
            for (int i = 0; i < 3; ++i) av[i] = LD16(ap + 16 * i);
#define STEP(j)                                                                           \
            {                                                                             \
                VEC8 t0 = DUP_LANEQ(bv, j), t1 = DUP_LANEQ(bv, j + 1);                    \
                VEC8 t2 = DUP_LANEQ(bv, j + 2), t3 = DUP_LANEQ(bv, j + 3);                \
                for (int i = 0; i < 3; ++i) {                                             \
                    c[i][j / 2] = MLAL(c[i][j / 2], GET_LO(av[i]), t0);                   \
                    c[i][j / 2] = MLAL(c[i][j / 2], GET_HI(av[i]), t1);                   \
                    c[i][j / 2 + 1] = MLAL(c[i][j / 2 + 1], GET_LO(av[i]), t2);           \
                    c[i][j / 2 + 1] = MLAL(c[i][j / 2 + 1], GET_HI(av[i]), t3);           \
                }                                                                         \
            }
            STEP(0) STEP(4) STEP(8) STEP(12)
#undef STEP
        }
        for (int i = 0; i < 3; ++i)          /* tile is column-major: tile[col * 24 + row] */
            for (int j = 0; j < NR; ++j) {
                int32_t *t = tile + j * MR + 8 * i;
                ST32(t, WIDEN_ADD_LO(LD32(t), c[i][j]));
                ST32(t + 4, WIDEN_ADD_HI(LD32(t + 4), c[i][j]));
            }
    }
}

void NAME(gemm)(int64_t M, int64_t N, int64_t K, const ELEM *A, const ELEM *B, int32_t *C, void *work,
                int64_t flush) {
    int64_t Kp = ROUND_UP(K, 2), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    ELEM *pa = (ELEM *)work, *pb = pa + Mp * Kp;
    int32_t *tile = (int32_t *)(((uintptr_t)(pb + Np * Kp) + 15) & ~(uintptr_t)15);
    if (flush < 2 || flush % 2) flush = 2;     /* the registry validates; never loop forever on a bad value */
    for (int64_t i0 = 0; i0 < Mp; i0 += MR)    /* [block][k pair][group i][k parity][8 rows] */
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t r = 0; r < MR; ++r) {
                int64_t row = i0 + r;
                pa[i0 * Kp + (k / 2) * 2 * MR + (r / 8) * 16 + (k % 2) * 8 + r % 8] =
                    (row < M && k < K) ? A[row * K + k] : 0;
            }
    for (int64_t j0 = 0; j0 < Np; j0 += NR)    /* [panel][k pair][column][k parity] */
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < NR; ++c)
                pb[j0 * Kp + (k / 2) * 2 * NR + c * 2 + k % 2] = (j0 + c < N && k < K) ? B[k * N + j0 + c] : 0;
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR) {
            for (int t = 0; t < MR * NR; ++t) tile[t] = 0;
            NAME(micro)(Kp, pa + i0 * Kp, pb + j0 * Kp, tile, flush);
            for (int64_t r = 0; r < MR && i0 + r < M; ++r)
                for (int64_t c = 0; c < NR && j0 + c < N; ++c) C[(i0 + r) * N + j0 + c] = tile[c * MR + r];
        }
}
