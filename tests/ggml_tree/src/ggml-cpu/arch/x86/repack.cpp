// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. x86's gemv of q4_0 weights in
// groups of four: with AVX2, two column groups a step (eight columns, one 256-bit row of floats), and one bug:
// no step for a last, odd group, whose four results are never written (a column tail lost the way #8549 lost a
// block). Without AVX2, the generic one.
#include "ggml-common.h"
#include "simd-mappings.h"
#include "repack.h"

void ggml_gemv_q4_0_4x4_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx,
                             const void * GGML_RESTRICT vy, int nr, int nc) {
#if defined(__AVX2__)
    GGML_UNUSED(bs); GGML_UNUSED(nr);
    const int nb = n / QK8_0;
    const block_q8_0 * a = (const block_q8_0 *) vy;
    for (int x = 0; x + 1 < nc / 4; x += 2) {          // the bug: `x + 1 <`, and no tail for x = nc / 4 - 1
        float sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int l = 0; l < nb; l++) {
            for (int c = 0; c < 8; c++) {
                const block_q4_0x4 * b = (const block_q4_0x4 *) vx + (x + c / 4) * nb + l;
                int sumi = 0;
                for (int k = 0; k < 16; k++) {
                    const uint8_t byte = b->qs[(k / 4) * 16 + (c % 4) * 4 + k % 4];
                    sumi += ((int8_t)(uint8_t)(byte << 4) >> 4) * a[l].qs[k] + ((int8_t)byte >> 4) * a[l].qs[k + 16];
                }
                sums[c] += sumi * GGML_CPU_FP16_TO_FP32(b->d[c % 4]) * GGML_CPU_FP16_TO_FP32(a[l].d);
            }
        }
        for (int c = 0; c < 8; c++) s[x * 4 + c] = sums[c];
    }
#else
    ggml_gemv_q4_0_4x4_q8_0_generic(n, s, bs, vx, vy, nr, nc);
#endif
}
