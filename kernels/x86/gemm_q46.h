/* s8 x s8 -> s32 GEMMs with one packing, one blocking and one 8x8 micro-kernel shape: the 4.6-bit kernel of
 * seed 004 and the exact 8-bit kernels it is measured against (docs/q46-kernels.md).
 *
 * C[M][N] = sum_k A[M][K] * B[K][N] (+ COMP[n]), A and B row-major s8, C row-major int32 (wrapping).
 *
 * Packing (both in `work`, redone on every call):
 *   A' = f(A) row by row, rows padded with zero rows to a multiple of 8 and k padded with zeros to a multiple
 *        of KG, each element ES bytes: f is a + SHIFT as u8 (4.6-bit: the A_m trick of seed 004), a XOR 0x80
 *        (VNNI: s8 as u8 + 128) or sign extension to int16 (VPMADDWD).
 *   B' = panels of 8 columns; in a panel, step s (k = s*KG .. s*KG + KG-1) is one vector of VW bytes: column c
 *        holds its KG values of k, ES bytes each, at c*KG*ES. PSHUFB pairs the bytes of two k rows column by
 *        column, VPUNPCKLWD/HWD makes the pairs quads, VPUNPCKLDQ/HDQ octets, VPMOVSXBW widens them (ES = 2).
 *   COMP[n] = -SHIFT * colsum(B)[n] (SHIFT = 128 for the VNNI kernel, 0 for VPMADDWD), int32 wrapping.
 * Micro-kernel (8 rows x 8 columns of C, the x86 micro-kernel shape of seed 004): per step, one load of B' and
 *   for each of the 8 rows a broadcast of its KG*ES bytes of A' (VPBROADCASTD/Q from memory) into STEP.
 *   With ACC16 (4.6-bit), STEP is VPMADDUBSW + VPADDW into int16 accumulators (one int16 lane per column and
 *   k pair), widened every `flush` k (flush / KG steps, at least 1) by VPMADDWD(ones) + VPADDD into int32;
 *   without it STEP accumulates int32 directly (VPMADDWD + VPADDD, or VPDPBUSD). At the end REDUCE sums the
 *   int32 lanes of a column (1 per column at 256 bits, 2 at 512 bits), COMP is added and mr x nc is stored.
 *
 * The including file defines NAME(x), TARGET, V, VW, KG, ES, ZERO(), LOADU(p), BCAST(p), STEP(acc, a, b),
 * REDUCE(acc) (-> __m256i of 8 column sums), COLSUM(acc, b) (+= per-column sums of a B' vector), PACK_A (A_U8_SHIFT, A_U8_XOR or A_S16), and ACC16 with
 * WIDEN(acc16) (-> int32 lanes) for the 4.6-bit kernels. A kernel with PARAMS takes (shift, flush) arguments.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#ifndef Q46_COMMON
#define Q46_COMMON
#define Q_MR 8
#define Q_NR 8
#define Q_ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))
#define Q_ALIGN64(p) ((void *)(((uintptr_t)(p) + 63) & ~(uintptr_t)63))
#define A_U8_SHIFT 1
#define A_U8_XOR 2
#define A_S16 3

/* Row k of B, columns col .. col+7, as 8 bytes; zero past N and past K. */
static inline uint64_t q46_row8(const int8_t *B, int64_t N, int64_t K, int64_t k, int64_t col) {
    uint64_t v = 0;
    if (k < K) {
        if (col + 8 <= N) {
            memcpy(&v, B + k * N + col, 8);
        } else {
            for (int64_t c = 0; c < N - col; ++c) v |= (uint64_t)(uint8_t)B[k * N + col + c] << (8 * c);
        }
    }
    return v;
}
#endif

size_t NAME(workspace)(int64_t M, int64_t N, int64_t K) {
    int64_t Kp = Q_ROUND_UP(K, KG), Mp = Q_ROUND_UP(M, Q_MR), Np = Q_ROUND_UP(N, Q_NR);
    return (size_t)((Mp + Np) * Kp * ES + Np * 4 + 3 * 64);
}

/* B' and the column sums. Quads (PSHUFB pair + unpack) are built in 128-bit registers, 8 columns x 4 k. */
__attribute__((target(TARGET)))
static void NAME(pack_b)(int64_t N, int64_t K, const int8_t *B, uint8_t *packed, int32_t *comp, int64_t shift) {
    int64_t Kp = Q_ROUND_UP(K, KG), Np = Q_ROUND_UP(N, Q_NR);
    /* control for PSHUFB: bytes of two rows r0 (0..7) and r1 (8..15) as pairs (r0[c], r1[c]) per column c */
    const __m128i pair = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for (int64_t j0 = 0; j0 < Np; j0 += Q_NR) {
        uint8_t *panel = packed + j0 * Kp * ES;
        for (int64_t k0 = 0; k0 < Kp; k0 += KG) {
            uint8_t *out = panel + k0 * Q_NR * ES;
#if KG == 2
            __m128i p01 = _mm_shuffle_epi8(_mm_set_epi64x((long long)q46_row8(B, N, K, k0 + 1, j0),
                                                          (long long)q46_row8(B, N, K, k0, j0)), pair);
            _mm256_storeu_si256((__m256i *)(void *)out, _mm256_cvtepi8_epi16(p01));   /* ES == 2 */
#else
            __m128i q[KG / 4][2];
            for (int g = 0; g < KG / 4; ++g) {
                int64_t k = k0 + 4 * g;
                __m128i p01 = _mm_shuffle_epi8(_mm_set_epi64x((long long)q46_row8(B, N, K, k + 1, j0),
                                                              (long long)q46_row8(B, N, K, k, j0)), pair);
                __m128i p23 = _mm_shuffle_epi8(_mm_set_epi64x((long long)q46_row8(B, N, K, k + 3, j0),
                                                              (long long)q46_row8(B, N, K, k + 2, j0)), pair);
                q[g][0] = _mm_unpacklo_epi16(p01, p23);   /* columns 0..3: k, k+1, k+2, k+3 */
                q[g][1] = _mm_unpackhi_epi16(p01, p23);   /* columns 4..7 */
            }
            __m128i o[4];
#if KG == 4
            o[0] = q[0][0]; o[1] = q[0][1];
#else  /* KG == 8: column c holds k0..k0+3 then k0+4..k0+7 */
            o[0] = _mm_unpacklo_epi32(q[0][0], q[1][0]); o[1] = _mm_unpackhi_epi32(q[0][0], q[1][0]);
            o[2] = _mm_unpacklo_epi32(q[0][1], q[1][1]); o[3] = _mm_unpackhi_epi32(q[0][1], q[1][1]);
#endif
            for (int h = 0; h < KG / 2; ++h) {
#if ES == 1
                _mm_storeu_si128((__m128i *)(void *)(out + 16 * h), o[h]);
#else
                _mm256_storeu_si256((__m256i *)(void *)(out + 32 * h), _mm256_cvtepi8_epi16(o[h]));
#endif
            }
#endif
        }
    }
    /* COMP = -shift * colsum(B), the column sums taken from B' (COLSUM: VPMADDUBSW(ones, b), VPMADDWD(ones)). */
    __m256i negshift = _mm256_set1_epi32((int)(uint32_t)(-(uint64_t)shift));
    for (int64_t j0 = 0; j0 < Np; j0 += Q_NR) {
        __m256i sum = _mm256_setzero_si256();
#if ES == 1
        if (shift) {
            const uint8_t *panel = packed + j0 * Kp;
            V acc = ZERO();
            for (int64_t s = 0; s < Kp / KG; ++s) acc = COLSUM(acc, LOADU(panel + s * VW));
            sum = REDUCE(acc);
        }
#endif
        _mm256_storeu_si256((__m256i *)(void *)(comp + j0), _mm256_mullo_epi32(sum, negshift));
    }
}

__attribute__((target(TARGET)))
static void NAME(pack_a)(int64_t M, int64_t K, const int8_t *A, uint8_t *packed, int64_t shift) {
    int64_t Kp = Q_ROUND_UP(K, KG), Mp = Q_ROUND_UP(M, Q_MR);
    (void)shift;
    for (int64_t i = 0; i < Mp; ++i) {
        const int8_t *src = A + i * K;
#if PACK_A == A_S16
        int16_t *dst = (int16_t *)(void *)(packed + i * Kp * 2);
        int64_t k = 0;
        if (i < M)
            for (; k < K; ++k) dst[k] = src[k];
#else
        uint8_t *dst = packed + i * Kp;
        int64_t k = 0;
        if (i < M) {
#if PACK_A == A_U8_SHIFT
            uint8_t s = (uint8_t)shift;
            for (; k < K; ++k) dst[k] = (uint8_t)((uint8_t)src[k] + s);
#else
            for (; k < K; ++k) dst[k] = (uint8_t)src[k] ^ 0x80;
#endif
        }
#endif
        for (; k < Kp; ++k) dst[k] = 0;
    }
}

__attribute__((target(TARGET)))
static void NAME(micro)(int64_t mr, int64_t nc, int64_t steps, int64_t block, const uint8_t *a, int64_t lda,
                        const uint8_t *b, const int32_t *comp, int32_t *C, int64_t ldc) {
    const uint8_t *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda, *a4 = a + 4 * lda,
                  *a5 = a + 5 * lda, *a6 = a + 6 * lda, *a7 = a + 7 * lda;
    V c0 = ZERO(), c1 = ZERO(), c2 = ZERO(), c3 = ZERO(), c4 = ZERO(), c5 = ZERO(), c6 = ZERO(), c7 = ZERO();
#define Q_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#ifdef ACC16
    for (int64_t s0 = 0; s0 < steps; s0 += block) {
        int64_t s1 = s0 + block < steps ? s0 + block : steps;
        V h0 = ZERO(), h1 = ZERO(), h2 = ZERO(), h3 = ZERO(), h4 = ZERO(), h5 = ZERO(), h6 = ZERO(), h7 = ZERO();
        for (int64_t s = s0; s < s1; ++s) {
            V bv = LOADU(b + s * VW);
            int64_t o = s * (KG * ES);
#define Q_STEP16(r) h##r = STEP(h##r, BCAST(a##r + o), bv);
            Q_ROWS(Q_STEP16)
        }
#define Q_WIDEN(r) c##r = ADD32(c##r, WIDEN(h##r));
        Q_ROWS(Q_WIDEN)
    }
#else
    (void)block;
    for (int64_t s = 0; s < steps; ++s) {
        V bv = LOADU(b + s * VW);
        int64_t o = s * (KG * ES);
#define Q_STEP32(r) c##r = STEP(c##r, BCAST(a##r + o), bv);
        Q_ROWS(Q_STEP32)
    }
#endif
    __m256i cv = _mm256_loadu_si256((const __m256i *)(const void *)comp);
    /* rows mr.. are not stored; at the right edge only lanes 0..nc-1 (VPMASKMOVD, slow on AMD: edges only) */
    __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nc), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#define Q_STORE(r) if (r < mr) { __m256i q_v = _mm256_add_epi32(REDUCE(c##r), cv);                               \
        if (nc == Q_NR) _mm256_storeu_si256((__m256i *)(void *)(C + r * ldc), q_v);                               \
        else _mm256_maskstore_epi32(C + r * ldc, keep, q_v); }
    Q_ROWS(Q_STORE)
#undef Q_ROWS
#undef Q_STEP16
#undef Q_WIDEN
#undef Q_STEP32
#undef Q_STORE
}

#ifdef PARAMS
#define Q_PARAMS , int64_t shift, int64_t flush
#else
#define Q_PARAMS
#endif

__attribute__((target(TARGET)))
void NAME(gemm)(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work Q_PARAMS) {
#ifndef PARAMS
#if PACK_A == A_U8_XOR
    int64_t shift = 128;
#else
    int64_t shift = 0;
#endif
    int64_t flush = 0;
#endif
    int64_t Kp = Q_ROUND_UP(K, KG), Mp = Q_ROUND_UP(M, Q_MR), Np = Q_ROUND_UP(N, Q_NR);
    int64_t steps = Kp / KG, block = flush / KG < 1 ? 1 : flush / KG;
    uint8_t *pa = (uint8_t *)Q_ALIGN64(work);
    uint8_t *pb = (uint8_t *)Q_ALIGN64(pa + Mp * Kp * ES);
    int32_t *comp = (int32_t *)Q_ALIGN64(pb + Np * Kp * ES);
    if (M <= 0 || N <= 0) return;
    NAME(pack_a)(M, K, A, pa, shift);
    NAME(pack_b)(N, K, B, pb, comp, shift);
    for (int64_t i0 = 0; i0 < M; i0 += Q_MR)
        for (int64_t j0 = 0; j0 < N; j0 += Q_NR)
            NAME(micro)(M - i0 < Q_MR ? M - i0 : Q_MR, N - j0 < Q_NR ? N - j0 : Q_NR, steps, block,
                        pa + i0 * Kp * ES, Kp * ES, pb + j0 * Kp * ES, comp + j0, C + i0 * N + j0, N);
}
#undef Q_PARAMS
