/* FBGEMM-style u8 x s8 GEMM with int16 accumulation (acc16) and an outlier split, for AVX2 and AVX-512BW.
 *
 * B = B_main + B_outlier: weights that do not fit `nbits` signed bits (all of them for nbits = 0) go to a
 * compressed-sparse-column matrix and are added exactly in int32 after the dense pass (seed 003's outlier-aware
 * quantization). B_main is packed in panels of NR int16 columns, k in pairs: one 16-bit lane per column holds
 * b[k][col], b[k+1][col]. Per pair of k (k even), VPMADDUBSW against the broadcast pair a[i][k], a[i][k+1]
 * saturates the pair sum, VPADDSW accumulates it with saturation in int16, and every BROW k values the int16
 * accumulators are widened (VPMOVSXWD) and added into int32 (VPADDD), as FBGEMM does every KCB = 256.
 *
 * The including file defines NAME(x), TARGET, V, VW, SET1_16, LOADU, STOREU, ZERO, ADDS16, MADDUBS, ADD32,
 * and WIDEN_LO / WIDEN_HI (sign-extend the low / high half of an int16 register into an int32 register).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define MR 4
#define CPV (VW / 2)          /* int16 columns per register = NR */
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))
#ifndef BROW
#define BROW 256
#endif

size_t NAME(workspace)(int64_t M, int64_t N, int64_t K) {
    (void)M;
    /* packed main B, then the CSC outliers: colptr (N+1 int32), rowidx (int32), values (int8) */
    return (size_t)(ROUND_UP(K, 2) * ROUND_UP(N, CPV)) + (size_t)(N + 1) * 4 + (size_t)(K * N) * 5 + 64;
}

static inline int NAME(is_outlier)(int8_t w, int64_t nbits) {
    return nbits <= 0 || w < -(1 << (nbits - 1)) || w >= (1 << (nbits - 1));
}

__attribute__((target(TARGET)))
static void NAME(micro)(int64_t mr, int64_t nc, int64_t K, const uint8_t *A, int64_t lda, const int8_t *panel,
                        int32_t *C, int64_t ldc) {
    V acc16[MR], lo[MR], hi[MR];
    const uint8_t *rows[MR];
    for (int r = 0; r < MR; ++r) {
        rows[r] = A + (r < mr ? r : mr - 1) * lda;
        acc16[r] = ZERO(); lo[r] = ZERO(); hi[r] = ZERO();
    }
    int64_t Kp = ROUND_UP(K, 2);
    for (int64_t k = 0; k < Kp; k += 2) {
        V b = LOADU(panel + k * CPV);
        for (int r = 0; r < MR; ++r) {
            uint16_t pair = rows[r][k];
            if (k + 1 < K) pair |= (uint16_t)(rows[r][k + 1] << 8);
            acc16[r] = ADDS16(acc16[r], MADDUBS(SET1_16((short)pair), b));
        }
        if ((k + 2) % BROW == 0 || k + 2 >= Kp) {
            for (int r = 0; r < MR; ++r) {
                lo[r] = ADD32(lo[r], WIDEN_LO(acc16[r]));
                hi[r] = ADD32(hi[r], WIDEN_HI(acc16[r]));
                acc16[r] = ZERO();
            }
        }
    }
    for (int r = 0; r < mr; ++r) {
        int32_t out[CPV];
        STOREU(out, lo[r]);
        STOREU(out + CPV / 2, hi[r]);
        memcpy(C + r * ldc, out, (size_t)nc * 4);
    }
}

__attribute__((target(TARGET)))
void NAME(gemm)(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work,
                int64_t nbits) {
    int64_t Kp = ROUND_UP(K, 2), Np = ROUND_UP(N, CPV);
    int8_t *packed = (int8_t *)work;
    int32_t *colptr = (int32_t *)(((uintptr_t)(packed + Kp * Np) + 3) & ~(uintptr_t)3);
    int32_t *rowidx = colptr + N + 1;
    int8_t *values = (int8_t *)(rowidx + K * N);
    int64_t nnz = 0;
    for (int64_t col = 0; col < N; ++col) {          /* split and CSC, ascending k in a column */
        colptr[col] = (int32_t)nnz;
        for (int64_t k = 0; k < K; ++k)
            if (NAME(is_outlier)(B[k * N + col], nbits)) { rowidx[nnz] = (int32_t)k; values[nnz++] = B[k * N + col]; }
    }
    colptr[N] = (int32_t)nnz;
    for (int64_t j0 = 0; j0 < Np; j0 += CPV)         /* pack B_main: [panel][k pair][column][2] */
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < CPV; ++c) {
                int64_t col = j0 + c;
                int8_t w = (k < K && col < N) ? B[k * N + col] : 0;
                packed[j0 * Kp + (k / 2) * 2 * CPV + c * 2 + (k & 1)] = NAME(is_outlier)(w, nbits) ? 0 : w;
            }
    for (int64_t j0 = 0; j0 < N; j0 += CPV)
        for (int64_t i0 = 0; i0 < M; i0 += MR)
            NAME(micro)(M - i0 < MR ? M - i0 : MR, N - j0 < CPV ? N - j0 : CPV, K, A + i0 * K, K,
                        packed + j0 * Kp, C + i0 * N + j0, N);
    for (int64_t col = 0; col < N; ++col)            /* outliers: exact int32 sparse pass */
        for (int32_t t = colptr[col]; t < colptr[col + 1]; ++t)
            for (int64_t i = 0; i < M; ++i)
                C[i * N + col] = (int32_t)((uint32_t)C[i * N + col] + (uint32_t)(A[i * K + rowidx[t]] * values[t]));
}
