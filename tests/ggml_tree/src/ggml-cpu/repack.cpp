// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. The plain C++ gemv and gemm of
// q4_0 weights repacked four rows at a time: for each column group and block, each column's integer sum, then
// sum += sumi * d_weight * d_activation, block after block.
#include "ggml-common.h"
#include "simd-mappings.h"
#include "repack.h"

// byte k (0..15) of column j's q4_0 quants, signed: its low nibble is element k, its high one element k + 16
static inline void lowp_tree_nibbles(const block_q4_0x4 * b, int j, int k, int * lo, int * hi) {
    const uint8_t byte = b->qs[(k / 4) * 16 + j * 4 + k % 4];      // stored XOR 0x88 already
    *lo = (int8_t)(uint8_t)(byte << 4) >> 4;
    *hi = (int8_t)byte >> 4;
}

void ggml_gemv_q4_0_4x4_q8_0_generic(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
                                     const void * GGML_RESTRICT vy, int nr, int nc) {
    GGML_UNUSED(bs); GGML_UNUSED(nr);
    const int nb = n / QK8_0;
    const block_q8_0 * a = (const block_q8_0 *) vy;
    for (int x = 0; x < nc / 4; x++) {
        const block_q4_0x4 * b = (const block_q4_0x4 *) vx + x * nb;
        float sums[4] = {0, 0, 0, 0};
        for (int l = 0; l < nb; l++) {
            for (int j = 0; j < 4; j++) {
                int sumi = 0;
                for (int k = 0; k < 16; k++) {
                    int lo, hi;
                    lowp_tree_nibbles(&b[l], j, k, &lo, &hi);
                    sumi += lo * a[l].qs[k] + hi * a[l].qs[k + 16];
                }
                sums[j] += sumi * GGML_CPU_FP16_TO_FP32(b[l].d[j]) * GGML_CPU_FP16_TO_FP32(a[l].d);
            }
        }
        for (int j = 0; j < 4; j++) s[x * 4 + j] = sums[j];
    }
}

void ggml_gemm_q4_0_4x4_q8_0_generic(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
                                     const void * GGML_RESTRICT vy, int nr, int nc) {
    const int nb = n / QK8_0;
    for (int y = 0; y < nr / 4; y++) {
        const block_q8_0x4 * a = (const block_q8_0x4 *) vy + y * nb;
        for (int x = 0; x < nc / 4; x++) {
            const block_q4_0x4 * b = (const block_q4_0x4 *) vx + x * nb;
            float sums[4][4] = {};
            for (int l = 0; l < nb; l++) {
                for (int m = 0; m < 4; m++) {          // activation row m of the group: element k at
                    for (int j = 0; j < 4; j++) {      // qs[(k / 4) * 16 + m * 4 + k % 4]
                        int sumi = 0;
                        for (int k = 0; k < 16; k++) {
                            int lo, hi;
                            lowp_tree_nibbles(&b[l], j, k, &lo, &hi);
                            const int at = (k / 4) * 16 + m * 4 + k % 4;
                            sumi += lo * a[l].qs[at] + hi * a[l].qs[at + 64];
                        }
                        sums[m][j] += sumi * GGML_CPU_FP16_TO_FP32(b[l].d[j]) * GGML_CPU_FP16_TO_FP32(a[l].d[m]);
                    }
                }
            }
            for (int m = 0; m < 4; m++)
                for (int j = 0; j < 4; j++) s[(y * 4 + m) * bs + x * 4 + j] = sums[m][j];
        }
    }
}
