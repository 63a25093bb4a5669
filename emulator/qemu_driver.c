/* lowp's guest driver for qemu-aarch64 (lowp.emulator.qemu): one long-lived process serves many kernel calls.
 *
 * Linked (target 'linux', no libc: linux_runtime.c) with a kernel's sources, it reads call requests from stdin and
 * writes replies to stdout; the host finds the kernel's functions in the ELF's symbol table and sends their
 * addresses. The protocol, the buffers and the serving loop are qemu_driver_common.h's (shared with the RISC-V 64
 * driver, qemu_driver_riscv64.c); this file is the AArch64 part: system calls (svc, number in x8), setjmp/longjmp
 * over the AAPCS64 callee-saved registers, the call itself with x0..x28 and v0..v31 from the request and 16 stack
 * argument slots, and the registers a signal's ucontext holds. The request's x[] is x0..x28 (29 words); the
 * reply's registers are x0..x30 and sp (HEADER 37 words):
 *
 *   reply    status (0 returned, 1 signal), signo, si_code, si_addr, pc, x[0..30], sp, then per buffer: ...
 *
 * Buffers: each in its own mapping between PROT_NONE guard pages, ending at the mapping's end (after its allowed
 * over-read), the slack below it and the over-read filled with a canary (the same layout as the Unicorn Machine),
 * kept from one call to the next while its size repeats. A fault in the kernel (SIGSEGV, SIGBUS, SIGILL, SIGTRAP,
 * SIGFPE) or the budget's SIGALRM: the handler records the signal, si_addr and the registers from the ucontext
 * and siglongjmps back here; the process goes on serving. */
#include <stdint.h>

enum { NX = 29, HEADER = 5 + 31 + 1, RET_SLOT = 5, JUMP_WORDS = 21 };
#define ARG_SLOT(i) (i)
#define SIGACTION_RESTORER 1

static long lowpq_sys6(long nr, long a, long b, long c, long d, long e, long f) {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
    return x0;
}

/* setjmp/longjmp without libc: the callee-saved registers (x19..x30, sp, d8..d15; AAPCS64). */
__attribute__((returns_twice)) long lowpq_setjmp(uint64_t *buf);
__attribute__((noreturn)) void lowpq_longjmp(uint64_t *buf, long value);
/* Calls frame->fn with x0..x28 and v0..v31 as the frame gives them and 16 stack argument slots; returns its x0. */
uint64_t lowpq_invoke(const void *frame);

__asm__(
    ".text\n"
    ".global lowpq_setjmp\n"
    ".type lowpq_setjmp, %function\n"
    "lowpq_setjmp:\n"
    "  stp x19, x20, [x0, #0]\n  stp x21, x22, [x0, #16]\n  stp x23, x24, [x0, #32]\n"
    "  stp x25, x26, [x0, #48]\n  stp x27, x28, [x0, #64]\n  stp x29, x30, [x0, #80]\n"
    "  mov x16, sp\n  str x16, [x0, #96]\n"
    "  stp d8, d9, [x0, #104]\n  stp d10, d11, [x0, #120]\n  stp d12, d13, [x0, #136]\n  stp d14, d15, [x0, #152]\n"
    "  mov x0, #0\n  ret\n"
    ".size lowpq_setjmp, . - lowpq_setjmp\n"
    ".global lowpq_longjmp\n"
    ".type lowpq_longjmp, %function\n"
    "lowpq_longjmp:\n"
    "  ldp x19, x20, [x0, #0]\n  ldp x21, x22, [x0, #16]\n  ldp x23, x24, [x0, #32]\n"
    "  ldp x25, x26, [x0, #48]\n  ldp x27, x28, [x0, #64]\n  ldp x29, x30, [x0, #80]\n"
    "  ldr x16, [x0, #96]\n  mov sp, x16\n"
    "  ldp d8, d9, [x0, #104]\n  ldp d10, d11, [x0, #120]\n  ldp d12, d13, [x0, #136]\n  ldp d14, d15, [x0, #152]\n"
    "  mov x0, x1\n  ret\n"
    ".size lowpq_longjmp, . - lowpq_longjmp\n"
    /* frame: fn @0, x[0..28] @8, v[0..31] @240, stack[0..15] @752 */
    ".global lowpq_invoke\n"
    ".type lowpq_invoke, %function\n"
    "lowpq_invoke:\n"
    "  stp x29, x30, [sp, #-176]!\n  mov x29, sp\n"
    "  stp x19, x20, [sp, #16]\n  stp x21, x22, [sp, #32]\n  stp x23, x24, [sp, #48]\n"
    "  stp x25, x26, [sp, #64]\n  stp x27, x28, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
    "  sub sp, sp, #128\n  mov x30, x0\n"
    "  add x9, x30, #752\n"
    "  ldp x10, x11, [x9, #0]\n  stp x10, x11, [sp, #0]\n  ldp x10, x11, [x9, #16]\n  stp x10, x11, [sp, #16]\n"
    "  ldp x10, x11, [x9, #32]\n  stp x10, x11, [sp, #32]\n  ldp x10, x11, [x9, #48]\n  stp x10, x11, [sp, #48]\n"
    "  ldp x10, x11, [x9, #64]\n  stp x10, x11, [sp, #64]\n  ldp x10, x11, [x9, #80]\n  stp x10, x11, [sp, #80]\n"
    "  ldp x10, x11, [x9, #96]\n  stp x10, x11, [sp, #96]\n  ldp x10, x11, [x9, #112]\n  stp x10, x11, [sp, #112]\n"
    "  add x9, x30, #240\n"
    "  ldp q0, q1, [x9, #0]\n  ldp q2, q3, [x9, #32]\n  ldp q4, q5, [x9, #64]\n  ldp q6, q7, [x9, #96]\n"
    "  ldp q8, q9, [x9, #128]\n  ldp q10, q11, [x9, #160]\n  ldp q12, q13, [x9, #192]\n  ldp q14, q15, [x9, #224]\n"
    "  ldp q16, q17, [x9, #256]\n  ldp q18, q19, [x9, #288]\n  ldp q20, q21, [x9, #320]\n  ldp q22, q23, [x9, #352]\n"
    "  ldp q24, q25, [x9, #384]\n  ldp q26, q27, [x9, #416]\n  ldp q28, q29, [x9, #448]\n  ldp q30, q31, [x9, #480]\n"
    "  ldp x0, x1, [x30, #8]\n  ldp x2, x3, [x30, #24]\n  ldp x4, x5, [x30, #40]\n  ldp x6, x7, [x30, #56]\n"
    "  ldp x8, x9, [x30, #72]\n  ldp x10, x11, [x30, #88]\n  ldp x12, x13, [x30, #104]\n  ldp x14, x15, [x30, #120]\n"
    "  ldp x16, x17, [x30, #136]\n  ldp x18, x19, [x30, #152]\n  ldp x20, x21, [x30, #168]\n"
    "  ldp x22, x23, [x30, #184]\n  ldp x24, x25, [x30, #200]\n  ldp x26, x27, [x30, #216]\n  ldr x28, [x30, #232]\n"
    "  ldr x30, [x30, #0]\n  blr x30\n"
    "  mov sp, x29\n"
    "  ldp x19, x20, [sp, #16]\n  ldp x21, x22, [sp, #32]\n  ldp x23, x24, [sp, #48]\n"
    "  ldp x25, x26, [sp, #64]\n  ldp x27, x28, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"
    "  ldp x29, x30, [sp], #176\n  ret\n"
    ".size lowpq_invoke, . - lowpq_invoke\n");

/* The AArch64 ucontext (uc_mcontext @176: fault_address, regs[31], sp, pc, pstate; Linux
   arch/arm64/include/uapi/asm/{ucontext,sigcontext}.h). */
enum { UC_MCONTEXT = 176 };

static void lowpq_capture(uint64_t *out, const void *context) {
    const uint64_t *mc = (const uint64_t *)((const char *)context + UC_MCONTEXT);
    out[4] = mc[33];                            /* pc */
    for (int i = 0; i < 31; i++) out[5 + i] = mc[1 + i];
    out[36] = mc[32];                           /* sp */
}

#include "qemu_driver_common.h"
