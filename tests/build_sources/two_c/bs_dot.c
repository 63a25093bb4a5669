/* The helper of a two-file kernel: its own translation unit, so the entry reaches it through the linker. */
#include "bs_kernel.h"

int32_t bs_dot(const int8_t *a, const int8_t *B, int64_t n, int64_t N, int64_t K) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k)
        sum += (int32_t)a[k] * (int32_t)B[k * N + n];
    return sum;
}
