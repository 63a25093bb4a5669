// tests/test_requant.py: SQSUB Vd.4S (vqsubq_s32), the saturating subtract of XNNPACK's fp32_neon output stage,
// four lanes at a time, run by Unicorn.
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

void lowp_sqsub_s32(const int32_t *a, const int32_t *b, int32_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4) vst1q_s32(out + i, vqsubq_s32(vld1q_s32(a + i), vld1q_s32(b + i)));
}
