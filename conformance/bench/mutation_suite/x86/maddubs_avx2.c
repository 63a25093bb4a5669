/* Mutation suite, x86 family 1: an AVX2 u8 x s8 -> s32 GEMM (MR x NR = 4 x 8) and the single-bug mutants built
 * from it with -D switches (conformance/bench/mutation_suite/expected.toml says what each one gets wrong).
 *
 * B is packed into the workspace behind a small header, in panels of 8 columns with k in groups of 4 (one 32-bit
 * lane per column holds b[k..k+3][col]), zero-padded to a multiple of 32 in k and of 8 in n. A is read in place:
 * a broadcast 4-byte group of a row meets one panel register. K runs in whole blocks of 32 (8 groups); the K tail
 * of each row (1..31 bytes) is staged in a zeroed 32-byte buffer, its length in k pairs kept in the header.
 * Rows are done 4 at a time, the M remainder one row at a time.
 *
 * The dot-product step DOT(acc, a, b), chosen with -D:
 *   (default)   VPMADDUBSW + VPMADDWD(ones) + VPADDD: each pair (k, k+1), k even, saturates to int16; exact for
 *               A in [0, 127] (u7).
 *   EXACT_U8    exact on all of u8: VPDPBUSD when the compiler targets AVX512-VNNI with AVX512VL, else A split
 *               into ceil(a/2) (VPAVGB, <= 128) and floor(a/2) (<= 127), two VPMADDUBSW that cannot saturate.
 *   SIGN_TRICK  s8 x s8 as VPMADDUBSW(|a|, sign(b, a)) (VPABSB, VPSIGNB).
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MR 4
#define NR 8
#define KB 32
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

#ifdef SIGN_TRICK
typedef int8_t a_elem;
#else
typedef uint8_t a_elem;
#endif

/* The packed B's header. */
typedef struct {
    uint32_t full_blocks;       /* whole 32-k blocks */
#ifdef MUT_TAIL31
    uint32_t tail_pairs : 4;    /* k pairs of the last, partial block */
#else
    uint32_t tail_pairs : 5;    /* k pairs of the last, partial block: 0..16 */
#endif
} pack_info;

#define HEADER 64               /* bytes before the panels: the header, padded to a cache line */

size_t mut_avx2_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return HEADER + (size_t)ROUND_UP(K, KB) * (size_t)ROUND_UP(N, NR);
}

static inline __m256i dot(__m256i acc, __m256i a, __m256i b) {
    const __m256i ones = _mm256_set1_epi16(1);
#if defined(EXACT_U8) && defined(__AVX512VNNI__) && defined(__AVX512VL__)
    (void)ones;
    return _mm256_dpbusd_epi32(acc, a, b);
#elif defined(EXACT_U8)
#ifdef MUT_A255
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(_mm256_add_epi8(a, _mm256_set1_epi8(1)), 1),
                                  _mm256_set1_epi8(0x7f));                       /* (a + 1) / 2 in 8 bits */
#else
    __m256i hi = _mm256_avg_epu8(a, _mm256_setzero_si256());                     /* (a + 1) / 2 in 9 bits */
#endif
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(a, 1), _mm256_set1_epi8(0x7f));   /* a / 2 */
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, b), ones));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, b), ones));
#elif defined(SIGN_TRICK)
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(b, a)),
                                                   ones));
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
#endif
}

static void pack_b(int64_t N, int64_t K, const int8_t *B, void *work) {
    int64_t Kp = ROUND_UP(K, KB), Np = ROUND_UP(N, NR);
    pack_info *info = work;
#ifdef MUT_BLOCK_OVERREAD
    int64_t k_pairs = ROUND_UP(K, 2);               /* VPMADDUBSW works on k pairs */
    info->full_blocks = (uint32_t)(k_pairs / KB);
    info->tail_pairs = (uint32_t)((k_pairs % KB) / 2);
#else
    info->full_blocks = (uint32_t)(K / KB);
    info->tail_pairs = (uint32_t)((K % KB + 1) / 2);
#endif
    int8_t *panels = (int8_t *)work + HEADER;
    for (int64_t j0 = 0; j0 < Np; j0 += NR)
        for (int64_t k = 0; k < Kp; ++k)
            for (int64_t c = 0; c < NR; ++c)
                panels[j0 * Kp + (k / 4) * NR * 4 + c * 4 + k % 4] = (k < K && j0 + c < N) ? B[k * N + j0 + c] : 0;
}

static inline uint32_t load_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void micro(int64_t mr, int64_t nc, int64_t K, const a_elem *A, const pack_info *info, const int8_t *panel,
                  int32_t *C, int64_t ldc) {
    __m256i acc[MR];
    const a_elem *rows[MR];
    for (int r = 0; r < MR; ++r) {
        rows[r] = A + (r < mr ? r : mr - 1) * K;     /* rows past mr re-read the last one; never stored */
        acc[r] = _mm256_setzero_si256();
    }
    int64_t k = 0;
    for (uint32_t blk = 0; blk < info->full_blocks; ++blk, k += KB)
        for (int g = 0; g < KB / 4; ++g) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(panel + (k + 4 * g) * NR));
            for (int r = 0; r < MR; ++r)
                acc[r] = dot(acc[r], _mm256_set1_epi32((int)load_u32(rows[r] + k + 4 * g)), b);
        }
    if (info->tail_pairs) {
        int64_t rem = K - k, groups = (2 * (int64_t)info->tail_pairs + 3) / 4;
        uint8_t stage[MR][KB];
        for (int r = 0; r < MR; ++r) {
            memset(stage[r], 0, KB);
            memcpy(stage[r], rows[r] + k, (size_t)rem);
        }
        for (int64_t g = 0; g < groups; ++g) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(panel + (k + 4 * g) * NR));
            for (int r = 0; r < MR; ++r)
                acc[r] = dot(acc[r], _mm256_set1_epi32((int)load_u32(stage[r] + 4 * g)), b);
        }
    }
    for (int r = 0; r < mr; ++r) {
        if (nc == NR) {
            _mm256_storeu_si256((__m256i *)(C + r * ldc), acc[r]);
            continue;
        }
        int32_t out[NR];
#ifdef MUT_N_TAIL_SWAP
        _mm256_storeu_si256((__m256i *)out, _mm256_shuffle_epi32(acc[r], _MM_SHUFFLE(3, 1, 2, 0)));
#else
        _mm256_storeu_si256((__m256i *)out, acc[r]);
#endif
        memcpy(C + r * ldc, out, (size_t)nc * 4);
    }
}

void mut_avx2_gemm(int64_t M, int64_t N, int64_t K, const a_elem *A, const int8_t *B, int32_t *C, void *work) {
    int64_t Kp = ROUND_UP(K, KB);
    const pack_info *info = work;
    const int8_t *panels = (const int8_t *)work + HEADER;
    pack_b(N, K, B, work);
    int64_t i0 = 0;
    for (; i0 + MR <= M; i0 += MR)
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(MR, N - j0 < NR ? N - j0 : NR, K, A + i0 * K, info, panels + j0 * Kp, C + i0 * N + j0, N);
#ifdef MUT_M_TAIL
    for (; i0 < M - 1; ++i0)
#else
    for (; i0 < M; ++i0)
#endif
        for (int64_t j0 = 0; j0 < N; j0 += NR)
            micro(1, N - j0 < NR ? N - j0 : NR, K, A + i0 * K, info, panels + j0 * Kp, C + i0 * N + j0, N);
}
