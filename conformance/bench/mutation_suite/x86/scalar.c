/* Mutation suite, x86 family 3: a portable C u8 x s8 -> s32 GEMM (no intrinsics) and its single-bug mutants
 * (-D switches; conformance/bench/mutation_suite/expected.toml).
 *
 * A is packed into the workspace in blocks of MR = 4 rows (per k, the 4 rows), B in panels of NR = 4 columns (per
 * k, the 4 columns), both with k zero-padded to a multiple of 4. C is cleared first; then K runs in blocks of
 * KC = 256 and every block adds its 4 x 4 tiles (k unrolled by 4) into C.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MR 4
#define NR 4
#define KC 256
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#ifdef MUT_A_SIGNED
typedef int8_t packed_a;
#else
typedef uint8_t packed_a;
#endif

size_t mut_scalar_workspace(int64_t M, int64_t N, int64_t K) {
    int64_t Kp = ROUND_UP(K, 4);
#ifdef MUT_WORK_SHORT
    return (size_t)(ROUND_UP(M, MR) * Kp + ROUND_UP(N, NR) * K);
#else
    return (size_t)(ROUND_UP(M, MR) * Kp + ROUND_UP(N, NR) * Kp);
#endif
}

static void pack_a(int64_t M, int64_t K, int64_t Kp, const uint8_t *A, packed_a *pa) {
    for (int64_t i0 = 0; i0 < ROUND_UP(M, MR); i0 += MR)
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t r = 0; r < MR; ++r)
                pa[i0 * Kp + k * MR + r] = (packed_a)((i0 + r < M && k < K) ? A[(i0 + r) * K + k] : 0);
}

static void pack_b(int64_t N, int64_t K, int64_t Kp, const int8_t *B, int8_t *pb) {
    for (int64_t j0 = 0; j0 < ROUND_UP(N, NR); j0 += NR)
        for (int64_t k = 0; k < Kp; ++k) {
            int8_t *dst = pb + j0 * Kp + k * NR;
            memset(dst, 0, NR);
            if (k >= K) continue;
#ifdef MUT_B_OVERREAD
            for (int64_t c = 0; c < NR && j0 + c < N; c += 2)      /* two columns per 16-bit copy */
                memcpy(dst + c, B + k * N + j0 + c, 2);
#else
            for (int64_t c = 0; c < NR && j0 + c < N; ++c) dst[c] = B[k * N + j0 + c];
#endif
        }
}

/* C[mr x nc] += the 4 x 4 tile of one K block (kc a multiple of 4). */
static void micro(int64_t mr, int64_t nc, int64_t kc, const packed_a *a, const int8_t *b, int32_t *C, int64_t ldc) {
    int32_t acc[MR][NR] = {{0}};
    for (int64_t k = 0; k < kc; k += 4)
        for (int t = 0; t < 4; ++t)
            for (int r = 0; r < MR; ++r)
                for (int c = 0; c < NR; ++c) acc[r][c] += (int32_t)a[(k + t) * MR + r] * b[(k + t) * NR + c];
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nc; ++c) C[r * ldc + c] = (int32_t)((uint32_t)C[r * ldc + c] + (uint32_t)acc[r][c]);
}

void mut_scalar_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, 4);
    packed_a *pa = work;
    int8_t *pb = (int8_t *)work + ROUND_UP(M, MR) * Kp;
    pack_a(M, K, Kp, A, pa);
    pack_b(N, K, Kp, B, pb);
#if defined(MUT_C_PAST)
    for (int64_t i = M * N; i >= 0; --i) C[i] = 0;
#elif defined(MUT_C_BEFORE)
    for (int64_t i = M * N - 1; i >= -1; --i) C[i] = 0;
#else
    for (int64_t i = M * N - 1; i >= 0; --i) C[i] = 0;
#endif
    for (int64_t k0 = 0, kc; k0 < Kp; k0 += kc) {
#ifdef MUT_HANG
        kc = (K - k0 < KC ? K - k0 : KC) & ~(int64_t)3;            /* whole groups of 4 */
#else
        kc = Kp - k0 < KC ? Kp - k0 : KC;
#endif
        for (int64_t i0 = 0; i0 < M; i0 += MR)
            for (int64_t j0 = 0; j0 < N; j0 += NR)
                micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, kc, pa + i0 * Kp + k0 * MR,
                      pb + j0 * Kp + k0 * NR, C + i0 * N + j0, N);
    }
}
