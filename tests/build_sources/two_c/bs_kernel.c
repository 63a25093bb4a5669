/* A kernel of two C files (this entry and bs_dot.c), a header directory and defines, as a TOML entry gives
   them: include_dirs = ["two_c/include"], defines = ["BS_OFFSET=0", "BS_CHECKED"]. Portable C: the same
   files build for x86-64 (gcc) and AArch64 (zig). */
#include <stddef.h>
#include <stdint.h>

#include "bs_kernel.h"

#ifndef BS_OFFSET
#error "BS_OFFSET comes from the entry's defines"
#endif
#ifndef BS_CHECKED
#error "BS_CHECKED comes from the entry's defines"
#endif

size_t bs_two_c_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M, (void)N, (void)K;
    return 0;
}

void bs_two_c_gemm(int64_t M, int64_t N, int64_t K, const void *A, const void *B, int32_t *C, void *work) {
    (void)work;
    const int8_t *a = A, *b = B;
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
            C[m * N + n] = bs_dot(a + m * K, b, n, N, K) + BS_OFFSET;
}
