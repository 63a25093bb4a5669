/* lowp's runtime for static Hexagon Linux programs run under qemu-hexagon (no libc): raw system calls (trap0(#1),
   number in r6, arguments in r0..r5, result in r0: the asm-generic numbers AArch64 and RISC-V use), _start calling
   main(argc, argv); the rest is linux_runtime_common.h.

   Hexagon kernels written for a libc (XNNPACK's hvx ones) also call a few libc functions the other targets' kernels
   do not; they are here, each what a libc gives:
     lrintf         round to nearest, ties to even (C99 7.12.9.5; the default rounding mode), through Hexagon's
                    convert_sf2w, which rounds by USR's mode (round to nearest at process start) and saturates a
                    value outside int32 to INT32_MIN / INT32_MAX (C leaves that case undefined; the models say so)
     printf, fflush the kernel's diagnostics: dropped (stdout is the driver's protocol pipe; nothing may reach it)
     stdout         a FILE pointer for fflush, never dereferenced */
#include "linux_runtime_common.h"

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long r6 __asm__("r6") = nr;
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r6), "r"(r1), "r"(r2) : "memory");
    return r0;
}

/* The initial stack pointer (r29) holds argc, then argv: handed to lowp_start_c in r0. */
__attribute__((naked)) void _start(void) {
    __asm__ volatile("r0 = r29\n\tcall lowp_start_c\n\ttrap0(#0)");
}

long lrintf(float x) {
    long r;
    __asm__("%0 = convert_sf2w(%1)" : "=r"(r) : "r"(x));
    return r;
}

struct _IO_FILE;
struct _IO_FILE *const stdout = 0;
int printf(const char *restrict format, ...) { (void)format; return 0; }
int fflush(struct _IO_FILE *f) { (void)f; return 0; }
