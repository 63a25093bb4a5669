// lowp's test tree: a 1x4c16 qs8-qc8w GEMM micro-kernel for wasm32 with relaxed SIMD, XNNPACK's prototype and
// packing (per 4 columns: 4 int32 biases, then per block of 16 k: 16 int8 weights of each column, then 4 float
// scales), written for lowp. The products use i32x4.relaxed_dot_i8x16_i7x16_add_s with A as the second (i7)
// operand: right only where the engine's relaxed dot is signed x signed (the sdot behaviour, which XNNPACK's
// dispatch asks of an engine before it picks a wasmsdot kernel). The output stage: float scale, magic bias, the
// lower clamp on the bits, saturating narrows, the upper clamp in int8 (the scalar imagic stage, bit for bit).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <wasm_simd128.h>

#include "src/xnnpack/gemm.h"

DECLARE_QS8_QC8W_GEMM_MINMAX_UKERNEL_FUNCTION(xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4c16__wasmsdot)

static int32_t lane_sum(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}

void xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x4c16__wasmsdot(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, const union xnn_qs8_qc8w_conv_minmax_params* params) XNN_OOB_READS
{
  assert(mr == 1);
  (void) a_stride;
  (void) cm_stride;
  const size_t blocks = (kc + 15) / 16;
  const int32_t zero_point = params->fp32_scalar.output_zero_point;
  const float magic = 12582912.0f;              // 1.5 * 2^23: its float's low bits hold round(x) + 0x400000
  const float low = magic + (float) ((int32_t) params->fp32_scalar.output_min - zero_point);
  int32_t low_bits;
  memcpy(&low_bits, &low, sizeof(low_bits));
  const v128_t vlow = wasm_i32x4_splat(low_bits);
  const v128_t vshift = wasm_i32x4_splat(0x4B400000 - zero_point);
  const v128_t vmax = wasm_i8x16_splat((int8_t) params->fp32_scalar.output_max);
  do {
    const int32_t* bias = (const int32_t*) w;
    const int8_t* wk = (const int8_t*) (bias + 4);
    v128_t acc[4];
    for (int n = 0; n < 4; n++) acc[n] = wasm_i32x4_make(bias[n], 0, 0, 0);
    for (size_t b = 0; b < blocks; b++) {
      const v128_t va = wasm_v128_load(a + 16 * b);
      for (int n = 0; n < 4; n++) {
        acc[n] = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(wk), va, acc[n]);
        wk += 16;
      }
    }
    const float* scale = (const float*) wk;
    v128_t sums = wasm_i32x4_make(lane_sum(acc[0]), lane_sum(acc[1]), lane_sum(acc[2]), lane_sum(acc[3]));
    v128_t vf = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sums), wasm_v128_load(scale));
    v128_t bits = wasm_i32x4_max(wasm_f32x4_add(vf, wasm_f32x4_splat(magic)), vlow);
    v128_t out16 = wasm_i16x8_narrow_i32x4(wasm_i32x4_sub(bits, vshift), wasm_i32x4_splat(0));
    v128_t out8 = wasm_i8x16_min(wasm_i8x16_narrow_i16x8(out16, out16), vmax);
    w = (const void*) (scale + 4);
    int8_t out[16];
    wasm_v128_store(out, out8);
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t n = 0; n < stored; n++) c[n] = out[n];
    c = (int8_t*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}
