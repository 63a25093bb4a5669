// lowp's test tree: the 1x4 qd8-f32-qc2w kernel's loop, two rows a call, reading each byte's crumbs in the reverse
// order (k + 3 - p in bits 2p): a one-bug kernel lowp must catch. Written for lowp.
#include "qd8-f32-qc2w-gemm-1x4-minmax-scalar.c"

void xnn_qd8_f32_qc2w_gemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_minmax_params* params, const float* row_sum,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr <= 2);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, row_sum, quantization_params, 1);
}
