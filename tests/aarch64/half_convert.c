// tests/test_half_conversions.py: float32 -> binary16 (FCVTN, vcvt_f16_f32) and float32 -> bfloat16 (BFCVTN,
// vcvt_bf16_f32: FEAT_BF16) on AArch64, four lanes at a time, run by Unicorn (FCVTN) and qemu-aarch64 (BFCVTN).
#include <arm_neon.h>
#include <stddef.h>
#include <stdint.h>

void lowp_fcvtn(const float *a, uint16_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4)
    vst1_u16(out + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(a + i))));
}

#ifdef __ARM_FEATURE_BF16
void lowp_bfcvtn(const float *a, uint16_t *out, size_t n) {
  for (size_t i = 0; i + 4 <= n; i += 4)
    vst1_u16(out + i, vreinterpret_u16_bf16(vcvt_bf16_f32(vld1q_f32(a + i))));
}
#endif
