/* s8 x s8 -> s32 GEMM for SME2: SDOT (4-way, multiple vectors) into ZA vector groups (FEAT_SME2,
 * svdot_za32_s8_vg1x4), read back as a vector group (MOVA, svread_za32_s32_vg1x4), at whatever streaming vector
 * length the CPU has. Exact products; each 4-product sum is exact and added to an int32 ZA lane modulo 2^32, and
 * the lanes of a ZA vector are summed (SADDV, 64-bit) and stored modulo 2^32: the exact product modulo 2^32.
 *
 * b = svcntb() bytes a streaming vector, L = b / 4 int32 lanes, vstride = b / 4 ZA vectors between a group's four
 * (ZA has b vectors). A is packed row by row and B column by column, each zero-padded to Kp = K rounded up to b.
 * For a row m and a block of 4 columns, one SDOT per b-deep k chunk adds A's chunk (the same vector four times)
 * dotted lane group by lane group with the 4 columns' chunks into ZA vectors slot, slot + vstride, slot + 2 vstride,
 * slot + 3 vstride; lane e of vector r then holds the partial dot of column r over k groups 4e..4e+3. One ZA fill
 * serves vstride column blocks of one row (slots 0 .. vstride - 1).
 *
 * LOWP_BUG_PAD_K4 (the one-bug version tests build): the packing pads k only to a multiple of 4, not to b, so the
 * last chunk reads whatever the workspace held past it when K is not a multiple of b. */
#include <arm_sme.h>
#include <stddef.h>
#include <stdint.h>

#define COLS 4                      /* columns per SDOT: the vector group's 4 registers */
#define ROUND_UP(x, m) (((x) + (m) - 1) / (m) * (m))

/* clang's SME ABI support calls these when a ZA-sharing caller had a lazy save pending (TPIDR2_EL0 != 0); a
 * lowp program never sets TPIDR2, so they are never reached, but the linker needs them. */
void __arm_tpidr2_save(void) { __builtin_trap(); }
void __arm_tpidr2_restore(void *blk) { (void) blk; __builtin_trap(); }

static int64_t chunk(void) { return (int64_t) svcntsb(); }

#ifdef LOWP_BUG_PAD_K4
static int64_t padded(int64_t K) { return ROUND_UP(K, 4); }
#else
static int64_t padded(int64_t K) { return ROUND_UP(K, chunk()); }
#endif

size_t lowp_sme2_sdot_s8_workspace(int64_t M, int64_t N, int64_t K) {
    return (size_t) (M + ROUND_UP(N, COLS)) * (size_t) ROUND_UP(K, chunk());
}

/* one row of C: columns [0, N) from pa (Kp bytes) and pb (ROUND_UP(N, 4) columns of Kp bytes) */
__arm_locally_streaming __arm_new("za")
static void row(int64_t N, int64_t Kp, const int8_t *pa, const int8_t *pb, int32_t *C) {
    const int64_t b = (int64_t) svcntb(), vstride = b / COLS, blocks = ROUND_UP(N, COLS) / COLS;
    const svbool_t all = svptrue_b8(), lanes = svptrue_b32();
    for (int64_t j0 = 0; j0 < blocks; j0 += vstride) {
        const int64_t jn = blocks - j0 < vstride ? blocks - j0 : vstride;
        svzero_za();
        for (int64_t k = 0; k < Kp; k += b) {
            const svint8_t a = svld1_s8(all, pa + k);
            const svint8x4_t zn = svcreate4(a, a, a, a);
            for (int64_t j = 0; j < jn; ++j) {
                const int8_t *col = pb + (j0 + j) * COLS * Kp + k;
                const svint8x4_t zm = svcreate4(svld1_s8(all, col), svld1_s8(all, col + Kp),
                                                svld1_s8(all, col + 2 * Kp), svld1_s8(all, col + 3 * Kp));
                svdot_za32_s8_vg1x4((uint32_t) j, zn, zm);
            }
        }
        for (int64_t j = 0; j < jn; ++j) {
            const svint32x4_t acc = svread_za32_s32_vg1x4((uint32_t) j);
            const int64_t n0 = (j0 + j) * COLS;
            if (n0 + 0 < N) C[n0 + 0] = (int32_t) (uint32_t) svaddv_s32(lanes, svget4(acc, 0));
            if (n0 + 1 < N) C[n0 + 1] = (int32_t) (uint32_t) svaddv_s32(lanes, svget4(acc, 1));
            if (n0 + 2 < N) C[n0 + 2] = (int32_t) (uint32_t) svaddv_s32(lanes, svget4(acc, 2));
            if (n0 + 3 < N) C[n0 + 3] = (int32_t) (uint32_t) svaddv_s32(lanes, svget4(acc, 3));
        }
    }
}

/* `count` vectors of X (element (i, k) at X[i * step + k * stride]), each K bytes padded with zeros to `pad` */
static void pack(int8_t *out, const int8_t *X, int64_t rows, int64_t count, int64_t K, int64_t pad, int64_t Kp,
                 int64_t step, int64_t stride) {
    for (int64_t i = 0; i < count; ++i)
        for (int64_t k = 0; k < pad; ++k)
            out[i * Kp + k] = (i < rows && k < K) ? X[i * step + k * stride] : 0;
}

void lowp_sme2_sdot_s8_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C,
                            void *work) {
    const int64_t Kp = ROUND_UP(K, chunk()), Np = ROUND_UP(N, COLS);
    int8_t *pa = (int8_t *) work, *pb = pa + M * Kp;
    pack(pa, A, M, M, K, padded(K), Kp, K, 1);
    pack(pb, B, N, Np, K, padded(K), Kp, 1, N);
    for (int64_t m = 0; m < M; ++m) row(N, Kp, pa + m * Kp, pb, C + m * N);
}
