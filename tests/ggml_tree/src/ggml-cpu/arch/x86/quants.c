// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. x86 vec_dots: AVX2 (+FMA, F16C)
// where the build has it, else the generic ones. q4_0 and q8_0 are right; iq4_nl carries one public bug.
#include "ggml-common.h"
#include "ggml-quants.h"
#include "simd-mappings.h"
#include "quants.h"

#if defined(__AVX2__)
#include <immintrin.h>

// the 8 lanes summed: high half onto low, then pairs, then the last two
static inline float hsum_float_8(const __m256 v) {
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

// 16 bytes of nibbles -> 32 bytes 0..15: the low nibbles (elements 0..15) in the low lane, the high in the high
static inline __m256i nibbles_to_bytes(const uint8_t * GGML_RESTRICT qs) {
    const __m128i packed = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// signed bytes times signed bytes, 4 products per int32 lane: VPMADDUBSW takes its first operand unsigned, so x's
// sign moves onto y (exact while y > -128, which q8 activations are)
static inline __m256i dot_i8_lanes(const __m256i x, const __m256i y) {
    const __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// acc + lanes * d, fused where the build has FMA
static inline __m256 scale_add(const __m256 acc, const __m256i lanes, const float d) {
#if defined(__FMA__)
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(d), acc);
#else
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(lanes), _mm256_set1_ps(d)));
#endif
}
#endif

void ggml_vec_dot_q4_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__AVX2__)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q4_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        const float d = GGML_CPU_FP16_TO_FP32(x[ib].d) * GGML_CPU_FP16_TO_FP32(y[ib].d);
        const __m256i qx = _mm256_sub_epi8(nibbles_to_bytes(x[ib].qs), _mm256_set1_epi8(8));
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = scale_add(acc, dot_i8_lanes(qx, qy), d);
    }
    *s = hsum_float_8(acc);
#else
    ggml_vec_dot_q4_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__AVX2__)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q8_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        const float d = GGML_CPU_FP16_TO_FP32(x[ib].d) * GGML_CPU_FP16_TO_FP32(y[ib].d);
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        acc = scale_add(acc, dot_i8_lanes(qx, qy), d);
    }
    *s = hsum_float_8(acc);
#else
    ggml_vec_dot_q8_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// THE BUG (re-created from ik_llama.cpp #137 / #427, fixed there for the full-range LUT types): to use the
// unsigned x signed VPMADDUBSW without the sign trick, the LUT holds value + 128 (1..241, unsigned) and 128 * sum(y)
// is subtracted afterwards. But VPMADDUBSW saturates each pair sum to int16: (113 + 128) * 127 * 2 = 61214 > 32767,
// so full-range values against large same-signed activations lose the excess before the correction is applied.
// Exact while |y| <= 67 ((241 + 241) * 67 = 32294); wrong from one block on with |y| = 127.
void ggml_vec_dot_iq4_nl_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__AVX2__)
    GGML_ASSERT(n % QK4_NL == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_iq4_nl * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK4_NL;

    const __m128i values = _mm_loadu_si128((const __m128i *)kvalues_iq4nl);
    const __m256i shifted_lut = _mm256_broadcastsi128_si256(_mm_xor_si128(values, _mm_set1_epi8((char)0x80)));
    const __m256i offset = _mm256_set1_epi8((char)0x80);          // 128, read unsigned
    const __m256i ones = _mm256_set1_epi16(1);

    __m256 acc = _mm256_setzero_ps();
    for (int ib = 0; ib < nb; ++ib) {
        const float d = GGML_CPU_FP16_TO_FP32(x[ib].d) * GGML_CPU_FP16_TO_FP32(y[ib].d);
        const __m256i ux = _mm256_shuffle_epi8(shifted_lut, nibbles_to_bytes(x[ib].qs));   // value + 128
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i with_offset = _mm256_madd_epi16(_mm256_maddubs_epi16(ux, qy), ones);   // saturates
        const __m256i correction = _mm256_madd_epi16(_mm256_maddubs_epi16(offset, qy), ones); // 128 * sum(y)
        acc = scale_add(acc, _mm256_sub_epi32(with_offset, correction), d);
    }
    *s = hsum_float_8(acc);
#else
    ggml_vec_dot_iq4_nl_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// The q8_0 activation quantizer as x86's AVX path computes it: d = amax / 127, the multiplier 127 / amax (not
// 1 / d), codes rounded half to even (what _mm256_round_ps(.., _MM_FROUND_TO_NEAREST_INT) does); written in C.
void quantize_row_q8_0(const float * GGML_RESTRICT x, void * GGML_RESTRICT vy, int64_t k) {
#if defined(__AVX__)
    block_q8_0 * GGML_RESTRICT y = vy;
    for (int64_t i = 0; i < k / QK8_0; i++) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            float a = x[i * QK8_0 + j] < 0 ? -x[i * QK8_0 + j] : x[i * QK8_0 + j];
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = lowp_tree_fp16(d);
        for (int j = 0; j < QK8_0; j++) {
            volatile float v = x[i * QK8_0 + j] * id;
            volatile float r = v + 12582912.0f;             // 1.5 * 2^23: the FPU's round to nearest even
            y[i].qs[j] = (int8_t)(r - 12582912.0f);
        }
    }
#else
    quantize_row_q8_0_generic(x, vy, k);
#endif
}
