/* lowp's runtime for static AArch64 Linux programs run under qemu-aarch64 (no libc): raw system calls, the
   libc functions compilers emit, and _start calling main(argc, argv). */
#include <stddef.h>

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

long lowp_read(int fd, void *buf, long n) { return lowp_syscall3(63, fd, (long)buf, n); }
long lowp_write(int fd, const void *buf, long n) { return lowp_syscall3(64, fd, (long)buf, n); }
void lowp_exit(int code) { for (;;) lowp_syscall3(93, code, 0, 0); }

#include "runtime_libc.h"

int main(int argc, char **argv);

void lowp_start_c(long *sp) { lowp_exit(main((int)sp[0], (char **)(sp + 1))); }

__attribute__((naked)) void _start(void) {
    __asm__ volatile("mov x0, sp\n\tbl lowp_start_c\n\tbrk #0");
}
