/* lowp's runtime for static RISC-V 64 Linux programs run under qemu-riscv64 (no libc): raw system calls (ecall,
   number in a7), and _start calling main(argc, argv); the rest is linux_runtime_common.h, as for AArch64. */
#include "linux_runtime_common.h"

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long a7 __asm__("a7") = nr;
    register long a0 __asm__("a0") = a;
    register long a1 __asm__("a1") = b;
    register long a2 __asm__("a2") = c;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7), "r"(a1), "r"(a2) : "memory");
    return a0;
}

__attribute__((naked)) void _start(void) {
    __asm__ volatile("mv a0, sp\n\tcall lowp_start_c\n\tunimp");
}
