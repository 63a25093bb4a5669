/* tests/test_verdicts.py: scalar u8 x s8 -> s32 GEMMs, each with one bug lowp's diagnosis must name. Sums are kept
 * in uint32_t (wrapping like the int32 contract, without signed-overflow UB). */
#include <stddef.h>
#include <stdint.h>

static int32_t dot(int64_t K, const uint8_t *a, const int8_t *b, int64_t stride) {
    uint32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += (uint32_t)((int32_t)a[k] * b[k * stride]);
    return (int32_t)s;
}

/* C += A*B: reads C before writing it (right only when C arrives zeroed). */
size_t vt_accum_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void vt_accum_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * N + j] = (int32_t)((uint32_t)C[i * N + j] + (uint32_t)dot(K, A + i * K, B + j, N));
}

/* The column loop stops one early: the last column of C is never written. */
size_t vt_lastcol_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void vt_lastcol_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j + 1 < N; ++j) C[i * N + j] = dot(K, A + i * K, B + j, N);
}

/* Packs B (transposed) into a static buffer, and packs again only when the shape changes: a second call of the same
 * shape with another B computes with the old one. */
static int8_t packed[1 << 21];
static int64_t packed_n = -1, packed_k = -1;
size_t vt_stale_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void vt_stale_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    if (N * K > (int64_t)sizeof packed) return;
    if (N != packed_n || K != packed_k) {
        for (int64_t j = 0; j < N; ++j)
            for (int64_t k = 0; k < K; ++k) packed[j * K + k] = B[k * N + j];
        packed_n = N, packed_k = K;
    }
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * N + j] = dot(K, A + i * K, packed + j * K, 1);
}

/* Accumulates into int32 sums in the workspace that it never zeroes (right only when the workspace arrives zeroed). */
size_t vt_dirtywork_workspace(int64_t M, int64_t N, int64_t K) { (void)K; return (size_t)(M * N * 4); }
void vt_dirtywork_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *work) {
    uint32_t *acc = work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            acc[i * N + j] += (uint32_t)dot(K, A + i * K, B + j, N);
            C[i * N + j] = (int32_t)acc[i * N + j];
        }
}
