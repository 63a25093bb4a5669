/* u8s8s32 GEMM on AMX-INT8 (TDPBUSD): C[M][N] = sum_k A[M][K] * B[K][N], exact, int32 wrap-around.
 *
 * Tiles (palette 1): tmm0 = C block, 16 rows x 16 int32 columns; tmm1 = A block, 16 rows x 64 bytes (k); tmm2 = B
 * block, 16 rows (k / 4) x 64 bytes (16 columns x 4 consecutive k, VNNI layout). Every block is copied into the
 * workspace with zero padding first, so M, N and K need not be multiples of the tile: a padded k meets a zero byte
 * on both sides, a padded row or column is computed and never stored. TDPBUSD sums the four u8*s8 products of a
 * k-group exactly and adds them to the dword, wrapping (Intel SDM Vol. 2C, TDPBUSD). Linux grants the tile data
 * state on request (arch_prctl ARCH_REQ_XCOMP_PERM): the caller's business, as lowp's native executor does it. */
#include <immintrin.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define TM 16                 /* rows of a C block */
#define TN 16                 /* int32 columns of a C block */
#define TK 64                 /* bytes of k per A block */

struct tilecfg {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

size_t lowp_u8s8s32_amx_workspace(int64_t M, int64_t N, int64_t K) {
    (void)M; (void)N; (void)K;
    return TM * TK + (TK / 4) * TN * 4 + TM * TN * 4 + 64;
}

__attribute__((target("amx-tile,amx-int8")))
void lowp_u8s8s32_amx_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C,
                           void *work) {
    uint8_t *a = (uint8_t *)(((uintptr_t)work + 63) & ~(uintptr_t)63);      /* TM x TK */
    int8_t *b = (int8_t *)(a + TM * TK);                                     /* TK/4 x TN*4 */
    int32_t *c = (int32_t *)(b + (TK / 4) * TN * 4);                         /* TM x TN */
    struct tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    cfg.rows[0] = TM; cfg.colsb[0] = TN * 4;
    cfg.rows[1] = TM; cfg.colsb[1] = TK;
    cfg.rows[2] = TK / 4; cfg.colsb[2] = TN * 4;
    _tile_loadconfig(&cfg);
    for (int64_t i0 = 0; i0 < M; i0 += TM)
        for (int64_t j0 = 0; j0 < N; j0 += TN) {
            _tile_zero(0);
            for (int64_t k0 = 0; k0 < K; k0 += TK) {
                for (int64_t r = 0; r < TM; ++r)
                    for (int64_t t = 0; t < TK; ++t)
                        a[r * TK + t] = (i0 + r < M && k0 + t < K) ? A[(i0 + r) * K + k0 + t] : 0;
                for (int64_t g = 0; g < TK / 4; ++g)
                    for (int64_t col = 0; col < TN; ++col)
                        for (int64_t t = 0; t < 4; ++t) {
                            int64_t k = k0 + 4 * g + t, n = j0 + col;
                            b[g * TN * 4 + col * 4 + t] = (k < K && n < N) ? B[k * N + n] : 0;
                        }
                _tile_loadd(1, a, TK);
                _tile_loadd(2, b, TN * 4);
                _tile_dpbusd(0, 1, 2);
            }
            _tile_stored(0, c, TN * 4);
            for (int64_t r = 0; r < TM && i0 + r < M; ++r)
                memcpy(C + (i0 + r) * N + j0, c + r * TN, (size_t)(N - j0 < TN ? N - j0 : TN) * 4);
        }
    _tile_release();
}
