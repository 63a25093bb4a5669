/* lowp's guest driver for qemu-riscv64 (lowp.emulator.qemu, guest RISCV64): one long-lived process serves many
 * kernel calls, with the protocol, buffers between guard pages, canaries and serving loop of qemu_driver_common.h
 * (shared with the AArch64 driver, qemu_driver.c). Linked (target 'riscv64-linux', no libc:
 * linux_runtime_riscv64.c) with a kernel's sources. This file is the RISC-V 64 part (LP64D):
 *
 *   system calls   ecall, number in a7, arguments in a0..a5 (asm-generic numbers, as AArch64's)
 *   setjmp         s0..s11, sp, ra, fs0..fs11: the callee-saved registers of the psABI (riscv-elf-psabi-doc,
 *                  riscv-cc.adoc "Integer Register Convention" / "Floating-point Register Convention")
 *   the call       x[] of the request is x0..x31 by register number: arguments 0..7 in a0..a7 (x10..x17), and
 *                  t0..t6, s0..s11 and a(nargs)..a7 as the seed chose them (x1 ra, x2 sp, x3 gp and x4 tp are the
 *                  driver's); arguments 8.. in 16 stack slots at sp; v0..v31 each filled with its 16 request bytes
 *                  repeated over VLENB (vl8re8.v: whole-register loads, independent of vtype and vl). The
 *                  vector registers are all caller-saved in the psABI; s0..s11 and fs0..fs11 are restored after.
 *   a signal       the RISC-V ucontext's uc_mcontext at 176 (struct sigcontext: sc_regs = pc, x1..x31; Linux
 *                  arch/riscv/include/uapi/asm/{ucontext,sigcontext}.h, qemu linux-user/riscv/signal.c): the
 *                  reply's registers are x0..x31 (x0 reported as 0, sp is x2), HEADER 37 words
 * RISC-V's struct sigaction has no sa_restorer (the kernel returns through the vDSO; asm-generic signal.h without
 * SA_RESTORER), and the handler never returns anyway: it siglongjmps to the serving loop. */
#include <stdint.h>

enum { NX = 32, HEADER = 5 + 32, RET_SLOT = 5 + 10, JUMP_WORDS = 26 };
#define ARG_SLOT(i) (10 + (i))
#define SIGACTION_RESTORER 0

static long lowpq_sys6(long nr, long a, long b, long c, long d, long e, long f) {
    register long a7 __asm__("a7") = nr;
    register long a0 __asm__("a0") = a;
    register long a1 __asm__("a1") = b;
    register long a2 __asm__("a2") = c;
    register long a3 __asm__("a3") = d;
    register long a4 __asm__("a4") = e;
    register long a5 __asm__("a5") = f;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7), "r"(a1), "r"(a2), "r"(a3), "r"(a4), "r"(a5) : "memory");
    return a0;
}

__attribute__((returns_twice)) long lowpq_setjmp(uint64_t *buf);
__attribute__((noreturn)) void lowpq_longjmp(uint64_t *buf, long value);
/* Calls frame->fn with the frame's registers, v0..v31 from vseed (32 * VLENB bytes); returns its a0. */
uint64_t lowpq_call(const void *frame, const void *vseed);
static uint64_t lowpq_invoke(const void *frame);

__asm__(
    ".text\n"
    ".global lowpq_setjmp\n"
    ".type lowpq_setjmp, @function\n"
    "lowpq_setjmp:\n"
    "  sd s0, 0(a0)\n"
    "  sd s1, 8(a0)\n"
    "  sd s2, 16(a0)\n"
    "  sd s3, 24(a0)\n"
    "  sd s4, 32(a0)\n"
    "  sd s5, 40(a0)\n"
    "  sd s6, 48(a0)\n"
    "  sd s7, 56(a0)\n"
    "  sd s8, 64(a0)\n"
    "  sd s9, 72(a0)\n"
    "  sd s10, 80(a0)\n"
    "  sd s11, 88(a0)\n"
    "  sd sp, 96(a0)\n"
    "  sd ra, 104(a0)\n"
    "  fsd fs0, 112(a0)\n"
    "  fsd fs1, 120(a0)\n"
    "  fsd fs2, 128(a0)\n"
    "  fsd fs3, 136(a0)\n"
    "  fsd fs4, 144(a0)\n"
    "  fsd fs5, 152(a0)\n"
    "  fsd fs6, 160(a0)\n"
    "  fsd fs7, 168(a0)\n"
    "  fsd fs8, 176(a0)\n"
    "  fsd fs9, 184(a0)\n"
    "  fsd fs10, 192(a0)\n"
    "  fsd fs11, 200(a0)\n"
    "  li a0, 0\n"
    "  ret\n"
    ".size lowpq_setjmp, . - lowpq_setjmp\n"
    ".global lowpq_longjmp\n"
    ".type lowpq_longjmp, @function\n"
    "lowpq_longjmp:\n"
    "  ld s0, 0(a0)\n"
    "  ld s1, 8(a0)\n"
    "  ld s2, 16(a0)\n"
    "  ld s3, 24(a0)\n"
    "  ld s4, 32(a0)\n"
    "  ld s5, 40(a0)\n"
    "  ld s6, 48(a0)\n"
    "  ld s7, 56(a0)\n"
    "  ld s8, 64(a0)\n"
    "  ld s9, 72(a0)\n"
    "  ld s10, 80(a0)\n"
    "  ld s11, 88(a0)\n"
    "  ld sp, 96(a0)\n"
    "  ld ra, 104(a0)\n"
    "  fld fs0, 112(a0)\n"
    "  fld fs1, 120(a0)\n"
    "  fld fs2, 128(a0)\n"
    "  fld fs3, 136(a0)\n"
    "  fld fs4, 144(a0)\n"
    "  fld fs5, 152(a0)\n"
    "  fld fs6, 160(a0)\n"
    "  fld fs7, 168(a0)\n"
    "  fld fs8, 176(a0)\n"
    "  fld fs9, 184(a0)\n"
    "  fld fs10, 192(a0)\n"
    "  fld fs11, 200(a0)\n"
    "  mv a0, a1\n"
    "  ret\n"
    ".size lowpq_longjmp, . - lowpq_longjmp\n"
    "/* frame: fn @0, x[0..31] @8, v[0..63] @264, stack[0..15] @776; own frame: 16 stack slots @0, ra and s0..s11 @128, fs0..fs11 @232 */\n"
    ".global lowpq_call\n"
    ".type lowpq_call, @function\n"
    "lowpq_call:\n"
    "  addi sp, sp, -336\n"
    "  sd ra, 128(sp)\n"
    "  sd s0, 136(sp)\n"
    "  sd s1, 144(sp)\n"
    "  sd s2, 152(sp)\n"
    "  sd s3, 160(sp)\n"
    "  sd s4, 168(sp)\n"
    "  sd s5, 176(sp)\n"
    "  sd s6, 184(sp)\n"
    "  sd s7, 192(sp)\n"
    "  sd s8, 200(sp)\n"
    "  sd s9, 208(sp)\n"
    "  sd s10, 216(sp)\n"
    "  sd s11, 224(sp)\n"
    "  fsd fs0, 232(sp)\n"
    "  fsd fs1, 240(sp)\n"
    "  fsd fs2, 248(sp)\n"
    "  fsd fs3, 256(sp)\n"
    "  fsd fs4, 264(sp)\n"
    "  fsd fs5, 272(sp)\n"
    "  fsd fs6, 280(sp)\n"
    "  fsd fs7, 288(sp)\n"
    "  fsd fs8, 296(sp)\n"
    "  fsd fs9, 304(sp)\n"
    "  fsd fs10, 312(sp)\n"
    "  fsd fs11, 320(sp)\n"
    "  ld t1, 776(a0)\n"
    "  sd t1, 0(sp)\n"
    "  ld t1, 784(a0)\n"
    "  sd t1, 8(sp)\n"
    "  ld t1, 792(a0)\n"
    "  sd t1, 16(sp)\n"
    "  ld t1, 800(a0)\n"
    "  sd t1, 24(sp)\n"
    "  ld t1, 808(a0)\n"
    "  sd t1, 32(sp)\n"
    "  ld t1, 816(a0)\n"
    "  sd t1, 40(sp)\n"
    "  ld t1, 824(a0)\n"
    "  sd t1, 48(sp)\n"
    "  ld t1, 832(a0)\n"
    "  sd t1, 56(sp)\n"
    "  ld t1, 840(a0)\n"
    "  sd t1, 64(sp)\n"
    "  ld t1, 848(a0)\n"
    "  sd t1, 72(sp)\n"
    "  ld t1, 856(a0)\n"
    "  sd t1, 80(sp)\n"
    "  ld t1, 864(a0)\n"
    "  sd t1, 88(sp)\n"
    "  ld t1, 872(a0)\n"
    "  sd t1, 96(sp)\n"
    "  ld t1, 880(a0)\n"
    "  sd t1, 104(sp)\n"
    "  ld t1, 888(a0)\n"
    "  sd t1, 112(sp)\n"
    "  ld t1, 896(a0)\n"
    "  sd t1, 120(sp)\n"
    /* V for these lines even where the kernel is built without it (ggml's rv64gc variant): qemu's CPU has V */
    "  .option push\n"
    "  .option arch, +v\n"
    "  csrr t1, vlenb\n"
    "  slli t1, t1, 3\n"
    "  vl8re8.v v0, (a1)\n"
    "  add a1, a1, t1\n"
    "  vl8re8.v v8, (a1)\n"
    "  add a1, a1, t1\n"
    "  vl8re8.v v16, (a1)\n"
    "  add a1, a1, t1\n"
    "  vl8re8.v v24, (a1)\n"
    "  .option pop\n"
    "  ld ra, 0(a0)\n"
    "  ld x5, 48(a0)\n"
    "  ld x6, 56(a0)\n"
    "  ld x7, 64(a0)\n"
    "  ld x8, 72(a0)\n"
    "  ld x9, 80(a0)\n"
    "  ld x11, 96(a0)\n"
    "  ld x12, 104(a0)\n"
    "  ld x13, 112(a0)\n"
    "  ld x14, 120(a0)\n"
    "  ld x15, 128(a0)\n"
    "  ld x16, 136(a0)\n"
    "  ld x17, 144(a0)\n"
    "  ld x18, 152(a0)\n"
    "  ld x19, 160(a0)\n"
    "  ld x20, 168(a0)\n"
    "  ld x21, 176(a0)\n"
    "  ld x22, 184(a0)\n"
    "  ld x23, 192(a0)\n"
    "  ld x24, 200(a0)\n"
    "  ld x25, 208(a0)\n"
    "  ld x26, 216(a0)\n"
    "  ld x27, 224(a0)\n"
    "  ld x28, 232(a0)\n"
    "  ld x29, 240(a0)\n"
    "  ld x30, 248(a0)\n"
    "  ld x31, 256(a0)\n"
    "  ld x10, 88(a0)\n"
    "  jalr ra, 0(ra)\n"
    "  ld ra, 128(sp)\n"
    "  ld s0, 136(sp)\n"
    "  ld s1, 144(sp)\n"
    "  ld s2, 152(sp)\n"
    "  ld s3, 160(sp)\n"
    "  ld s4, 168(sp)\n"
    "  ld s5, 176(sp)\n"
    "  ld s6, 184(sp)\n"
    "  ld s7, 192(sp)\n"
    "  ld s8, 200(sp)\n"
    "  ld s9, 208(sp)\n"
    "  ld s10, 216(sp)\n"
    "  ld s11, 224(sp)\n"
    "  fld fs0, 232(sp)\n"
    "  fld fs1, 240(sp)\n"
    "  fld fs2, 248(sp)\n"
    "  fld fs3, 256(sp)\n"
    "  fld fs4, 264(sp)\n"
    "  fld fs5, 272(sp)\n"
    "  fld fs6, 280(sp)\n"
    "  fld fs7, 288(sp)\n"
    "  fld fs8, 296(sp)\n"
    "  fld fs9, 304(sp)\n"
    "  fld fs10, 312(sp)\n"
    "  fld fs11, 320(sp)\n"
    "  addi sp, sp, 336\n"
    "  ret\n"
    ".size lowpq_call, . - lowpq_call\n");

/* The RISC-V ucontext: uc_mcontext at 176 (uc_flags, uc_link, uc_stack 24, uc_sigmask 8, 120 bytes reserved,
   aligned to 16), its sc_regs pc, x1..x31. */
enum { UC_MCONTEXT = 176 };

static void lowpq_capture(uint64_t *out, const void *context) {
    const uint64_t *mc = (const uint64_t *)((const char *)context + UC_MCONTEXT);
    out[4] = mc[0];                             /* pc */
    out[5] = 0;                                 /* x0 */
    for (int i = 1; i < 32; i++) out[5 + i] = mc[i];
}

#include "qemu_driver_common.h"

/* v0..v31 for the call: each register's 16 request bytes repeated over its VLENB bytes (qemu-riscv64 7.2 takes
   VLEN up to 1024 bits: 128 bytes a register), so a seed gives the same state at every VLEN. */
static unsigned char vseed[32 * 128] __attribute__((aligned(16)));

static uint64_t lowpq_invoke(const void *frame) {
    const struct frame *f = frame;
    unsigned long vlenb;
    __asm__ volatile(".option push\n.option arch, +v\ncsrr %0, vlenb\n.option pop" : "=r"(vlenb));
    if (vlenb > 128) lowp_exit(9);
    const unsigned char *v = (const unsigned char *)f->v;
    for (unsigned long r = 0; r < 32; r++)
        for (unsigned long j = 0; j < vlenb; j++) vseed[r * vlenb + j] = v[16 * r + j % 16];
    return lowpq_call(frame, vseed);
}
