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

// The IGEMM prototype: an indirection buffer of ks / sizeof(void*) row pointers per tap (XNNPACK's
// src/xnnpack/igemm.h).
#define DECLARE_QS8_QC8W_IGEMM_MINMAX_UKERNEL_FUNCTION(fn_name)                                           \
  XNN_INTERNAL void fn_name(size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, \
                            int8_t* c, size_t cm_stride, size_t cn_stride, size_t a_offset,             \
                            const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params);

DECLARE_QS8_QC8W_IGEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4__scalar_lrintf)
