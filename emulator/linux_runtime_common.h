/* The part of lowp's Linux runtimes (linux_runtime.c, linux_runtime_riscv64.c) that is the same on every
   architecture: the generic Linux system call numbers (read 63, write 64, exit 93, shared by AArch64 and RISC-V),
   the libc functions compilers emit, and the C half of _start. The including file defines lowp_syscall3 (its
   architecture's system call instruction) and _start (which passes the initial stack pointer to lowp_start_c); an
   architecture with its own numbers (32-bit Arm's EABI table) defines LOWP_NR_READ, LOWP_NR_WRITE and LOWP_NR_EXIT
   first. */
#include <stddef.h>

#ifndef LOWP_NR_READ
#define LOWP_NR_READ 63
#define LOWP_NR_WRITE 64
#define LOWP_NR_EXIT 93
#endif

static long lowp_syscall3(long nr, long a, long b, long c);

long lowp_read(int fd, void *buf, long n) { return lowp_syscall3(LOWP_NR_READ, fd, (long)buf, n); }
long lowp_write(int fd, const void *buf, long n) { return lowp_syscall3(LOWP_NR_WRITE, fd, (long)buf, n); }
void lowp_exit(int code) { for (;;) lowp_syscall3(LOWP_NR_EXIT, code, 0, 0); }

#include "runtime_libc.h"

int main(int argc, char **argv);

void lowp_start_c(long *sp) { lowp_exit(main((int)sp[0], (char **)(sp + 1))); }
