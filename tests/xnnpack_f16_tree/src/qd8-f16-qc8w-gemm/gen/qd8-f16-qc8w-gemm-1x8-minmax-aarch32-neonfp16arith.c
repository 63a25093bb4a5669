// lowp's f16 test tree: a 1x8 qd8-f16-qc8w GEMM micro-kernel for AArch32 NEON with half-precision arithmetic,
// written for lowp with the ACLE intrinsics. Packed per 8 columns: 8 int32 (minus the column sums), the int8
// weights a k at a time, 8 float filter scales, 8 float biases. VMOVL.S8 and VMLAL.S16 by scalar into int32, then
// VCVT.F32.S32, VMUL.F32 by the row's inv_scale and the scales, VADD.F32 the biases (AArch32 NEON: flush-to-zero,
// the Standard FPSCR value), VCVT.F16.F32 and the clamp in f16 (VMAX.F16, VMIN.F16).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include <arm_neon.h>

#include "src/xnnpack/microparams.h"

void xnn_qd8_f16_qc8w_gemm_minmax_ukernel_1x8__aarch32_neonfp16arith(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, void* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f16_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  (void) a_stride;
  (void) cm_stride;
  uint16_t* c0 = (uint16_t*) c;
  const float16x8_t vmin = vreinterpretq_f16_u16(vdupq_n_u16(params->scalar.min));
  const float16x8_t vmax = vreinterpretq_f16_u16(vdupq_n_u16(params->scalar.max));
  do {
    const int32_t zero_point = quantization_params[0].zero_point;
    int32x4_t vacc0 = vmulq_n_s32(vld1q_s32((const int32_t*) w), zero_point);
    int32x4_t vacc1 = vmulq_n_s32(vld1q_s32((const int32_t*) w + 4), zero_point);
    const int8_t* wk = (const int8_t*) ((const int32_t*) w + 8);
    for (size_t k = 0; k < kc; k++) {
      const int16x8_t vb = vmovl_s8(vld1_s8(wk));
      vacc0 = vmlal_n_s16(vacc0, vget_low_s16(vb), a[k]);
      vacc1 = vmlal_n_s16(vacc1, vget_high_s16(vb), a[k]);
      wk += 8;
    }
    const float* vscale = (const float*) wk;
    const float inv_scale = quantization_params[0].inv_scale;
    float32x4_t vout0 = vmulq_n_f32(vcvtq_f32_s32(vacc0), inv_scale);
    float32x4_t vout1 = vmulq_n_f32(vcvtq_f32_s32(vacc1), inv_scale);
    vout0 = vaddq_f32(vmulq_f32(vout0, vld1q_f32(vscale)), vld1q_f32(vscale + 8));
    vout1 = vaddq_f32(vmulq_f32(vout1, vld1q_f32(vscale + 4)), vld1q_f32(vscale + 12));
    float16x8_t vhalf = vcombine_f16(vcvt_f16_f32(vout0), vcvt_f16_f32(vout1));
    vhalf = vminq_f16(vmaxq_f16(vhalf, vmin), vmax);
    uint16_t out[8];
    vst1q_u16(out, vreinterpretq_u16_f16(vhalf));
    const size_t stored = nc < 8 ? nc : 8;
    for (size_t n = 0; n < stored; n++) c0[n] = out[n];
    w = (const void*) (vscale + 16);
    c0 = (uint16_t*) ((uintptr_t) c0 + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
