// lowp's ggml-shaped test tree: not ggml's code. The three block formats this tree's kernels read, laid out as
// ggml-common.h lays them out (lowp.kernels.ggml.blocks models the same bytes).
#pragma once

#include "ggml.h"

#ifdef __cplusplus
#define _Static_assert static_assert     // repack.cpp includes this too
#endif

// 32 weights: a fp16 scale, then 16 bytes whose low nibbles are elements 0..15 and high nibbles 16..31 (q - 8)
#define QK4_0 32
typedef struct {
    ggml_half d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;
_Static_assert(sizeof(block_q4_0) == sizeof(ggml_half) + QK4_0 / 2, "block_q4_0 has padding");

// 32 int8 values and their fp16 scale: the activations of every dot product here (and a weight type itself)
#define QK8_0 32
typedef struct {
    ggml_half d;
    int8_t qs[QK8_0];
} block_q8_0;
_Static_assert(sizeof(block_q8_0) == sizeof(ggml_half) + QK8_0, "block_q8_0 has padding");

// q4_0's nibble order, but a nibble indexes kvalues_iq4nl instead of being q - 8
#define QK4_NL 32
typedef struct {
    ggml_half d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;
_Static_assert(sizeof(block_iq4_nl) == sizeof(ggml_half) + QK4_NL / 2, "block_iq4_nl has padding");

// The non-linear 4-bit grid: it spans the whole int8 range, which is what makes an unsigned-offset trick overflow.
__attribute__((unused)) static const int8_t kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

// repack.cpp's interleaved blocks (lowp.kernels.ggml.repack.make_block): four q4_0 rows' scales, then their
// quants in 4-byte chunks, row after row, every byte XOR 0x88 (each nibble then reads as a signed q - 8)
typedef struct {
    ggml_half d[4];
    uint8_t qs[QK4_0 * 2];
} block_q4_0x4;

// four q8_0 activation rows the same way (a gemm's vy; lowp.kernels.ggml.repack.pack_activations)
typedef struct {
    ggml_half d[4];
    int8_t qs[QK8_0 * 4];
} block_q8_0x4;

// fp32 -> fp16, round to nearest even (normal, subnormal and overflow to inf; no NaN input here)
static inline ggml_half lowp_tree_fp16(float f) {
    union { float f; uint32_t u; } v = { f };
    uint32_t sign = (v.u >> 16) & 0x8000u, abs = v.u & 0x7fffffffu;
    if (abs >= 0x477ff000u) return (ggml_half)(sign | 0x7c00u);            // rounds past 65504: inf
    if (abs < 0x38800000u) {                                                // below 2^-14: a subnormal fp16
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u, shift = 126 - (abs >> 23);
        if (shift > 24) return (ggml_half)sign;
        uint32_t q = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        q += rest > half || (rest == half && (q & 1));
        return (ggml_half)(sign | q);
    }
    uint32_t q = (abs - 0x38000000u) >> 13, rest = abs & 0x1fffu;
    q += rest > 0x1000u || (rest == 0x1000u && (q & 1));
    return (ggml_half)(sign | q);
}
