/* R2: 4-bit u4 x u4 -> s32 (A, B in [0, 15], stored as u8) with NEON UMLAL: A broadcast, B packed in panels of 8
 * columns (8 bytes per k); products accumulated in uint16 lanes, widened into two uint32x4 every FLUSH k.
 * BUG: FLUSH = 512 from the bound 65535 / (15 * 8) = 546 (the author took 8, the s4 magnitude, as B's maximum);
 * with a = b = 15 a lane gains 225 per k and uint16 wraps after 291 k. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define NR 8
#define FLUSH 512
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_u4_umlal_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)RUP(N, NR) * (size_t)(K > 0 ? K : 1);
}

void arm_u4_umlal_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_, *B = B_;
    const int64_t Np = RUP(N, NR);
    uint8_t *Bp = work;                           /* panel p, k: 8 bytes at (p * K + k) * 8 */
    for (int64_t p = 0; p < Np / NR; ++p)
        for (int64_t k = 0; k < K; ++k)
            for (int c = 0; c < NR; ++c) {
                int64_t j = p * NR + c;
                Bp[(p * K + k) * NR + c] = j < N ? B[k * N + j] : 0;
            }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t p = 0; p < Np / NR; ++p) {
            uint16x8_t acc16 = vdupq_n_u16(0);
            uint32x4_t lo = vdupq_n_u32(0), hi = vdupq_n_u32(0);
            for (int64_t k = 0; k < K; ++k) {
                acc16 = vmlal_u8(acc16, vdup_n_u8(A[i * K + k]), vld1_u8(Bp + (p * K + k) * NR));
                if ((k + 1) % FLUSH == 0 || k == K - 1) {
                    lo = vaddw_u16(lo, vget_low_u16(acc16));
                    hi = vaddw_high_u16(hi, acc16);
                    acc16 = vdupq_n_u16(0);
                }
            }
            int32_t out[NR];
            vst1q_s32(out, vreinterpretq_s32_u32(lo));
            vst1q_s32(out + 4, vreinterpretq_s32_u32(hi));
            for (int64_t c = 0; c < NR && p * NR + c < N; ++c) C[i * N + p * NR + c] = out[c];
        }
}
