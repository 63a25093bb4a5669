// lowp's ggml-shaped test tree: not ggml's code. Where an arch folder has no native version of a vec_dot, the
// `_generic` definition in quants.c is renamed to the plain name, so the build still has every function.
#pragma once

#if defined(__aarch64__) || defined(__x86_64__)
// arch/arm and arch/x86 define all three, and the q8_0 quantizer (falling back to `_generic` inside where a
// feature is missing)
#elif defined(__riscv) && __riscv_xlen == 64
// arch/riscv defines the three vec_dots, not the quantizer
#define quantize_row_q8_0_generic quantize_row_q8_0
#elif defined(__POWERPC__) || defined(__powerpc__)
// arch/powerpc defines only the q8_0 dot
#define ggml_vec_dot_q4_0_q8_0_generic ggml_vec_dot_q4_0_q8_0
#define ggml_vec_dot_iq4_nl_q8_0_generic ggml_vec_dot_iq4_nl_q8_0
#define quantize_row_q8_0_generic quantize_row_q8_0
#else
// an arch with no folder here: every vec_dot is the generic one
#define ggml_vec_dot_q4_0_q8_0_generic ggml_vec_dot_q4_0_q8_0
#define ggml_vec_dot_q8_0_q8_0_generic ggml_vec_dot_q8_0_q8_0
#define ggml_vec_dot_iq4_nl_q8_0_generic ggml_vec_dot_iq4_nl_q8_0
#define quantize_row_q8_0_generic quantize_row_q8_0
#endif
