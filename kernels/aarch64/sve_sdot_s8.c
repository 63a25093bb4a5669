/* s8 x s8 -> s32 GEMM for SVE, vector-length agnostic: SDOT (SVE, FEAT_SVE) of B's 4-deep column groups with a
 * broadcast 4-byte group of A's row. Exact products, int32 accumulation wrapping mod 2^32, at any vector length.
 *
 * NR = svcntw() columns per panel (4 at VL 128, 8 at 256, 16 at 512): for each k-group of 4, one vector holds NR
 * columns x 4 k (column-major within the group), so 32-bit lane c is column c. A's 4 bytes of a row's k-group are
 * broadcast to every 32-bit lane (svdup_n_s32). Micro-kernel: MR = 4 rows x NR columns, 4 accumulators; the last
 * panel's columns past N are stored under a svwhilelt predicate. Everything VL-dependent (panel width, workspace)
 * is read from the hardware at run time (svcntw): one binary for every VL. */
#include <arm_sve.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define KG 4
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t lowp_sve_sdot_s8_workspace(int64_t M, int64_t N, int64_t K) {
    const int64_t nr = (int64_t) svcntw();
    return (size_t) (ROUND_UP(M, MR) + ROUND_UP(N, nr)) * (size_t) ROUND_UP(K, KG);
}

static void micro(int64_t mr, int64_t nc, int64_t Kp, const int8_t *a, const int8_t *panel, int32_t *C,
                  int64_t ldc) {
    const int64_t nr = (int64_t) svcntw();
    const svbool_t all = svptrue_b8();
    svint32_t acc0 = svdup_n_s32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t k = 0; k < Kp; k += KG) {
        const svint8_t b = svld1_s8(all, panel + k * nr);
        int32_t w0, w1, w2, w3;            /* one row's 4 bytes of this k-group, as a 32-bit word */
        __builtin_memcpy(&w0, a + 0 * Kp + k, 4);
        __builtin_memcpy(&w1, a + 1 * Kp + k, 4);
        __builtin_memcpy(&w2, a + 2 * Kp + k, 4);
        __builtin_memcpy(&w3, a + 3 * Kp + k, 4);
        acc0 = svdot_s32(acc0, b, svreinterpret_s8_s32(svdup_n_s32(w0)));
        acc1 = svdot_s32(acc1, b, svreinterpret_s8_s32(svdup_n_s32(w1)));
        acc2 = svdot_s32(acc2, b, svreinterpret_s8_s32(svdup_n_s32(w2)));
        acc3 = svdot_s32(acc3, b, svreinterpret_s8_s32(svdup_n_s32(w3)));
    }
    const svbool_t cols = svwhilelt_b32_s64(0, nc);
    svst1_s32(cols, C, acc0);                 /* rows past mr are not stored (sizeless types cannot be arrays) */
    if (mr > 1) svst1_s32(cols, C + ldc, acc1);
    if (mr > 2) svst1_s32(cols, C + 2 * ldc, acc2);
    if (mr > 3) svst1_s32(cols, C + 3 * ldc, acc3);
}

void lowp_sve_sdot_s8_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C,
                           void *work) {
    const int64_t nr = (int64_t) svcntw();
    const int64_t Kp = ROUND_UP(K, KG), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, nr);
    int8_t *pa = (int8_t *) work, *pb = pa + Mp * Kp;
    for (int64_t i = 0; i < Mp; ++i)
        for (int64_t k = 0; k < Kp; ++k) pa[i * Kp + k] = (i < M && k < K) ? A[i * K + k] : 0;
    for (int64_t j0 = 0; j0 < Np; j0 += nr)          /* panel: [k/4][column][4] */
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < nr; ++c)
                pb[j0 * Kp + (k / KG) * nr * KG + c * KG + (k % KG)] = (j0 + c < N && k < K) ? B[k * N + j0 + c] : 0;
    for (int64_t i0 = 0; i0 < M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += nr)
            micro(M - i0 < MR ? M - i0 : MR, N - j0 < nr ? N - j0 : nr, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
