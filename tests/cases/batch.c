/* tests/test_batch.py: u8 x s8 -> s32 GEMMs that misbehave in the ways a batch must survive. Each is exact
 * (sums in uint32_t: int32 wrap-around without signed-overflow UB) but:
 *   fault_gemm:  writes one int32 past C when A[0][0] == 77 (a fault at the guard page, in that case only);
 *   inputs_gemm: zeroes A[0][0] after computing C (it changes its input);
 *   canary_gemm: writes one int32 past C (into the over-read its entry allows, a canary, not the guard page);
 *   state_gemm:  from its 50th call on, adds one to C[0][0] (it keeps state between calls);
 *   late_gemm:   from its 3000th call on, adds the low bit of the previous call's A[0][0] to C[0][0] (state that
 *                shows after the generated cases, and differs from call to call);
 *   once_gemm:   on its 100th call only, writes one int32 past C (a canary: a batch cannot pin it on one case);
 *   hang_gemm:   loops forever when A[0][0] == 77. */
#include <stddef.h>
#include <stdint.h>

static void gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (uint32_t)((int32_t)A[i * K + k] * B[k * N + j]);
            C[i * N + j] = (int32_t)s;
        }
}

size_t fault_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void fault_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (A[0] == 77) ((volatile int32_t *)C)[M * N] = 1;
}

size_t inputs_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void inputs_gemm(int64_t M, int64_t N, int64_t K, uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    A[0] = 0;
}

size_t canary_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void canary_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    ((volatile int32_t *)C)[M * N] = 1;
}

static int64_t calls;
size_t state_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void state_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (++calls >= 50) C[0] = (int32_t)((uint32_t)C[0] + 1u);
}

static int64_t late_calls;
static uint8_t late_previous;
size_t late_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void late_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (++late_calls >= 3000) C[0] = (int32_t)((uint32_t)C[0] + (late_previous & 1u));
    late_previous = A[0];
}

static int64_t once_calls;
size_t once_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void once_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (++once_calls == 100) ((volatile int32_t *)C)[M * N] = 1;
}

size_t hang_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void hang_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    while (A[0] == 77) __asm__ volatile("" ::: "memory");
    gemm(M, N, K, A, B, C);
}
