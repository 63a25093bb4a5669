// lowp's ggml-shaped test tree: not ggml's code. fp16 -> fp32 for the kernels, chosen per target as ggml
// chooses: the hardware conversion where the build has one, else the table the CPU backend fills at init.
#pragma once

#include "ggml.h"

#if defined(__ARM_NEON) && defined(__aarch64__)
// AArch64: the scalar FCVT of an __fp16
static inline float ggml_cpu_fp16_to_fp32(ggml_half h) {
    __fp16 f;
    __builtin_memcpy(&f, &h, sizeof f);
    return (float)f;
}
#define GGML_CPU_FP16_TO_FP32(x) ggml_cpu_fp16_to_fp32(x)
#elif defined(__F16C__)
#include <immintrin.h>
#define GGML_CPU_FP16_TO_FP32(x) _cvtsh_ss(x)
#else
// x86 without F16C, RISC-V without Zfh, anything else: 65536 floats, filled before the first call
extern float ggml_table_f32_f16[1 << 16];
static inline float ggml_lookup_fp16_to_fp32(ggml_half h) {
    return ggml_table_f32_f16[h];
}
#define GGML_CPU_FP16_TO_FP32(x) ggml_lookup_fp16_to_fp32(x)
#endif
