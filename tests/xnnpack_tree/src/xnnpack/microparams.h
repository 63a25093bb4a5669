// lowp's test tree: the qs8-qc8w params union, with XNNPACK's fp32_scalar member layout.
#pragma once

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
