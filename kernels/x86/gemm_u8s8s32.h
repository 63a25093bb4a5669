/* u8 x s8 -> s32 GEMM, one template for every x86 vector width and dot-product sequence.
 *
 * C[M][N] = sum_k A[M][K] * B[K][N] (+ COMPENSATION[n] for the s8s8 variant), row-major, int32 wrap-around.
 * B is packed into panels of NR columns, k grouped by 4: one 32-bit lane per column holds b[k..k+3][col], so
 * a register holds VW/4 columns and a broadcast 32-bit group of A (a[i][k..k+3]) meets each column.
 * DOT(acc, a, b) is either VPDPBUSD (exact) or VPMADDUBSW + VPMADDWD(ones) + VPADDD, which pairs k with k+1 for
 * even k and saturates each pair sum to int16 (oneDNN's and FBGEMM's AVX2 path, seed 002).
 *
 * The including file defines: NAME(x) (symbol prefix), TARGET (target attribute string), V (vector type), VW
 * (bytes), SET1_32, LOADU, STOREU, ADD32, ZERO, DOT(acc, a, b), and optionally SIGNED_A (A is s8: it is
 * shifted to u8 by XOR 0x80 and C gets -128 * colsum(B), oneDNN's compensation).
 */
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define MR 4
#define NRV 2
#define CPV (VW / 4)           /* columns per vector */
#define NR (NRV * CPV)         /* columns per panel */
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#undef a_elem
#undef A_BIAS
#ifdef SIGNED_A
#define a_elem int8_t
#define A_BIAS 0x80808080u
#else
#define a_elem uint8_t
#define A_BIAS 0u
#endif

/* Bytes of workspace: the packed B (and the compensation vector for SIGNED_A). */
size_t NAME(workspace)(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)(ROUND_UP(K, 4) * ROUND_UP(N, NR)) + (size_t)ROUND_UP(N, NR) * 4 + 64;
}

static void NAME(pack_b)(int64_t N, int64_t K, const int8_t *B, int8_t *packed, int32_t *comp) {
    int64_t Kp = ROUND_UP(K, 4), Np = ROUND_UP(N, NR);
    for (int64_t j0 = 0; j0 < Np; j0 += NR) {
        int8_t *panel = packed + j0 * Kp;
        for (int64_t kg = 0; kg < Kp; kg += 4)
            for (int64_t c = 0; c < NR; ++c)
                for (int64_t t = 0; t < 4; ++t) {
                    int64_t k = kg + t, col = j0 + c;
                    panel[kg * NR + c * 4 + t] = (k < K && col < N) ? B[k * N + col] : 0;
                }
    }
    for (int64_t col = 0; col < Np; ++col) {
        int32_t s = 0;
        for (int64_t k = 0; k < K && col < N; ++k) s += B[k * N + col];
        comp[col] = (int32_t)((uint32_t)s * (uint32_t)(A_BIAS ? -128 : 0));
    }
}

static inline uint32_t NAME(a_group)(const a_elem *row, int64_t k, int64_t K) {
    uint32_t g = 0;
    memcpy(&g, row + k, (size_t)(K - k < 4 ? K - k : 4));
    /* Padding bytes stay 0 after the shift too: they meet zero-padded B, so their value does not matter. */
    return g ^ A_BIAS;
}

__attribute__((target(TARGET)))
static void NAME(micro)(int64_t mr, int64_t nc, int64_t K, const a_elem *A, int64_t lda, const int8_t *panel,
                        const int32_t *comp, int32_t *C, int64_t ldc) {
    V acc[MR][NRV];
    const a_elem *rows[MR];
    for (int r = 0; r < MR; ++r) {
        rows[r] = A + (r < mr ? r : mr - 1) * lda;   /* rows past M re-read the last row; never stored */
        for (int v = 0; v < NRV; ++v) acc[r][v] = ZERO();
    }
    int64_t Kp = ROUND_UP(K, 4);
    for (int64_t kg = 0; kg < Kp; kg += 4) {
        const int8_t *bp = panel + kg * NR;
        V b[NRV];
        for (int v = 0; v < NRV; ++v) b[v] = LOADU(bp + v * VW);
        for (int r = 0; r < MR; ++r) {
            uint32_t g = kg + 4 <= K ? (({ uint32_t t; memcpy(&t, rows[r] + kg, 4); t; }) ^ A_BIAS)
                                     : NAME(a_group)(rows[r], kg, K);
            V a = SET1_32((int)g);
            for (int v = 0; v < NRV; ++v) acc[r][v] = DOT(acc[r][v], a, b[v]);
        }
    }
    for (int r = 0; r < mr; ++r) {
        int32_t out[NR];
        for (int v = 0; v < NRV; ++v) STOREU(out + v * CPV, ADD32(acc[r][v], LOADU(comp + v * CPV)));
        memcpy(C + r * ldc, out, (size_t)nc * 4);
    }
}

__attribute__((target(TARGET)))
void NAME(gemm)(int64_t M, int64_t N, int64_t K, const a_elem *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, 4), Np = ROUND_UP(N, NR);
    int8_t *packed = (int8_t *)work;
    int32_t *comp = (int32_t *)(((uintptr_t)(packed + Kp * Np) + 63) & ~(uintptr_t)63);
    NAME(pack_b)(N, K, B, packed, comp);
    for (int64_t j0 = 0; j0 < N; j0 += NR)
        for (int64_t i0 = 0; i0 < M; i0 += MR)
            NAME(micro)(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, K, A + i0 * K, K,
                        packed + j0 * Kp, comp + j0, C + i0 * N + j0, N);
}
