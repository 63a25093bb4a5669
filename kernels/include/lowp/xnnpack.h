/* lowp's copy of the XNNPACK GEMM / IGEMM micro-kernel ABI: what a ukernel is handed, so a kernel written against
 * XNNPACK's prototypes runs under lowp with no adapter. Facts (not code) from XNNPACK's public headers @75db3c0:
 *   prototypes: src/xnnpack/gemm.h (DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION, DECLARE_QU8_..., the qd8 ones),
 *               src/xnnpack/igemm.h (DECLARE_QS8_QC8W_IGEMM_MINMAX_UKERNEL_FUNCTION, the qd8 one with zero_data);
 *   params:     src/xnnpack/microparams.h L97-132 (the float minmax structs), L174-322 (the conv minmax unions),
 *               filled as src/microparams-init.c fills them;
 *   packing:    src/reference/packing.cc (see lowp/kernels/xnnpack.py and docs/xnnpack-abi.md).
 * Each XNNPACK union is a set of structs here, one per layout (lowp.kernels.xnnpack.PARAMS_LAYOUTS lays out the
 * same bytes). Everything here is plain C: include it from C, C++ or read it beside an assembly kernel. */
#ifndef LOWP_XNNPACK_H
#define LOWP_XNNPACK_H
#include <stddef.h>
#include <stdint.h>

/* ---- qs8-qc8w, qs8-qc4w and qs8-qc2w (per-channel scales in the packed weights): union
 * xnn_qs8_qc8w_conv_minmax_params */
struct lowp_xnn_qs8_qc8w_fp32_params { int16_t output_zero_point; int16_t output_min; int16_t output_max; };
/* ARM32 SIMD32: the clamp's byte repeated in each of a word's four bytes */
struct lowp_xnn_qs8_qc8w_fp32_armsimd32_params {
  float magic_bias; int32_t magic_bias_less_zero_point; uint32_t output_min; uint32_t output_max;
};
/* NEON without FCVTNS: the magic bias 12582912.0f (1.5 * 2^23) and 0x4B400000 - output_zero_point */
struct lowp_xnn_qs8_qc8w_fp32_neon_params {
  float magic_bias; int32_t magic_bias_less_output_zero_point; int8_t output_min; int8_t output_max;
};
/* NEONv8 (FCVTNS): the int8 clamp in uint8 fields, as XNNPACK's struct declares them (the same bits) */
struct lowp_xnn_qs8_qc8w_fp32_neonv8_params { int16_t output_zero_point; uint8_t output_min; uint8_t output_max; };

/* ---- qs8 (per-tensor): union xnn_qs8_conv_minmax_params */
struct lowp_xnn_qs8_fp32_params { float scale; int16_t output_zero_point; int16_t output_min; int16_t output_max; };
/* rndnu_scalar: multiplier = the scale's 24-bit mantissa, shift = 150 - its biased exponent, rounding 2^(shift-1) */
struct lowp_xnn_qs8_rndnu_scalar_params {
  int32_t multiplier; uint32_t shift; int16_t output_min; int16_t output_max; int32_t output_zero_point;
  int64_t rounding;
};
struct lowp_xnn_qs8_fp32_armsimd32_params {
  float scale; float magic_bias; int32_t magic_bias_less_zero_point; uint32_t output_min; uint32_t output_max;
};
struct lowp_xnn_qs8_fp32_neon_params {
  float scale; float magic_bias; int32_t magic_bias_less_output_zero_point; int8_t output_min; int8_t output_max;
};
struct lowp_xnn_qs8_fp32_neonv8_params { float scale; int16_t output_zero_point; int8_t output_min; int8_t output_max; };
/* rndnu_neon: SQSHL by right_pre_shift (>= 0: a saturating left shift, 0 for scales below 0.5), SQDMULH by
 * multiplier, SRSHL by right_post_shift (negative: a rounding right shift), then + output_zero_point
 * (saturating), clamp. */
struct lowp_xnn_qs8_rndnu_neon_params {
  int32_t right_pre_shift; int32_t multiplier; int32_t right_post_shift;
  int16_t output_zero_point; int8_t output_min; int8_t output_max;
};

/* ---- qu8 (uint8 A, weights and C; the weights' zero point travels here): union xnn_qu8_conv_minmax_params */
struct lowp_xnn_qu8_fp32_params {
  int32_t kernel_zero_point; float scale; int16_t output_zero_point; int16_t output_min; int16_t output_max;
};
struct lowp_xnn_qu8_rndnu_scalar_params {
  int32_t multiplier; uint32_t shift; int16_t output_min; int16_t output_max; int32_t output_zero_point;
  int32_t kernel_zero_point; int64_t rounding;
};
/* rndnu16: SQRSHL by left_pre_shift (the scale's exponent + 1), SQXTN to int16, SQRDMULH by a 15-bit multiplier,
 * SQADD output_zero_point, SQXTUN, clamp (xnn_qu8_requantize_rndnu16) */
struct lowp_xnn_qu8_rndnu16_scalar_params {
  uint8_t kernel_zero_point; uint8_t padding[3]; int32_t left_pre_shift; int16_t multiplier;
  int16_t output_zero_point; uint8_t output_min; uint8_t output_max;
};
/* minus_kernel_zero_point: -kernel_zero_point as two uint16 halves */
struct lowp_xnn_qu8_fp32_armsimd32_params {
  float scale; float magic_bias; uint32_t minus_kernel_zero_point; int32_t magic_bias_less_zero_point;
  uint32_t output_min; uint32_t output_max;
};
struct lowp_xnn_qu8_fp32_neon_params {
  uint8_t kernel_zero_point; uint8_t padding[3]; float scale; float magic_bias;
  int32_t magic_bias_less_output_zero_point; uint8_t output_min; uint8_t output_max;
};
struct lowp_xnn_qu8_fp32_neonv8_params {
  uint8_t kernel_zero_point; uint8_t padding[3]; float scale; int16_t output_zero_point; uint8_t output_min;
  uint8_t output_max;
};
struct lowp_xnn_qu8_rndnu_neon_params {
  uint8_t kernel_zero_point; uint8_t padding[3];
  int32_t right_pre_shift; int32_t multiplier; int32_t right_post_shift;
  int16_t output_zero_point; uint8_t output_min; uint8_t output_max;
};

/* ---- qd8 / qdu8 (dynamically quantized A, float C): the output clamp, and one {zero_point, inv_scale} per row of
 * A (an IGEMM: one for all its rows). qdu8 kernels read A as uint8 with a zero point in [0, 255]. */
struct lowp_xnn_f32_minmax_params { float min; float max; };
struct lowp_xnn_f32_qc4w_minmax_params { float min; float max; int32_t kernel_zero_point; };
struct lowp_xnn_f32_qb4w_minmax_params { float min; float max; size_t blocksize; };
struct lowp_xnn_qd8_quantization_params { int32_t zero_point; float inv_scale; };
/* Half-precision outputs (microparams.h L90-141): f16 bounds are xnn_float16 (an IEEE half's bits), bf16's float. */
struct lowp_xnn_f16_minmax_params { uint16_t min; uint16_t max; };
struct lowp_xnn_f16_qc4w_minmax_params { uint16_t min; uint16_t max; };
struct lowp_xnn_f16_qb4w_minmax_params { uint16_t min; uint16_t max; size_t blocksize; };
struct lowp_xnn_bf16_qb4w_minmax_params { float min; float max; size_t blocksize; };

/* The ukernel prototypes. mr <= MR rows of A and C; nc = all N columns (the ukernel walks them NR at a time);
 * kc = K in bytes (the ukernel rounds it up to kr*sr, twice that for 4-bit weights, and may read A that far:
 * XNNPACK's documented over-read); a_stride, cm_stride, cn_stride in bytes; w the packed weights. */
typedef void (*lowp_xnn_qs8_gemm_ukernel)(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                          const void *w, int8_t *c, size_t cm_stride, size_t cn_stride,
                                          const void *params);
typedef void (*lowp_xnn_qd8_f32_gemm_ukernel)(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                              const void *w, float *c, size_t cm_stride, size_t cn_stride,
                                              const void *params,
                                              const struct lowp_xnn_qd8_quantization_params *quantization_params);
/* qd8-qc2w (2-bit weights with a float zero point per column, src/xnnpack/microfnptr.h L140-150): the float sums of
 * A's rows (as the ukernel reads A: kc, a multiple of 4) come before the rows' quantization parameters. */
typedef void (*lowp_xnn_qd8_f32_qc2w_gemm_ukernel)(size_t mr, size_t nc, size_t kc, const int8_t *a,
                                                   size_t a_stride, const void *w, float *c, size_t cm_stride,
                                                   size_t cn_stride, const void *params, const float *row_sum,
                                                   const struct lowp_xnn_qd8_quantization_params *quantization_params);
/* IGEMM: ks = taps * MR * sizeof(void *) bytes of the indirection buffer `a` per call (taps groups of MR row
 * pointers); a pointer other than `zero` is read at itself + a_offset. The qd8 form compares with `zero` (a
 * sentinel, never read) and reads `zero_data` (the batch's zero point) instead. */
typedef void (*lowp_xnn_qs8_igemm_ukernel)(size_t mr, size_t nc, size_t kc, size_t ks, const int8_t **a,
                                           const void *w, int8_t *c, size_t cm_stride, size_t cn_stride,
                                           size_t a_offset, const int8_t *zero, const void *params);
typedef void (*lowp_xnn_qd8_f32_igemm_ukernel)(size_t mr, size_t nc, size_t kc, size_t ks, const int8_t **a,
                                               const void *w, float *c, size_t cm_stride, size_t cn_stride,
                                               size_t a_offset, const int8_t *zero, const int8_t *zero_data,
                                               const void *params,
                                               const struct lowp_xnn_qd8_quantization_params *quantization_params);
#endif
