/* lowp's alignment probe with XNNPACK's GEMM ukernel ABI (tests/test_alignment.py): each call writes, into the
 * first four bytes of its first row of C, where its pointers a, w, c and params are modulo 64, and zeros into the
 * rest of its rows (mr 1, nr 4). A GEMM of M rows makes M calls, each handed a and c at its row: every executor
 * must place each call's pointers where XNNPACK's operator would, the buffer's offset plus the row's. */
#include <stddef.h>
#include <stdint.h>

void lowp_align_probe_ukernel_1x4(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                  const void *w, int8_t *c, size_t cm_stride, size_t cn_stride, const void *params) {
    (void)mr; (void)kc; (void)a_stride; (void)cm_stride; (void)cn_stride;
    const void *where[4] = {a, w, c, params};
    for (size_t n = 0; n < nc; n++) c[n] = 0;
    for (size_t n = 0; n < 4 && n < nc; n++) c[n] = (int8_t)((uintptr_t)where[n] % 64);
}
