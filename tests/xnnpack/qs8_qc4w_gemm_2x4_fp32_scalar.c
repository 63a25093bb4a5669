/* lowp's own qs8-qc4w GEMM micro-kernel, 2x4, fp32 'fmagic' requantization, in the style of XNNPACK's scalar 4-bit
 * kernels (facts, not code: google/XNNPACK @75db3c0 src/qs8-qc4w-gemm/gen/qs8-qc4w-gemm-1x2-minmax-fp32-scalar-
 * lrintf.c; packing src/reference/packing.cc L434-546). The weights are 4-bit, two to a byte: with kr = 1, the
 * byte of column n of each 2-deep k chunk holds k in its low nibble and k + 1 in its high one, each the weight's
 * two's complement nibble. The kernel shifts a nibble into the high half of a byte ((int8) (b << 4), (int8)
 * (b & 0xF0)): 16x the weight, so the accumulator starts at the packed 16 x (bias - izp * sums) and is shifted
 * right by 4 before the float step. kc is rounded up to 2 (A read one byte past an odd K). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline uint32_t float_as_uint32(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }
static inline int32_t asr4(int32_t x) { return x >= 0 ? x >> 4 : ~(~x >> 4); }      /* math_asr_s32 */

static inline int8_t requantize(int32_t acc, float scale, float vmin, float vmax, int32_t magic_less_zp) {
  float f = (float) asr4(acc) * scale;
  f = min_f32(max_f32(f, vmin), vmax);
  f += 12582912.0f;
  return (int8_t) ((int32_t) float_as_uint32(f) - magic_less_zp);
}

void lowp_qs8_qc4w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  kc = (kc + 1) & ~(size_t) 1;
  const int8_t *a0 = a;
  int8_t *c0 = c;
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) { a1 = a0; c1 = c0; }
  const int32_t zp = params->output_zero_point;
  const float vmin = (float) ((int32_t) params->output_min - zp);
  const float vmax = (float) ((int32_t) params->output_max - zp);
  const int32_t magic_less_zp = INT32_C(0x4B400000) - zp;
  do {
    int32_t acc0[4], acc1[4];
    memcpy(acc0, w, sizeof acc0);
    memcpy(acc1, w, sizeof acc1);
    w = (const int32_t *) w + 4;
    for (size_t k = 0; k < kc; k += 2) {
      const uint8_t *wk = (const uint8_t *) w;
      for (int n = 0; n < 4; n++) {
        const int32_t lo = (int8_t) (uint8_t) (wk[n] << 4), hi = (int8_t) (wk[n] & 0xF0);
        acc0[n] += (int32_t) a0[k] * lo + (int32_t) a0[k + 1] * hi;
        acc1[n] += (int32_t) a1[k] * lo + (int32_t) a1[k + 1] * hi;
      }
      w = (const uint8_t *) w + 4;
    }
    float scale[4];
    memcpy(scale, w, sizeof scale);
    w = (const float *) w + 4;
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
      c1[n] = requantize(acc1[n], scale[n], vmin, vmax, magic_less_zp);
      c0[n] = requantize(acc0[n], scale[n], vmin, vmax, magic_less_zp);
    }
    if (nc <= 4) break;
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    nc -= 4;
  } while (nc != 0);
}
