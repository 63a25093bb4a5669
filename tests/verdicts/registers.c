/* tests/test_verdicts.py: AArch64 functions for lowp's emulator (Machine.call). x9 and v9 at entry (registers the
 * caller never sets: what the seed chose), and a 16-byte `ldr q` and a byte store at a buffer's start. */
#include <stdint.h>

uint64_t vt_x9(void) {
    uint64_t v;
    __asm__ volatile("mov %0, x9" : "=r"(v));
    return v;
}

uint64_t vt_v9(void) {
    uint64_t v;
    __asm__ volatile("fmov %0, d9" : "=r"(v));
    return v;
}

/* Loads 16 bytes from p with one `ldr q0`; returns their first byte. */
uint64_t vt_ldr_q(const uint8_t *p) {
    uint64_t v;
    __asm__ volatile("ldr q0, [%1]\n\tumov %w0, v0.b[0]" : "=r"(v) : "r"(p) : "v0", "memory");
    return v;
}

/* Loads 16 bytes with `ldr q0`, then stores one byte at p[n]. */
void vt_ldr_q_then_store(uint8_t *p, int64_t n) {
    __asm__ volatile("ldr q0, [%0]" : : "r"(p) : "v0", "memory");
    ((volatile uint8_t *)p)[n] = 1;
}
