/* Shared by bs_kernel.c, bs_dot.c and (through the asm entry's C helper) bs_asm.S's kernel; found through the
   entry's include_dirs. */
#ifndef BS_KERNEL_H
#define BS_KERNEL_H
#include <stdint.h>

/* The dot product of row `a` (K int8s) with column n of B (K x N int8s, row-major), exact in int32 for
   K < 2^17. Defined in bs_dot.c. */
int32_t bs_dot(const int8_t *a, const int8_t *B, int64_t n, int64_t N, int64_t K);
#endif
