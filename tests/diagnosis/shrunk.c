/* tests/test_diagnosis.py: scalar u8 x s8 -> s32 GEMMs whose failure, once shrunk, reads differently from the case
 * that found it: the cause a row gives must be the shrunk counterexample's. */
#include <stdint.h>

/* Products summed in int16 lanes (wrapping) flushed into the int32 total every 300 k: the SMLAL bug of a kernel
 * whose spill is wrong, written in C. A deep case names the flush interval; a shrunk one (the first depth at which a
 * lane wraps) cannot tell 300 from any other interval past its depth. */
uint64_t dx_lanes_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void dx_lanes_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t total = 0;
            uint16_t lane = 0;
            for (int64_t k = 0; k < K; ++k) {
                lane = (uint16_t)(lane + (uint16_t)(int16_t)((int32_t)A[i * K + k] * B[k * N + j]));
                if ((k + 1) % 300 == 0) { total += (uint32_t)(int32_t)(int16_t)lane; lane = 0; }
            }
            C[i * N + j] = (int32_t)(total + (uint32_t)(int32_t)(int16_t)lane);
        }
}

/* Reads one byte past the end of each row of A from K = 5 on (a loop bound of K + 1 where the row is long enough
 * to be unrolled), multiplying it by 0: the fault's offset and A's shape depend on the case. */
uint64_t dx_overread_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void dx_overread_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            uint32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (uint32_t)((int32_t)A[i * K + k] * B[k * N + j]);
            if (K >= 5) s += (uint32_t)(((const volatile uint8_t *)A)[i * K + K] & 0);
            C[i * N + j] = (int32_t)s;
        }
}
