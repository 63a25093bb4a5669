/* Exhaustive SMLAL (8-bit) lane sweep: for one value of the Vn byte `a`, the `count` Vm bytes b from `first` on
   and every 16-bit accumulator value acc in -32768..32767, out[(b - first) * 65536 + (acc + 32768)] = SMLAL lane
   result (a few b at a time: an output of 32 MB is a fresh mapping, page faults included, at every call).
   The instruction is written in inline assembly so the compiler cannot hoist a*b out of the loop (it would
   turn vmlal_s8 into SMULL + ADD). Eight registers a loop iteration: Unicorn's cost is per instruction and per
   translated block, and the copy, the store and the loop's own instructions were six of every seven. */
#include <arm_neon.h>
#include <stdint.h>

#define SMLAL(r) __asm__("smlal %0.8h, %1.8b, %2.8b" : "+w"(r) : "w"(va), "w"(vb))

void smlal_sweep(int16_t *out, long a, long first, long count) {
    int8x8_t va = vdup_n_s8((int8_t)a);
    const int16_t start[8] = {-32768, -32767, -32766, -32765, -32764, -32763, -32762, -32761};
    int16x8_t step = vdupq_n_s16(8), stride = vdupq_n_s16(64);
    for (long b = first; b < first + count; b++) {
        int8x8_t vb = vdup_n_s8((int8_t)b);
        int16x8_t acc[8];
        acc[0] = vld1q_s16(start);
        for (int j = 1; j < 8; j++)
            acc[j] = vaddq_s16(acc[j - 1], step);
        for (int i = 0; i < 8192; i += 8) {          /* 8 registers of 8 lanes: acc .. acc + 63 */
            int16x8_t r0 = acc[0], r1 = acc[1], r2 = acc[2], r3 = acc[3];
            int16x8_t r4 = acc[4], r5 = acc[5], r6 = acc[6], r7 = acc[7];
            SMLAL(r0); SMLAL(r1); SMLAL(r2); SMLAL(r3); SMLAL(r4); SMLAL(r5); SMLAL(r6); SMLAL(r7);
            vst1q_s16(out, r0); vst1q_s16(out + 8, r1); vst1q_s16(out + 16, r2); vst1q_s16(out + 24, r3);
            vst1q_s16(out + 32, r4); vst1q_s16(out + 40, r5); vst1q_s16(out + 48, r6); vst1q_s16(out + 56, r7);
            out += 64;
            for (int j = 0; j < 8; j++)
                acc[j] = vaddq_s16(acc[j], stride);
        }
    }
}
