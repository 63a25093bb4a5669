/* The pair-saturating reading of a batch (contracts.int32.pair_saturating, VPMADDUBSW then VPMADDWD by ones), for
 * u8 A and s8 B: C[c][m][n] = sum over pairs (k, k+1), k even, of sat16(A[m][k] * B[k][n] + A[m][k+1] * B[k+1][n]),
 * the pair sums added wrapping in 32 bits. A plain loop the compiler vectorises: batch.pair_saturating3 calls it
 * where numpy's passes over an (n, P, M, N) tensor of pair sums cost ten times as much, and checks it against the
 * per-case model on every batch's first case (docs/batch.md). An odd K's last pair has one product. */
#include <stdint.h>

static inline int32_t sat16(int32_t s) { return s > 32767 ? 32767 : s < -32768 ? -32768 : s; }

void lowp_pair_saturating_u8s8(int64_t cases, int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B,
                               int32_t *C) {
    for (int64_t c = 0; c < cases; ++c) {
        const uint8_t *a = A + c * M * K;
        const int8_t *b = B + c * K * N;
        uint32_t *out = (uint32_t *)(C + c * M * N);     /* unsigned: the 32-bit wrap is defined */
        for (int64_t m = 0; m < M; ++m) {
            uint32_t *row = out + m * N;
            for (int64_t n = 0; n < N; ++n) row[n] = 0;
            int64_t k = 0;
            for (; k + 1 < K; k += 2) {
                int32_t a0 = a[m * K + k], a1 = a[m * K + k + 1];
                const int8_t *b0 = b + k * N, *b1 = b0 + N;
                for (int64_t n = 0; n < N; ++n) row[n] += (uint32_t)sat16(a0 * b0[n] + a1 * b1[n]);
            }
            if (k < K) {
                int32_t a0 = a[m * K + k];
                const int8_t *b0 = b + k * N;
                for (int64_t n = 0; n < N; ++n) row[n] += (uint32_t)(a0 * b0[n]);
            }
        }
    }
}
