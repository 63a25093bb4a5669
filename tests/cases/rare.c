/* tests/test_cases.py: scalar u8 x s8 -> s32 GEMMs for the hypothesis example database. rare_gemm is exact except
 * where K % 11 == 10 and M >= 2, where it adds one to C[0][0] (a search of the right shapes finds it after tens of
 * examples, the database's replay on its first); right_gemm is exact; needle_gemm is exact except for about 64 of
 * the 65,536 values (A[0][0], B[0][0]) can take (a uniform case hits one once in ~1,000: a fuzzing campaign's
 * later seeds find what one run's cases miss). Sums are kept in uint32_t (wrapping like the
 * int32 contract, without signed-overflow UB). */
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

size_t rare_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void rare_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (K % 11 == 10 && M >= 2) C[0] = (int32_t)((uint32_t)C[0] + 1u);
}

size_t right_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void right_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
}

size_t needle_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void needle_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    gemm(M, N, K, A, B, C);
    if (((uint32_t)A[0] * 131u + (uint32_t)(uint8_t)B[0]) % 1031u == 300u) C[0] = (int32_t)((uint32_t)C[0] ^ 1u);
}
