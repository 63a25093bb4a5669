/* tests/test_stage_families.py: an s8 GEMM through lowp's driver ABI (kernels/include/lowp/quant.h) requantizing
 * as TFLite's reference kernels do with TFLITE_SINGLE_ROUNDING (tflite-micro common.cc L31-47): acc = sum (a -
 * a_zp)(b - b_zp) + bias[n], MultiplyByQuantizedMultiplier (int64 x * m + 2^(30 - shift)) >> (31 - shift),
 * + output_zero_point, clamped to [output_min, output_max], an (int8_t) cast.
 *
 * LOWP_BUG selects one one-line bug of the output stage (0: none, the correct kernel):
 *   1 the shift without its rounding term              2 every column's multiplier read from column 0
 *   3 the shift one bit too far (>> (32 - shift))      4 no max with output_min (the cast wraps)
 *   5 the zero point subtracted                        6 every column's bias read from column 0 */
#include <stdint.h>

#include "lowp/quant.h"

#ifndef LOWP_BUG
#define LOWP_BUG 0
#endif

uint64_t sb_tflite_workspace(int64_t M, int64_t N, int64_t K) { (void) M; (void) N; (void) K; return 0; }

static int32_t mbqm(int32_t x, int32_t m, int32_t shift) {
  const int64_t product = (int64_t) x * m;
#if LOWP_BUG == 1
  return (int32_t) (product >> (31 - shift));
#elif LOWP_BUG == 3
  return (int32_t) ((product + ((int64_t) 1 << (30 - shift))) >> (32 - shift));
#else
  return (int32_t) ((product + ((int64_t) 1 << (30 - shift))) >> (31 - shift));
#endif
}

void sb_tflite_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int8_t *C, void *work,
                    const struct lowp_requant *q) {
  (void) work;
  const int32_t *bias = LOWP_BIAS(q), *mult = LOWP_MULTIPLIER(q), *shift = LOWP_SHIFT(q);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      uint32_t acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (uint32_t) (((int32_t) A[i * K + k] - q->a_zero_point) * ((int32_t) B[k * N + j] - q->b_zero_point));
#if LOWP_BUG == 6
      acc += (uint32_t) bias[0];
#else
      acc += (uint32_t) bias[j];
#endif
#if LOWP_BUG == 2
      int32_t y = mbqm((int32_t) acc, mult[0], shift[j]);
#else
      int32_t y = mbqm((int32_t) acc, mult[j], shift[j]);
#endif
#if LOWP_BUG == 5
      y = (int32_t) ((uint32_t) y - (uint32_t) q->output_zero_point);
#else
      y = (int32_t) ((uint32_t) y + (uint32_t) q->output_zero_point);
#endif
#if LOWP_BUG != 4
      y = y > q->output_min ? y : q->output_min;
#endif
      y = y < q->output_max ? y : q->output_max;
      C[i * N + j] = (int8_t) y;
    }
}
