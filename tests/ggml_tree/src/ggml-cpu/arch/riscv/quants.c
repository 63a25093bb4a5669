// lowp's ggml-shaped test tree (tests/ggml_tree/README.md): not ggml's code. RISC-V vec_dots with the V
// extension's intrinsics where the build has V (any VLEN >= 128; clang defines __riscv_v_intrinsic even without
// V, so __riscv_v decides), else the generic ones. q4_0 and q8_0 are right; iq4_nl carries one public bug.
#include "ggml-common.h"
#include "ggml-quants.h"
#include "simd-mappings.h"
#include "quants.h"

#if defined(__riscv_v) && defined(__riscv_v_intrinsic)
#include <riscv_vector.h>

// acc[0] + the widened products of count int8 pairs, in as many strips as VLEN needs
static inline vint32m1_t strip_dot(vint32m1_t acc, const int8_t * GGML_RESTRICT a, const int8_t * GGML_RESTRICT b,
                                   int count) {
    for (int j = 0; j < count;) {
        const size_t vl = __riscv_vsetvl_e8m1(count - j);
        const vint16m2_t p = __riscv_vwmul_vv_i16m2(__riscv_vle8_v_i8m1(a + j, vl), __riscv_vle8_v_i8m1(b + j, vl), vl);
        acc = __riscv_vwredsum_vs_i16m2_i32m1(p, acc, vl);
        j += vl;
    }
    return acc;
}

// one iq4_nl block times its q8_0 block, as an int32: VRGATHER looks the 16 nibbles of each half up in the values
static inline int32_t iq4_nl_block(const block_iq4_nl * GGML_RESTRICT x, const block_q8_0 * GGML_RESTRICT y) {
    const size_t vl = __riscv_vsetvl_e8m1(QK4_NL / 2);          // 16: one register at VLEN >= 128
    const vint8m1_t values = __riscv_vle8_v_i8m1(kvalues_iq4nl, vl);
    const vuint8m1_t packed = __riscv_vle8_v_u8m1(x->qs, vl);
    const vint8m1_t lo = __riscv_vrgather_vv_i8m1(values, __riscv_vand_vx_u8m1(packed, 0x0F, vl), vl);
    const vint8m1_t hi = __riscv_vrgather_vv_i8m1(values, __riscv_vsrl_vx_u8m1(packed, 4, vl), vl);
    vint32m1_t acc = __riscv_vmv_s_x_i32m1(0, 1);
    acc = __riscv_vwredsum_vs_i16m2_i32m1(__riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y->qs, vl), vl), acc, vl);
    acc = __riscv_vwredsum_vs_i16m2_i32m1(__riscv_vwmul_vv_i16m2(hi, __riscv_vle8_v_i8m1(y->qs + QK4_NL / 2, vl), vl), acc, vl);
    return __riscv_vmv_x_s_i32m1_i32(acc);
}

static inline float block_scale(ggml_half dx, ggml_half dy) {
    return GGML_CPU_FP16_TO_FP32(dx) * GGML_CPU_FP16_TO_FP32(dy);
}
#endif

void ggml_vec_dot_q4_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__riscv_v) && defined(__riscv_v_intrinsic)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q4_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        vint32m1_t acc = __riscv_vmv_s_x_i32m1(0, 1);
        for (int j = 0; j < QK4_0 / 2;) {
            const size_t vl = __riscv_vsetvl_e8m1(QK4_0 / 2 - j);
            const vuint8m1_t packed = __riscv_vle8_v_u8m1(x[ib].qs + j, vl);
            const vint8m1_t lo = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vand_vx_u8m1(packed, 0x0F, vl)), 8, vl);
            const vint8m1_t hi = __riscv_vsub_vx_i8m1(__riscv_vreinterpret_v_u8m1_i8m1(__riscv_vsrl_vx_u8m1(packed, 4, vl)), 8, vl);
            acc = __riscv_vwredsum_vs_i16m2_i32m1(__riscv_vwmul_vv_i16m2(lo, __riscv_vle8_v_i8m1(y[ib].qs + j, vl), vl), acc, vl);
            acc = __riscv_vwredsum_vs_i16m2_i32m1(__riscv_vwmul_vv_i16m2(hi, __riscv_vle8_v_i8m1(y[ib].qs + QK4_0 / 2 + j, vl), vl), acc, vl);
            j += vl;
        }
        sumf += __riscv_vmv_x_s_i32m1_i32(acc) * block_scale(x[ib].d, y[ib].d);
    }
    *s = sumf;
#else
    ggml_vec_dot_q4_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

void ggml_vec_dot_q8_0_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__riscv_v) && defined(__riscv_v_intrinsic)
    GGML_ASSERT(n % QK8_0 == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_q8_0 * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK8_0;

    float sumf = 0.0f;
    for (int ib = 0; ib < nb; ++ib) {
        const vint32m1_t acc = strip_dot(__riscv_vmv_s_x_i32m1(0, 1), x[ib].qs, y[ib].qs, QK8_0);
        sumf += __riscv_vmv_x_s_i32m1_i32(acc) * block_scale(x[ib].d, y[ib].d);
    }
    *s = sumf;
#else
    ggml_vec_dot_q8_0_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}

// THE BUG (re-created from llama.cpp #29131, open at ggml d99724f): two blocks a step with `ib + 1 < nb` and no
// tail, so an odd block count drops its last block (nb = 1 returns 0).
void ggml_vec_dot_iq4_nl_q8_0(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
#if defined(__riscv_v) && defined(__riscv_v_intrinsic)
    GGML_ASSERT(n % QK4_NL == 0);
    GGML_ASSERT(nrc == 1);
    GGML_UNUSED(bs); GGML_UNUSED(bx); GGML_UNUSED(by);
    const block_iq4_nl * GGML_RESTRICT x = vx;
    const block_q8_0 * GGML_RESTRICT y = vy;
    const int nb = n / QK4_NL;

    float sumf = 0.0f;
    for (int ib = 0; ib + 1 < nb; ib += 2) {
        sumf += iq4_nl_block(&x[ib], &y[ib]) * block_scale(x[ib].d, y[ib].d);
        sumf += iq4_nl_block(&x[ib + 1], &y[ib + 1]) * block_scale(x[ib + 1].d, y[ib + 1].d);
    }
    *s = sumf;
#else
    ggml_vec_dot_iq4_nl_q8_0_generic(n, s, bs, vx, bx, vy, by, nrc);
#endif
}
