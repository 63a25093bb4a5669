/* lowp's guest driver for qemu-arm (lowp.emulator.qemu, guest ARM): one long-lived process serves many kernel
 * calls, with the protocol, buffers between guard pages, canaries and serving loop of qemu_driver_common.h (shared
 * with the AArch64 and RISC-V 64 drivers). Linked (target 'arm-linux': AArch32, ARM state, EABI hard float, no libc:
 * linux_runtime_arm.c) with a kernel's sources. This file is the 32-bit Arm part (AAPCS with the VFP variant, "Procedure
 * Call Standard for the Arm Architecture", ARM-software/abi-aa aapcs32.rst 6.1 and 6.5):
 *
 *   system calls   svc #0, number in r7, arguments in r0..r5; the EABI numbers of arch/arm/tools/syscall.tbl (mmap2
 *                  for mmap: its offset is in pages, always 0 here)
 *   setjmp         r4..r11, sp, lr and d8..d15: the callee-saved registers of AAPCS (d8..d15 of the VFP variant)
 *   the call       x[] of the request is the 8 argument words, then r4..r11 and r12 (NX 17): arguments 0..3 in
 *                  r0..r3, arguments 4..7 and the 16 stack words after them in 4-byte stack slots (every argument a
 *                  32-bit word: pointers, size_t, int32; the low half of each request word); r4..r12 and the
 *                  argument registers a call leaves unused as the seed chose them; d0..d31 (d0..d15 where the CPU
 *                  has 16 double registers) from the first 256 bytes of v[]. r4..r11, d8..d15 restored after.
 *   a signal       the Arm ucontext's uc_mcontext at 20 (struct sigcontext: trap_no, error_code, oldmask, r0..r10,
 *                  fp, ip, sp, lr, pc, cpsr, fault_address; Linux arch/arm/include/uapi/asm/{ucontext,sigcontext}.h):
 *                  the reply's registers are r0..r15 and cpsr (HEADER 22 words)
 * The return value is r0, sign-extended to 64 bits (a 32-bit int's -1 is -1). */
#include <stdint.h>

enum { NX = 17, HEADER = 5 + 17, RET_SLOT = 5, JUMP_WORDS = 14 };
#define ARG_SLOT(i) (i)
#define SIGACTION_RESTORER 1
#define LOWPQ_ARCH_SYSCALLS 1
enum { SYS_SIGALTSTACK = 186, SYS_RT_SIGACTION = 174, SYS_RT_SIGPROCMASK = 175, SYS_SETITIMER = 104,
       SYS_GETPID = 20, SYS_MUNMAP = 91, SYS_MMAP = 192 /* mmap2 */, SYS_MPROTECT = 125, SYS_READV = 145,
       SYS_WRITEV = 146,
       LOWP_COUNTS = 0xC0DE /* not a Linux call (qemu-arm answers ENOSYS); lowp's plugin takes it (qemu_plugin.c) */ };

static long lowpq_sys6(long nr, long a, long b, long c, long d, long e, long f) {
    register long r7 __asm__("r7") = nr;
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r4 __asm__("r4") = e;
    register long r5 __asm__("r5") = f;
    __asm__ volatile("svc #0" : "+r"(r0) : "r"(r7), "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5) : "memory");
    return r0;
}

__attribute__((returns_twice)) long lowpq_setjmp(uint64_t *buf);
__attribute__((noreturn)) void lowpq_longjmp(uint64_t *buf, long value);
/* Calls frame->fn with the frame's registers and stack words, d0..d(dregs - 1) from its v[]; returns r0. */
long lowpq_call(const void *frame, long dregs);

/* frame: fn @0, x[0..16] @8 (args 0..7, r4..r11, r12), v[0..63] @144, stack[0..15] @656. Every word is 64 bits: a
   register takes its low half (little endian: the word's address). */
__asm__(
    ".text\n"
    ".fpu neon\n"
    ".arm\n"
    ".global lowpq_setjmp\n"
    ".type lowpq_setjmp, %function\n"
    "lowpq_setjmp:\n"
    "  mov r12, sp\n"
    "  stmia r0!, {r4-r12, lr}\n"
    "  vstmia r0, {d8-d15}\n"
    "  mov r0, #0\n"
    "  bx lr\n"
    ".size lowpq_setjmp, . - lowpq_setjmp\n"
    ".global lowpq_longjmp\n"
    ".type lowpq_longjmp, %function\n"
    "lowpq_longjmp:\n"
    "  ldmia r0!, {r4-r12, lr}\n"
    "  vldmia r0, {d8-d15}\n"
    "  mov sp, r12\n"
    "  mov r0, r1\n"
    "  bx lr\n"
    ".size lowpq_longjmp, . - lowpq_longjmp\n"
    ".global lowpq_call\n"
    ".type lowpq_call, %function\n"
    "lowpq_call:\n"
    "  push {r1, r4-r11, lr}\n"           /* 40 bytes: sp stays 8-aligned; r1 (dregs) kept at [sp, #64] below */
    "  vpush {d8-d15}\n"
    "  sub sp, sp, #80\n"                 /* 20 stack argument words: x[4..7], stack[0..15] */
    "  add r2, r0, #40\n"                 /* x[4] */
    "  mov r3, #0\n"
    "1:\n"
    "  ldr r12, [r2, r3, lsl #3]\n"
    "  str r12, [sp, r3, lsl #2]\n"
    "  add r3, r3, #1\n"
    "  cmp r3, #4\n"
    "  bne 1b\n"
    "  add r2, r0, #656\n"                /* stack[0] */
    "  mov r3, #0\n"
    "2:\n"
    "  ldr r12, [r2, r3, lsl #3]\n"
    "  add lr, sp, #16\n"
    "  str r12, [lr, r3, lsl #2]\n"
    "  add r3, r3, #1\n"
    "  cmp r3, #16\n"
    "  bne 2b\n"
    "  add r2, r0, #144\n"                /* v[]: d0..d31 are its first 32 words */
    "  cmp r1, #0\n"
    "  beq 3f\n"
    "  vldmia r2!, {d0-d15}\n"
    "  cmp r1, #32\n"
    "  bne 3f\n"
    "  vldmia r2, {d16-d31}\n"
    "3:\n"
    "  ldr r4, [r0, #72]\n"
    "  ldr r5, [r0, #80]\n"
    "  ldr r6, [r0, #88]\n"
    "  ldr r7, [r0, #96]\n"
    "  ldr r8, [r0, #104]\n"
    "  ldr r9, [r0, #112]\n"
    "  ldr r10, [r0, #120]\n"
    "  ldr r11, [r0, #128]\n"
    "  ldr r12, [r0, #136]\n"
    "  ldr lr, [r0, #0]\n"
    "  ldr r1, [r0, #16]\n"
    "  ldr r2, [r0, #24]\n"
    "  ldr r3, [r0, #32]\n"
    "  ldr r0, [r0, #8]\n"
    "  blx lr\n"
    "  add sp, sp, #80\n"
    "  vpop {d8-d15}\n"
    "  pop {r1, r4-r11, lr}\n"
    "  bx lr\n"
    ".size lowpq_call, . - lowpq_call\n");

/* The Arm ucontext: uc_flags, uc_link, uc_stack (12 bytes), then uc_mcontext @20: trap_no, error_code, oldmask,
   r0..r10, fp, ip, sp, lr, pc, cpsr, fault_address (unsigned longs). */
enum { UC_MCONTEXT = 20 };

static void lowpq_capture(uint64_t *out, const void *context) {
    const uint32_t *mc = (const uint32_t *)((const char *)context + UC_MCONTEXT);
    out[4] = mc[18];                            /* pc */
    for (int i = 0; i < 16; i++) out[5 + i] = mc[3 + i];     /* r0..r12, sp, lr, pc */
    out[21] = mc[19];                           /* cpsr */
}

static uint64_t lowpq_invoke(const void *frame);

#include "qemu_driver_common.h"

/* d registers to seed: 32 where AT_HWCAP says VFPD32 (bit 19), else 16 (VFP, bit 6: every CPU lowp runs has it) */
static long lowpq_dregs = -1;

static uint64_t lowpq_invoke(const void *frame) {
    if (lowpq_dregs < 0) {
        uint64_t hwcap = lowpq_hwcap;
        if (!(hwcap & (1u << 6))) lowp_exit(10);
        lowpq_dregs = hwcap & (1u << 19) ? 32 : 16;
    }
    return (uint64_t)(int64_t)lowpq_call(frame, lowpq_dregs);
}
