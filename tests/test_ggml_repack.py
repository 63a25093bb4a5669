"""ggml's repacked GEMV/GEMM (lowp.kernels.ggml.repack): the packers lay bytes out where a small C re-statement of
make_block_* puts them, and a gemv/gemm that reads the packed bytes by repack.cpp's own index arithmetic (followed
here in numpy, loop for loop) gives `expected`, the exact dot of each weight row by each activation row.

With $LOWP_GGML_CHECKOUT (a ggml checkout), the table is checked against repack.h's declarations, and the real
functions are built and called on exact-domain cases (natively on an AVX2 host).
"""
from __future__ import annotations

import os
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from lowp.kernels.ggml import repack as R
from lowp.kernels.ggml.blocks import FORMATS, KVALUES_FP4, KVALUES_IQ4NL, QK_K, _e8m0_half, _scale_min_k4

F16 = lambda bits: float(np.uint16(bits).view(np.float16))         # noqa: E731 - a ggml_half's value
ZERO_FAMILY = [name for name, r in R.REPACKED.items() if r.x_type in ("q4_0", "q8_0", "iq4_nl", "mxfp4")]
Q4_K = [name for name, r in R.REPACKED.items() if r.x_type == "q4_K" and not r.riscv_zvfh]


# ---- the layout against lowp's C re-statement of make_block_* ------------------------------------------------------
C_MAKE_BLOCK = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
/* lowp's re-statement of repack.cpp's make_block_<type>x<N> quant loop (ggml @d99724f L2766-2775): chunk i of
   the output is `blocklen` bytes of block i % N at (i / N) * blocklen, each byte XORed with `mask`. */
void lowp_interleave(const uint8_t *in, int n, int field, int blocklen, uint8_t mask, uint8_t *out) {
    for (int i = 0; i < n * field / blocklen; i++) {
        int src_id = i % n, src_offset = (i / n) * blocklen, dst_offset = i * blocklen;
        for (int b = 0; b < blocklen; b++) out[dst_offset + b] = in[src_id * field + src_offset + b] ^ mask;
    }
}
/* One q8_0 block as ggml's quantizers make it: d = amax / 127, id = 1 / d (generic, NEON, RVV) or 127 / amax
   (x86 AVX), q = roundf (ties away) or nearbyintf (ties to even, the default rounding mode) of x * id. */
void lowp_quantize_q8_0_block(const float *x, int ratio, int ties_even, float *d_out, int8_t *q) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f;
    float id = ratio ? (amax != 0.0f ? 127.0f / amax : 0.0f) : (d != 0.0f ? 1.0f / d : 0.0f);
    for (int i = 0; i < 32; i++) {
        float v = x[i] * id;
        q[i] = (int8_t)(ties_even ? nearbyintf(v) : roundf(v));
    }
    *d_out = d;
}
/* ggml_quantize_mat_q8_0_4x<bl>'s store order (L162-169) for already-quantized rows: qs[j] of 4 rows x 32. */
void lowp_quantize_mat_order(const int8_t *rows, int blocklen, int8_t *qs) {
    for (int j = 0; j < 32 * 4; j++) {
        int src_offset = (j / (4 * blocklen)) * blocklen;
        int src_id = (j % (4 * blocklen)) / blocklen;
        src_offset += j % blocklen;
        qs[j] = rows[src_id * 32 + src_offset];
    }
}
"""


@pytest.fixture(scope="module")
def c_layout():
    cffi = pytest.importorskip("cffi")
    from lowp.emulator.native_build import NativeUnavailable, build_shared_object
    try:
        path = build_shared_object(C_MAKE_BLOCK, "ggml-repack-layout-test")
    except NativeUnavailable as e:
        pytest.skip(str(e))
    ffi = cffi.FFI()
    ffi.cdef("void lowp_interleave(const uint8_t *, int, int, int, uint8_t, uint8_t *);"
             "void lowp_quantize_mat_order(const int8_t *, int, int8_t *);"
             "void lowp_quantize_q8_0_block(const float *, int, int, float *, int8_t *);")
    return ffi, ffi.dlopen(str(path))


@pytest.mark.parametrize("x_type, ncols, blocklen", [("q4_0", 4, 4), ("q4_0", 4, 8), ("q4_0", 8, 8),
                                                      ("q8_0", 4, 4), ("q8_0", 4, 8), ("iq4_nl", 8, 8),
                                                      ("mxfp4", 4, 4)])
def test_quants_are_where_make_block_puts_them(c_layout, x_type, ncols, blocklen):
    ffi, lib = c_layout
    fmt = FORMATS[x_type]
    rng = np.random.default_rng(ncols * blocklen)
    blocks = rng.integers(0, 256, (ncols, fmt.dtype.itemsize), dtype=np.uint8)
    packed = np.frombuffer(R.make_block(x_type, blocks.reshape(-1).view(fmt.dtype), blocklen).tobytes(), np.uint8)
    qs = np.ascontiguousarray(blocks.view(fmt.dtype)["qs"]).view(np.uint8).reshape(ncols, -1)
    want = np.zeros(qs.size, np.uint8)
    lib.lowp_interleave(ffi.from_buffer("uint8_t[]", qs), ncols, qs.shape[1], blocklen,
                        0x88 if x_type == "q4_0" else 0, ffi.from_buffer("uint8_t[]", want))
    scale_bytes = packed.size - qs.size
    assert np.array_equal(packed[scale_bytes:], want)
    scales = "e" if x_type == "mxfp4" else "d"      # the scales first, in column order
    assert np.array_equal(packed[:scale_bytes], blocks.view(fmt.dtype)[scales].view(np.uint8).reshape(-1))


@pytest.mark.parametrize("blocklen", [4, 8])
def test_activation_quants_are_in_quantize_mat_order(c_layout, blocklen):
    ffi, lib = c_layout
    rng = np.random.default_rng(blocklen)
    rows = rng.integers(0, 256, (4, 1, FORMATS["q8_0"].dtype.itemsize), dtype=np.uint8)
    packed = np.frombuffer(R.pack_activations("q8_0", rows, blocklen), np.uint8)
    qs = np.ascontiguousarray(rows.reshape(4, -1).view(FORMATS["q8_0"].dtype)["qs"]).reshape(-1)
    want = np.zeros(128, np.int8)
    lib.lowp_quantize_mat_order(ffi.from_buffer("int8_t[]", qs), blocklen, ffi.from_buffer("int8_t[]", want))
    assert np.array_equal(packed[8:].view(np.int8), want)
    assert np.array_equal(packed[:8], rows[:, 0, :2].reshape(-1))     # d[4]: each row's fp16 d


@pytest.mark.parametrize("variant", sorted(set(R.QUANTIZE_MAT_VARIANT.values())))
def test_quantize_mat_variants_are_float32_arithmetic_as_c_does_it(c_layout, variant):
    """quantize_mat_q8_0 under each build's variant equals the C re-statement's blocks (float32 division, multiply
    and rounding as the C compiler does them), interleaved, on cases that tell the variants apart."""
    ffi, lib = c_layout
    ratio, ties_even = variant == "x86-avx", variant in ("x86-avx", "neon")
    for kind, x in R.quantize_cases(np.random.default_rng(2), 2):
        rows = np.zeros((4, 2), FORMATS["q8_0"].dtype)
        for r in range(4):
            for b in range(2):
                block = np.ascontiguousarray(x[r, 32 * b:32 * (b + 1)])
                d, q = np.zeros(1, np.float32), np.zeros(32, np.int8)
                lib.lowp_quantize_q8_0_block(ffi.from_buffer("float[]", block), ratio, ties_even,
                                             ffi.from_buffer("float[]", d), ffi.from_buffer("int8_t[]", q))
                rows[r, b]["d"], rows[r, b]["qs"] = d.astype(np.float16).view(np.uint16)[0], q
        want = R.pack_activations("q8_0", rows.view(np.uint8).reshape(4, 2, -1), 8)
        assert R.quantize_mat_q8_0(x, 8, variant) == want, kind


def test_the_quantize_cases_tell_every_variant_apart():
    cases = list(R.quantize_cases(np.random.default_rng(3), 1))
    outputs = {v: [R.quantize_mat_q8_0(x, 4, v) for _, x in cases] for v in set(R.QUANTIZE_MAT_VARIANT.values())}
    distinct = {tuple(o) for o in outputs.values()}
    assert len(distinct) == 3       # ref and rvv-rmm round alike (1 / d, ties away): they differ only past int16


def test_q8_Kx4_bsums_are_in_quantize_mat_order():
    """quantize_mat_q8_K_4x4 accumulates qs[j] into bsums[index(j)] (L253, 4x8 L304): the packed bsums must be
    exactly those sums of the packed quants."""
    rng = np.random.default_rng(5)
    from lowp.kernels.ggml.exact import _activations
    rows = np.stack([_activations("q8_K", 1, 127, rng) for _ in range(4)])
    for blocklen, mask in ((4, 15), (8, 31)):
        packed = np.frombuffer(R.pack_activations("q8_K", rows, blocklen), np.uint8)
        qs = packed[16:16 + 1024].view(np.int8).astype(np.int64)
        sums = np.zeros(64, np.int64)
        for j in range(1024):        # L253 / L304: the index each quant is summed into
            shift = 2 if blocklen == 4 else 3
            sums[(((j & mask) >> shift) << 2) + ((j >> 8) << 4) + ((j >> 6) & 3)] += qs[j]
        assert np.array_equal(packed[16 + 1024:].view("<i2"), sums)


# ---- a gemv/gemm over the packed bytes, by the generic functions' index arithmetic --------------------------------
def _zero_family_code(x_type: str, byte: int, high: bool) -> int:
    """What the generic makes of one packed byte (L787-788 q4_0 after its XOR: (int8)(b << 4) and (int8)(b & 0xF0),
    the >> 4 at L789; L1148-1149 iq4_nl; L1224-1225 mxfp4)."""
    if x_type == "q4_0":
        v = (byte & 0xF0) if high else (byte << 4) & 0xFF
        return (v - 256 if v >= 128 else v)
    nibble = byte >> 4 if high else byte & 0x0F
    return int((KVALUES_IQ4NL if x_type == "iq4_nl" else KVALUES_FP4)[nibble])


def follow_zero_family(name: str, vx: bytes, vy: bytes, n: int, nr: int, nc: int) -> np.ndarray:
    """ggml_gemv/gemm_{q4_0,q8_0,iq4_nl,mxfp4}_*_generic (repack.cpp L754-1564, L1658-2624), loop for loop, with
    exact rational sums (in the exact domain they are what float32 gives)."""
    r = R.REPACKED[name]
    N, bl, qk, nb = r.ncols, r.blocklen, 32, n // 32
    x = np.frombuffer(vx, np.uint8).reshape(nc // N, nb, -1)
    y = np.frombuffer(vy, np.uint8)
    scale_bytes = N if r.x_type == "mxfp4" else 2 * N
    rows = 4 if r.kind == "gemm" else 1
    y = y.reshape(nr // rows, nb, -1)
    out = np.zeros((nr, nc), np.float32)
    steps = qk // bl if r.x_type == "q8_0" else qk // (2 * bl)
    for yg in range(nr // rows):
        for xg in range(nc // N):
            sums = [[Fraction(0)] * N for _ in range(rows)]
            for l in range(nb):
                b, a = x[xg, l], y[yg, l]
                qs, aq = b[scale_bytes:].view(np.int8), a[2 * rows:].view(np.int8)
                for k in range(steps):
                    for m in range(rows):
                        for j in range(N):
                            sumi = 0
                            for i in range(bl):
                                byte = int(qs[k * N * bl + j * bl + i]) & 0xFF
                                lo = (k * rows * bl + m * bl + i) if rows == 4 else (k * bl + i)
                                if r.x_type == "q8_0":
                                    sumi += int(qs[k * N * bl + j * bl + i]) * int(aq[lo])
                                    continue
                                hi = lo + (qk // 2) * rows
                                p = (_zero_family_code(r.x_type, byte, False) * int(aq[lo])
                                     + _zero_family_code(r.x_type, byte, True) * int(aq[hi]))
                                sumi += p >> 4 if r.x_type == "q4_0" else p
                            dx = (float(_e8m0_half(b[j:j + 1])[0]) if r.x_type == "mxfp4"
                                  else F16(b[2 * j:2 * j + 2].view("<u2")[0]))
                            dy = F16(a[2 * m:2 * m + 2].view("<u2")[0])
                            sums[m][j] += Fraction(sumi) * Fraction(dx) * Fraction(dy)
            for m in range(rows):
                out[yg * rows + m, xg * N:(xg + 1) * N] = [np.float32(float(v)) for v in sums[m]]
    return out


def follow_q4_K(name: str, vx: bytes, vy: bytes, n: int, nr: int, nc: int) -> np.ndarray:
    """ggml_gemv/gemm_q4_K_8x{4,8}_q8_K_generic (L887-1027, L1822-1984): the utmp unpacking of the packed scales,
    the quants by k, and the mins times the bsums (gemm: bsums at sb * 8 + m * 4 - (sb % 2) * 6)."""
    r = R.REPACKED[name]
    N, bl, nb = 8, r.blocklen, n // QK_K
    rows = 4 if r.kind == "gemm" else 1
    x = np.frombuffer(vx, np.uint8).reshape(nc // N, nb, -1)
    y = np.frombuffer(vy, np.uint8).reshape(nr // rows, nb, -1)
    per_chunk = 32 // bl            # k per 64 quants (32 bytes): 8 (8x4: k / 8) or 4 (8x8: k >> 2)
    out = np.zeros((nr, nc), np.float32)
    for yg in range(nr // rows):
        for xg in range(nc // N):
            total = [[Fraction(0)] * N for _ in range(rows)]
            for l in range(nb):
                b, a = x[xg, l], y[yg, l]
                d, dmin = b[:16].view("<u2"), b[16:32].view("<u2")
                utmp = _unpack_utmp(b[32:128])
                qs = b[128:]
                ad = a[:4 * rows].view("<f4")
                aq = a[4 * rows:4 * rows + QK_K * rows].view(np.int8)
                bsums = a[4 * rows + QK_K * rows:].view("<i2")
                for k in range(QK_K // (2 * bl)):
                    s0, s1 = utmp[(k // per_chunk) * 32:], utmp[(k // per_chunk) * 32 + 16:]
                    for m in range(rows):
                        for j in range(N):
                            sumi = 0
                            for i in range(bl):
                                byte = int(qs[k * N * bl + j * bl + i])
                                if rows == 1:
                                    base = (k // per_chunk) * 64 + (k % per_chunk) * bl + i
                                    lo, hi = base, base + 32
                                else:
                                    base = (k // per_chunk) * 256 + (k % per_chunk) * 4 * bl + m * bl + i
                                    lo, hi = base, base + 128
                                sumi += (byte & 0xF) * int(aq[lo]) * int(s0[j]) + (byte >> 4) * int(aq[hi]) * int(s1[j])
                            total[m][j] += Fraction(sumi) * Fraction(F16(d[j])) * Fraction(float(ad[m]))
                for sb in range(8):
                    mins = utmp[8 + sb * 16:]
                    for m in range(rows):
                        at = sb * 2 if rows == 1 else sb * 8 + m * 4 - (sb % 2) * 6
                        for j in range(N):
                            total[m][j] -= (Fraction(int(mins[j]) * (int(bsums[at]) + int(bsums[at + 1])))
                                            * Fraction(F16(dmin[j])) * Fraction(float(ad[m])))
            for m in range(rows):
                out[yg * rows + m, xg * N:(xg + 1) * N] = [np.float32(float(v)) for v in total[m]]
    return out


def _unpack_utmp(scales: np.ndarray) -> np.ndarray:
    """The generic's kmask unpacking of the 96 packed scale bytes into utmp (L918-925): per sub-block, 8 scales
    then 8 mins, as bytes."""
    words = scales.view("<u4").astype(np.uint32).reshape(8, 3)
    utmp = np.zeros((8, 4), np.uint32)
    k1, k2, k3 = np.uint32(0x3f3f3f3f), np.uint32(0x0f0f0f0f), np.uint32(0x03030303)
    for sb in range(8):
        u0, u1, u2 = words[sb]
        utmp[sb, 3] = ((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4)
        uaux = u1 & k1
        utmp[sb, 1] = (u2 & k2) | (((u0 >> 6) & k3) << 4)
        utmp[sb, 2] = uaux
        utmp[sb, 0] = u0 & k1
    return utmp.reshape(-1).view(np.uint8)


def _case(name: str, blocks: int, groups: int, seed: int):
    r = R.REPACKED[name]
    rng = np.random.default_rng(seed)
    nc, nr = r.ncols * groups, (1 if r.kind == "gemv" else 4 * groups)
    xs, ys, n = R.draw_case(name, blocks, nc, nr, rng)
    return xs, ys, n, nr, nc


@pytest.mark.parametrize("name", ZERO_FAMILY)
def test_generic_arithmetic_over_the_packed_layout_is_expected(name):
    for blocks, groups in ((1, 1), (2, 2)):
        xs, ys, n, nr, nc = _case(name, blocks, groups, blocks * 7 + groups)
        vx, vy = R.operands(name, xs, ys)
        assert np.array_equal(follow_zero_family(name, vx, vy, n, nr, nc), R.expected(name, xs, ys)), (blocks, groups)


@pytest.mark.parametrize("name", Q4_K)
def test_q4_K_generic_arithmetic_over_the_packed_layout_is_expected(name):
    xs, ys, n, nr, nc = _case(name, 1, 1, 11)
    vx, vy = R.operands(name, xs, ys)
    assert np.array_equal(follow_q4_K(name, vx, vy, n, nr, nc), R.expected(name, xs, ys))


def test_packed_q4_K_scales_unpack_to_each_columns_scales_and_mins():
    """The generic's utmp of make_block_q4_Kx8's 96 bytes is, per sub-block, the 8 columns' get_scale_min_k4."""
    rng = np.random.default_rng(8)
    fmt = FORMATS["q4_K"]
    blocks = rng.integers(0, 256, (8, fmt.dtype.itemsize), dtype=np.uint8).reshape(-1).view(fmt.dtype)
    packed = R.make_block("q4_K", blocks, 8)
    utmp = _unpack_utmp(packed[32:128]).reshape(8, 16)
    sc, mn = _scale_min_k4(blocks["scales"])
    assert np.array_equal(utmp[:, :8], sc.T) and np.array_equal(utmp[:, 8:], mn.T)


def test_gemm_results_are_in_the_row_times_bs_layout():
    """result_matrix reads s[row * bs + col] and checks the floats between rows are untouched."""
    s = np.full(2 * 7, np.float32(np.nan), np.float32)
    s[0:4], s[7:11] = 1, 2
    got, clean = R.result_matrix("ggml_gemm_q4_0_4x4_q8_0", s, 2, 4, 7)
    assert clean and np.array_equal(got, [[1] * 4, [2] * 4])
    s[5] = 0
    assert not R.result_matrix("ggml_gemm_q4_0_4x4_q8_0", s, 2, 4, 7)[1]


# ---- against a ggml checkout ----------------------------------------------------------------------------------------
def _checkout() -> Path:
    root = os.environ.get("LOWP_GGML_CHECKOUT")
    if not root:
        pytest.skip("LOWP_GGML_CHECKOUT is not set (a ggml checkout: the real repack.h and repack.cpp)")
    return Path(root)


def test_the_table_is_repack_h():
    text = (_checkout() / "src" / "ggml-cpu" / "repack.h").read_text()
    declared = set(re.findall(r"void (ggml_ge[mv]{2}_\w+?)(?:_generic)?\(", text))
    assert declared == set(R.REPACKED)
    cpp = (_checkout() / "src" / "ggml-cpu" / "repack.cpp").read_text().splitlines()
    for name, r in R.REPACKED.items():
        assert cpp[r.line - 1].startswith(f"void {name}_generic("), (name, r.line)


@pytest.mark.parametrize("arch, condition", [("x86", "defined(__x86_64__)"), ("arm", "defined(__aarch64__)")])
def test_native_is_what_arch_fallback_does_not_rename(arch, condition):
    """arch-fallback.h renames a _generic function to the plain name where the arch has no native one: NATIVE[arch]
    must be exactly the gemv/gemm functions its section leaves alone."""
    text = (_checkout() / "src" / "ggml-cpu" / "arch-fallback.h").read_text()
    start = text.index(condition)
    end = text.index("#elif", start)
    renamed = set(re.findall(r"#define (ggml_ge[mv]{2}_\w+)_generic ", text[start:end]))
    plain = {name for name, r in R.REPACKED.items() if not r.riscv_zvfh}
    assert set(R.NATIVE[arch]) == plain - renamed


@pytest.fixture(scope="module")
def haswell():
    from lowp.kernels.features import host_arch, host_features
    if host_arch() != "x86-64" or "avx2" not in host_features("x86-64"):
        pytest.skip("the host has no AVX2 (the haswell build runs natively only)")
    runner = R.RepackRunner(R.RepackBuild(_checkout(), "haswell"))
    yield runner
    runner.close()


@pytest.mark.parametrize("name", ["ggml_gemv_q4_0_8x8_q8_0", "ggml_gemm_q4_0_8x8_q8_0", "ggml_gemm_q4_K_8x8_q8_K",
                                  "ggml_gemm_iq4_nl_8x8_q8_0", "ggml_gemv_q8_0_4x8_q8_0"])
def test_real_functions_equal_expected(haswell, name):
    tally = R.measure(haswell, name, np.random.default_rng(35), blocks=(1, 3), groups=(1, 2))
    assert tally.equal == tally.total, tally.first


def _k_blocks(x_type: str, seed: int) -> np.ndarray:
    fmt = FORMATS[x_type]
    return np.random.default_rng(seed).integers(0, 256, (8, fmt.dtype.itemsize), dtype=np.uint8).reshape(-1).view(
        fmt.dtype)


def test_packed_q2_K_scales_are_where_the_generic_reads_them():
    """ggml_gemv_q2_K_8x8_q8_K_generic reads column j's scale of sub-block 2 sb + t at scales[sb * 16 + 2 j + t]
    (L1062-1086: scales_0 + (k / 4) * 64, offset (k / 2) % 2 + j * 2; the mins at sb * 16 + 2 j, L1092-1095)."""
    blocks = _k_blocks("q2_K", 9)
    packed = R.make_block("q2_K", blocks, 8)[32:32 + 128]
    for sb in range(8):
        for j in range(8):
            for t in range(2):
                assert packed[sb * 16 + 2 * j + t] == blocks["scales"][j, 2 * sb + t], (sb, j, t)


def test_packed_q6_K_scales_are_where_the_generic_reads_them():
    """The q6_K generic reads column j's scale s at scales[s * ncols_interleaved + j] (L499-500)."""
    blocks = _k_blocks("q6_K", 10)
    packed = R.make_block("q6_K", blocks, 8)[16:16 + 128].view(np.int8)
    for s in range(16):
        assert np.array_equal(packed[s * 8:(s + 1) * 8], blocks["scales"][:, s]), s


def test_every_selected_layout_has_its_gemv_and_gemm():
    for x_type, choices in R.SELECTED.items():
        for _, family in choices:
            name, _, shape = family.rpartition("_")
            for kind in ("gemv", "gemm"):
                r = R.REPACKED[f"ggml_{kind}_{family}_{R.VEC_DOT_TYPE[x_type]}"]
                assert (r.x_type, f"{r.ncols}x{r.blocklen}") == (x_type, shape)


@pytest.mark.parametrize("name", ["ggml_gemm_q4_0_8x8_q8_0", "ggml_gemm_q6_K_8x8_q8_K"])
def test_drawn_cases_put_every_cross_pair_in_the_exact_domain(name):
    """exact.draw fits each activation row to its own weight row; draw_case must also fit the cross pairs (q6_K's
    full-range activations are past the bound over 4 blocks: test_ggml_exact)."""
    from lowp.kernels.ggml.dot import terms
    from lowp.kernels.ggml.exact import margin
    xs, ys, n, _, _ = _case(name, 4, 1, 3)
    assert all(margin(terms(R.REPACKED[name].x_type, x, y, n)) >= 1 for x in xs for y in ys)


def test_drawn_cases_keep_a_useful_activation_range():
    """Narrowed scales keep the activations' range from collapsing to 0 on a large gemm (with exact.draw's wider
    scale spread, 3 blocks of q4_K times 16 x 16 rows already forced every activation code to 0)."""
    xs, ys, n, _, _ = _case("ggml_gemm_q4_K_8x8_q8_K", 3, 2, 4)
    codes = ys.reshape(-1, FORMATS["q8_K"].dtype.itemsize).reshape(-1).view(FORMATS["q8_K"].dtype)["qs"]
    assert np.abs(codes.astype(int)).max() >= 7


@pytest.fixture(scope="module")
def armv8_6_sve256():
    runner = R.RepackRunner(R.RepackBuild(_checkout(), "armv8.6_1"), 256)
    if runner.unavailable():
        pytest.skip(runner.unavailable())
    yield runner
    runner.close()


@pytest.mark.parametrize("name", ["ggml_gemm_q4_0_8x8_q8_0", "ggml_gemm_q8_0_4x8_q8_0", "ggml_gemm_q4_K_8x8_q8_K"])
def test_real_sve_i8mm_functions_equal_expected(armv8_6_sve256, name):
    """The SVE + i8mm paths, which run only at a 256-bit vector length (arch/arm/repack.cpp L2750, L3774, L5027)."""
    tally = R.measure(armv8_6_sve256, name, np.random.default_rng(35), blocks=(1, 3), groups=(1, 2))
    assert tally.equal == tally.total, tally.first


@pytest.mark.parametrize("symbol, variant", [("ggml_quantize_mat_q8_0_4x8", "x86-avx"),
                                             ("ggml_quantize_mat_q8_0_4x8_generic", "ref"),
                                             ("ggml_quantize_mat_q8_0_4x4", "ref")])
def test_real_quantizers_are_their_variant(haswell, symbol, variant):
    """The haswell build's AVX2 4x8 quantizer (arch/x86/repack.cpp L178-287) is x86-avx; the 4x4 one has no x86
    version (arch-fallback.h L88: the generic renamed, ref)."""
    blocklen = int(symbol.split("_4x")[1][0])
    for kind, x in R.quantize_cases(np.random.default_rng(4), 3):
        assert haswell.quantize(symbol, x) == R.quantize_mat_q8_0(x, blocklen, variant), kind
