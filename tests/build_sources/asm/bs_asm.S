// An AArch64 kernel entry in assembly with a C helper (bs_dot.c): for each C element it calls
// int32_t bs_dot(const int8_t *a, const int8_t *B, int64_t n, int64_t N, int64_t K) (AAPCS64: arguments in
// x0-x4, result in w0; x19-x25, x29 and x30 preserved here, the helper may clobber x0-x18).
#include "bs_asm.h"

    .text
    .globl  bs_asm_workspace
    .type   bs_asm_workspace, %function
bs_asm_workspace:                       // size_t bs_asm_workspace(int64_t M, int64_t N, int64_t K): none
    mov     x0, #0
    ret
    .size   bs_asm_workspace, . - bs_asm_workspace

    .globl  bs_asm_gemm
    .type   bs_asm_gemm, %function
// void bs_asm_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *work)
bs_asm_gemm:
    stp     x29, x30, [sp, #-BS_FRAME]!
    mov     x29, sp
    stp     x19, x20, [sp, #16]
    stp     x21, x22, [sp, #32]
    stp     x23, x24, [sp, #48]
    str     x25, [sp, #64]
    mov     x19, x0                     // rows left
    mov     x20, x1                     // N
    mov     x21, x2                     // K
    mov     x22, x3                     // this row of A
    mov     x23, x4                     // B
    mov     x24, x5                     // the next C element
    cbz     x19, 3f
1:  cbz     x20, 2f
    mov     x25, #0                     // n
4:  mov     x0, x22
    mov     x1, x23
    mov     x2, x25
    mov     x3, x20
    mov     x4, x21
    bl      bs_dot
    str     w0, [x24], #BS_C_BYTES
    add     x25, x25, #1
    cmp     x25, x20
    b.lt    4b
2:  add     x22, x22, x21               // the next row of A: K bytes on
    subs    x19, x19, #1
    b.ne    1b
3:  ldr     x25, [sp, #64]
    ldp     x23, x24, [sp, #48]
    ldp     x21, x22, [sp, #32]
    ldp     x19, x20, [sp, #16]
    ldp     x29, x30, [sp], #BS_FRAME
    ret
    .size   bs_asm_gemm, . - bs_asm_gemm
