/* lowp's guest driver for qemu-hexagon (lowp.emulator.qemu, guest HEXAGON): one long-lived process serves many
 * kernel calls, with the protocol, buffers between guard pages, canaries and serving loop of qemu_driver_common.h
 * (shared with the AArch64 and RISC-V drivers). Linked (target 'hexagon-linux', no libc: linux_runtime_hexagon.c)
 * with a kernel's sources. This file is the Hexagon part (32-bit; the protocol's words stay 64-bit):
 *
 *   system calls   trap0(#1), number in r6, arguments in r0..r5 (asm-generic numbers, as AArch64's)
 *   setjmp         r16..r27, r29 (sp), r30 (fp), r31 (lr): the callee-saved registers of the Hexagon ABI
 *                  (Qualcomm "Hexagon Application Binary Interface User Guide" 80-N2040-23, section "Registers":
 *                  r0..r5 arguments, r0 (r1:0) the result, r6..r15 and r28 caller-saved, r16..r27 callee-saved)
 *   the call       x[] of the request is r0..r31 by number: arguments 0..5 in r0..r5; arguments 6 and 7 (x[6],
 *                  x[7]) and 8.. (stack[]) go to the outgoing stack area, one 32-bit word each (the ABI passes
 *                  what does not fit r0..r5 on the stack, in order); r8..r27 as the seed chose them (r6, r7
 *                  too when there are fewer than 6 arguments' worth of them in use: they are caller-saved);
 *                  r28 carries the entry, r29..r31 are the driver's. v0..v31 are each filled with their 16
 *                  request bytes repeated over the 128-byte register (HVX vectors are caller-saved).
 *   a signal       the ucontext's uc_mcontext at 24 (uc_flags, uc_link, uc_stack of 12 bytes, sigcontext aligned
 *                  to 8: Linux arch/hexagon/include/uapi/asm/{ucontext,sigcontext,user.h}; qemu
 *                  linux-user/hexagon/signal.c struct target_ucontext): r0..r31, sa0, lc0, sa1, lc1, m0, m1, usr,
 *                  p3_0, gp, ugp, pc (word 42). The reply's registers are r0..r31 (sp is r29), HEADER 37 words.
 * Hexagon's struct sigaction has no sa_restorer (the kernel's trampoline; asm-generic signal.h without
 * SA_RESTORER); siginfo's si_addr is at 12 on a 32-bit target. */
#include <stdint.h>

enum { NX = 32, HEADER = 5 + 32, RET_SLOT = 5 + 0, JUMP_WORDS = 16 };
#define ARG_SLOT(i) (i)
#define SIGACTION_RESTORER 0

static long lowpq_sys6(long nr, long a, long b, long c, long d, long e, long f) {
    register long r6 __asm__("r6") = nr;
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r3 __asm__("r3") = d;
    register long r4 __asm__("r4") = e;
    register long r5 __asm__("r5") = f;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r6), "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5) : "memory");
    return r0;
}

__attribute__((returns_twice)) long lowpq_setjmp(uint64_t *buf);
__attribute__((noreturn)) void lowpq_longjmp(uint64_t *buf, long value);
/* Calls frame->fn with the frame's registers and stack words, v0..v31 from vseed (32 * 128 bytes); returns r0. */
uint32_t lowpq_call(const void *frame, const void *vseed);
static uint64_t lowpq_invoke(const void *frame);

/* The frame (struct frame of qemu_driver_common.h, 64-bit words; a 32-bit value is a word's low half): fn @0,
   x[i] @8 + 8i, v[] @264, stack[j] @776 + 8j. lowpq_call's own frame (allocframe #128, which saves r31:30 above
   it): the 18 outgoing argument words @0..71, the callee-saved r17:16..r27:26 @72..119. */
__asm__(
    ".text\n"
    ".global lowpq_setjmp\n"
    ".type lowpq_setjmp, @function\n"
    ".p2align 4\n"
    "lowpq_setjmp:\n"
    "  memd(r0+#0) = r17:16\n"
    "  memd(r0+#8) = r19:18\n"
    "  memd(r0+#16) = r21:20\n"
    "  memd(r0+#24) = r23:22\n"
    "  memd(r0+#32) = r25:24\n"
    "  memd(r0+#40) = r27:26\n"
    "  memd(r0+#48) = r29:28\n"
    "  memd(r0+#56) = r31:30\n"
    "  r0 = #0\n"
    "  jumpr r31\n"
    ".size lowpq_setjmp, . - lowpq_setjmp\n"
    ".global lowpq_longjmp\n"
    ".type lowpq_longjmp, @function\n"
    ".p2align 4\n"
    "lowpq_longjmp:\n"
    "  r17:16 = memd(r0+#0)\n"
    "  r19:18 = memd(r0+#8)\n"
    "  r21:20 = memd(r0+#16)\n"
    "  r23:22 = memd(r0+#24)\n"
    "  r25:24 = memd(r0+#32)\n"
    "  r27:26 = memd(r0+#40)\n"
    "  r29:28 = memd(r0+#48)\n"
    "  r31:30 = memd(r0+#56)\n"
    "  r0 = r1\n"
    "  jumpr r31\n"
    ".size lowpq_longjmp, . - lowpq_longjmp\n"
    ".global lowpq_call\n"
    ".type lowpq_call, @function\n"
    ".p2align 4\n"
    "lowpq_call:\n"
    "  allocframe(#128)\n"
    "  memd(r29+#72) = r17:16\n"
    "  memd(r29+#80) = r19:18\n"
    "  memd(r29+#88) = r21:20\n"
    "  memd(r29+#96) = r23:22\n"
    "  memd(r29+#104) = r25:24\n"
    "  memd(r29+#112) = r27:26\n"
    /* the outgoing stack arguments: x[6], x[7], stack[0..15] (low words) -> @0..@68 */
    "  r2 = memw(r0+#56)\n"
    "  memw(r29+#0) = r2\n"
    "  r2 = memw(r0+#64)\n"
    "  memw(r29+#4) = r2\n"
    "  r3 = add(r0, #776)\n"
    "  r4 = add(r29, #8)\n"
    ".rept 16\n"
    "  r2 = memw(r3++#8)\n"
    "  memw(r4++#4) = r2\n"
    ".endr\n"
    /* v0..v31 from vseed (aligned: vseed is 128-byte aligned) */
    "  v0 = vmem(r1+#0)\n"
    "  v1 = vmem(r1+#1)\n"
    "  v2 = vmem(r1+#2)\n"
    "  v3 = vmem(r1+#3)\n"
    "  v4 = vmem(r1+#4)\n"
    "  v5 = vmem(r1+#5)\n"
    "  v6 = vmem(r1+#6)\n"
    "  v7 = vmem(r1+#7)\n"
    "  r1 = add(r1, #1024)\n"
    "  v8 = vmem(r1+#0)\n"
    "  v9 = vmem(r1+#1)\n"
    "  v10 = vmem(r1+#2)\n"
    "  v11 = vmem(r1+#3)\n"
    "  v12 = vmem(r1+#4)\n"
    "  v13 = vmem(r1+#5)\n"
    "  v14 = vmem(r1+#6)\n"
    "  v15 = vmem(r1+#7)\n"
    "  r1 = add(r1, #1024)\n"
    "  v16 = vmem(r1+#0)\n"
    "  v17 = vmem(r1+#1)\n"
    "  v18 = vmem(r1+#2)\n"
    "  v19 = vmem(r1+#3)\n"
    "  v20 = vmem(r1+#4)\n"
    "  v21 = vmem(r1+#5)\n"
    "  v22 = vmem(r1+#6)\n"
    "  v23 = vmem(r1+#7)\n"
    "  r1 = add(r1, #1024)\n"
    "  v24 = vmem(r1+#0)\n"
    "  v25 = vmem(r1+#1)\n"
    "  v26 = vmem(r1+#2)\n"
    "  v27 = vmem(r1+#3)\n"
    "  v28 = vmem(r1+#4)\n"
    "  v29 = vmem(r1+#5)\n"
    "  v30 = vmem(r1+#6)\n"
    "  v31 = vmem(r1+#7)\n"
    /* r1..r27 from x[], the entry into r28, r0 last */
    "  r28 = memw(r0+#0)\n"
    "  r1 = memw(r0+#16)\n"
    "  r2 = memw(r0+#24)\n"
    "  r3 = memw(r0+#32)\n"
    "  r4 = memw(r0+#40)\n"
    "  r5 = memw(r0+#48)\n"
    "  r6 = memw(r0+#56)\n"
    "  r7 = memw(r0+#64)\n"
    "  r8 = memw(r0+#72)\n"
    "  r9 = memw(r0+#80)\n"
    "  r10 = memw(r0+#88)\n"
    "  r11 = memw(r0+#96)\n"
    "  r12 = memw(r0+#104)\n"
    "  r13 = memw(r0+#112)\n"
    "  r14 = memw(r0+#120)\n"
    "  r15 = memw(r0+#128)\n"
    "  r16 = memw(r0+#136)\n"
    "  r17 = memw(r0+#144)\n"
    "  r18 = memw(r0+#152)\n"
    "  r19 = memw(r0+#160)\n"
    "  r20 = memw(r0+#168)\n"
    "  r21 = memw(r0+#176)\n"
    "  r22 = memw(r0+#184)\n"
    "  r23 = memw(r0+#192)\n"
    "  r24 = memw(r0+#200)\n"
    "  r25 = memw(r0+#208)\n"
    "  r26 = memw(r0+#216)\n"
    "  r27 = memw(r0+#224)\n"
    "  r0 = memw(r0+#8)\n"
    "  callr r28\n"
    "  r17:16 = memd(r29+#72)\n"
    "  r19:18 = memd(r29+#80)\n"
    "  r21:20 = memd(r29+#88)\n"
    "  r23:22 = memd(r29+#96)\n"
    "  r25:24 = memd(r29+#104)\n"
    "  r27:26 = memd(r29+#112)\n"
    "  dealloc_return\n"
    ".size lowpq_call, . - lowpq_call\n");

/* The Hexagon ucontext: uc_mcontext at 24, its words r0..r31, then the control registers, among them the pc:
   word 42 in Linux's user_regs_struct (sa0, lc0, sa1, lc1, m0, m1, usr, p3_0, gp, ugp, pc), word 41 in qemu 10's
   target_sigcontext (no p3_0: the predicates follow the pc). Which one this qemu writes is found at start-up
   (lowpq_calibrate): a load from address 0 at a known pc, and the word of the context that holds it. */
enum { UC_MCONTEXT = 24, MC_CONTROL = 32, MC_WORDS = 16 };
static int mc_pc = -1;                  /* the pc's word in uc_mcontext; -1 until calibrated */

static void lowpq_capture(uint64_t *out, const void *context) {
    const uint32_t *mc = (const uint32_t *)((const char *)context + UC_MCONTEXT);
    if (mc_pc < 0) {                    /* calibrating: the control words instead of r0..r15 */
        for (int i = 0; i < MC_WORDS; i++) out[5 + i] = mc[MC_CONTROL + i];
        return;
    }
    out[4] = mc[mc_pc];
    for (int i = 0; i < 32; i++) out[5 + i] = mc[i];
}

void lowpq_fault(void);
extern const char lowpq_fault_at[];
__asm__(
    ".text\n"
    ".global lowpq_fault\n"
    ".type lowpq_fault, @function\n"
    ".p2align 4\n"
    "lowpq_fault:\n"
    "  r0 = #0\n"
    ".global lowpq_fault_at\n"
    "lowpq_fault_at:\n"
    "  r0 = memw(r0+#0)\n"
    "  jumpr r31\n"
    ".size lowpq_fault, . - lowpq_fault\n");

static void lowpq_calibrate(void);
#define LOWPQ_SETUP lowpq_calibrate

#include "qemu_driver_common.h"

static void lowpq_calibrate(void) {
    if (lowpq_setjmp(jump) == 0) {
        armed = 1;
        lowpq_fault();
        lowp_exit(10);                  /* the load from address 0 did not fault */
    }
    uint64_t empty = 0;
    lowpq_sys6(SYS_RT_SIGPROCMASK, 2 /* SIG_SETMASK */, (long)&empty, 0, 8, 0, 0);
    for (int i = 0; i < MC_WORDS; i++)
        if (reply[5 + i] == (uint64_t)(uintptr_t)lowpq_fault_at) mc_pc = MC_CONTROL + i;
    if (mc_pc < 0) lowp_exit(11);       /* no word of the context holds the faulting pc */
}

/* v0..v31 for the call: each register's 16 request bytes repeated over its 128 bytes, so a seed gives the same
   state as on the other targets' 16-byte registers. */
static unsigned char vseed[32 * 128] __attribute__((aligned(128)));

static uint64_t lowpq_invoke(const void *frame) {
    const struct frame *f = frame;
    const unsigned char *v = (const unsigned char *)f->v;
    for (unsigned r = 0; r < 32; r++)
        for (unsigned j = 0; j < 128; j++) vseed[r * 128 + j] = v[16 * r + j % 16];
    return (uint64_t)(int64_t)(int32_t)lowpq_call(frame, vseed);     /* r0, sign-extended as a C int would be */
}
