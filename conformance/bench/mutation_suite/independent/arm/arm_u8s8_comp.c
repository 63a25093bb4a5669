/* R6: u8 x s8 -> s32 on FEAT_DotProd (no USDOT): A is moved to s8 as a - 128 (XOR 0x80), SDOT against B, and the
 * result is corrected by + 128 * colsum(B), computed while packing B (transposed, zero-padded to 16 in k).
 * BUG (signed/unsigned): the packing routine was copied from the u8 x u8 (UDOT) kernel and still takes B as
 * `const uint8_t *`: the packed bytes are right (same bits) but colsum adds b + 256 for every negative b. */
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

#define KB 16
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t arm_u8s8_comp_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)(N + 1) * RUP(K, KB) + (size_t)N * 4 + 16;
}

static void pack_b(int64_t N, int64_t K, int64_t Kp, const uint8_t *B, int8_t *Bt, int32_t *colsum) {
    for (int64_t j = 0; j < N; ++j) {
        int32_t s = 0;
        for (int64_t k = 0; k < Kp; ++k) {
            uint8_t b = k < K ? B[k * N + j] : 0;
            Bt[j * Kp + k] = (int8_t)b;
            s += b;
        }
        colsum[j] = s;
    }
}

void arm_u8s8_comp_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int64_t Kp = RUP(K, KB);
    int8_t *Bt = work;
    int8_t *arow = (int8_t *)work + N * Kp;
    int32_t *colsum = (int32_t *)(((uintptr_t)(arow + Kp) + 15) & ~(uintptr_t)15);
    pack_b(N, K, Kp, B_, Bt, colsum);
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t k = 0; k < Kp; ++k) arow[k] = k < K ? (int8_t)(A[i * K + k] ^ 0x80) : 0;
        for (int64_t j = 0; j < N; ++j) {
            int32x4_t acc = vdupq_n_s32(0);
            for (int64_t k = 0; k < Kp; k += KB) acc = vdotq_s32(acc, vld1q_s8(arow + k), vld1q_s8(Bt + j * Kp + k));
            C[i * N + j] = (int32_t)((uint32_t)vaddvq_s32(acc) + 128u * (uint32_t)colsum[j]);
        }
    }
}
