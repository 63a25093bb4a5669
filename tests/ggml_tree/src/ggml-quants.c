// lowp's ggml-shaped test tree: not ggml's code. The reference q8_0 quantizer ggml-quants.c defines, written from
// its documented behaviour: per block of 32, d = amax / 127, codes roundf(x * (1 / d)) (half away from zero), d
// stored as fp16 (round to nearest even). lowp compiles this file where a quantizer's claimed path is the reference.
#include "ggml-quants.h"

static float half_away(float x) {
    float t = (float)(int)x;                                                // toward zero (|x| <= 127 here)
    if (x - t >= 0.5f) t += 1.0f;
    else if (t - x >= 0.5f) t -= 1.0f;
    return t;
}

void quantize_row_q8_0_ref(const float * GGML_RESTRICT x, block_q8_0 * GGML_RESTRICT y, int64_t k) {
    for (int64_t i = 0; i < k / QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            float a = x[i * QK8_0 + j] < 0 ? -x[i * QK8_0 + j] : x[i * QK8_0 + j];
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[i].d = lowp_tree_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)half_away(x[i * QK8_0 + j] * id);
    }
}
