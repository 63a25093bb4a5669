/* lowp's own AArch32 NEON int8 GEMM (the shape of XNNPACK's mlal-lane kernels): A and B widened to int16 (VMOVL.S8),
 * VMLAL.S16 into int32 lanes: exact. Four columns at a time; the `gemm` signature with 32-bit words (long).
 * -DLOWP_BUG_S16_ACC: the products are summed in int16 lanes (VMLA.I16) and widened only at the end: the sums wrap
 * once they pass 32767, a one-bug version lowp must catch. */
#include <arm_neon.h>
#include <stdint.h>

long lowp_neon_gemm_workspace(long M, long N, long K) { (void)M; (void)K; return 4 * (N + 3) / 4 * 4 + 16; }

void lowp_neon_gemm_s8(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    int16_t *bcol = work;                               /* four columns of B at row k, widened */
    for (long n0 = 0; n0 < N; n0 += 4) {
        for (long m = 0; m < M; m++) {
#ifdef LOWP_BUG_S16_ACC
            int16x4_t acc16 = vdup_n_s16(0);
#else
            int32x4_t acc = vdupq_n_s32(0);
#endif
            for (long k = 0; k < K; k++) {
                for (long j = 0; j < 4; j++) bcol[j] = n0 + j < N ? B[k * N + n0 + j] : 0;
                int16x4_t vb = vld1_s16(bcol);
                int16_t a = A[m * K + k];
#ifdef LOWP_BUG_S16_ACC
                acc16 = vmla_n_s16(acc16, vb, a);
#else
                acc = vmlal_n_s16(acc, vb, a);
#endif
            }
#ifdef LOWP_BUG_S16_ACC
            int32x4_t acc = vmovl_s16(acc16);
#endif
            int32_t out[4];
            vst1q_s32(out, acc);
            for (long j = 0; j < 4 && n0 + j < N; j++) C[m * N + n0 + j] = out[j];
        }
    }
}
