/* lowp's freestanding runtime for x86-64 kernels run under Bochs (lowp.emulator.bochs): the libc functions a
   compiler emits calls to (zero-fills, struct copies) and the ones a kernel's error paths reach. There is no OS:
   abort, a failed assert and a smashed stack execute INT3, which lowp reports as a Trap naming the function.
   REP STOSB / MOVSB rather than C loops: GCC at -O2 turns a byte loop back into a call to memset. Every symbol is
   weak: a kernel's own definition wins. */
#include <stddef.h>
#include <stdint.h>

__attribute__((weak)) void *memset(void *dst, int c, size_t n) {
    void *d = dst;
    __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
    return dst;
}

__attribute__((weak)) void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
    void *d = dst;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(src), "+c"(n) : : "memory");
    return dst;
}

__attribute__((weak)) void *memmove(void *dst, const void *src, size_t n) {
    if ((uintptr_t)dst - (uintptr_t)src >= n)         /* no overlap that a forward copy would destroy */
        return memcpy(dst, src, n);
    unsigned char *d = (unsigned char *)dst + n - 1;
    const unsigned char *s = (const unsigned char *)src + n - 1;
    __asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    return dst;
}

__attribute__((weak)) int memcmp(const void *a, const void *b, size_t n) {
    const unsigned char *x = a, *y = b;
    for (; n--; x++, y++)
        if (*x != *y) return *x - *y;
    return 0;
}

__attribute__((weak)) __attribute__((noreturn)) void abort(void) { for (;;) __asm__ volatile("int3"); }

__attribute__((weak)) __attribute__((noreturn)) void __assert_fail(const char *expr, const char *file, unsigned line, const char *fn) {
    (void)expr; (void)file; (void)line; (void)fn;
    for (;;) __asm__ volatile("int3");
}

__attribute__((weak)) __attribute__((noreturn)) void __stack_chk_fail(void) { for (;;) __asm__ volatile("int3"); }

__attribute__((weak)) void _start(void) { for (;;) __asm__ volatile("int3"); }
