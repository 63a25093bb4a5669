/* Mutation suite, x86 family 2: an AVX-512 VNNI GEMM (VPDPBUSD, MR x NR = 4 x 16), u8 x s8 -> s32 or, with
 * -DSIGNED_A, s8 x s8 -> s32 the way oneDNN does it on u8 x s8 hardware: A ^ 0x80 is A + 128 as u8, and C gets the
 * compensation -128 * colsum(B). The single-bug mutants are -D switches (conformance/bench/mutation_suite/expected.toml).
 *
 * B is packed whole into the workspace, in panels of 16 columns with k in groups of 4 (one 32-bit lane per column
 * holds b[k..k+3][col]); then come the compensation (int32 per column) and the column sums it is made from. K runs
 * in blocks of KC = 1024 (the first block stores its tile in C, the next ones add to it); the N remainder uses
 * masked loads and stores.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MR 4
#define NR 16
#define KC 1024
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#ifdef SIGNED_A
typedef int8_t a_elem;
#define A_BIAS 0x80808080u
#define SYM(x) mut_vnni_s8s8_##x
#else
typedef uint8_t a_elem;
#define A_BIAS 0u
#define SYM(x) mut_vnni_u8s8_##x
#endif

#ifdef MUT_COLSUM16
typedef int16_t colsum_t;
#else
typedef int32_t colsum_t;
#endif

#ifdef MUT_COMP_PLUS
#define COMP_SCALE 128u
#else
#define COMP_SCALE ((uint32_t)-128)
#endif

/* Workspace: packed B | compensation (Np int32) | column sums (Np colsum_t), each 64-byte aligned. */
size_t SYM(workspace)(int64_t M, int64_t N, int64_t K) {
    (void)M;
    int64_t Np = ROUND_UP(N, NR);
    return (size_t)(ROUND_UP(ROUND_UP(K, 4) * Np, 64) + ROUND_UP(Np * 4, 64) + Np * 4);
}

static void pack_b(int64_t N, int64_t K, const int8_t *B, int8_t *packed) {
    int64_t Kp = ROUND_UP(K, 4), Np = ROUND_UP(N, NR);
    for (int64_t j0 = 0; j0 < Np; j0 += NR)
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < NR; ++c)
                packed[j0 * Kp + (k / 4) * NR * 4 + c * 4 + k % 4] = (k < K && j0 + c < N) ? B[k * N + j0 + c] : 0;
}

#ifdef SIGNED_A
/* comp[j] = -128 * sum_k B[k][j] (int32, wrapping): what A + 128 adds to every product with column j. */
static void compensation(int64_t N, int64_t K, const int8_t *B, int32_t *comp, colsum_t *sums) {
#ifndef MUT_COLSUM_UNINIT
    for (int64_t j = 0; j < N; ++j) sums[j] = 0;
#endif
    for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) sums[j] += B[k * N + j];
    for (int64_t j = 0; j < ROUND_UP(N, NR); ++j)
        comp[j] = j < N ? (int32_t)((uint32_t)(int32_t)sums[j] * COMP_SCALE) : 0;
}
#endif

static inline uint32_t a_group(const a_elem *row, int64_t k, int64_t K) {
    uint32_t g = 0;
    memcpy(&g, row + k, (size_t)(K - k < 4 ? K - k : 4));
    return g ^ A_BIAS;      /* padding bytes meet B's zero padding: their value does not matter */
}

static void micro(int64_t mr, int64_t nc, int64_t kc, int64_t kvalid, const a_elem *A, int64_t lda,
                  const int8_t *panel, const int32_t *comp, int32_t *C, int64_t ldc, int first) {
    __m512i acc[MR];
    const a_elem *rows[MR];
    for (int r = 0; r < MR; ++r) {
        rows[r] = A + (r < mr ? r : mr - 1) * lda;
        acc[r] = _mm512_setzero_si512();
    }
    for (int64_t k = 0; k < kc; k += 4) {
        __m512i b = _mm512_loadu_si512((const void *)(panel + k * NR));
        for (int r = 0; r < MR; ++r)
            acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32((int)a_group(rows[r], k, kvalid)), b);
    }
    __mmask16 m = (__mmask16)(nc >= NR ? 0xFFFF : (1u << nc) - 1);
#if defined(MUT_C_ACCUM)
    int add_c = 1;
    (void)first;
#elif defined(MUT_KBLOCK_STORE)
    int add_c = 0;
    (void)first;
#else
    int add_c = !first;
#endif
    for (int r = 0; r < mr; ++r) {
        __m512i c = acc[r];
#ifdef SIGNED_A
        if (first) c = _mm512_add_epi32(c, _mm512_maskz_loadu_epi32(m, comp));
#else
        (void)comp;
#endif
        if (add_c) c = _mm512_add_epi32(c, _mm512_maskz_loadu_epi32(m, C + r * ldc));
        _mm512_mask_storeu_epi32(C + r * ldc, m, c);
    }
}

void SYM(gemm)(int64_t M, int64_t N, int64_t K, const a_elem *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, 4), Np = ROUND_UP(N, NR);
    int8_t *packed = work;
    int32_t *comp = (int32_t *)((int8_t *)work + ROUND_UP(Kp * Np, 64));
    colsum_t *sums = (colsum_t *)(comp + ROUND_UP(Np, 16));
#ifdef MUT_STALE_B
    static int8_t *cache;                            /* packed weights, kept for the next call of the same shape */
    static int64_t cached_n = -1, cached_k = -1;
    if (N != cached_n || K != cached_k) {
        free(cache);
        cache = aligned_alloc(64, (size_t)ROUND_UP(Kp * Np, 64));
        pack_b(N, K, B, cache);
        cached_n = N;
        cached_k = K;
    }
    packed = cache;
#else
    pack_b(N, K, B, packed);
#endif
#ifdef SIGNED_A
    compensation(N, K, B, comp, sums);
#else
    (void)sums;
#endif
    for (int64_t k0 = 0; k0 < Kp; k0 += KC) {
        int64_t kc = Kp - k0 < KC ? Kp - k0 : KC;
        for (int64_t i0 = 0; i0 < M; i0 += MR)
            for (int64_t j0 = 0; j0 < N; j0 += NR)
                micro(M - i0 < MR ? M - i0 : MR, N - j0 < NR ? N - j0 : NR, kc, K - k0, A + i0 * K + k0, K,
                      packed + j0 * Kp + k0 * NR, comp + j0, C + i0 * N + j0, N, k0 == 0);
    }
}
