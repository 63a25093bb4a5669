/* lowp's copy of the XNNPACK GEMM micro-kernel ABI: what a ukernel is handed, so a kernel written against XNNPACK's
 * prototype runs under lowp with no adapter. Facts (not code) from XNNPACK's public headers:
 *   prototype: src/xnnpack/gemm.h (DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION, the qd8-f32 one);
 *   params:    src/xnnpack/microparams.h, the newest scalar layouts (fp32_scalar, rndnu_neon,
 *              xnn_qd8_quantization_params, xnn_f32_minmax_params);
 *   packing:   src/packing.c xnn_pack_qs8_gemm_goi_w, xnn_pack_qu8_gemm_goi_w (see lowp/kernels/xnnpack.py and
 *              docs/xnnpack-abi.md).
 * Everything here is plain C: include it from C, C++ or read it beside an assembly kernel. */
#ifndef LOWP_XNNPACK_H
#define LOWP_XNNPACK_H
#include <stddef.h>
#include <stdint.h>

/* qs8-qc8w, fp32 requantization: the per-channel scales travel in the packed weights (NR floats after each
 * block's weights). */
struct lowp_xnn_qs8_qc8w_fp32_params { int16_t output_zero_point; int16_t output_min; int16_t output_max; };

/* qs8 (per-tensor), fp32 requantization. */
struct lowp_xnn_qs8_fp32_params { float scale; int16_t output_zero_point; int16_t output_min; int16_t output_max; };

/* qs8 (per-tensor), rndnu requantization, NEON layout: SQSHL by right_pre_shift (>= 0: a saturating left shift,
 * 0 for scales below 0.5), SQDMULH by multiplier, SRSHL by right_post_shift (negative: a rounding right shift),
 * then + output_zero_point (saturating), clamp. */
struct lowp_xnn_qs8_rndnu_neon_params {
  int32_t right_pre_shift; int32_t multiplier; int32_t right_post_shift;
  int16_t output_zero_point; int8_t output_min; int8_t output_max;
};

/* qu8 (per-tensor; uint8 A, weights and C), fp32 requantization: the weights' zero point travels here. */
struct lowp_xnn_qu8_fp32_params {
  int32_t kernel_zero_point; float scale; int16_t output_zero_point; int16_t output_min; int16_t output_max;
};

/* qu8, rndnu requantization, NEON layout (as the qs8 one, after the kernel zero point). */
struct lowp_xnn_qu8_rndnu_neon_params {
  uint8_t kernel_zero_point; uint8_t padding[3];
  int32_t right_pre_shift; int32_t multiplier; int32_t right_post_shift;
  int16_t output_zero_point; uint8_t output_min; uint8_t output_max;
};

/* qd8-f32-qc8w: the output clamp, and one {zero_point, inv_scale} per row of A (the dynamic quantization). */
struct lowp_xnn_f32_minmax_params { float min; float max; };
struct lowp_xnn_qd8_quantization_params { int32_t zero_point; float inv_scale; };

/* The ukernel prototypes. mr <= MR rows of A and C; nc = all N columns (the ukernel walks them NR at a time);
 * kc = K in bytes (the ukernel rounds it up to kr*sr and may read A that far: XNNPACK's documented over-read);
 * a_stride, cm_stride, cn_stride in bytes (lowp passes K, N*sizeof(out), NR*sizeof(out)); w the packed weights. */
typedef void (*lowp_xnn_qs8_gemm_ukernel)(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                          const void *w, int8_t *c, size_t cm_stride, size_t cn_stride,
                                          const void *params);
typedef void (*lowp_xnn_qd8_f32_gemm_ukernel)(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                              const void *w, float *c, size_t cm_stride, size_t cn_stride,
                                              const struct lowp_xnn_f32_minmax_params *params,
                                              const struct lowp_xnn_qd8_quantization_params *quantization_params);
#endif
