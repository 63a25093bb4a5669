// lowp's test tree: a 1x8c4 qd8-f32-qc4w GEMM micro-kernel in portable C reading XNNPACK's non-planar 4-bit packing
// for 16-byte registers (xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_aarch64, kr 4: a byte pairs column n with column
// n + 16 / kr = n + 4 at one k): per 8 columns, 8 int32 (minus 16 x the column sums), then per 4 k 16 bytes, 4 for
// each of columns 0-3, byte j holding column n's weight at k + j in its low nibble and column n + 4's in its high
// one, then 8 float filter scales and 8 float biases. Each nibble is placed in a byte's high half (16x products),
// the sum is shifted right by 4 and the qd8 float tail is unfused. Written for lowp; the 2x8c4 entry's file
// includes this one and swaps the nibbles' columns (reads the low nibble as column n + 4's).
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "src/xnnpack/gemm.h"

static int32_t high_half(uint8_t nibble) { return (int32_t) (int8_t) (uint8_t) (nibble << 4); }

static int32_t asr4(int32_t x) { return x >= 0 ? x >> 4 : ~(~x >> 4); }

static void row(size_t nc, size_t kc, const int8_t* a, const void* w, float* c, size_t cn_stride,
                const struct xnn_f32_qc4w_minmax_params* params,
                const struct xnn_qd8_quantization_params* quantization_params, int swapped)
{
  do {
    int32_t vacc[8];
    for (int n = 0; n < 8; n++) vacc[n] = ((const int32_t*) w)[n] * quantization_params->zero_point;
    const uint8_t* wk = (const uint8_t*) ((const int32_t*) w + 8);
    for (size_t k = 0; k < kc; k += 4) {
      for (int n = 0; n < 4; n++) {
        for (int j = 0; j < 4; j++) {
          const uint8_t byte = wk[n * 4 + j];
          const uint8_t first = swapped ? byte >> 4 : byte & 0xF, second = swapped ? byte & 0xF : byte >> 4;
          vacc[n] += (int32_t) a[k + j] * high_half(first);
          vacc[n + 4] += (int32_t) a[k + j] * high_half(second);
        }
      }
      wk += 16;
    }
    const float* vscale = (const float*) wk;
    const float* vbias = vscale + 8;
    const size_t stored = nc < 8 ? nc : 8;
    for (size_t n = 0; n < stored; n++) {
      float vf = (float) asr4(vacc[n]) * quantization_params->inv_scale;
      vf = vf * vscale[n];
      vf = vf + vbias[n];
      vf = vf < params->scalar.min ? params->scalar.min : vf;
      vf = vf > params->scalar.max ? params->scalar.max : vf;
      c[n] = vf;
    }
    w = (const void*) (vbias + 8);
    c = (float*) ((uintptr_t) c + cn_stride);
    nc -= stored;
  } while (nc != 0);
}

static void gemm(size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c,
                 size_t cm_stride, size_t cn_stride, const struct xnn_f32_qc4w_minmax_params* params,
                 const struct xnn_qd8_quantization_params* quantization_params, int swapped)
{
  kc = (kc + 3) & ~(size_t) 3;      // the packing rounds k up to kr (planes 1); A's over-read is XNNPACK's slack
  for (size_t m = 0; m < mr; m++) {
    row(nc, kc, (const int8_t*) ((uintptr_t) a + m * a_stride), w, (float*) ((uintptr_t) c + m * cm_stride),
        cn_stride, params, &quantization_params[m], swapped);
  }
}

void xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c4__scalar(
    size_t mr, size_t nc, size_t kc, const int8_t* a, size_t a_stride, const void* w, float* c, size_t cm_stride,
    size_t cn_stride, const struct xnn_f32_qc4w_minmax_params* params,
    const struct xnn_qd8_quantization_params* quantization_params)
{
  assert(mr == 1);
  gemm(mr, nc, kc, a, a_stride, w, c, cm_stride, cn_stride, params, quantization_params, 0);
}
