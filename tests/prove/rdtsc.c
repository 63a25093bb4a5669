/* A GEMM that reads the time-stamp counter: lowp prove has no model of RDTSC and must say UNKNOWN, naming it. */
#include <stdint.h>
#include <stddef.h>
#include <x86intrin.h>

size_t rdtsc_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 64; }

void rdtsc_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    volatile uint64_t t = __rdtsc();
    (void)t;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}
