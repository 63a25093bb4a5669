// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. The little of ggml.h that the
// vec_dot kernels of this tree need, under ggml's names.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
#define GGML_RESTRICT
#else
#define GGML_RESTRICT restrict
#endif

#define GGML_UNUSED(x) (void)(x)
#ifdef __cplusplus
// repack.cpp is C++: the C functions keep their C names, and C++ spells _Noreturn its own way
#define GGML_API extern "C"
#define GGML_NORETURN __attribute__((noreturn))
#else
#define GGML_API extern
#define GGML_NORETURN _Noreturn
#endif

// IEEE binary16 bits; converted to float by GGML_CPU_FP16_TO_FP32 (ggml-cpu/simd-mappings.h)
typedef uint16_t ggml_half;

// Defined by the program that links the kernels (lowp's shim: it traps).
GGML_API GGML_NORETURN void ggml_abort(const char * file, int line, const char * fmt, ...);

#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x) do { if (!(x)) GGML_ABORT("GGML_ASSERT(%s) failed", #x); } while (0)
