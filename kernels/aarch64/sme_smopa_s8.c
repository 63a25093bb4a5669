/* s8 x s8 -> s32 GEMM for SME: SMOPA (FEAT_SME), the sum of 4 outer products of 8-bit vectors into a 32-bit ZA
 * tile, at whatever streaming vector length the CPU has. Exact products; each 4-product sum is exact and added to
 * the int32 tile element modulo 2^32.
 *
 * T = svcntsw() (the streaming vector's 32-bit lanes: 4 at SVL 128, 8 at 256, 16 at 512) rows and columns per
 * tile. A is packed in panels of T rows, B in panels of T columns, each k-group of 4 as one vector: lane i holds
 * row (column) i's 4 bytes. SMOPA ZA0.S += A_group (T x 4) x B_group^T (4 x T). The tile is zeroed, accumulated
 * over K, then stored row by row (ST1W from ZA horizontal slices) under a predicate for the last columns.
 * The micro-kernel runs in streaming mode with its own ZA (__arm_locally_streaming, __arm_new("za")): the caller
 * is ordinary non-streaming code, as in a real library's dispatch. */
#include <arm_sme.h>
#include <stddef.h>
#include <stdint.h>

#define KG 4
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

/* clang's SME ABI support calls these when a ZA-sharing caller had a lazy save pending (TPIDR2_EL0 != 0); a
 * lowp program never sets TPIDR2, so they are never reached, but the linker needs them. */
void __arm_tpidr2_save(void) { __builtin_trap(); }
void __arm_tpidr2_restore(void *blk) { (void) blk; __builtin_trap(); }

static int64_t tile_lanes(void) { return (int64_t) svcntsw(); }

size_t lowp_sme_smopa_s8_workspace(int64_t M, int64_t N, int64_t K) {
    const int64_t t = tile_lanes();
    return (size_t) (ROUND_UP(M, t) + ROUND_UP(N, t)) * (size_t) ROUND_UP(K, KG);
}

__arm_locally_streaming __arm_new("za")
static void micro(int64_t mr, int64_t nc, int64_t Kp, const int8_t *pa, const int8_t *pb, int32_t *C,
                  int64_t ldc) {
    const int64_t t = (int64_t) svcntsw();
    const svbool_t all = svptrue_b8();
    svzero_za();
    for (int64_t k = 0; k < Kp; k += KG) {
        const svint8_t a = svld1_s8(all, pa + k * t);
        const svint8_t b = svld1_s8(all, pb + k * t);
        svmopa_za32_s8_m(0, all, all, a, b);
    }
    const svbool_t cols = svwhilelt_b32_s64(0, nc);
    for (int64_t r = 0; r < mr; ++r) svst1_hor_za32(0, (uint32_t) r, cols, C + r * ldc);
}

/* panel of `lanes` rows of X (rows x K, row-major): [k/4][row][4], zero past `rows` and K */
static void pack(int8_t *out, const int8_t *X, int64_t rows, int64_t K, int64_t Kp, int64_t lanes, int64_t stride,
                 int64_t step) {
    for (int64_t k = 0; k < Kp; ++k)
        for (int64_t i = 0; i < lanes; ++i)
            out[(k / KG) * lanes * KG + i * KG + (k % KG)] = (i < rows && k < K) ? X[i * step + k * stride] : 0;
}

void lowp_sme_smopa_s8_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C,
                            void *work) {
    const int64_t t = tile_lanes();
    const int64_t Kp = ROUND_UP(K, KG), Mp = ROUND_UP(M, t), Np = ROUND_UP(N, t);
    int8_t *pa = (int8_t *) work, *pb = pa + Mp * Kp;
    for (int64_t i0 = 0; i0 < Mp; i0 += t)
        pack(pa + i0 * Kp, A + (i0 < M ? i0 * K : 0), M - i0 < t ? M - i0 : t, K, Kp, t, 1, K);
    for (int64_t j0 = 0; j0 < Np; j0 += t)
        pack(pb + j0 * Kp, B + (j0 < N ? j0 : 0), N - j0 < t ? N - j0 : t, K, Kp, t, N, 1);
    for (int64_t i0 = 0; i0 < M; i0 += t)
        for (int64_t j0 = 0; j0 < N; j0 += t)
            micro(M - i0 < t ? M - i0 : t, N - j0 < t ? N - j0 : t, Kp, pa + i0 * Kp, pb + j0 * Kp,
                  C + i0 * N + j0, N);
}
