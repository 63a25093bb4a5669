/* lowp's runtime for static RISC-V 64 Linux programs run under qemu-riscv64 (no libc): raw system calls (ecall,
   number in a7; the generic Linux numbers read 63, write 64, exit 93), the libc functions compilers emit, and
   _start calling main(argc, argv). The same interface as linux_runtime.c for AArch64. */
#include <stddef.h>

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long a7 __asm__("a7") = nr;
    register long a0 __asm__("a0") = a;
    register long a1 __asm__("a1") = b;
    register long a2 __asm__("a2") = c;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7), "r"(a1), "r"(a2) : "memory");
    return a0;
}

long lowp_read(int fd, void *buf, long n) { return lowp_syscall3(63, fd, (long)buf, n); }
long lowp_write(int fd, const void *buf, long n) { return lowp_syscall3(64, fd, (long)buf, n); }
void lowp_exit(int code) { for (;;) lowp_syscall3(93, code, 0, 0); }

#include "runtime_libc.h"

int main(int argc, char **argv);

void lowp_start_c(long *sp) { lowp_exit(main((int)sp[0], (char **)(sp + 1))); }

__attribute__((naked)) void _start(void) {
    __asm__ volatile("mv a0, sp\n\tcall lowp_start_c\n\tunimp");
}
