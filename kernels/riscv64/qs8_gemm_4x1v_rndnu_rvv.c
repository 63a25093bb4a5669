/* A qs8 GEMM micro-kernel for RISC-V V 1.0 with XNNPACK's ukernel ABI (lowp/xnnpack.h), vector-length agnostic, its
 * requantization done in RVV fixed point: vsmul + vnclip, rounded by vxrm. Written for lowp, not copied.
 *
 * Accumulation, the shape of XNNPACK's own RVV qs8 GEMMs (google/XNNPACK @75db3c0 src/qs8-gemm/rvv.c.in L82-154,
 * SiFive/Microchip 2024, the "MRx1v" LMUL=1 variant): nr = VLMAX at e32/m4 (vsetvlmax_e32m4: VLEN/8 columns, 16 at
 * VLEN 128, 32 at VLEN 256), the int32 accumulators start from the packed bias, and per k the nr int8 weights are
 * loaded (vle8, m1), sign-extended to int16 (vsext.vf2, m2) and multiplied by each row's A byte into the int32
 * accumulator with a widening multiply-add (vwmacc.vx, int16 x int16 -> int32): every product exact, the sum exact
 * modulo 2^32. The last block of columns runs at vl = nc (vsetvl_e32m4); the packed weights keep nr per block.
 *
 * Requantization (XNNPACK's RVV kernels have fp32 only; this is lowp's fixed-point one, taking XNNPACK's rndnu_neon
 * params: right_pre_shift >= 0, a Q31 multiplier, right_post_shift <= -1; docs/output-stages.md "RVV vnclip"):
 *   1. SQSHL by right_pre_shift as that many saturating doublings (vsadd.vv x, x: RVV 1.0 section 12.1);
 *   2. vsmul.vx by the multiplier (section 12.3: clip(roundoff_signed(x * m, 31))) under vxrm LOWP_VSMUL_VXRM,
 *      default 2 (rdn: truncation, SQDMULH's result);
 *   3. vnclip.wx by -right_post_shift, int32 -> int16 (section 12.5: clip(roundoff_signed(x, shift))) under vxrm
 *      LOWP_VXRM (0 rnu, 1 rne, 2 rdn, 3 rod; default 0: round half up, SRSHL's rounding);
 *   4. vsadd.vx the output zero point (int16, saturating), vnclip.wi 0 to int8 (saturating; no bits rounded off),
 *      vmax / vmin with output_min / output_max, vse8.
 * The rounding mode is set by the intrinsics' vxrm argument (__riscv_vsmul_vx_i32m4(..., __RISCV_VXRM_RDN, vl):
 * the compiler writes the vxrm CSR before the instruction, RVV intrinsic spec v1.0 "Fixed-point rounding mode").
 * Rows past mr alias the last real row (their loads stay in bounds, their stores rewrite the same bytes). */
#include <riscv_vector.h>
#include <stddef.h>
#include <stdint.h>

#include "lowp/xnnpack.h"

#ifndef LOWP_VXRM
#define LOWP_VXRM 0             /* vnclip's rounding: rnu */
#endif
#ifndef LOWP_VSMUL_VXRM
#define LOWP_VSMUL_VXRM 2       /* vsmul's rounding: rdn */
#endif
#if LOWP_VXRM < 0 || LOWP_VXRM > 3 || LOWP_VSMUL_VXRM < 0 || LOWP_VSMUL_VXRM > 3
#error "LOWP_VXRM and LOWP_VSMUL_VXRM are vxrm values: 0 rnu, 1 rne, 2 rdn, 3 rod"
#endif

/* One row's accumulators to int8: steps 1-4 above. */
static inline vint8m1_t requantize(vint32m4_t acc, int32_t pre, int32_t multiplier, size_t post, int16_t zero_point,
                                   int8_t out_min, int8_t out_max, size_t vl) {
  for (int32_t i = 0; i < pre; i++)
    acc = __riscv_vsadd_vv_i32m4(acc, acc, vl);
  acc = __riscv_vsmul_vx_i32m4(acc, multiplier, LOWP_VSMUL_VXRM, vl);
  vint16m2_t out16 = __riscv_vnclip_wx_i16m2(acc, post, LOWP_VXRM, vl);
  out16 = __riscv_vsadd_vx_i16m2(out16, zero_point, vl);
  vint8m1_t out = __riscv_vnclip_wx_i8m1(out16, 0, LOWP_VXRM, vl);
  out = __riscv_vmax_vx_i8m1(out, out_min, vl);
  return __riscv_vmin_vx_i8m1(out, out_max, vl);
}

void lowp_xnn_qs8_gemm_minmax_rndnu_ukernel_4x1v__rvv(size_t mr, size_t nc, size_t kc, const int8_t *a,
                                                      size_t a_stride, const void *w, int8_t *c, size_t cm_stride,
                                                      size_t cn_stride,
                                                      const struct lowp_xnn_qs8_rndnu_neon_params *params) {
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr < 2) {
    a1 = a0;
    c1 = c0;
  }
  const int8_t *a2 = (const int8_t *) ((uintptr_t) a1 + a_stride);
  int8_t *c2 = (int8_t *) ((uintptr_t) c1 + cm_stride);
  if (mr <= 2) {
    a2 = a1;
    c2 = c1;
  }
  const int8_t *a3 = (const int8_t *) ((uintptr_t) a2 + a_stride);
  int8_t *c3 = (int8_t *) ((uintptr_t) c2 + cm_stride);
  if (mr != 4) {
    a3 = a2;
    c3 = c2;
  }

  const size_t nr = __riscv_vsetvlmax_e32m4();
  size_t vl = nr;
  const int32_t pre = params->right_pre_shift;
  const int32_t multiplier = params->multiplier;
  const size_t post = (size_t) -params->right_post_shift;
  const int16_t zero_point = params->output_zero_point;
  const int8_t out_min = params->output_min;
  const int8_t out_max = params->output_max;

  do {
    if (nc < nr)
      vl = __riscv_vsetvl_e32m4(nc);
    nc -= vl;

    vint32m4_t acc0 = __riscv_vle32_v_i32m4((const int32_t *) w, vl);
    vint32m4_t acc1 = acc0;
    vint32m4_t acc2 = acc0;
    vint32m4_t acc3 = acc0;
    w = (const int32_t *) w + nr;

    size_t k = kc;
    do {
      const int16_t va0 = *a0++;
      const int16_t va1 = *a1++;
      const int16_t va2 = *a2++;
      const int16_t va3 = *a3++;
      const vint16m2_t vb = __riscv_vsext_vf2_i16m2(__riscv_vle8_v_i8m1((const int8_t *) w, vl), vl);
      w = (const int8_t *) w + nr;
      acc0 = __riscv_vwmacc_vx_i32m4(acc0, va0, vb, vl);
      acc1 = __riscv_vwmacc_vx_i32m4(acc1, va1, vb, vl);
      acc2 = __riscv_vwmacc_vx_i32m4(acc2, va2, vb, vl);
      acc3 = __riscv_vwmacc_vx_i32m4(acc3, va3, vb, vl);
    } while (--k != 0);

    __riscv_vse8_v_i8m1(c0, requantize(acc0, pre, multiplier, post, zero_point, out_min, out_max, vl), vl);
    __riscv_vse8_v_i8m1(c1, requantize(acc1, pre, multiplier, post, zero_point, out_min, out_max, vl), vl);
    __riscv_vse8_v_i8m1(c2, requantize(acc2, pre, multiplier, post, zero_point, out_min, out_max, vl), vl);
    __riscv_vse8_v_i8m1(c3, requantize(acc3, pre, multiplier, post, zero_point, out_min, out_max, vl), vl);
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    c2 = (int8_t *) ((uintptr_t) c2 + cn_stride);
    c3 = (int8_t *) ((uintptr_t) c3 + cn_stride);
    a0 -= kc;
    a1 -= kc;
    a2 -= kc;
    a3 -= kc;
  } while (nc != 0);
}
