/* int8 GEMM with SDOT (FEAT_DotProd), written with ACLE intrinsics.
   c[i][j] = sum_p a[i][p] * bt[j][p]: a is m x k row-major, bt is B transposed (n x k), c is m x n int32.
   Needs n % 4 == 0; k may be anything (a scalar tail handles k % 16). */
#include <arm_neon.h>
#include <stdint.h>

void gemm_sdot(const int8_t *a, const int8_t *bt, int32_t *c, long m, long n, long k) {
    for (long i = 0; i < m; i++) {
        const int8_t *ar = a + i * k;
        for (long j = 0; j < n; j += 4) {
            const int8_t *b0 = bt + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
            int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0;
            long p = 0;
            for (; p + 16 <= k; p += 16) {
                int8x16_t av = vld1q_s8(ar + p);
                s0 = vdotq_s32(s0, av, vld1q_s8(b0 + p));
                s1 = vdotq_s32(s1, av, vld1q_s8(b1 + p));
                s2 = vdotq_s32(s2, av, vld1q_s8(b2 + p));
                s3 = vdotq_s32(s3, av, vld1q_s8(b3 + p));
            }
            int32x4_t r = vpaddq_s32(vpaddq_s32(s0, s1), vpaddq_s32(s2, s3));
            int32_t t[4];
            vst1q_s32(t, r);
            for (; p < k; p++) {
                t[0] += ar[p] * b0[p];
                t[1] += ar[p] * b1[p];
                t[2] += ar[p] * b2[p];
                t[3] += ar[p] * b3[p];
            }
            vst1q_s32(c + i * n + j, vld1q_s32(t));
        }
    }
}

/* The same product with the by-element form: bp holds B packed as (k/4, n, 4) groups, so one SDOT by element
   multiplies four columns by a group of four values of a's row broadcast from one lane. Needs k % 16 == 0. */
void gemm_sdot_lane(const int8_t *a, const int8_t *bp, int32_t *c, long m, long n, long k) {
    for (long i = 0; i < m; i++) {
        for (long j = 0; j < n; j += 4) {
            int32x4_t acc = vdupq_n_s32(0);
            for (long p = 0; p < k; p += 16) {
                int8x16_t av = vld1q_s8(a + i * k + p);
                acc = vdotq_laneq_s32(acc, vld1q_s8(bp + ((p / 4 + 0) * n + j) * 4), av, 0);
                acc = vdotq_laneq_s32(acc, vld1q_s8(bp + ((p / 4 + 1) * n + j) * 4), av, 1);
                acc = vdotq_laneq_s32(acc, vld1q_s8(bp + ((p / 4 + 2) * n + j) * 4), av, 2);
                acc = vdotq_laneq_s32(acc, vld1q_s8(bp + ((p / 4 + 3) * n + j) * 4), av, 3);
            }
            vst1q_s32(c + i * n + j, acc);
        }
    }
}
