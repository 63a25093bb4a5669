// lowp's test tree: the qd8-f32-qb4w kernel of the 1x4 file, two rows a call, with one bug: it scales every block's
// sum by the first block's scales (right whenever K is one block).
#include "qd8-f32-qb4w-gemm-1x4-minmax-scalar.c"

void xnn_qd8_f32_qb4w_gemm_minmax_ukernel_2x4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_qb4w_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr != 0 && mr <= 2);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 1);
}
