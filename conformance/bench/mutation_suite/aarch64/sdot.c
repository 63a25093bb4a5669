/* Mutation suite, AArch64 family 2: s8 x s8 -> s32 GEMM with SDOT by element (FEAT_DotProd), MR x NR = 4 x 8,
 * exact (int32 wrap-around). Single-bug mutants are -D switches (conformance/bench/mutation_suite/expected.toml).
 *
 * A is packed in blocks of 4 rows, each row k-contiguous and zero-padded to a multiple of 16 (one int8x16 per row
 * and 16 k); B in panels of 8 columns, k in groups of 4 (16 bytes = 4 columns x 4 k, two per group). K runs in
 * blocks of KC = 1024: the first block stores its tiles in C, the next ones add to them. Without
 * __ARM_FEATURE_DOTPROD the dot product is SMULL + SADDLP + ADDP (exact, for cores without SDOT).
 * Freestanding (lowp's emulator runtime has no libc headers).
 */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define MR 4
#define NR 8
#define KB 16
#define KC 1024
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#if !defined(MUT_PATH) && defined(__ARM_FEATURE_DOTPROD)
#define USE_SDOT
#elif defined(MUT_PATH) && defined(__ARM_FEATURE_DOT_PROD)
#define USE_SDOT
#endif

#ifdef USE_SDOT
#define DOT_LANE(acc, b, a, g) vdotq_laneq_s32(acc, b, a, g)
#else
static inline int32x4_t dot4(int32x4_t acc, int8x16_t b, int8x16_t a) {
    int16x8_t lo = vmull_s8(vget_low_s8(b), vget_low_s8(a)), hi = vmull_high_s8(b, a);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}
#define DOT_LANE(acc, b, a, g) dot4(acc, b, vreinterpretq_s8_s32(vdupq_laneq_s32(vreinterpretq_s32_s8(a), g)))
#endif

size_t mut_sdot_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t)(ROUND_UP(M, MR) + ROUND_UP(N, NR)) * (size_t)ROUND_UP(K, KB);
}

static void pack_a(int64_t M, int64_t K, int64_t Kp, const int8_t *A, int8_t *pa) {
    for (int64_t i = 0; i < ROUND_UP(M, MR); ++i) {
        int8_t *dst = pa + i * Kp;
        int64_t k = 0;
        if (i < M) {
            const int8_t *src = A + i * K;
#ifdef MUT_A_OVERREAD
            for (; k < K; k += KB) vst1q_s8(dst + k, vld1q_s8(src + k));   /* pad bytes meet zero B */
#else
            for (; k + KB <= K; k += KB) vst1q_s8(dst + k, vld1q_s8(src + k));
            for (; k < K; ++k) dst[k] = src[k];
#endif
        }
        for (; k < Kp; ++k) dst[k] = 0;
    }
}

static void pack_b(int64_t N, int64_t K, int64_t Kp, const int8_t *B, int8_t *pb) {
    for (int64_t j0 = 0; j0 < ROUND_UP(N, NR); j0 += NR)
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < NR; ++c)
#ifdef MUT_B_OVERREAD
                pb[j0 * Kp + (k / 4) * NR * 4 + c * 4 + k % 4] = (j0 + c < N && k <= K) ? B[k * N + j0 + c] : 0;
#else
                pb[j0 * Kp + (k / 4) * NR * 4 + c * 4 + k % 4] = (j0 + c < N && k < K) ? B[k * N + j0 + c] : 0;
#endif
}

static void micro(int64_t mr, int64_t nc, int64_t kc, const int8_t *a, int64_t lda, const int8_t *panel, int32_t *C,
                  int64_t ldc, int first) {
    int32x4_t acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
    for (int64_t k = 0; k < kc; k += KB) {
        int8x16_t av[MR];
        for (int r = 0; r < MR; ++r) av[r] = vld1q_s8(a + r * lda + k);
        const int8_t *bp = panel + k * NR;
#define GROUP(g)                                                                          \
        {                                                                                 \
            int8x16_t b0 = vld1q_s8(bp + (g) * 32), b1 = vld1q_s8(bp + (g) * 32 + 16);    \
            for (int r = 0; r < MR; ++r) {                                                \
                acc[r][0] = DOT_LANE(acc[r][0], b0, av[r], g);                            \
                acc[r][1] = DOT_LANE(acc[r][1], b1, av[r], g);                            \
            }                                                                             \
        }
        GROUP(0) GROUP(1) GROUP(2) GROUP(3)
#undef GROUP
    }
#ifdef MUT_M_TAIL_STORE
    (void)mr;
    for (int r = 0; r < MR; ++r) {
#else
    for (int r = 0; r < mr; ++r) {
#endif
        int32_t out[NR], *p = C + r * ldc;
        vst1q_s32(out, acc[r][0]);
        vst1q_s32(out + 4, acc[r][1]);
        if (!first)
            for (int c = 0; c < nc; ++c) out[c] = (int32_t)((uint32_t)out[c] + (uint32_t)p[c]);
        if (nc == NR) {
            vst1q_s32(p, vld1q_s32(out));
            vst1q_s32(p + 4, vld1q_s32(out + 4));
            continue;
        }
        const int32_t *q = out;
        if (nc & 4) { vst1q_s32(p, vld1q_s32(q)); p += 4; q += 4; }
        if (nc & 2) { vst1_s32(p, vld1_s32(q)); p += 2; q += 2; }
#ifndef MUT_N_TAIL_UNWRITTEN
        if (nc & 1) *p = *q;
#endif
    }
}

void mut_sdot_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Mp = ROUND_UP(M, MR), Np = ROUND_UP(N, NR);
    int8_t *pa = work, *pb = pa + Mp * Kp;
    pack_a(M, K, Kp, A, pa);
#ifdef MUT_STATIC_B
    static int8_t cache[1 << 16];                     /* packed weights, kept for the next call of the same shape */
    static int64_t cached_n = -1, cached_k = -1;
    if (Np * Kp <= (int64_t)sizeof cache) {
        pb = cache;
        if (N != cached_n || K != cached_k) {
            pack_b(N, K, Kp, B, pb);
            cached_n = N;
            cached_k = K;
        }
    } else {
        pack_b(N, K, Kp, B, pb);
    }
#else
    pack_b(N, K, Kp, B, pb);
#endif
    for (int64_t k0 = 0, kc; k0 < Kp; k0 += kc) {
#ifdef MUT_HANG
        kc = (K - k0 < KC ? K - k0 : KC) & ~(int64_t)(KB - 1);     /* whole 16-k steps */
#else
        kc = Kp - k0 < KC ? Kp - k0 : KC;
#endif
        for (int64_t i0 = 0; i0 < M; i0 += MR)
            for (int64_t j0 = 0, nc; j0 < N; j0 += nc) {
                nc = N - j0 < NR ? N - j0 : NR;
#ifdef MUT_KBLOCK_B
                const int8_t *panel = pb + j0 * Kp;
#else
                const int8_t *panel = pb + j0 * Kp + k0 * NR;
#endif
                micro(M - i0 < MR ? M - i0 : MR, nc, kc, pa + i0 * Kp + k0, Kp, panel, C + i0 * N + j0, N, k0 == 0);
            }
    }
}
