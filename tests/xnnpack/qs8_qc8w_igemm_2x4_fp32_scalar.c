/* lowp's own qs8-qc8w IGEMM (convolution) micro-kernel, 2x4, fp32 'fmagic' requantization, in the style of
 * XNNPACK's scalar IGEMMs (facts, not code: google/XNNPACK @75db3c0 src/qs8-igemm/scalar.c.in, the prototype of
 * src/xnnpack/igemm.h L1983-1988). The indirection buffer `a` holds, per call, ks / sizeof(void *) pointers: for
 * each tap, MR row pointers; a pointer other than `zero` is read at itself + a_offset (XNNPACK's operator builds
 * the buffer once and passes the input's offset); the zero pointer is read as it is (the padding, filled with the
 * input zero point). Packed weights (kr = 1, goki): per 4 columns, 4 int32, then per tap per k 4 int8, then 4
 * float scales. Plain C: x86-64 and AArch64.
 *
 * LOWP_BUG_NO_A_OFFSET: reads every pointer as it is (a kernel that forgets a_offset).
 * LOWP_BUG_STORE_ORDER: stores row 0 before row 1; with mr = 1 (c1 = c0) the row past M's result is what stays,
 * which shows only when that row holds other values than row 0 (junk, as XNNPACK's tester gives it). */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowp/xnnpack.h"

static inline uint32_t float_as_uint32(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float max_f32(float a, float b) { return a > b ? a : b; }
static inline float min_f32(float a, float b) { return a < b ? a : b; }

static inline int8_t requantize(int32_t acc, float scale, float vmin, float vmax, int32_t magic_less_zp) {
  float f = (float) acc * scale;
  f = min_f32(max_f32(f, vmin), vmax);
  f += 12582912.0f;
  return (int8_t) ((int32_t) float_as_uint32(f) - magic_less_zp);
}

static inline const int8_t *row(const int8_t *p, const int8_t *zero, size_t a_offset) {
#ifdef LOWP_BUG_NO_A_OFFSET
  (void) zero; (void) a_offset;
  return p;
#else
  return p != zero ? (const int8_t *) ((uintptr_t) p + a_offset) : p;
#endif
}

void lowp_qs8_qc8w_igemm_minmax_fp32_ukernel_2x4__scalar_fmagic(
    size_t mr, size_t nc, size_t kc, size_t ks, const int8_t **restrict a, const void *restrict w,
    int8_t *restrict c, size_t cm_stride, size_t cn_stride, size_t a_offset, const int8_t *zero,
    const struct lowp_xnn_qs8_qc8w_fp32_params *params) {
  assert(mr != 0 && mr <= 2 && nc != 0 && kc != 0 && ks != 0 && ks % (2 * sizeof(void *)) == 0);
  int8_t *c0 = c;
  int8_t *c1 = (int8_t *) ((uintptr_t) c0 + cm_stride);
  if (mr != 2) c1 = c0;
  const int32_t zp = params->output_zero_point;
  const float vmin = (float) ((int32_t) params->output_min - zp);
  const float vmax = (float) ((int32_t) params->output_max - zp);
  const int32_t magic_less_zp = INT32_C(0x4B400000) - zp;
  do {
    int32_t acc0[4], acc1[4];
    memcpy(acc0, w, sizeof acc0);
    memcpy(acc1, w, sizeof acc1);
    w = (const int32_t *) w + 4;
    size_t p = ks;
    do {
      const int8_t *a0 = row(a[0], zero, a_offset);
      const int8_t *a1 = row(a[1], zero, a_offset);
      a += 2;
      for (size_t k = 0; k < kc; k++) {
        const int8_t *wk = (const int8_t *) w;
        for (int n = 0; n < 4; n++) {
          acc0[n] += (int32_t) a0[k] * (int32_t) wk[n];
          acc1[n] += (int32_t) a1[k] * (int32_t) wk[n];
        }
        w = (const int8_t *) w + 4;
      }
      p -= 2 * sizeof(void *);
    } while (p != 0);
    float scale[4];
    memcpy(scale, w, sizeof scale);
    w = (const float *) w + 4;
    const size_t n_out = nc < 4 ? nc : 4;
    for (size_t n = 0; n < n_out; n++) {
#ifdef LOWP_BUG_STORE_ORDER
      c0[n] = requantize(acc0[n], scale[n], vmin, vmax, magic_less_zp);
      c1[n] = requantize(acc1[n], scale[n], vmin, vmax, magic_less_zp);
#else
      c1[n] = requantize(acc1[n], scale[n], vmin, vmax, magic_less_zp);
      c0[n] = requantize(acc0[n], scale[n], vmin, vmax, magic_less_zp);
#endif
    }
    if (nc <= 4) break;
    c0 = (int8_t *) ((uintptr_t) c0 + cn_stride);
    c1 = (int8_t *) ((uintptr_t) c1 + cn_stride);
    a = (const int8_t **) ((uintptr_t) a - ks);     /* the same taps for the next 4 columns */
    nc -= 4;
  } while (nc != 0);
}
