// lowp's f16 test tree: a 1x2v qd8-f16-qc8w GEMM micro-kernel for RVV with half-precision vector arithmetic (Zvfh),
// written for lowp with the RVV intrinsics. nr = VLMAX of e32 at LMUL 4 (16 columns at VLEN 128); packed per nr
// columns: nr int32 (minus the column sums), the int8 weights a k at a time, nr float filter scales, nr float
// biases. VWMACC into int32, VFCVT, VFMUL by the row's inv_scale and the scales, VFADD the biases (unfused), then
// VFNCVT to f16 (round to nearest even, frm 0) and the clamp in f16 (VFMAX, VFMIN: Zvfh), VSE16.
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include <riscv_vector.h>

#include "src/xnnpack/microparams.h"

void xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x2v__rvvfp16arith(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, void* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f16_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  (void) a_stride;
  (void) cm_stride;
  const size_t nr = __riscv_vsetvlmax_e32m4();
  uint16_t* c0 = (uint16_t*) c;
  do {
    const size_t vl = __riscv_vsetvl_e32m4(nc);
    vint32m4_t vacc = __riscv_vle32_v_i32m4((const int32_t*) w, vl);
    vacc = __riscv_vmul_vx_i32m4(vacc, quantization_params[0].zero_point, vl);
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + nr);
    for (size_t k = 0; k < kc; k++) {
      const vint16m2_t vb = __riscv_vsext_vf2_i16m2(__riscv_vle8_v_i8m1(wk, vl), vl);
      vacc = __riscv_vwmacc_vx_i32m4(vacc, (int16_t) a[k], vb, vl);
      wk += nr;
    }
    const float* vscale = (const float*) wk;
    vfloat32m4_t vout = __riscv_vfcvt_f_x_v_f32m4(vacc, vl);
    vout = __riscv_vfmul_vf_f32m4(vout, quantization_params[0].inv_scale, vl);
    vout = __riscv_vfmul_vv_f32m4(vout, __riscv_vle32_v_f32m4(vscale, vl), vl);
    vout = __riscv_vfadd_vv_f32m4(vout, __riscv_vle32_v_f32m4(vscale + nr, vl), vl);
    vfloat16m2_t vhalf = __riscv_vfncvt_f_f_w_f16m2(vout, vl);
    const vfloat16m2_t vmin = __riscv_vreinterpret_v_u16m2_f16m2(__riscv_vmv_v_x_u16m2(params->scalar.min, vl));
    const vfloat16m2_t vmax = __riscv_vreinterpret_v_u16m2_f16m2(__riscv_vmv_v_x_u16m2(params->scalar.max, vl));
    vhalf = __riscv_vfmin_vv_f16m2(__riscv_vfmax_vv_f16m2(vhalf, vmin, vl), vmax, vl);
    __riscv_vse16_v_u16m2(c0, __riscv_vreinterpret_v_f16m2_u16m2(vhalf), vl);
    w = (const void*) (vscale + 2 * nr);
    c0 = (uint16_t*) ((uintptr_t) c0 + cn_stride);
    nc -= vl;
  } while (nc != 0);
}
