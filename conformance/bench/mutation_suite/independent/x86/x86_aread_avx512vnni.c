/* X5: u8 x s8 -> s32, one output at a time with 512-bit VPDPBUSD over 64 k per step. B transposed into the
 * workspace and zero-padded to a multiple of 64 in k, so whatever A bytes lie beyond the row multiply zeros.
 * A is read in place with unmasked 64-byte loads, "like XNNPACK's XNN_OOB_READS"; declared overread A = 16.
 * BUG: the tail load reads up to 63 bytes past the end of the row, i.e. past the end of A on the last row,
 * far more than the 16 bytes declared. (A masked load, _mm512_maskz_loadu_epi8, was meant.) */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define KB 64
#define RUP(x, m) (((x) + (m) - 1) / (m) * (m))

size_t x86_aread_avx512vnni_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M;
    return (size_t)N * RUP(K, KB);
}

void x86_aread_avx512vnni_gemm(int64_t M, int64_t N, int64_t K, const void *A_, const void *B_, int32_t *C, void *work) {
    const uint8_t *A = A_;
    const int8_t *B = B_;
    const int64_t Kp = RUP(K, KB);
    int8_t *Bt = work;
    for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < Kp; ++k) Bt[j * Kp + k] = k < K ? B[k * N + j] : 0;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            __m512i acc = _mm512_setzero_si512();
            for (int64_t k = 0; k < K; k += KB)
                acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(A + i * K + k), _mm512_loadu_si512(Bt + j * Kp + k));
            C[i * N + j] = _mm512_reduce_add_epi32(acc);
        }
}
