/* Exhaustive SMLAL (8-bit) lane sweep: for one value of the Vn byte `a`, every Vm byte b in -128..127 and every
   16-bit accumulator value acc in -32768..32767, out[(b + 128) * 65536 + (acc + 32768)] = SMLAL lane result.
   The instruction is written in inline assembly so the compiler cannot hoist a*b out of the loop (it would
   turn vmlal_s8 into SMULL + ADD). */
#include <arm_neon.h>
#include <stdint.h>

void smlal_sweep(int16_t *out, long a) {
    int8x8_t va = vdup_n_s8((int8_t)a);
    const int16_t start[8] = {-32768, -32767, -32766, -32765, -32764, -32763, -32762, -32761};
    int16x8_t step = vdupq_n_s16(8);
    for (int b = -128; b < 128; b++) {
        int8x8_t vb = vdup_n_s8((int8_t)b);
        int16x8_t acc = vld1q_s16(start);
        for (int i = 0; i < 8192; i++) {
            int16x8_t r = acc;
            __asm__("smlal %0.8h, %1.8b, %2.8b" : "+w"(r) : "w"(va), "w"(vb));
            vst1q_s16(out, r);
            out += 8;
            acc = vaddq_s16(acc, step);
        }
    }
}
