/* tests/test_verdicts.py: shows what a kernel is handed and keeps, on both targets (native x86 and emulated
 * AArch64; freestanding: no libc). mode 0 leaves C as it arrived; mode 1 copies the workspace into C; mode 2 writes
 * C[0] = the number of calls this copy of the kernel has seen (static state), the rest 0. */
#include <stddef.h>
#include <stdint.h>

static int32_t calls;

size_t vt_probe_workspace(int64_t M, int64_t N, int64_t K) { (void)K; return (size_t)(M * N * 4); }

void vt_probe_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work,
                   int64_t mode) {
    (void)K; (void)A; (void)B;
    if (mode == 1) {
        const volatile uint8_t *w = work;
        volatile uint8_t *c = (volatile uint8_t *)C;
        for (int64_t i = 0; i < M * N * 4; ++i) c[i] = w[i];
    } else if (mode == 2) {
        calls += 1;
        for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
        C[0] = calls;
    }
}
