// lowp's test tree: qs8-qc8w IGEMM (convolution) micro-kernels for wasm32 with SIMD128 (i16x8.load8x8,
// i32x4.dot_i16x8_s), XNNPACK's IGEMM prototype and goki packing (per 4 columns: 4 int32 biases, per tap per block
// of 8 k: 8 int8 weights of each column, then 4 float scales), written for lowp. The indirection buffer holds ks
// bytes of wasm32 pointers (4 bytes each): per tap MR row pointers, each read at itself + a_offset unless it is the
// zero buffer. Rows past mr alias the last stored one and are stored first, so row 0 is what stays.
//
//   2x4c8 ..._ld64:  exact.
//   2x4c8 ..._ld128: ignores a_offset (a one-bug kernel: right where a_offset is 0; elsewhere it reads a_offset
//                    bytes before each row, an out-of-bounds read through an indirection pointer).
//   1x4c8 ..._ld64:  reads the indirection buffer as 8-byte pointers (a one-bug kernel: ks / 8 taps, each the low
//                    half of every other entry; wrong everywhere).
// Output stage as the wasm GEMMs' (XNNPACK's imagic stage of its wasm kernels).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <wasm_simd128.h>

#include "src/xnnpack/gemm.h"

#define DECLARE_IGEMM(fn_name)                                                                                  \
  XNN_INTERNAL void fn_name(size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w,        \
                            int8_t* c, size_t cm_stride, size_t cn_stride, size_t a_offset, const int8_t* zero, \
                            const union xnn_qs8_qc8w_conv_minmax_params* params);
DECLARE_IGEMM(xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4c8__wasmsimd_dot16x2_ld64)
DECLARE_IGEMM(xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4c8__wasmsimd_dot16x2_ld128)
DECLARE_IGEMM(xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4c8__wasmsimd_dot16x2_ld64)

static int32_t lane_sum(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}

// Entry i of the indirection buffer read as a pointer of `pointer_bytes` bytes (8: the bug; wasm32 truncates).
static const int8_t* entry(const uint8_t* table, size_t i, size_t pointer_bytes) {
  if (pointer_bytes == 8) {
    uint64_t wide;
    memcpy(&wide, table + 8 * i, sizeof(wide));
    return (const int8_t*) (uintptr_t) wide;
  }
  const int8_t* p;
  memcpy(&p, table + sizeof(p) * i, sizeof(p));
  return p;
}

// The imagic output stage of 4 accumulators (as the wasm GEMMs of this tree) into 4 int8.
static v128_t output_stage(const v128_t acc[4], const float* scale,
                           const union xnn_qs8_qc8w_conv_minmax_params* params) {
  const int32_t zero_point = params->fp32_scalar.output_zero_point;
  const float magic = 12582912.0f;
  const float low = magic + (float) ((int32_t) params->fp32_scalar.output_min - zero_point);
  int32_t low_bits;
  memcpy(&low_bits, &low, sizeof(low_bits));
  v128_t sums = wasm_i32x4_make(lane_sum(acc[0]), lane_sum(acc[1]), lane_sum(acc[2]), lane_sum(acc[3]));
  v128_t vf = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(sums), wasm_v128_load(scale));
  v128_t bits = wasm_i32x4_max(wasm_f32x4_add(vf, wasm_f32x4_splat(magic)), wasm_i32x4_splat(low_bits));
  v128_t out16 = wasm_i16x8_narrow_i32x4(wasm_i32x4_sub(bits, wasm_i32x4_splat(0x4B400000 - zero_point)),
                                         wasm_i32x4_splat(0));
  return wasm_i8x16_min(wasm_i8x16_narrow_i16x8(out16, out16),
                        wasm_i8x16_splat((int8_t) params->fp32_scalar.output_max));
}

static void store(int8_t* c, v128_t out8, size_t n) {
  int8_t out[16];
  wasm_v128_store(out, out8);
  for (size_t i = 0; i < n; i++) c[i] = out[i];
}

static void igemm_mrx4c8(size_t MR, size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w,
                         int8_t* c, size_t cm_stride, size_t cn_stride, size_t a_offset, const int8_t* zero,
                         const union xnn_qs8_qc8w_conv_minmax_params* params, int add_offset,
                         size_t pointer_bytes) {
  assert(mr != 0 && mr <= MR && MR <= 2);
  assert(ks != 0 && ks % (MR * sizeof(void*)) == 0);
  int8_t* crow[2] = {c, (int8_t*) ((uintptr_t) c + cm_stride)};
  if (mr != 2) crow[1] = crow[0];
  const size_t blocks = (kc + 7) / 8;
  const size_t taps = ks / (MR * pointer_bytes);
  do {
    const int32_t* bias = (const int32_t*) w;
    const int8_t* wk = (const int8_t*) (bias + 4);
    v128_t acc[2][4];
    for (size_t r = 0; r < MR; r++)
      for (int n = 0; n < 4; n++) acc[r][n] = wasm_i32x4_make(bias[n], 0, 0, 0);
    for (size_t tap = 0; tap < taps; tap++) {
      const int8_t* row[2];
      for (size_t r = 0; r < MR; r++) {
        row[r] = entry((const uint8_t*) a, tap * MR + r, pointer_bytes);
        if (row[r] != zero && add_offset) row[r] = (const int8_t*) ((uintptr_t) row[r] + a_offset);
      }
      for (size_t b = 0; b < blocks; b++) {
        for (size_t r = 0; r < MR; r++) {
          const v128_t va = wasm_i16x8_load8x8(row[r] + 8 * b);
          for (int n = 0; n < 4; n++)
            acc[r][n] = wasm_i32x4_add(acc[r][n], wasm_i32x4_dot_i16x8(va, wasm_i16x8_load8x8(wk + 8 * n)));
        }
        wk += 32;
      }
    }
    const float* scale = (const float*) wk;
    const size_t stored = nc < 4 ? nc : 4;
    for (size_t r = MR; r-- > 0;) {          // the last row first: a row past mr aliases row 0, which wins
      store(crow[r], output_stage(acc[r], scale, params), stored);
      crow[r] = (int8_t*) ((uintptr_t) crow[r] + cn_stride);
    }
    w = (const void*) (scale + 4);
    nc -= stored;
  } while (nc != 0);
}

void xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4c8__wasmsimd_dot16x2_ld64(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, size_t a_offset, const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params)
    XNN_OOB_READS
{
  igemm_mrx4c8(2, mr, nc, kc, ks, a, w, c, cm_stride, cn_stride, a_offset, zero, params, 1, sizeof(void*));
}

void xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4c8__wasmsimd_dot16x2_ld128(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, size_t a_offset, const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params)
    XNN_OOB_READS
{
  igemm_mrx4c8(2, mr, nc, kc, ks, a, w, c, cm_stride, cn_stride, a_offset, zero, params, 0 /* the bug */,
               sizeof(void*));
}

void xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x4c8__wasmsimd_dot16x2_ld64(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t** a, const void* w, int8_t* c, size_t cm_stride,
    size_t cn_stride, size_t a_offset, const int8_t* zero, const union xnn_qs8_qc8w_conv_minmax_params* params)
    XNN_OOB_READS
{
  igemm_mrx4c8(1, mr, nc, kc, ks, a, w, c, cm_stride, cn_stride, a_offset, zero, params, 1, 8 /* the bug */);
}
