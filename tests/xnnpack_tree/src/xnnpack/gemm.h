// lowp's test tree: the GEMM micro-kernel prototype of XNNPACK's qs8-qc8w kernels, declared internal as there.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/common.h"
#include "src/xnnpack/microparams.h"

#define DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(fn_name)                                  \
  XNN_INTERNAL void fn_name(size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, \
                            const void* w, int8_t* c, size_t cm_stride, size_t cn_stride,       \
                            const union xnn_qs8_qc8w_conv_minmax_params* params);

DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x8c8__avx2)
DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c8__avx2)
DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf)
DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic)

// The qs8-qc4w GEMMs take the qc8w params union (XNNPACK's src/xnnpack/gemm.h).
DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf)

// The qs8-qc2w GEMMs take the qc8w params union too; the qd8-f32-qc2w GEMMs the float sums of A's rows before the
// rows' quantization parameters (XNNPACK's xnn_qd8_f32_qc2w_gemm_ukernel_fn, src/xnnpack/microfnptr.h).
DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf)

#define DECLARE_QD8_F32_QC2W_GEMM_MINMAX_UKERNEL_FUNCTION(fn_name)                                      \
  XNN_INTERNAL void fn_name(size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride,         \
                            const void* w, float* c, size_t cm_stride, size_t cn_stride,                \
                            const struct xnn_f32_minmax_params* params, const float* row_sum,           \
                            const struct xnn_qd8_quantization_params* quantization_params);

DECLARE_QD8_F32_QC2W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qd8_f32_qc2w_gemm_minmax_ukernel_1x4__scalar)
DECLARE_QD8_F32_QC2W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar)

// The IGEMM prototype: an indirection buffer of ks / sizeof(void*) row pointers per tap (XNNPACK's
// src/xnnpack/igemm.h).
#define DECLARE_QS8_QC8W_IGEMM_MINMAX_UKERNEL_FUNCTION(fn_name)                                           \
  XNN_INTERNAL void fn_name(size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, \
                            int8_t* c, size_t cm_stride, size_t cn_stride, size_t a_offset,             \
                            const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params);

DECLARE_QS8_QC8W_IGEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf)
