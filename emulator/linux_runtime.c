/* lowp's runtime for static AArch64 Linux programs run under qemu-aarch64 (no libc): raw system calls (svc,
   number in x8), and _start calling main(argc, argv); the rest is linux_runtime_common.h. */
#include "linux_runtime_common.h"

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

__attribute__((naked)) void _start(void) {
    __asm__ volatile("mov x0, sp\n\tbl lowp_start_c\n\tbrk #0");
}
