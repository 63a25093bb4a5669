/* tests/test_wasm.py: s8 x s8 -> s32 GEMMs (A M x K, B K x N, row-major) for wasm32 with SIMD128, lowp's own.
 *   simd_gemm:     exact: 8 products at a time, i16x8.extend_low_i8x16_s and i32x4.dot_i16x8_s, then a scalar tail;
 *   notail_gemm:   the same, but it drops the K % 8 tail (a one-bug kernel: wrong wherever K % 8 != 0);
 *   relaxed_gemm:  16 products at a time with i32x4.relaxed_dot_i8x16_i7x16_add_s, B as the second (i7) operand:
 *                  exact only where the engine's relaxed dot reads B's lanes signed (the sdot behaviour); a
 *                  kernel that needs exact s8 x s8 has no business using it (wrong under pmaddubsw, vpdpbusd);
 *   overread_gemm: exact, then reads A one byte past its end (an out-of-bounds read);
 *   spin_gemm:     loops forever when K > 1 (a runaway loop);
 *   trap_gemm:     exact, but __builtin_trap() when K > 1 (a trap). */
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

static int32_t hsum(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
           wasm_i32x4_extract_lane(v, 3);
}

static void simd(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, int tail) {
    int8_t column[8];
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) {
            v128_t acc = wasm_i32x4_splat(0);
            long k = 0;
            for (; k + 8 <= K; k += 8) {
                for (int t = 0; t < 8; t++) column[t] = B[(k + t) * N + j];
                v128_t a = wasm_i16x8_extend_low_i8x16(wasm_v128_load64_zero(A + i * K + k));
                v128_t b = wasm_i16x8_extend_low_i8x16(wasm_v128_load64_zero(column));
                acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(a, b));
            }
            int32_t s = hsum(acc);
            if (tail)
                for (; k < K; k++) s += A[i * K + k] * B[k * N + j];
            C[i * N + j] = s;
        }
}

size_t simd_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void simd_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    simd(M, N, K, A, B, C, 1);
}

size_t notail_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void notail_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    simd(M, N, K, A, B, C, 0);
}

size_t relaxed_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void relaxed_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    int8_t row[16], column[16];
    for (long i = 0; i < M; i++)
        for (long j = 0; j < N; j++) {
            v128_t acc = wasm_i32x4_splat(0);
            for (long k = 0; k < K; k += 16) {
                for (int t = 0; t < 16; t++) {
                    row[t] = k + t < K ? A[i * K + k + t] : 0;
                    column[t] = k + t < K ? B[(k + t) * N + j] : 0;
                }
                acc = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(row), wasm_v128_load(column), acc);
            }
            C[i * N + j] = hsum(acc);
        }
}

size_t overread_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void overread_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    simd(M, N, K, A, B, C, 1);
    C[0] += ((volatile const int8_t *) A)[M * K] & 0;
}

size_t spin_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void spin_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    while (*(volatile const long *) &K > 1) {}
    simd(M, N, K, A, B, C, 1);
}

size_t trap_workspace(long M, long N, long K) { (void)M; (void)N; (void)K; return 0; }
void trap_gemm(long M, long N, long K, const int8_t *A, const int8_t *B, int32_t *C, void *work) {
    (void)work;
    if (K > 1) __builtin_trap();
    simd(M, N, K, A, B, C, 1);
}
