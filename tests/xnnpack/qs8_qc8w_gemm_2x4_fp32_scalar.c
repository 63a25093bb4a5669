/* lowp's own qs8-qc8w GEMM micro-kernel, 2x4, fp32 requantization the scalar 'fmagic' way, in the style of XNNPACK's
 * scalar kernels (facts, not code: google/XNNPACK @75db3c0 src/qs8-gemm/scalar.c.in; the params struct
 * xnn_qs8_qc8w_conv_minmax_params.fp32_scalar, src/xnnpack/microparams.h L228-233). Plain C: it builds for x86-64
 * (native, Bochs) and AArch64 (Unicorn, qemu) alike.
 *
 * Packed weights (kr = 1): per 4 columns, 4 int32 (bias less input_zero_point * column sums), 4 int8 per k, then
 * 4 float scales. Rows past mr alias the row before (a, c), as XNNPACK's kernels do.
 *
 * Two defines plant the stride bugs XNNPACK's strided_a / strided_cm tests exist for:
 *   LOWP_BUG_A_STRIDE: row 1 of A is read at a0 + kc instead of a0 + a_stride (right only when a_stride == kc);
 *   LOWP_BUG_C_STRIDE: row 1 of C is written at c0 + nc instead of c0 + cm_stride (right when cm_stride == nc).
 * And two that assume more alignment than XNNPACK promises (tests/test_alignment.py):
 *   LOWP_BUG_ALIGNED_W (x86-64): each block's bias words are loaded with MOVDQA, which needs w 16-byte aligned
 *     (the ABI promises 4): a general-protection fault wherever the caller's w is not;
 *   LOWP_BUG_ROUNDED_PARAMS: params are read at their address rounded down to 8 bytes (the params union promises
 *     4): right only where the caller's params happen to be 8-byte aligned. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline uint32_t float_as_uint32(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }

/* fmagic: clamp in float to [min - zp, max - zp], add 1.5 * 2^23 (the low mantissa bits are then the rounded
 * integer, ties to even), reinterpret, subtract the magic bias's bits less the zero point. */
static inline int8_t requantize(int32_t acc, float scale, float vmin, float vmax, int32_t magic_less_zp) {
  float f = (float) acc * scale;
  f = min_f32(max_f32(f, vmin), vmax);
  f += 12582912.0f;
  return (int8_t) ((int32_t) float_as_uint32(f) - magic_less_zp);
}

void lowp_qs8_qc8w_gemm_minmax_fp32_ukernel_2x4__scalar_fmagic(
    size_t mr, size_t nc, size_t kc, const int8_t *restrict a, size_t a_stride, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, const struct lowp_xnn_qs8_qc8w_fp32_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0);
  const int8_t *a0 = a;
  int8_t *c0 = c;
#ifdef LOWP_BUG_A_STRIDE
  const int8_t *a1 = a0 + kc;
#else
  const int8_t *a1 = (const int8_t *) ((uintptr_t) a0 + a_stride);
#endif
#ifdef LOWP_BUG_C_STRIDE
  int8_t *c1 = c0 + nc;
#else
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
#endif
  if (mr != 2) { a1 = a0; c1 = c0; }
#ifdef LOWP_BUG_ROUNDED_PARAMS
  params = (const struct lowp_xnn_qs8_qc8w_fp32_params *) ((uintptr_t) params & ~(uintptr_t) 7);
#endif
  const int32_t zp = params->output_zero_point;
  const float vmin = (float) ((int32_t) params->output_min - zp);
  const float vmax = (float) ((int32_t) params->output_max - zp);
  const int32_t magic_less_zp = INT32_C(0x4B400000) - zp;
  do {
    int32_t acc0[4], acc1[4];
#if defined(LOWP_BUG_ALIGNED_W) && defined(__x86_64__)
    __asm__ volatile("movdqa (%1), %%xmm0\n\tmovdqu %%xmm0, (%0)" : : "r"(acc0), "r"(w) : "xmm0", "memory");
#else
    memcpy(acc0, w, sizeof acc0);
#endif
    memcpy(acc1, acc0, sizeof acc1);
    w = (const int32_t *) w + 4;
    for (size_t k = 0; k < kc; k++) {
      const int8_t *wk = (const int8_t *) w;
      for (int n = 0; n < 4; n++) {
        acc0[n] += (int32_t) a0[k] * (int32_t) wk[n];
        acc1[n] += (int32_t) a1[k] * (int32_t) wk[n];
      }
      w = (const int8_t *) w + 4;
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
