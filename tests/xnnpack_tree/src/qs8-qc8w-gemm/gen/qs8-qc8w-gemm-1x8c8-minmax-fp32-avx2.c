// lowp's test tree: a source that does not build (a variable that was never declared), so the campaign must report
// it as such and go on.
#include <immintrin.h>

#include "src/xnnpack/gemm.h"

void xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c8__avx2(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params)
{
  c[0] = (int8_t) lowp_undeclared_zero_point;
}
