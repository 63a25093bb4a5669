/* tests/test_verdicts.py: one x86 kernel that misbehaves in the way its `mode` parameter picks, for the native
 * guard (kernels/guard.c). Mode 0 is a plain exact u8 x s8 GEMM; every other mode computes the same C and then
 * makes one bad access (or, mode 2, computes C from a 32-byte vector load of A, which needs M*K <= 32). */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* Declares M*N int32s and 8 bytes more; mode 5 writes the byte just past that. */
size_t vt_guard_workspace(int64_t M, int64_t N, int64_t K) { (void)K; return (size_t)(M * N * 4 + 8); }

volatile uintptr_t vt_null_address = 0;   /* a null pointer the compiler cannot see (no UB-driven ud2) */
volatile int64_t vt_sink;

/* uint32_t arithmetic: wraps like the int32 contract, without signed-overflow UB. */
static void exact(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (uint32_t)((int32_t)A[i * K + k] * B[k * N + j]);
            C[i * N + j] = (int32_t)s;
        }
}

void vt_guard_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work,
                   int64_t mode) {
    if (mode == 2) {           /* A through one 32-byte load from its start: over-reads A when M*K < 32 */
        uint8_t bytes[32];
        _mm256_storeu_si256((__m256i *)bytes, _mm256_loadu_si256((const __m256i *)A));
        exact(M, N, K, bytes, B, C);
        return;
    }
    exact(M, N, K, A, B, C);
    switch (mode) {
    case 1: vt_sink = ((const volatile uint8_t *)A)[M * K]; break;       /* read one byte past A */
    case 3: ((volatile int32_t *)C)[M * N] = 1; break;                   /* write one int32 past C */
    case 4: ((volatile int32_t *)C)[-1] = 0x7fffffff; break;             /* write C[-1] */
    case 5: ((volatile uint8_t *)work)[M * N * 4 + 8] = 1; break;        /* one byte past the declared workspace */
    case 6: *(volatile int32_t *)vt_null_address = 1; break;             /* null write */
    case 7: for (;;) vt_sink++;                                          /* runaway loop */
    case 8: ((volatile uint8_t *)A)[M * K] = 1; break;                   /* write one byte past A */
    default: break;
    }
}
