// lowp's test tree: the non-planar qd8-f32-qc4w kernel of the 1x8c4 file, two rows a call, with one bug: it swaps
// the nibbles of each byte (reads the low one as column n + 4's weight and the high one as column n's), as a kernel
// written for the planar order's nibble placement would.
#include "qd8-f32-qc4w-gemm-1x8c4-minmax-scalar.c"

void xnn_qd8_f32_qc4w_gemm_minmax_ukernel_2x8c4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_qc4w_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr != 0 && mr <= 2);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 1);
}
