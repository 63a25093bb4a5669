/* lowp's alignment probe (tests/test_alignment.py): a `gemm`-signature kernel that computes nothing but where its
 * buffers are. C[0][0..3] = the addresses of A, B, C and the workspace modulo 64, so every executor can be asked
 * where it placed each buffer for an `align` option. Sizes are `long`, as the 32-bit guests take them. Byte
 * stores only: C itself may be misaligned, and Hexagon and 32-bit Arm trap on a misaligned word store. */
#include <stddef.h>
#include <stdint.h>

long align_probe_workspace(long M, long N, long K) {
    (void)M; (void)N; (void)K;
    return 16;
}

static void put(int32_t *C, long i, uint32_t value) {
    uint8_t *c = (uint8_t *)C + 4 * i;
    for (int b = 0; b < 4; b++) c[b] = (uint8_t)(value >> (8 * b));
}

void align_probe_gemm(long M, long N, long K, const void *A, const void *B, int32_t *C, void *work) {
    (void)K;
    for (long i = 0; i < M * N; i++) put(C, i, 0);
    const void *where[4] = {A, B, C, work};
    for (long i = 0; i < 4 && i < M * N; i++) put(C, i, (uint32_t)((uintptr_t)where[i] % 64));
}
