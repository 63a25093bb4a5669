/* Kernels that misbehave on purpose, for the emulator's guard pages, budget and trap reporting. */
#include <stdint.h>

/* Off by one: reads x[0..n] inclusive, one element past the end. */
long sum_off_by_one(const int32_t *x, long n) {
    long s = 0;
    for (long i = 0; i <= n; i++) s += x[i];
    return s;
}

/* Writes y[n] as well: one element past the end. */
void fill_off_by_one(int16_t *y, long n) {
    for (long i = 0; i <= n; i++) y[i] = (int16_t)i;
}

/* Writes y[-1]: one element before the start. */
void write_before_start(int32_t *y) { y[-1] = 7; }

/* Never returns. */
void spin(volatile long *x) {
    for (;;) *x += 1;
}

/* UDF #0 (permanently undefined), then BRK #1 (__builtin_trap). */
void undefined(void) { __asm__ volatile(".inst 0x00000000"); }
void trap(void) { __builtin_trap(); }

/* Unbounded recursion: overflows the stack. */
long recurse(volatile long *x, long n) { x[0] += n; return n + recurse(x, n + 1) + x[0]; }
