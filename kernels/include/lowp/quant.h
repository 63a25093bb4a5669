/* lowp's quantized driver ABI ("quant-gemm"): for kernels whose own ABI lowp does not know (ruy's params struct,
 * gemmlowp's kernel format, MLAS), a small driver of the user's exposes
 *   void f(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C, void *work,
 *          const struct lowp_requant *q);
 * A is M x K, B is K x N, C is M x N of the output type, all row-major; `work` as for the int32 `gemm` signature
 * (size from <prefix>_workspace(M, N, K)). One block, no pointers inside, so it reads the same natively and
 * emulated: the header, then the per-output-channel arrays at fixed offsets (LOWP_BIAS, ... below). */
#ifndef LOWP_QUANT_H
#define LOWP_QUANT_H
#include <stdint.h>

struct lowp_requant {
  int32_t a_zero_point;        /* sum_k (A - a_zero_point)(B - b_zero_point) */
  int32_t b_zero_point;
  int32_t output_zero_point;
  int32_t output_min;          /* the clamp, in the output type */
  int32_t output_max;
  int32_t n;                   /* N: the length of each array below */
  int32_t reserved[2];
  /* then: int32_t bias[n]; float scale[n]; int32_t multiplier[n]; int32_t shift[n] (TFLite convention: the real
   * multiplier is multiplier * 2^(shift - 31)). A per-tensor quantization repeats one value n times. */
};

#define LOWP_BIAS(q)       ((const int32_t *)((const struct lowp_requant *)(q) + 1))
#define LOWP_SCALE(q)      ((const float *)(LOWP_BIAS(q) + (q)->n))
#define LOWP_MULTIPLIER(q) ((const int32_t *)(LOWP_BIAS(q) + 2 * (q)->n))
#define LOWP_SHIFT(q)      ((const int32_t *)(LOWP_BIAS(q) + 3 * (q)->n))
#endif
