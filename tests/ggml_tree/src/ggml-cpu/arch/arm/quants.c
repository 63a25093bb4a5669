// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. AArch64 NEON vec_dots, with SDOT
// where the build has FEAT_DotProd and an emulation of it where it does not. iq4_nl is right; q4_0 and q8_0 each
// carry one public bug.
#include "ggml-common.h"
#include "ggml-quants.h"
#include "simd-mappings.h"
#include "quants.h"

#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>

#if defined(__ARM_FEATURE_DOTPROD)
#define ggml_vdotq_s32(acc, a, b) vdotq_s32(acc, a, b)
#else
// SDOT without FEAT_DotProd: the same total over the 16 products, but NOT the same lanes. SDOT's lane i sums
// products 4i..4i+3; here lane i sums products 2i, 2i+1 (low half) and 8+2i, 8+2i+1 (high half). Right wherever
// the four lanes are added up before any per-lane scaling; wrong where lanes carry different scales
// (llama.cpp #21462, its nvfp4 fix #21559).
static inline int32x4_t ggml_vdotq_s32(int32x4_t acc, int8x16_t a, int8x16_t b) {
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
}
#endif

// q4_0's 16 bytes -> elements 0..15 (low nibbles) and 16..31 (high nibbles), as int8 q - 8
static inline void q4_0_codes(const uint8_t * GGML_RESTRICT qs, int8x16_t * lo, int8x16_t * hi) {
    const uint8x16_t packed = vld1q_u8(qs);
    const int8x16_t eight = vdupq_n_s8(8);
    *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0F))), eight);
    *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(packed, 4)), eight);
}

// one q4_0 block times its q8_0 block: the int32 lanes (their sum is the block's integer dot)
static inline int32x4_t q4_0_block_lanes(const block_q4_0 * GGML_RESTRICT x, const block_q8_0 * GGML_RESTRICT y) {
    int8x16_t lo, hi;
    q4_0_codes(x->qs, &lo, &hi);
    return ggml_vdotq_s32(ggml_vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

static inline float block_scale(ggml_half dx, ggml_half dy) {
    return GGML_CPU_FP16_TO_FP32(dx) * GGML_CPU_FP16_TO_FP32(dy);
}
#endif

// THE BUG (re-created from llama.cpp #8549, fixed by #8556): two blocks a step, even and odd blocks in their own
// accumulators, and no tail: with an odd block count the last block is never read (nb = 1 returns 0).
void ggml_vec_dot_q4_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__ARM_NEON) && defined(__aarch64__)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q4_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    float32x4_t sum_even = vdupq_n_f32(0.0f);
    float32x4_t sum_odd = vdupq_n_f32(0.0f);
    for (int ib = 0; ib + 1 < nb; ib += 2) {
        const int32x4_t p0 = q4_0_block_lanes(&x[ib], &y[ib]);
        const int32x4_t p1 = q4_0_block_lanes(&x[ib + 1], &y[ib + 1]);
        sum_even = vmlaq_n_f32(sum_even, vcvtq_f32_s32(p0), block_scale(x[ib].d, y[ib].d));
        sum_odd = vmlaq_n_f32(sum_odd, vcvtq_f32_s32(p1), block_scale(x[ib + 1].d, y[ib + 1].d));
    }
    *s = vaddvq_f32(sum_even) + vaddvq_f32(sum_odd);
#else
    ggml_vec_dot_q4_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// THE BUG (re-created from llama.cpp #21462 / #21559): two blocks a step with the blocks' 4-byte groups
// interleaved (TRN1/TRN2 on 32-bit elements: lanes 0 and 2 hold block ib, lanes 1 and 3 block ib + 1), so one
// multiply by {d0, d1, d0, d1} scales both blocks' lanes. Right with SDOT (+dotprod). Without it, ggml_vdotq_s32
// feeds lane 1 products of block ib and lane 2 products of block ib + 1: each block's sum is split across both
// scales. Wrong from two blocks on whenever the two blocks' scales differ; the odd tail block is right.
void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__ARM_NEON) && defined(__aarch64__)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q8_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    float32x4_t sumv = vdupq_n_f32(0.0f);
    int ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        int32x4_t lanes = vdupq_n_s32(0);
        for (int k = 0; k < QK8_0; k += 16) {
            const int32x4_t x0 = vreinterpretq_s32_s8(vld1q_s8(x[ib].qs + k));
            const int32x4_t x1 = vreinterpretq_s32_s8(vld1q_s8(x[ib + 1].qs + k));
            const int32x4_t y0 = vreinterpretq_s32_s8(vld1q_s8(y[ib].qs + k));
            const int32x4_t y1 = vreinterpretq_s32_s8(vld1q_s8(y[ib + 1].qs + k));
            lanes = ggml_vdotq_s32(lanes, vreinterpretq_s8_s32(vtrn1q_s32(x0, x1)), vreinterpretq_s8_s32(vtrn1q_s32(y0, y1)));
            lanes = ggml_vdotq_s32(lanes, vreinterpretq_s8_s32(vtrn2q_s32(x0, x1)), vreinterpretq_s8_s32(vtrn2q_s32(y0, y1)));
        }
        const float d0 = block_scale(x[ib].d, y[ib].d);
        const float d1 = block_scale(x[ib + 1].d, y[ib + 1].d);
        const float32x4_t scales = { d0, d1, d0, d1 };
        sumv = vmlaq_f32(sumv, vcvtq_f32_s32(lanes), scales);
    }
    float sumf = vaddvq_f32(sumv);
    for (; ib < nb; ++ib) {
        int32x4_t lanes = ggml_vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[ib].qs), vld1q_s8(y[ib].qs));
        lanes = ggml_vdotq_s32(lanes, vld1q_s8(x[ib].qs + 16), vld1q_s8(y[ib].qs + 16));
        sumf += vaddvq_s32(lanes) * block_scale(x[ib].d, y[ib].d);
    }
    *s = sumf;
#else
    ggml_vec_dot_q8_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// Right with and without SDOT: TBL looks the nibbles up in the 16 values, and each block's lanes are added up
// (ADDV) before its one scale multiplies them.
void ggml_vec_dot_iq4_nl_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__ARM_NEON) && defined(__aarch64__)
    GGML_ASSERT(n % QK4_NL == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_iq4_nl * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK4_NL;

    const int8x16_t values = vld1q_s8(kvalues_iq4nl);
    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const uint8x16_t packed = vld1q_u8(x[ib].qs);
        const int8x16_t lo = vqtbl1q_s8(values, vandq_u8(packed, vdupq_n_u8(0x0F)));
        const int8x16_t hi = vqtbl1q_s8(values, vshrq_n_u8(packed, 4));
        int32x4_t lanes = ggml_vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y[ib].qs));
        lanes = ggml_vdotq_s32(lanes, hi, vld1q_s8(y[ib].qs + 16));
        sumf += vaddvq_s32(lanes) * block_scale(x[ib].d, y[ib].d);
    }
    *s = sumf;
#else
    ggml_vec_dot_iq4_nl_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// The q8_0 activation quantizer, with one bug of lowp's making (no public issue): ggml's NEON path rounds the codes
// with vcvtnq_s32_f32 (to nearest, ties to even); this one uses vcvtaq_s32_f32 (ties away from zero), so a code
// that lands on .5 differs. Otherwise as ggml: d = amax / 127, the multiplier 1 / d.
void quantize_row_q8_0(const float * GGML_RESTRICT x, void * GGML_RESTRICT vy, int64_t k) {
    block_q8_0 * GGML_RESTRICT y = vy;
    for (int64_t i = 0; i < k / QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            float a = x[i * QK8_0 + j] < 0 ? -x[i * QK8_0 + j] : x[i * QK8_0 + j];
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        y[i].d = lowp_tree_fp16(d);
#if defined(__ARM_NEON) && defined(__aarch64__)
        for (int j = 0; j < QK8_0; j += 4) {
            const float32x4_t v = vmulq_n_f32(vld1q_f32(x + i * QK8_0 + j), id);
            int32_t q[4];
            vst1q_s32(q, vcvtaq_s32_f32(v));                        /* the bug: ties away, not vcvtnq */
            for (int l = 0; l < 4; l++) y[i].qs[j + l] = (int8_t)q[l];
        }
#else
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = (int8_t)(x[i * QK8_0 + j] * id);
#endif
    }
}
