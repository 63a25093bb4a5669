/* lowp's own HVX qs8-qc8w GEMM with XNNPACK's ukernel ABI (signature xnnpack-gemm, fp32_scalar params), run under
 * qemu-hexagon: 1 row x 32 columns, c4 packing (per 32 columns: 32 int32 biases, then per 4 k the 32 columns' 4
 * bytes each, then 32 float scales). The shape of XNNPACK's hvx kernels (src/qs8-gemm/c4-hvx.c.in): vsplat of 4
 * A bytes, Vw += vrmpy(Vb, Vb), lrintf per lane, vpack w->h sat, vadd h sat zp, vpack h->b sat, vmax / vmin, a
 * masked store of nc bytes. Written for lowp's tests; one-bug versions by define:
 *   LOWP_BUG_A_STRIDE16  k 4..7 read from a + 16 (XNNPACK @75db3c0's aligned path: (const int32_t*) a + 4)
 *   LOWP_BUG_ZP_WRAP     the zero point added with a wrapping vadd (Vh) instead of vadd:sat
 *   LOWP_BUG_PACK_ORDER  vpack's operands swapped where two accumulators share a pack (columns 0-31 go high)
 *   LOWP_BUG_STORE_ALL   all 32 bytes stored whatever nc (writes past C's row) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <hexagon_types.h>
#include <hexagon_protos.h>
#include <hvx_hexagon_protos.h>

union lowp_params { struct { int16_t output_zero_point, output_min, output_max; } fp32_scalar; };

static HVX_Vector rescale(HVX_Vector vacc, HVX_Vector vscale) {
    int32_t acc[32] __attribute__((aligned(128)));
    float scale[32] __attribute__((aligned(128)));
    *(HVX_Vector *)acc = vacc;
    *(HVX_Vector *)scale = vscale;
    for (int i = 0; i < 32; i++) acc[i] = (int32_t)lrintf((float)acc[i] * scale[i]);
    return *(HVX_Vector *)acc;
}

static void store(int8_t *c, size_t n, HVX_Vector v) {        /* n <= 32 bytes at c, through an aligned block */
    int8_t block[256] __attribute__((aligned(128)));
    *(HVX_Vector *)block = v;
    memcpy(c, block, n);
}

static int32_t load4(const int8_t *p) { int32_t v; memcpy(&v, p, 4); return v; }

void lowp_qs8_qc8w_gemm_1x32c4__hvx(size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride,
                                    const void *w, int8_t *c, size_t cm_stride, size_t cn_stride,
                                    const union lowp_params *params) {
    (void)mr, (void)a_stride, (void)cm_stride;
    kc = (kc + 3) & ~(size_t)3;
    const HVX_Vector vzp = Q6_Vh_vsplat_R(params->fp32_scalar.output_zero_point);
    const HVX_Vector vmin = Q6_Vb_vsplat_R(params->fp32_scalar.output_min);
    const HVX_Vector vmax = Q6_Vb_vsplat_R(params->fp32_scalar.output_max);
    do {
        HVX_Vector vacc = *(const HVX_Vector *)w; w = (const int8_t *)w + 128;
        const int8_t *a0 = a;
        size_t k = kc;
        for (; k >= 8; k -= 8) {
            const HVX_Vector va0 = Q6_V_vsplat_R(load4(a0));
#ifdef LOWP_BUG_A_STRIDE16
            const HVX_Vector va1 = Q6_V_vsplat_R(load4(a0 + 16));
#else
            const HVX_Vector va1 = Q6_V_vsplat_R(load4(a0 + 4));
#endif
            a0 += 8;
            const HVX_Vector vb0 = *(const HVX_Vector *)w; w = (const int8_t *)w + 128;
            const HVX_Vector vb1 = *(const HVX_Vector *)w; w = (const int8_t *)w + 128;
            vacc = Q6_Vw_vrmpyacc_VwVbVb(vacc, va0, vb0);
            vacc = Q6_Vw_vrmpyacc_VwVbVb(vacc, va1, vb1);
        }
        if (k != 0) {
            const HVX_Vector va0 = Q6_V_vsplat_R(load4(a0));
            const HVX_Vector vb0 = *(const HVX_Vector *)w; w = (const int8_t *)w + 128;
            vacc = Q6_Vw_vrmpyacc_VwVbVb(vacc, va0, vb0);
        }
        vacc = rescale(vacc, *(const HVX_Vector *)w); w = (const int8_t *)w + 128;
#ifdef LOWP_BUG_PACK_ORDER
        HVX_Vector vout = Q6_Vh_vpack_VwVw_sat(vacc, Q6_V_vsplat_R(0));
#else
        HVX_Vector vout = Q6_Vh_vpack_VwVw_sat(Q6_V_vsplat_R(0), vacc);
#endif
#ifdef LOWP_BUG_ZP_WRAP
        vout = Q6_Vh_vadd_VhVh(vout, vzp);
#else
        vout = Q6_Vh_vadd_VhVh_sat(vout, vzp);
#endif
        HVX_Vector vb = Q6_Vb_vpack_VhVh_sat(vout, vout);
        vb = Q6_Vb_vmin_VbVb(Q6_Vb_vmax_VbVb(vb, vmin), vmax);
        if (nc >= 32) {
            store(c, 32, vb);
            c = (int8_t *)((uintptr_t)c + cn_stride);
            nc -= 32;
        } else {
#ifdef LOWP_BUG_STORE_ALL
            store(c, 32, vb);
#else
            store(c, nc, vb);
#endif
            nc = 0;
        }
    } while (nc != 0);
}

/* The target's guarantees: a read one byte past the end of A, and a loop that never ends. */
int32_t lowp_hvx_read_past(const int8_t *a, size_t n) {
    int32_t s = 0;
    for (size_t i = 0; i <= n; i++) s += a[i];
    return s;
}

void lowp_hvx_spin(volatile int32_t *flag) {
    while (*flag == 0) {}
}
