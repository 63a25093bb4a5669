// lowp's ggml-shaped test tree: not ggml's code. The reference quantizers ggml-quants.c defines; no vec_dot
// calls them. This tree's ggml-quants.c defines q8_0's (the generic quantize_row_q8_0 calls it).
#pragma once

#include "ggml-common.h"

GGML_API void quantize_row_q4_0_ref(const float * GGML_RESTRICT x, block_q4_0 * GGML_RESTRICT y, int64_t k);
GGML_API void quantize_row_q8_0_ref(const float * GGML_RESTRICT x, block_q8_0 * GGML_RESTRICT y, int64_t k);
GGML_API void quantize_row_iq4_nl_ref(const float * GGML_RESTRICT x, block_iq4_nl * GGML_RESTRICT y, int64_t k);
