/* lowp's runtime for static 32-bit Arm (AArch32, EABI, hard float) Linux programs run under qemu-arm (no libc):
   raw system calls (svc #0, number in r7; the EABI numbers of Linux arch/arm/tools/syscall.tbl: exit 1, read 3,
   write 4), and _start calling main(argc, argv); the rest is linux_runtime_common.h. */
#define LOWP_NR_READ 3
#define LOWP_NR_WRITE 4
#define LOWP_NR_EXIT 1
#include "linux_runtime_common.h"

static long lowp_syscall3(long nr, long a, long b, long c) {
    register long r7 __asm__("r7") = nr;
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    __asm__ volatile("svc #0" : "+r"(r0) : "r"(r7), "r"(r1), "r"(r2) : "memory");
    return r0;
}

__attribute__((naked)) void _start(void) {
    __asm__ volatile("mov r0, sp\n\tbic sp, sp, #7\n\tbl lowp_start_c\n\tudf #0");
}
