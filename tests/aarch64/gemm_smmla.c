/* int8 GEMM with SMMLA (FEAT_I8MM), written with ACLE intrinsics.
   c[i][j] = sum_p a[i][p] * bt[j][p]: a is m x k row-major, bt is B transposed (n x k), c is m x n int32.
   One SMMLA multiplies a 2x8 block of a (rows i, i+1) by the 8x2 block of B held as rows j, j+1 of bt (the
   right operand is stored column by column) into the 2x2 block {c[i][j], c[i][j+1], c[i+1][j], c[i+1][j+1]}.
   Needs m, n even and k % 8 == 0. */
#include <arm_neon.h>
#include <stdint.h>

void gemm_smmla(const int8_t *a, const int8_t *bt, int32_t *c, long m, long n, long k) {
    for (long i = 0; i < m; i += 2) {
        for (long j = 0; j < n; j += 2) {
            int32x4_t acc = vdupq_n_s32(0);
            for (long p = 0; p < k; p += 8) {
                int8x16_t av = vcombine_s8(vld1_s8(a + i * k + p), vld1_s8(a + (i + 1) * k + p));
                int8x16_t bv = vcombine_s8(vld1_s8(bt + j * k + p), vld1_s8(bt + (j + 1) * k + p));
                acc = vmmlaq_s32(acc, av, bv);
            }
            vst1_s32(c + i * n + j, vget_low_s32(acc));
            vst1_s32(c + (i + 1) * n + j, vget_high_s32(acc));
        }
    }
}

/* u8 x s8 with USMMLA: a unsigned (activations), bt signed (weights). */
void gemm_usmmla(const uint8_t *a, const int8_t *bt, int32_t *c, long m, long n, long k) {
    for (long i = 0; i < m; i += 2) {
        for (long j = 0; j < n; j += 2) {
            int32x4_t acc = vdupq_n_s32(0);
            for (long p = 0; p < k; p += 8) {
                uint8x16_t av = vcombine_u8(vld1_u8(a + i * k + p), vld1_u8(a + (i + 1) * k + p));
                int8x16_t bv = vcombine_s8(vld1_s8(bt + j * k + p), vld1_s8(bt + (j + 1) * k + p));
                acc = vusmmlaq_s32(acc, av, bv);
            }
            vst1_s32(c + i * n + j, vget_low_s32(acc));
            vst1_s32(c + (i + 1) * n + j, vget_high_s32(acc));
        }
    }
}
