"""The float orders of ggml's dot products (lowp.kernels.ggml.orders).

CI (no checkout): each order's structure, against things that could fail: on power-of-two scales every order gives
the exact value (exact.py's domain); on constructed cases two orders differ where their roundings must; and 45
(order, type) pairs equal a small C re-statement (lowp's own C, below: it groups the lanes itself), built with the
host cc, on random scales.

With $LOWP_GGML_CHECKOUT (a ggml checkout, @d99724f measured): ggml's own vec_dots in 26 builds (VARIANTS: ggml's
x86 flag sets natively with the host cc and three with zig cc, AArch64 with NEON, dotprod, i8mm and SVE at three
vector lengths and RISC-V V at four under qemu-user, wasm32 SIMD128 on wasmtime, and each arch's _generic), on
blocks with random normal fp16 scales (a third with 0, subnormal or fp16-max weights' scales), counted equal /
differ against the order `order_for` names. `python tests/test_ggml_orders.py [cases] [build ...]` prints the
table docs/ggml.md records.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from lowp.kernels.ggml.blocks import FORMATS
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, exact_dot, formats_for
from lowp.kernels.ggml.orders import CLANG_TWIN, ORDERS, order_for

pytest.importorskip("gguf", reason="the iq formats' grids come from gguf without a ggml checkout")
F32 = np.float32
CHECKOUT = os.environ.get("LOWP_GGML_CHECKOUT")


# ---- drawing blocks with random (non-power-of-two) scales --------------------------------------------------------
def _normal_fp16(shape, rng, low=-8, high=2) -> np.ndarray:
    """Random normal fp16 values: a random 10-bit mantissa, exponent in [low, high], either sign."""
    mant = 1 + rng.integers(0, 1024, shape) / 1024
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (sign * mant * np.exp2(rng.integers(low, high + 1, shape))).astype(np.float16)


def _scales(rec: np.ndarray, x_type: str, rng) -> None:
    for field in ("d", "m", "dmin"):
        if field in rec.dtype.names and rec.dtype[field].base == np.dtype("<u2"):
            rec[field] = _normal_fp16(rec[field].shape, rng).view(np.uint16)
    if x_type == "mxfp4":
        rec["e"] = rng.integers(118, 134, rec["e"].shape)
    if x_type == "iq1_m":               # its fp16 d lives in the top nibbles of the four scale words
        words = rec["scales"].copy().view("<u2").reshape(len(rec), 4)
        d = _normal_fp16(len(rec), rng).view(np.uint16)
        for w in range(4):
            words[:, w] = (words[:, w] & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12)
        rec["scales"] = words.view(np.uint8).reshape(rec["scales"].shape)


def _activations(y_type: str, nb: int, rng) -> np.ndarray:
    """q8 blocks: codes in [-127, 127] (ggml's precondition), random normal d, stored sums consistent."""
    fmt = formats_for(y_type)[y_type]
    rec = np.zeros(nb, fmt.dtype)
    rec["qs"] = rng.integers(-127, 128, rec["qs"].shape)
    if y_type == "q8_K":
        rec["d"] = (rng.uniform(2.0 ** -8, 4.0, nb) * np.where(rng.random(nb) < 0.5, -1, 1)).astype(np.float32)
        rec["bsums"] = rec["qs"].astype(np.int64).reshape(nb, -1, 16).sum(axis=2)
    else:
        d = _normal_fp16(nb, rng)
        rec["d"] = d.view(np.uint16)
        if y_type == "q8_1":
            rec["s"] = (d.astype(np.float32) * rec["qs"].astype(np.int64).sum(axis=1)).astype(np.float16).view(
                np.uint16)
    return rec.view(np.uint8).reshape(nb, -1)


def draw_random(x_type: str, blocks: int, rng):
    """(x bytes, y bytes, n): random x blocks with random normal scales, random activations."""
    xf, y_type = formats_for(x_type)[x_type], VEC_DOT_TYPE[x_type]
    n = blocks * xf.qk
    x = rng.integers(0, 256, (blocks, xf.dtype.itemsize), dtype=np.uint8)
    _scales(x.reshape(-1).view(xf.dtype), x_type, rng)
    return x, _activations(y_type, n // FORMATS[y_type].qk, rng), n


EDGE_FP16 = np.array([0x0000, 0x0001, 0x03FF, 0x7BFF], np.uint16)     # 0, the least and greatest subnormal, max


def draw_edges(x_type: str, blocks: int, rng):
    """draw_random, then half of x's fp16 scale fields replaced by 0, a subnormal or the fp16 maximum."""
    x, y, n = draw_random(x_type, blocks, rng)
    rec = x.reshape(-1).view(formats_for(x_type)[x_type].dtype)
    for field in ("d", "m", "dmin"):
        if field in rec.dtype.names and rec.dtype[field].base == np.dtype("<u2"):
            edge = EDGE_FP16[rng.integers(0, len(EDGE_FP16), rec[field].shape)]
            rec[field] = np.where(rng.random(rec[field].shape) < 0.5, rec[field], edge)
    return x, y, n


def same_bits(a, b) -> bool:
    a, b = F32(a), F32(b)
    return a.view(np.uint32) == b.view(np.uint32) or (np.isnan(a) and np.isnan(b))


# ---- CI: each order's structure ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ORDERS))
def test_every_order_gives_the_exact_value_on_power_of_two_scales(name):
    """In exact.py's domain every partial sum is a float32 number, so any correct float order returns the exact
    value: an order whose integer parts (lanes, sub-scales, stored sums) were wrong would miss it."""
    from lowp.kernels.ggml.exact import draw
    order = ORDERS[name]
    for x_type in sorted(order.steps):
        rng = np.random.default_rng(sum(map(ord, name + x_type)))
        for blocks in (1, 2, 3, 5):
            x, y, n = draw(x_type, blocks, rng)
            assert same_bits(order.value(x_type, x, y, n), F32(float(exact_dot(x_type, x, y, n)))), \
                (name, x_type, blocks)


def _q8_0_cancelling() -> tuple[np.ndarray, np.ndarray, int]:
    """Two q8_0 blocks whose products cancel: d = dx * dy = (1 + 2^-10)^2 is exact, sumi = +-32 * 127 * 127, and
    d * sumi needs 35 bits. Rounded twice, the second block cancels the first exactly (0); contracted, the FMA
    keeps the first product's rounding error."""
    fmt = FORMATS["q8_0"]
    x, y = np.zeros(2, fmt.dtype), np.zeros(2, fmt.dtype)
    for rec in (x, y):
        rec["d"] = np.float16(1 + 2 ** -10).view(np.uint16)
    x["qs"], y["qs"][0], y["qs"][1] = 127, 127, -127
    return x.view(np.uint8).reshape(2, -1), y.view(np.uint8).reshape(2, -1), 64


def test_contraction_changes_the_generic_result():
    x, y, n = _q8_0_cancelling()
    d = F32(np.float32(1 + 2 ** -10) * np.float32(1 + 2 ** -10))
    residual = np.float64(d) * 516128 - np.float64(F32(d * F32(516128)))     # the product's rounding error
    assert ORDERS["generic"].value("q8_0", x, y, n) == 0
    assert ORDERS["generic-fma"].value("q8_0", x, y, n) == F32(-residual) != 0


def test_avx2_lanes_and_hsum_differ_from_the_sequential_order():
    """One q8_0 block: generic rounds d * sumi once; AVX2 rounds d * lane in each of its 8 lanes and the
    hsum_float_8 tree adds them. Lane 0 holds 4 * 113 * 127 (d times it rounds), lanes 1..7 hold 3 each: the
    tree's three roundings at 2^16 land elsewhere than the block's one."""
    fmt = FORMATS["q8_0"]
    x, y = np.zeros(1, fmt.dtype), np.zeros(1, fmt.dtype)
    x["d"] = np.float16(1 + 2 ** -10).view(np.uint16)
    y["d"] = np.float16(1 - 2 ** -11).view(np.uint16)
    x["qs"] = [113, 113, 113, 113] + [1, 0, 0, 0] * 7
    y["qs"] = [127, 127, 127, 127] + [3, 0, 0, 0] * 7
    xb, yb = x.view(np.uint8).reshape(1, -1), y.view(np.uint8).reshape(1, -1)
    d = F32(F32(1 + 2 ** -10) * F32(1 - 2 ** -11))
    lanes = [F32(d * F32(v)) for v in [4 * 113 * 127] + [3] * 7]
    hsum = F32(F32(F32(lanes[0] + lanes[4]) + F32(lanes[2] + lanes[6])) +
               F32(F32(lanes[1] + lanes[5]) + F32(lanes[3] + lanes[7])))
    assert ORDERS["avx2"].value("q8_0", xb, yb, 32) == hsum
    assert ORDERS["generic-fma"].value("q8_0", xb, yb, 32) == F32(d * F32(4 * 113 * 127 + 21)) != hsum


def test_neon_lane_grouping_follows_dotprod():
    """ggml_vdotq_s32 without dotprod groups bytes (2i, 2i+1, 8+2i, 9+2i) into lane i, SDOT (4i..4i+3): products
    at bytes 0 and 2 share lane 0 with SDOT and split over lanes 0 and 1 without, and the lanes' products with
    d = (1 + 2^-10)^2 round differently."""
    fmt = FORMATS["q8_0"]
    x, y = np.zeros(2, fmt.dtype), np.zeros(2, fmt.dtype)
    for rec in (x, y):
        rec["d"] = np.float16(1 + 2 ** -10).view(np.uint16)
    x["qs"][0, [0, 2, 16]] = [127, 89, 1]
    y["qs"][0, [0, 2, 16]] = [127, 127, 2]
    xb, yb = x.view(np.uint8).reshape(2, -1), y.view(np.uint8).reshape(2, -1)
    from lowp.kernels.ggml.orders import neon_lanes, parts
    p = parts("q8_0", xb, yb, 64)
    assert list(neon_lanes(p, dotprod=True)[0]) == [127 * 127 + 89 * 127 + 2, 0, 0, 0]
    assert list(neon_lanes(p, dotprod=False)[0]) == [127 * 127 + 2, 89 * 127, 0, 0]
    assert ORDERS["neon"].value("q8_0", xb, yb, 64) != ORDERS["neon-dotprod"].value("q8_0", xb, yb, 64)


# a C re-statement of the orders (lowp's own code), built with the host cc without contraction: it takes each
# value's integer product (times its sub-scale) and the float scales from the numpy model, and does the lane
# grouping and the float arithmetic itself (fmaf: libm's correctly rounded FMA)
RESTATED = r"""
#include <math.h>
static float madd(float a, float b, float c, int fused) { return fused ? fmaf(a, b, c) : c + a * b; }
static float hsum8(const float *v) {
    float h[4]; for (int i = 0; i < 4; i++) h[i] = v[4 + i] + v[i];
    return (h[0] + h[2]) + (h[1] + h[3]);
}
static float addv4(const float *v) { return (v[0] + v[1]) + (v[2] + v[3]); }
static float faddv(const float *v, int n) {            /* recursive halves */
    if (n == 1) return v[0];
    return faddv(v, n / 2) + faddv(v + n / 2, n / 2);
}
static int block_sum(const int *v, int qk) { int s = 0; for (int e = 0; e < qk; e++) s += v[e]; return s; }
/* lane l of a block of qk values: the values e with lane_of(e) == l */
enum { FOUR, NEON_SDOT, NEON_FALLBACK, MOD32_BY4, MOD8, WASM };
static int lane_of(int kind, int e) {
    switch (kind) {
    case FOUR: return e / 4;                        /* eight lanes of four consecutive values (of 32) */
    case NEON_SDOT: return (e % 16) / 4;            /* SDOT over two 16-byte halves, added; AVX's quad lanes */
    case NEON_FALLBACK: return (e % 8) / 2;         /* vmull + vpaddl: bytes 2i, 2i+1, 8+2i, 9+2i */
    case MOD32_BY4: return (e % 32) / 4;            /* 256-bit loads of 32, lanes of four */
    case MOD8: return e % 8;                        /* the generic K-quants' aux32[8] */
    default: return (e % 8) / 2;                    /* wasm i32x4_dot_i16x8 over runs of eight */
    }
}
static void lanes(int kind, const int *v, int qk, int n, int *out) {
    for (int l = 0; l < n; l++) out[l] = 0;
    for (int e = 0; e < qk; e++) out[lane_of(kind, e)] += v[e];
}
float generic_q4_0(int nb, const int *v, const float *dx, const float *dy, int fused) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) sumf = madd((float)block_sum(v + 32 * i, 32) * dx[i], dy[i], sumf, fused);
    return sumf;
}
float generic_d_sumi(int nb, const int *v, const float *dx, const float *dy, int fused) {
    float sumf = 0;
    for (int i = 0; i < nb; i++) sumf = madd(dx[i] * dy[i], (float)block_sum(v + 32 * i, 32), sumf, fused);
    return sumf;
}
float generic_with_min(int nb, const int *v, const float *dx, const float *dy, const float *m, const float *s,
                       int fused) {
    float sumf = 0;
    for (int i = 0; i < nb; i++)
        sumf = sumf + madd(dx[i] * dy[i], (float)block_sum(v + 32 * i, 32), m[i] * s[i], fused);
    return sumf;
}
float generic_k_lanes(int nb, const int *v, const float *dx, const float *yd, const int *mins,
                      const float *dmin, int fused) {
    float sums[8] = {0}, sumf = 0; int aux[8];
    for (int i = 0; i < nb; i++) {
        lanes(MOD8, v + 256 * i, 256, 8, aux);
        for (int l = 0; l < 8; l++) sums[l] = madd(dx[i] * yd[i], (float)aux[l], sums[l], fused);
        if (mins) sumf = madd(-(dmin[i] * yd[i]), (float)mins[i], sumf, fused);
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}
float avx2_one(int nb, const int *v, const float *dx, const float *dy) {
    float acc[8] = {0}; int q[8];
    for (int i = 0; i < nb; i++) {
        lanes(FOUR, v + 32 * i, 32, 8, q);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(dx[i] * dy[i], (float)q[l], acc[l]);
    }
    return hsum8(acc);
}
float avx2_two(int nb, const int *v, const float *dx, const float *dy, int fused) {
    float acc[2][8] = {{0}}, both[8]; int pairs = nb / 2 * 2, q[8];
    for (int i = 0; i < pairs; i++) {
        lanes(FOUR, v + 32 * i, 32, 8, q);
        for (int l = 0; l < 8; l++) acc[i % 2][l] = fmaf(dy[i] * dx[i], (float)q[l], acc[i % 2][l]);
    }
    for (int l = 0; l < 8; l++) both[l] = acc[0][l] + acc[1][l];
    float sumf = hsum8(both);
    for (int i = pairs; i < nb; i++) sumf = madd(dy[i] * dx[i], (float)block_sum(v + 32 * i, 32), sumf, fused);
    return sumf;
}
float neon_pairs_d_sumi(int nb, const int *v, const float *dx, const float *dy, int fused, int dotprod) {
    float acc[2][4] = {{0}}; int pairs = nb / 2 * 2, q[4];
    for (int i = 0; i < pairs; i++) {
        lanes(dotprod ? NEON_SDOT : NEON_FALLBACK, v + 32 * i, 32, 4, q);
        for (int l = 0; l < 4; l++) acc[i % 2][l] = madd((float)q[l], dx[i] * dy[i], acc[i % 2][l], fused);
    }
    float sumf = addv4(acc[0]) + addv4(acc[1]);
    for (int i = pairs; i < nb; i++) sumf = madd(dx[i] * dy[i], (float)block_sum(v + 32 * i, 32), sumf, fused);
    return sumf;
}
float avx2_q4_K(int nb, const int *v, const int *bsum_mins, const float *dx, const float *yd, const float *dmin) {
    float acc[8] = {0}, m[4] = {0}; int q[8];
    for (int i = 0; i < nb; i++) {
        for (int l = 0; l < 4; l++) {           /* lane l: the 16s 4l..4l+3 (mins of 32s 2l, 2l+1) */
            int s = 0; for (int j = 4 * l; j < 4 * l + 4; j++) s += bsum_mins[16 * i + j];
            m[l] = fmaf(-(yd[i] * dmin[i]), (float)s, m[l]);
        }
        lanes(MOD32_BY4, v + 256 * i, 256, 8, q);
        for (int l = 0; l < 8; l++) acc[l] = fmaf(yd[i] * dx[i], (float)q[l], acc[l]);
    }
    return hsum8(acc) + ((m[0] + m[2]) + (m[1] + m[3]));
}
float rvv_q6_K_halves(int nb, const int *v, const float *dx, const float *yd) {
    float sumf = 0;
    for (int i = 0; i < nb; i++)
        for (int h = 0; h < 2; h++) sumf = fmaf(dx[i] * yd[i], (float)block_sum(v + 256 * i + 128 * h, 128), sumf);
    return sumf;
}
float avx_pairs_d_sumi(int nb, const int *v, const float *dx, const float *dy, int fused, int contract) {
    float acc[8] = {0}; int pairs = nb / 2 * 2, q[2][4];
    for (int i = 0; i < pairs; i += 2) {
        lanes(NEON_SDOT, v + 32 * i, 32, 4, q[0]);          /* AVX's quad lanes: 4k..4k+3 and 16+4k.. */
        lanes(NEON_SDOT, v + 32 * (i + 1), 32, 4, q[1]);
        for (int l = 0; l < 8; l++) {
            int b = i + l / 4;
            acc[l] = madd(dx[b] * dy[b], (float)q[l / 4][l % 4], acc[l], contract);
        }
    }
    float sumf = hsum8(acc);
    for (int i = pairs; i < nb; i++) sumf = madd(dx[i] * dy[i], (float)block_sum(v + 32 * i, 32), sumf, fused);
    return sumf;
}
float ssse3_q4_0(int nb, const int *v, const float *dx, const float *dy) {
    float acc[4][4] = {{0}}; int pairs = nb / 2 * 2, q[8];
    for (int i = 0; i < pairs; i++) {
        lanes(FOUR, v + 32 * i, 32, 8, q);
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 4; l++) acc[2 * (i % 2) + h][l] += (dx[i] * dy[i]) * (float)q[4 * h + l];
    }
    float r[4];
    for (int k = 0; k < 4; k++) r[k] = (acc[k][0] + acc[k][1]) + (acc[k][2] + acc[k][3]);
    float sumf = (r[0] + r[1]) + (r[2] + r[3]);
    for (int i = pairs; i < nb; i++) sumf += (float)block_sum(v + 32 * i, 32) * dx[i] * dy[i];
    return sumf;
}
float wasm_blocks(int nb, const int *v, const float *dx, const float *dy) {
    float acc[4] = {0}; int q[4];
    for (int i = 0; i < nb; i++) {
        lanes(WASM, v + 32 * i, 32, 4, q);
        for (int l = 0; l < 4; l++) acc[l] = acc[l] + (float)q[l] * (dx[i] * dy[i]);
    }
    return ((acc[0] + acc[1]) + acc[2]) + acc[3];
}
float sve_q8_0(int nb, const int *v, const float *dx, const float *dy, int bits) {
    float acc[2][16] = {{0}}, one[16] = {0}; int pairs = nb / 2 * 2, q[2][8];
    int n = bits == 128 ? 4 : 8, width = bits / 32;
    for (int i = 0; i < pairs; i += 2) {
        for (int k = 0; k < 2; k++) lanes(bits == 128 ? NEON_SDOT : FOUR, v + 32 * (i + k), 32, n, q[k]);
        if (bits == 512) {                       /* both blocks in one 16-lane vector, one accumulator */
            for (int l = 0; l < 16; l++) one[l] = fmaf((float)q[l / 8][l % 8], dx[i + l / 8] * dy[i + l / 8], one[l]);
        } else {
            for (int k = 0; k < 2; k++)
                for (int l = 0; l < n; l++) acc[k][l] = fmaf((float)q[k][l], dx[i + k] * dy[i + k], acc[k][l]);
        }
    }
    float both[16] = {0};
    for (int l = 0; l < 16; l++) both[l] = bits == 512 ? one[l] : acc[0][l] + acc[1][l];
    float sumf = faddv(both, width);
    for (int i = pairs; i < nb; i++) sumf = fmaf(dx[i] * dy[i], (float)block_sum(v + 32 * i, 32), sumf);
    return sumf;
}
"""
RESTATED_DECLS = """
float generic_q4_0(int, const int *, const float *, const float *, int);
float generic_d_sumi(int, const int *, const float *, const float *, int);
float generic_with_min(int, const int *, const float *, const float *, const float *, const float *, int);
float generic_k_lanes(int, const int *, const float *, const float *, const int *, const float *, int);
float avx2_one(int, const int *, const float *, const float *);
float avx2_two(int, const int *, const float *, const float *, int);
float neon_pairs_d_sumi(int, const int *, const float *, const float *, int, int);
float avx2_q4_K(int, const int *, const int *, const float *, const float *, const float *);
float rvv_q6_K_halves(int, const int *, const float *, const float *);
float avx_pairs_d_sumi(int, const int *, const float *, const float *, int, int);
float ssse3_q4_0(int, const int *, const float *, const float *);
float wasm_blocks(int, const int *, const float *, const float *);
float sve_q8_0(int, const int *, const float *, const float *, int);
"""


@pytest.fixture(scope="module")
def restated():
    """The C re-statement, built with the host cc at -O2 -ffp-contract=off (no -mfma: nothing is fused unless
    fmaf says so)."""
    cffi = pytest.importorskip("cffi")
    from lowp.emulator.native_build import NativeUnavailable, build_shared_object
    try:
        path = build_shared_object(RESTATED, "ggml-orders-restated", ("-O2", "-ffp-contract=off"))
    except NativeUnavailable as e:
        pytest.skip(f"no host C compiler: {e}")
    ffi = cffi.FFI()
    ffi.cdef(RESTATED_DECLS)
    return ffi, ffi.dlopen(str(path))


def _c_args(ffi, *arrays):
    out = []
    for a in arrays:
        if a is None:
            out.append(ffi.NULL)
        else:
            a = np.ascontiguousarray(a, np.int32 if np.asarray(a).dtype.kind in "iu" else np.float32)
            out.append(ffi.from_buffer(("int[]" if a.dtype == np.int32 else "float[]"), a))    # keeps a alive
    return out


def _restated_value(ffi, lib, name: str, x_type: str, p) -> F32:
    """The C re-statement of order `name` for x_type, from the per-value integers sub * prod and the scales."""
    nb, fused, v = len(p.prod), int(ORDERS[name].fused), p.sub * p.prod
    if name == "rvv-vl128" and x_type == "q6_K":
        return F32(lib.rvv_q6_K_halves(nb, *_c_args(ffi, v, p.dx, p.yd)))
    if name == "avx2" and x_type == "q4_K":
        return F32(lib.avx2_q4_K(nb, *_c_args(ffi, v, p.bsums * p.min16, p.dx, p.yd, p.dmin)))
    if name.startswith("sve-vl"):
        return F32(lib.sve_q8_0(nb, *_c_args(ffi, v, p.dx, p.yd), int(name[6:])))
    if name in ("avx", "avx-fma", "avx-fma-clang"):
        return F32(lib.avx_pairs_d_sumi(nb, *_c_args(ffi, v, p.dx, p.yd), fused, int(name == "avx-fma")))
    if name == "ssse3":
        return F32(lib.ssse3_q4_0(nb, *_c_args(ffi, v, p.dx, p.yd)))
    if name == "wasm-simd128":
        return F32(lib.wasm_blocks(nb, *_c_args(ffi, v, p.dx, p.yd)))
    if name == "avx2" and x_type in ("iq4_nl", "mxfp4"):
        return F32(lib.avx2_two(nb, *_c_args(ffi, v, p.dx, p.yd), fused))
    if name == "avx2":
        return F32(lib.avx2_one(nb, *_c_args(ffi, v, p.dx, p.yd)))
    if name.startswith("neon"):
        return F32(lib.neon_pairs_d_sumi(nb, *_c_args(ffi, v, p.dx, p.yd), fused, int("dotprod" in name)))
    if x_type == "q4_0":
        return F32(lib.generic_q4_0(nb, *_c_args(ffi, v, p.dx, p.yd), fused))
    if x_type in ("q4_1", "q5_1"):
        return F32(lib.generic_with_min(nb, *_c_args(ffi, v, p.dx, p.yd, p.m, p.s), fused))
    if x_type.endswith("_K"):
        return F32(lib.generic_k_lanes(nb, *_c_args(ffi, v, p.dx, p.yd, p.mins, p.dmin), fused))
    return F32(lib.generic_d_sumi(nb, *_c_args(ffi, v, p.dx, p.yd), fused))


RESTATED_CASES = [(g, t) for g in ("generic", "generic-fma") for t in ("q4_0", "q8_0", "q5_0", "iq4_nl", "q4_1",
                                                                       "q5_1", "q3_K", "q4_K", "q5_K", "q6_K")] + \
                 [("avx2", t) for t in ("q4_0", "q5_0", "q8_0", "iq4_nl", "mxfp4", "q4_K")] + \
                 [(n, t) for n in ("neon", "neon-dotprod", "neon-nofma", "neon-dotprod-nofma") for t in ("q8_0",
                                                                                                        "q5_0")] + \
                 [("rvv-vl128", "q6_K"), ("avx", "q8_0"), ("avx-fma", "q8_0"), ("avx-fma-clang", "q8_0"),
                  ("avx", "iq4_nl"), ("ssse3", "q4_0"), ("wasm-simd128", "q8_0"), ("wasm-simd128", "q5_0"),
                  ("sve-vl128", "q8_0"), ("sve-vl256", "q8_0"), ("sve-vl512", "q8_0")]


@pytest.mark.parametrize("name,x_type", RESTATED_CASES)
def test_order_matches_its_c_restatement_on_random_scales(restated, name, x_type):
    """The numpy float steps (fma_f32's emulation, the hsum and vaddvq trees, the accumulators' order) against
    the same steps done by the CPU in lowp's C, on random normal scales where roundings happen."""
    from lowp.kernels.ggml.orders import parts
    ffi, lib = restated
    rng = np.random.default_rng(sum(map(ord, name + x_type)))
    for i in range(45):
        x, y, n = draw_random(x_type, 1 + i % 9, rng)
        want = _restated_value(ffi, lib, name, x_type, parts(x_type, x, y, n))
        assert same_bits(ORDERS[name].value(x_type, x, y, n), want), (name, x_type, i)


def test_order_for_names_an_order_that_models_the_type():
    """Whatever order_for names exists and has a model for the type; paths not modelled give None."""
    cases = [("x86-64", f, None) for f in (frozenset(), frozenset({"sse4_2", "ssse3"}),
                                           frozenset({"avx", "sse4_2"}), frozenset({"avx", "avx2", "fma"}))]
    cases += [("aarch64", f, None) for f in (frozenset({"asimd"}), frozenset({"asimd", "asimddp"}),
                                             frozenset({"asimd", "sve"}))]
    cases += [("riscv64", f, b) for f in (frozenset(), frozenset({"v"})) for b in (None, 128, 256, 512, 1024)]
    cases += [("aarch64", frozenset({"asimd", "asimddp", "sve"}), b) for b in (128, 256, 512)]
    cases += [("wasm32", f, None) for f in (frozenset(), frozenset({"simd128"}))]
    named = 0
    for arch, features, bits in cases:
        for x_type in VEC_DOT_TYPE:
            name = order_for(arch, features, x_type, bits)
            if name is not None:
                named += 1
                assert x_type in ORDERS[name].steps, (arch, features, x_type, name)
    assert named > 300
    assert order_for("aarch64", frozenset({"asimd", "sve"}), "q4_0") is None       # SVE: not modelled
    assert order_for("riscv64", frozenset({"v"}), "q4_0", 2048) is None            # no such ggml body
    assert order_for("aarch64", frozenset({"asimd", "asimddp", "sve"}), "q4_0") is None    # SVE's length unknown
    assert order_for("powerpc64le", frozenset(), "q4_0") is None


# ---- ggml's own kernels (a checkout), measured ------------------------------------------------------------------
STUB = r"""
#include <stddef.h>
#include <stdint.h>
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
float ggml_table_f32_ue4m3[1 << 8];
void lowp_ggml_set_tables(const float *f16, const float *e8m0, const float *ue4m3) {
    for (int i = 0; i < (1 << 16); i++) ggml_table_f32_f16[i] = f16[i];
    for (int i = 0; i < 256; i++) { ggml_table_f32_e8m0_half[i] = e8m0[i]; ggml_table_f32_ue4m3[i] = ue4m3[i]; }
}
void ggml_abort(const char *file, int line, const char *fmt, ...) {
    (void)file; (void)line; (void)fmt; __builtin_trap();
}
#ifndef LOWP_HAVE_LIBC
float fabsf(float x) { return __builtin_fabsf(x); }
/* the qemu guests have no libc: ldexpf by exact doublings and halvings (ggml_ue4m3_to_fp32 asks only for normal
   results); roundf only serves quantizers, never a vec_dot */
float roundf(float x) { (void)x; __builtin_trap(); }
float ldexpf(float x, int e) {
    for (; e > 0; e--) x *= 2.0f;
    for (; e < 0; e++) x *= 0.5f;
    return x;
}
#endif
#if defined(__ARM_FEATURE_SVE)
#include <arm_sve.h>
int ggml_cpu_get_sve_cnt(void) { return (int)svcntb(); }
#endif
#define TRAP(name) void name(void) { __builtin_trap(); }
TRAP(quantize_iq4_xs) TRAP(quantize_row_iq4_nl_ref) TRAP(quantize_row_mxfp4_ref) TRAP(quantize_row_nvfp4_ref)
TRAP(quantize_row_q1_0_ref) TRAP(quantize_row_q2_0_ref) TRAP(quantize_row_q2_K_ref) TRAP(quantize_row_q3_K_ref)
TRAP(quantize_row_q4_0_ref) TRAP(quantize_row_q4_1_ref) TRAP(quantize_row_q4_K_ref) TRAP(quantize_row_q5_0_ref)
TRAP(quantize_row_q5_1_ref) TRAP(quantize_row_q5_K_ref) TRAP(quantize_row_q6_K_ref) TRAP(quantize_row_q8_0_ref)
TRAP(quantize_row_q8_1_ref) TRAP(quantize_row_q8_K_ref) TRAP(quantize_row_tq1_0_ref) TRAP(quantize_row_tq2_0_ref)
"""
TYPES = sorted(VEC_DOT_TYPE)
PILEDRIVER = ("-msse4.2", "-mavx", "-mf16c", "-mfma")
HASWELL = (*PILEDRIVER, "-mavx2", "-mbmi2")
SKYLAKEX = (*HASWELL, "-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512dq", "-mavx512bw")
X86_PILEDRIVER = frozenset({"sse4_2", "ssse3", "avx", "f16c", "fma"})
X86_HASWELL = X86_PILEDRIVER | {"avx2", "bmi2"}
X86_SKYLAKEX = X86_HASWELL | {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}


@dataclass(frozen=True)
class Variant:
    """One build of ggml's quants: `arch` as order_for names it, the features its flags enable, and whether the
    `_generic` functions are called (their order: generic, contracted where the build has FMA)."""
    name: str
    arch: str
    flags: tuple
    features: frozenset
    vector_bits: int | None = None
    generic: bool = False
    clang: bool = False         # x86 built by zig cc (clang) rather than the host's GCC

    def order(self, x_type: str) -> str | None:
        if self.generic:    # AArch64 and RV64GC always have FMA, wasm never, x86 with -mfma
            fma = {"x86-64": "fma" in self.features, "wasm32": False}.get(self.arch, True)
            return "generic-fma" if fma else "generic"
        name = order_for(self.arch, self.features, x_type, self.vector_bits)
        return CLANG_TWIN.get(name, name) if self.clang else name


VARIANTS = [   # ggml's src/CMakeLists.txt GGML_CPU_ALL_VARIANTS flag sets (x86, ARM) and the RISC-V V builds
    Variant("x64", "x86-64", (), frozenset()),
    Variant("sse42", "x86-64", ("-msse4.2",), frozenset({"sse4_2", "ssse3"})),
    Variant("sandybridge", "x86-64", ("-msse4.2", "-mavx"), frozenset({"sse4_2", "ssse3", "avx"})),
    Variant("piledriver", "x86-64", PILEDRIVER, X86_PILEDRIVER),
    Variant("piledriver clang", "x86-64", PILEDRIVER, X86_PILEDRIVER, clang=True),
    Variant("haswell", "x86-64", HASWELL, X86_HASWELL),
    Variant("skylakex", "x86-64", SKYLAKEX, X86_SKYLAKEX),
    Variant("icelake", "x86-64", (*SKYLAKEX, "-mavx512vbmi", "-mavx512vnni"),
            X86_SKYLAKEX | {"avx512vbmi", "avx512_vnni"}),
    Variant("alderlake", "x86-64", (*HASWELL, "-mavxvnni"), X86_HASWELL | {"avx_vnni"}),
    Variant("haswell clang", "x86-64", HASWELL, X86_HASWELL, clang=True),
    Variant("haswell _generic", "x86-64", HASWELL, X86_HASWELL, generic=True),
    Variant("haswell clang _generic", "x86-64", HASWELL, X86_HASWELL, generic=True, clang=True),
    Variant("armv8-a", "aarch64", ("-march=armv8-a",), frozenset({"asimd"})),
    Variant("armv8.2-a+dotprod", "aarch64", ("-march=armv8.2-a+dotprod",), frozenset({"asimd", "asimddp"})),
    Variant("armv8.6-a+i8mm", "aarch64", ("-march=armv8.6-a+dotprod+i8mm",), frozenset({"asimd", "asimddp", "i8mm"})),
    *(Variant(f"armv8.2-a+sve vl{bits}", "aarch64", ("-march=armv8.2-a+dotprod+sve",),
              frozenset({"asimd", "asimddp", "sve"}), bits) for bits in (128, 256, 512)),
    Variant("armv8-a _generic", "aarch64", ("-march=armv8-a",), frozenset({"asimd"}), generic=True),
    Variant("rv64gcv vl128", "riscv64", ("-march=rv64gcv",), frozenset({"v"}), 128),
    Variant("rv64gcv vl256", "riscv64", ("-march=rv64gcv",), frozenset({"v"}), 256),
    Variant("rv64gcv vl512", "riscv64", ("-march=rv64gcv",), frozenset({"v"}), 512),
    Variant("rv64gcv vl1024", "riscv64", ("-march=rv64gcv",), frozenset({"v"}), 1024),
    Variant("rv64gcv _generic", "riscv64", ("-march=rv64gcv",), frozenset({"v"}), 128, generic=True),
    Variant("wasm32 simd128", "wasm32", ("-msimd128",), frozenset({"simd128"})),
    Variant("wasm32 _generic", "wasm32", ("-msimd128",), frozenset({"simd128"}), generic=True),
]
# llama.cpp #29131: RVV iq4_nl and mxfp4 loop over pairs of blocks (riscv quants.c L5501, L5556, L6492, L6547)
# with no tail, so an odd last block is dropped
DROPS_ODD_LAST_BLOCK = {("riscv64", "iq4_nl"), ("riscv64", "mxfp4")}
# measured here: these RVV bodies miss the exact value even on power-of-two scales (the exact domain), so no float
# order is at stake: riscv quants.c iq2_xxs_vl512 (L4708-4777, taken for VLEN 512 and above), iq2_s_vl1024
# (L4057-4209), iq3_xxs_vl1024 (L5374-5453), under qemu-riscv64 7.2
WRONG_IN_THE_EXACT_DOMAIN = {("riscv64", 512, "iq2_xxs"), ("riscv64", 1024, "iq2_xxs"), ("riscv64", 1024, "iq2_s"),
                             ("riscv64", 1024, "iq3_xxs")}


def tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stub's tables as ggml fills them: fp16 -> fp32, E8M0 halved and UE4M3 halved as blocks.py decodes."""
    from lowp.kernels.ggml.blocks import _e8m0_half, _ue4m3_half
    f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    codes = np.arange(256, dtype=np.uint8)
    return f16, _e8m0_half(codes).astype(np.float32), _ue4m3_half(codes).astype(np.float32)


def ggml_sources(checkout: Path, arch: str) -> list[Path]:
    cpu = checkout / "src" / "ggml-cpu"
    return [cpu / "quants.c", cpu / "arch" / arch / "quants.c"]


def ggml_includes(checkout: Path) -> tuple[str, ...]:
    return ("-std=gnu11", *(f"-I{checkout / p}" for p in ("include", "src", "src/ggml-cpu")))


def vec_dot_symbol(x_type: str, generic: bool, exists) -> str:
    """ggml_vec_dot_<x>_<y>[_generic]: where an arch has no version of its own, arch-fallback.h renames the
    _generic to the plain name, so that is the one to call."""
    name = f"ggml_vec_dot_{x_type}_{VEC_DOT_TYPE[x_type]}"
    return name + "_generic" if generic and exists(name + "_generic") else name


def build_with_clang(sources, flags) -> Path:
    """A shared object built by zig cc (clang) for x86-64 Linux, in lowp's build cache (as native_build builds
    with zig where the host compiler cannot)."""
    from lowp.emulator import buildcache
    from lowp.emulator.build import zig
    from lowp.emulator.native_build import cache_dir
    return buildcache.build(zig(cache_dir()), sources, directory=cache_dir(), stem="ggml-quants-orders-clang",
                            suffix=".so", compile_flags=("-target", "x86_64-linux-gnu", *flags, "-fPIC"),
                            link_flags=("-shared",))


class X86Library:
    """ggml's x86 quants built natively (the host cc, GCC here, or zig cc) with a variant's flags, called through
    cffi."""

    def __init__(self, checkout: Path, flags, stub: Path, clang: bool = False):
        import cffi
        from lowp.emulator.native_build import build_shared_library
        self.ffi = cffi.FFI()
        self.ffi.cdef("void lowp_ggml_set_tables(const float *, const float *, const float *);" + "".join(
            f"void ggml_vec_dot_{t}_{VEC_DOT_TYPE[t]}{g}(int, float *, size_t, const void *, size_t, const void *,"
            " size_t, int);" for t in TYPES for g in ("", "_generic")))
        sources, all_flags = [*ggml_sources(checkout, "x86"), stub], ("-O2", *ggml_includes(checkout), *flags)
        path = build_with_clang(sources, all_flags) if clang else \
            build_shared_library(sources, all_flags, stem="ggml-quants-orders")
        self.lib = self.ffi.dlopen(str(path))
        self.lib.lowp_ggml_set_tables(*(self.ffi.from_buffer("float[]", t) for t in tables()))

    def _exists(self, symbol: str) -> bool:
        try:
            getattr(self.lib, symbol)
        except AttributeError:
            return False
        return True

    def vec_dot(self, x_type: str, x, y, n: int, generic: bool = False) -> F32:
        fn = getattr(self.lib, vec_dot_symbol(x_type, generic, self._exists))
        out = self.ffi.new("float[1]")
        xb, yb = np.ascontiguousarray(x), np.ascontiguousarray(y)
        fn(n, out, 0, self.ffi.from_buffer(xb), 0, self.ffi.from_buffer(yb), 0, 1)
        return F32(out[0])

    def close(self) -> None:
        pass


def zig_libc_includes(triple: str) -> tuple[str, ...]:
    """The musl headers zig ships (ggml includes math.h, string.h, stdlib.h; the guest has no libc)."""
    import ziglang
    base = Path(ziglang.__file__).parent / "lib" / "libc" / "include"
    return tuple(f for d in (f"{triple}-linux-musl", "generic-musl", "any-linux-any")
                 for f in ("-idirafter", str(base / d)))


class QemuLibrary:
    """ggml's quants for AArch64 or RISC-V 64 built with zig cc (clang), run under qemu-user."""

    def __init__(self, checkout: Path, variant: Variant, stub: Path):
        from lowp.emulator.qemu import (AARCH64, RISCV64, QemuMachine, build_for_qemu, riscv64_vector_length_cpu,
                                        vector_length_cpu)
        arm = variant.arch == "aarch64"
        guest, triple, arch = (AARCH64, "aarch64", "arm") if arm else (RISCV64, "riscv64", "riscv")
        binary = build_for_qemu(*ggml_sources(checkout, arch), stub, guest=guest,
                                flags=(*ggml_includes(checkout), *variant.flags, *zig_libc_includes(triple)))
        if arm:
            cpu = {"cpu": vector_length_cpu(variant.vector_bits)} if variant.vector_bits else {}
        else:
            cpu = {"cpu": riscv64_vector_length_cpu(variant.vector_bits)}
        self.machine = QemuMachine(binary, guest=guest, **cpu)
        self.machine.call("lowp_ggml_set_tables", *tables())
        self.restarts = self.machine.restarts

    def vec_dot(self, x_type: str, x, y, n: int, generic: bool = False) -> F32:
        symbol = vec_dot_symbol(x_type, generic, lambda s: s in self.machine.binary.symbols)
        out = self.machine.call(symbol, n, np.zeros(1, np.float32), 0, np.ascontiguousarray(x).reshape(-1), 0,
                                np.ascontiguousarray(y).reshape(-1), 0, 1)
        assert self.machine.restarts == self.restarts, "qemu restarted: the guest's tables are gone"
        return F32(out.arrays[0][0])

    def close(self) -> None:
        self.machine.close()


class WasmLibrary:
    """ggml's wasm quants built with zig cc for wasm32-wasi (lowp.emulator.wasm), run on wasmtime."""

    def __init__(self, checkout: Path, variant: Variant, stub: Path):
        from lowp.emulator.wasm.build import build_for_wasm
        from lowp.emulator.wasm.machine import WasmMachine
        binary = build_for_wasm(*ggml_sources(checkout, "wasm"), stub,
                                flags=(*ggml_includes(checkout), *variant.flags, "-DLOWP_HAVE_LIBC"))
        self.machine = WasmMachine(binary)
        self.machine.call("lowp_ggml_set_tables", *tables())     # the tables are the module's globals: they stay

    def vec_dot(self, x_type: str, x, y, n: int, generic: bool = False) -> F32:
        symbol = vec_dot_symbol(x_type, generic, lambda s: s in self.machine.exports)
        out = self.machine.call(symbol, n, np.zeros(1, np.float32), 0, np.ascontiguousarray(x).reshape(-1), 0,
                                np.ascontiguousarray(y).reshape(-1), 0, 1)
        return F32(out.arrays[0][0])

    def close(self) -> None:
        pass


def library(checkout: Path, variant: Variant, stub_dir: Path):
    stub = stub_dir / "lowp_ggml_stub.c"
    stub.write_text(STUB)
    if variant.arch == "x86-64":
        return X86Library(checkout, variant.flags, stub, variant.clang)
    if variant.arch == "wasm32":
        return WasmLibrary(checkout, variant, stub)
    return QemuLibrary(checkout, variant, stub)


@dataclass
class Tally:
    equal: int = 0
    known: int = 0          # misses that are the known dropped-block bug, checked as such
    total: int = 0
    misses: list = None
    rounded: int = 0        # cases where the order's result is not the exact value rounded once (the order shows)


def misses_the_exact_domain(lib, variant: Variant, x_type: str, cases: int = 9) -> int:
    """How many of `cases` exact-domain draws (power-of-two scales: every order gives the exact value) the kernel
    gets wrong."""
    from lowp.kernels.ggml.exact import draw
    rng = np.random.default_rng(sum(map(ord, x_type)))
    wrong = 0
    for i in range(cases):
        x, y, n = draw(x_type, 1 + i % 9, rng)
        wrong += not same_bits(lib.vec_dot(x_type, x, y, n, variant.generic), F32(float(exact_dot(x_type, x, y, n))))
    return wrong


def measure(lib, variant: Variant, x_type: str, cases: int) -> Tally | None:
    """`cases` random draws (block counts 1..9 in turn; of each 27, the last 9 with edge scales on the weights) of
    x_type on the variant against its order."""
    name = variant.order(x_type)
    if name is None or (variant.arch, variant.vector_bits, x_type) in WRONG_IN_THE_EXACT_DOMAIN:
        return None
    rng = np.random.default_rng(sum(map(ord, variant.name + x_type)))
    tally = Tally(misses=[])
    for i in range(cases):
        blocks = 1 + i % 9
        x, y, n = (draw_edges if i % 27 >= 18 else draw_random)(x_type, blocks, rng)    # a third with edges
        got = lib.vec_dot(x_type, x, y, n, variant.generic)
        want = ORDERS[name].value(x_type, x, y, n)
        tally.total += 1
        tally.rounded += not same_bits(want, F32(float(exact_dot(x_type, x, y, n))))
        if same_bits(got, want):
            tally.equal += 1
        elif (variant.arch, x_type) in DROPS_ODD_LAST_BLOCK and not variant.generic and blocks % 2 and \
                same_bits(got, F32(0) if blocks == 1 else ORDERS[name].value(x_type, x[:-1], y[:-1], n - 32)):
            tally.known += 1
        elif len(tally.misses) < 3:
            tally.misses.append((blocks, float(got), float(want), float(exact_dot(x_type, x, y, n))))
    return tally


@pytest.mark.skipif(not CHECKOUT, reason="LOWP_GGML_CHECKOUT (a ggml checkout, ggml-org/ggml @d99724f measured) "
                                         "is not set: ggml's own kernels are measured only against a checkout")
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_ggml_kernels_follow_their_order(variant, tmp_path):
    """Each type's vec_dot in this build equals the order order_for names, bit for bit, on random-scale blocks
    (the RVV iq4_nl/mxfp4 odd-block drop, llama.cpp #29131, counted apart and checked to be that)."""
    if variant.arch != "x86-64":
        from lowp.emulator.qemu import RISCV64, AARCH64, unavailable
        why = unavailable(AARCH64 if variant.arch == "aarch64" else RISCV64)
        if why:
            pytest.skip(why)
    else:                   # built and called natively: the CPU must have every feature of the flags
        from lowp.kernels.features import host_features
        missing = sorted(variant.features - host_features("x86-64"))
        if missing:
            pytest.skip(f"{variant.name}: this CPU lacks {', '.join(missing)} (the x86 builds run natively here)")
    lib = library(Path(CHECKOUT), variant, tmp_path)
    try:
        for x_type in TYPES:
            tally = measure(lib, variant, x_type, 27)
            if tally is not None:
                assert tally.equal + tally.known == tally.total, (variant.name, x_type, tally)
            if (variant.arch, variant.vector_bits, x_type) in WRONG_IN_THE_EXACT_DOMAIN and not variant.generic:
                assert misses_the_exact_domain(lib, variant, x_type) > 0, (variant.name, x_type, "now right")
    finally:
        lib.close()


def main(cases: int, only: list[str]) -> None:
    """Print the measured table (type x variant: equal/total) for docs/ggml.md; `only`: those variants."""
    import tempfile
    columns = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in [v for v in VARIANTS if not only or v.name in only]:
            lib = library(Path(CHECKOUT), variant, Path(tmp))
            try:
                columns[variant.name] = {t: (variant.order(t), measure(lib, variant, t, cases)) for t in TYPES}
                for t in TYPES:
                    if (variant.arch, variant.vector_bits, t) in WRONG_IN_THE_EXACT_DOMAIN and not variant.generic:
                        print(variant.name, t, "exact domain:", misses_the_exact_domain(lib, variant, t, 90),
                              "of 90 wrong")
            finally:
                lib.close()
    print("| type | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for t in TYPES:
        cells = []
        for name in columns:
            order, tally = columns[name][t]
            if tally is None:
                cells.append("wrong" if order else "-")
            else:
                cell = f"{tally.equal}/{tally.total}"
                cells.append(cell + (f" (+{tally.known} known)" if tally.known else "") +
                             (f" MISS {tally.misses}" if tally.misses else ""))
        print(f"| {t} | " + " | ".join(cells) + " |")
    print("orders:", {name: sorted({columns[name][t][0] for t in TYPES if columns[name][t][0]}) for name in columns})
    tallies = [tally for column in columns.values() for _, tally in column.values() if tally]
    print("cases:", sum(t.total for t in tallies), "equal:", sum(t.equal for t in tallies), "known:",
          sum(t.known for t in tallies), "order's result not the exact value rounded once:",
          sum(t.rounded for t in tallies))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 270, sys.argv[2:])
