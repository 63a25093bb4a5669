// lowp's test tree: the qs8-qc8w params union, with XNNPACK's fp32_scalar member layout.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "include/xnnpack.h"
#include "src/xnnpack/common.h"

union xnn_qs8_qc8w_conv_minmax_params {
  struct {
    int16_t output_zero_point;
    int16_t output_min;
    int16_t output_max;
  } fp32_scalar;
};

// The qd8 row parameters and the f16 output's clamp (XNNPACK's struct xnn_qd8_quantization_params and struct
// xnn_f16_minmax_params: two IEEE halves, held here as their bits).
struct xnn_qd8_quantization_params {
  int32_t zero_point;
  float inv_scale;
};

struct xnn_f16_minmax_params {
  struct {
    uint16_t min;
    uint16_t max;
  } scalar;
};

// The float clamp of a qd8-f32-qc4w kernel (XNNPACK's struct xnn_f32_qc4w_minmax_params).
struct xnn_f32_qc4w_minmax_params {
  struct {
    float min;
    float max;
    int32_t kernel_zero_point;
  } scalar;
};

// The float clamp and block size of a qd8-f32-qb4w kernel (XNNPACK's struct xnn_f32_qb4w_minmax_params).
struct xnn_f32_qb4w_minmax_params {
  struct {
    float min;
    float max;
    size_t blocksize;
  } scalar;
};

// The float clamp of a qd8-f32 kernel (XNNPACK's struct xnn_f32_minmax_params), the params of qd8-f32-qc2w.
struct xnn_f32_minmax_params {
  struct {
    float min;
    float max;
  } scalar;
};
