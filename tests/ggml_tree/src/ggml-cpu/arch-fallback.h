// lowp's ggml-shaped test tree: not ggml's code. Where an arch folder has no native version of a vec_dot, the
// `_generic` definition in quants.c is renamed to the plain name, so the build still has every function.
#pragma once

#if defined(__x86_64__)
// arch/x86 defines all three, and the q8_0 quantizer (falling back to `_generic` inside where a feature is
// missing), and of repack.cpp's functions the gemv (arch/x86/repack.cpp)
#define ggml_gemm_q4_0_4x4_q8_0_generic ggml_gemm_q4_0_4x4_q8_0
#elif defined(__aarch64__)
// arch/arm defines all three, and the q8_0 quantizer; no repack functions
#define ggml_gemv_q4_0_4x4_q8_0_generic ggml_gemv_q4_0_4x4_q8_0
#define ggml_gemm_q4_0_4x4_q8_0_generic ggml_gemm_q4_0_4x4_q8_0
#elif defined(__riscv) && __riscv_xlen == 64
// arch/riscv defines the three vec_dots, not the quantizer
#define quantize_row_q8_0_generic quantize_row_q8_0
#define ggml_gemv_q4_0_4x4_q8_0_generic ggml_gemv_q4_0_4x4_q8_0
#define ggml_gemm_q4_0_4x4_q8_0_generic ggml_gemm_q4_0_4x4_q8_0
#elif defined(__POWERPC__) || defined(__powerpc__)
// arch/powerpc defines only the q8_0 dot
#define ggml_vec_dot_q4_0_q8_0_generic ggml_vec_dot_q4_0_q8_0
#define ggml_vec_dot_iq4_nl_q8_0_generic ggml_vec_dot_iq4_nl_q8_0
#define quantize_row_q8_0_generic quantize_row_q8_0
#define ggml_gemv_q4_0_4x4_q8_0_generic ggml_gemv_q4_0_4x4_q8_0
#define ggml_gemm_q4_0_4x4_q8_0_generic ggml_gemm_q4_0_4x4_q8_0
#else
// an arch with no folder here: every vec_dot is the generic one
#define ggml_vec_dot_q4_0_q8_0_generic ggml_vec_dot_q4_0_q8_0
#define ggml_vec_dot_q8_0_q8_0_generic ggml_vec_dot_q8_0_q8_0
#define ggml_vec_dot_iq4_nl_q8_0_generic ggml_vec_dot_iq4_nl_q8_0
#define quantize_row_q8_0_generic quantize_row_q8_0
#define ggml_gemv_q4_0_4x4_q8_0_generic ggml_gemv_q4_0_4x4_q8_0
#define ggml_gemm_q4_0_4x4_q8_0_generic ggml_gemm_q4_0_4x4_q8_0
#endif
