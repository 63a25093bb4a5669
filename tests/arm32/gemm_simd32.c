/* lowp's own ARMv6 SIMD32 int8 GEMM (the shape of XNNPACK's c4 armsimd32 kernels): four int8 of A and of B per 32-bit
 * word, SXTB16 (with ROR #8) to two int16 pairs, SMLAD into an int32: exact. The `gemm` signature on a 32-bit target:
 * every argument a 32-bit word (long). A is M x K, B is K x N, C is M x N, row-major.
 * -DLOWP_BUG_NO_ROR: the bytes 1 and 3 of each word are never multiplied (SXTB16 without the ROR #8): a one-bug
 * version lowp must catch. */
#include <arm_acle.h>
#include <stdint.h>

long lowp_simd32_gemm_workspace(long M, long N, long K) { (void)M; (void)N; return 4 * ((K + 3) / 4 + 1); }

static int8x4_t word(const int8_t *p) { uint32_t w; __builtin_memcpy(&w, p, 4); return (int8x4_t)w; }

void lowp_simd32_gemm_s8(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int8_t *b = work;                                   /* one column of B, K rounded up to 4 with zeros */
    long kw = (K + 3) / 4 * 4;
    for (long n = 0; n < N; n++) {
        for (long k = 0; k < kw; k++) b[k] = k < K ? B[k * N + n] : 0;
        for (long m = 0; m < M; m++) {
            int32_t acc = 0;
            for (long k = 0; k < kw; k += 4) {
                int8_t a4[4];
                for (int i = 0; i < 4; i++) a4[i] = k + i < K ? A[m * K + k + i] : 0;
                int8x4_t va = word(a4), vb = word(b + k);
                acc = __smlad(__sxtb16(va), __sxtb16(vb), acc);
#ifndef LOWP_BUG_NO_ROR
                acc = __smlad(__sxtb16(__ror(va, 8)), __sxtb16(__ror(vb, 8)), acc);
#endif
            }
            C[m * N + n] = acc;
        }
    }
}
