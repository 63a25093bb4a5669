// lowp's ggml-shaped test tree: not ggml's code. The repacked GEMV/GEMM of q4_0 weights in groups of four rows
// (block_q4_0x4), ggml's signature: s[row * bs + col] = dot(activation row, weight row), n values a row, nr
// activation rows (a gemv: one plain q8_0 row; a gemm: groups of four, block_q8_0x4), nc weight rows.
#pragma once

#include "ggml.h"
#include "arch-fallback.h"

#define LOWP_REPACK(name) GGML_API void name(int n, float * GGML_RESTRICT s, size_t bs, \
    const void * GGML_RESTRICT vx, const void * GGML_RESTRICT vy, int nr, int nc)

LOWP_REPACK(ggml_gemv_q4_0_4x4_q8_0);
LOWP_REPACK(ggml_gemm_q4_0_4x4_q8_0);
LOWP_REPACK(ggml_gemv_q4_0_4x4_q8_0_generic);
LOWP_REPACK(ggml_gemm_q4_0_4x4_q8_0_generic);
