"""The XNNPACK ABI as XNNPACK ships it (google/XNNPACK @75db3c0): every params layout of the int8 datatypes as the
init functions fill them, XNNPACK's own names (init and pack functions, test YAML entries), the 4-bit packers, the
IGEMM indirection buffer, qdu8, rndnu16 and strided A and C, checked against independent readings written here
(loops as packing.cc states them, the init functions' arithmetic) and with lowp's own small XNNPACK-style kernels
(tests/xnnpack/kernels.toml) on every executor: natively, on Bochs, under Unicorn and qemu-aarch64."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import runner

from lowp.kernels import executor, xnnpack

from .conftest import registered

HERE = Path(__file__).resolve().parent / "xnnpack"
F32 = np.float32


@pytest.fixture(scope="module")
def ks():
    """The test kernels, taken out again after the module (qb4w.toml's claim no output contract a later CLI run
    would accept: left registered, they made `lowp prove` in a later module exit 2)."""
    with registered(HERE / "kernels.toml") as kernels, registered(HERE / "qb4w.toml") as qb4w:
        yield {**kernels, **qb4w}


def _operands(k, rng, M, N, K):
    (alo, ahi), (blo, bhi) = k.domain.a, k.domain.b
    return (rng.integers(alo, ahi + 1, (M, K)).astype(k.a_dtype),
            rng.integers(blo, bhi + 1, (K, N)).astype(k.b_dtype))


def _params(k, A, B, seed=0, style="typical"):
    from lowp.conformance.search.quantized import draw_params
    return draw_params(k, A, B, seed, style)


def _judged(k, A, B, q, C):
    from lowp.conformance.search.quantized import judge
    return judge(k.output, k, A, B, q, C)


def _agrees(k, A, B, q, C) -> bool:
    """The kernel's output equals its model bit for bit and passes its output-stage contract."""
    return C.tobytes() == k.predict(A, B, q).tobytes() and _judged(k, A, B, q, C)[0]


# ---- params layouts, filled as XNNPACK's init functions fill them -------------------------------------------------
def _blob(datatype, layout, q, **kw):
    return xnnpack.params_blob(datatype, layout, q, **kw).view(xnnpack.PARAMS_LAYOUTS[(datatype, layout)])[0]


Q8 = {"output_zero_point": -3, "output_min": -100, "output_max": 90, "scale": np.full(4, 0.0625, F32),
      "bias": np.zeros(4, np.int32)}
QU8 = {**Q8, "output_zero_point": 131, "output_min": 2, "output_max": 250, "b_zero_point": 77}


def test_qc8w_fp32_neonv8_holds_the_int8_clamp_in_uint8_fields():
    """xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params (microparams-init.c L62-73) stores int8 output_min/max in
    the uint8 fields of its struct (microparams.h L249-253): the bits, -100 as 156."""
    p = _blob("qs8-qc8w", "fp32_neonv8", Q8)
    assert (int(p["output_zero_point"]), int(p["output_min"]), int(p["output_max"])) == (-3, 156, 90)
    assert xnnpack.PARAMS_LAYOUTS[("qs8-qc8w", "fp32_neonv8")].itemsize == 4


def test_magic_bias_layouts_hold_the_magic_less_the_zero_point():
    """fp32_neon and fp32_armsimd32: 12582912.0f and 0x4B400000 - output_zero_point; armsimd32 repeats the clamp's
    byte four times and qu8's -kernel_zero_point as two uint16 halves (microparams-init.c L34-58, L304-345)."""
    p = _blob("qs8-qc8w", "fp32_neon", Q8)
    assert p["magic_bias"] == F32(12582912.0) and int(p["magic_bias_less_output_zero_point"]) == 0x4B400000 + 3
    assert (int(p["output_min"]), int(p["output_max"])) == (-100, 90)
    p = _blob("qs8", "fp32_armsimd32", Q8)
    assert p["scale"] == F32(0.0625) and int(p["output_min"]) == 0x9C9C9C9C and int(p["output_max"]) == 0x5A5A5A5A
    p = _blob("qu8", "fp32_armsimd32", QU8)
    assert int(p["minus_kernel_zero_point"]) == ((-77) & 0xFFFF) * 0x00010001
    assert int(p["magic_bias_less_zero_point"]) == 0x4B400000 - 131 and int(p["output_min"]) == 0x02020202
    p = _blob("qu8", "fp32_neonv8", QU8)
    assert (int(p["kernel_zero_point"]), p["scale"], int(p["output_zero_point"])) == (77, F32(0.0625), 131)


@pytest.mark.parametrize("scale", [2.0 ** -32, 0.0625, 0.7, 1.0, float(np.nextafter(F32(256), F32(0)))])
def test_rndnu_scalar_params_from_the_scale_bits(scale):
    """xnn_init_qs8_conv_minmax_rndnu_scalar_params (L92-122): multiplier = mantissa with its hidden bit,
    shift = 127 + 23 - biased exponent, rounding = 1 << (shift - 1); qu8's also carries the kernel zero point."""
    bits = int(F32(scale).view(np.uint32))
    shift = 150 - (bits >> 23)
    for datatype, q in (("qs8", Q8), ("qu8", QU8)):
        p = _blob(datatype, "rndnu_scalar", {**q, "scale": np.full(4, scale, F32)})
        assert (int(p["multiplier"]), int(p["shift"]), int(p["rounding"])) == \
            ((bits & 0x7FFFFF) | 0x800000, shift, 1 << (shift - 1))
        assert int(p["output_zero_point"]) == q["output_zero_point"]
    assert int(_blob("qu8", "rndnu_scalar", {**QU8, "scale": np.full(4, scale, F32)})["kernel_zero_point"]) == 77


def _rndnu16_reading(scale):
    """parse_f32 and xnn_init_qu8_conv_minmax_rndnu16_scalar_params as plain integers (requantization.h L72-82,
    microparams-init.c L124-154; math_asr_s32_rounding rounds half up)."""
    bits = int(F32(scale).view(np.uint32))
    exp, m24 = (bits >> 23) - 127, (bits & 0x7FFFFF) | 0x800000
    m15 = (m24 + 256) >> 9
    if m15 == 32768:
        m15, exp = 16384, exp + 1
    return exp + 1, m15


@pytest.mark.parametrize("scale", [2.0 ** -32, 0.001, 0.5, 1.0, 3.3,
                                   float(np.nextafter(F32(2.0), F32(0))),      # the mantissa rounds up to 2^15
                                   float(np.nextafter(F32(256), F32(0)))])
def test_rndnu16_params(scale):
    p = _blob("qu8", "rndnu16_scalar", {**QU8, "scale": np.full(4, scale, F32)})
    assert (int(p["left_pre_shift"]), int(p["multiplier"])) == _rndnu16_reading(scale)
    assert (int(p["kernel_zero_point"]), int(p["output_zero_point"]), int(p["output_min"]),
            int(p["output_max"])) == (77, 131, 2, 250)


def test_float_layouts_carry_the_clamp_blocksize_and_kernel_zero_point():
    q = {"output_min": F32(-2.5), "output_max": F32(7)}
    p = _blob("qd8-f32-qb4w", "qb4w_minmax_f32", q, bl=64)
    assert (p["min"], p["max"], int(p["blocksize"])) == (F32(-2.5), F32(7), 64)
    assert xnnpack.PARAMS_LAYOUTS[("qd8-f32-qb4w", "qb4w_minmax_f32")].itemsize == 16     # size_t blocksize at 8
    assert int(_blob("qdu8-f32-qc4w", "qc4w_minmax_f32", q, kernel_zero_point=0)["kernel_zero_point"]) == 0


def test_per_tensor_layouts_refuse_per_channel_scales():
    with pytest.raises(ValueError, match="per-tensor ABI takes one value"):
        xnnpack.params_blob("qs8", "fp32_neonv8", {**Q8, "scale": np.array([0.5, 1, 1, 1], F32)})


# ---- XNNPACK's names -------------------------------------------------------------------------------------------------
# Every `init:` and `pack:` of the int8 test YAMLs @75db3c0 (test/q*.yaml, test/pqs8*.yaml), as of this writing.
INITS = """xnn_init_bf16_qb4w_minmax_scalar_params xnn_init_f16_minmax_scalar_params xnn_init_f16_qb4w_minmax_scalar_params
xnn_init_f16_qc4w_minmax_scalar_params xnn_init_f32_minmax_scalar_params xnn_init_f32_qb4w_minmax_scalar_params
xnn_init_f32_qc4w_minmax_scalar_params xnn_init_qs8_qc8w_conv_minmax_fp32_armsimd32_params
xnn_init_qs8_qc8w_conv_minmax_fp32_neon_params xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params
xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params xnn_init_qu8_conv_minmax_fp32_armsimd32_params
xnn_init_qu8_conv_minmax_fp32_neon_params xnn_init_qu8_conv_minmax_fp32_neonv8_params
xnn_init_qu8_conv_minmax_fp32_scalar_params xnn_init_qu8_conv_minmax_rndnu16_scalar_params
xnn_init_qu8_conv_minmax_rndnu_neon_params xnn_init_qu8_conv_minmax_rndnu_scalar_params""".split()
PACKS = """xnn_pack_kai_qb4_weights_and_biases xnn_pack_kai_qs4_weights_and_biases xnn_pack_kai_qs4_weights_and_biases_sme
xnn_pack_kai_qs8_conv_goki_w_sme xnn_pack_kai_qs8_qc8w_weights_and_biases_sme xnn_pack_kai_qs8_weights_and_biases
xnn_pack_qd8_qc2w_gemm_goi_w xnn_pack_qs8_conv_goki_w xnn_pack_qs8_gemm_goi_w xnn_pack_qs8_qb4w_gemm_goi_w
xnn_pack_qs8_qc2w_gemm_goi_w xnn_pack_qs8_qc4uw_gemm_goi_w xnn_pack_qs8_qc4w_gemm_goi_w
xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_aarch64 xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_avx512
xnn_pack_qs8_to_qu8_conv_goki_w xnn_pack_qs8_to_qu8_gemm_goi_w xnn_pack_qs8_to_qu8_qc2w_gemm_goi_w
xnn_pack_qs8_to_qu8_qc4uw_gemm_goi_w xnn_pack_qs8_to_qu8_qc4w_gemm_goi_w
xnn_pack_qs8_to_qu8_qc4w_gemm_goi_w_non_planar_avx512 xnn_pack_qu8_conv_goki_w xnn_pack_qu8_gemm_goi_w
xnn_qs8_packw_gemm_goi_ukernel_x16c4__neondot xnn_qs8_packw_gemm_goi_ukernel_x8c4__neondot""".split()


def test_every_init_and_pack_of_the_test_yamls_is_mapped_or_refused_with_a_reason():
    for name in INITS:
        if name in xnnpack.LAYOUT_OF_INIT:
            datatype, layout = xnnpack.layout_of_init(name)
            assert (datatype, layout) in xnnpack.PARAMS_LAYOUTS, name
        else:
            with pytest.raises(ValueError, match="lowp has no"):
                xnnpack.layout_of_init(name)
    for name in PACKS:
        if name in xnnpack.PACKING_OF_PACK:
            assert xnnpack.packing_of_pack(name).datatypes
        else:
            with pytest.raises(ValueError, match="not modelled|KleidiAI"):
                xnnpack.packing_of_pack(name)
    assert xnnpack.packing_of_pack("xnn_pack_qs8_to_qu8_gemm_goi_w").a_shift == 128
    assert xnnpack.packing_of_pack("xnn_pack_qs8_conv_goki_w").conv
    with pytest.raises(ValueError, match="not an init function"):
        xnnpack.layout_of_init("xnn_init_qs8_nonsense_params")


def test_test_yaml_entries_translate_as_the_generator_reads_them():
    vnni = xnnpack.from_test_entry({"name": "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__avx512vnni",
                                    "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params",
                                    "pack": "xnn_pack_qs8_to_qu8_gemm_goi_w", "k-block": 8})
    assert vnni == {"symbol": "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_4x16c4__avx512vnni",
                    "signature": "xnnpack-gemm", "tile": {"mr": 4, "nr": 16, "kr": 4},
                    "xnnpack": {"datatype": "qs8-qc8w", "params": "fp32_scalar", "sr": 1}, "a_shift": 128,
                    "a_type": "s8", "b_type": "s8", "c_type": "s8"}
    qdu8 = xnnpack.from_test_entry({"name": "xnn_qd8_f32_qc8w_igemm_minmax_ukernel_1x16c4__avx512vnni",
                                    "init": "xnn_init_f32_minmax_scalar_params", "pack": "xnn_pack_qs8_conv_goki_w",
                                    "k-block": 8, "unsigned-inputs": True})
    assert (qdu8["signature"], qdu8["xnnpack"]["datatype"], qdu8["a_type"], qdu8["a_shift"]) == \
        ("xnnpack-igemm", "qdu8-f32-qc8w", "u8", 0)
    sr = xnnpack.from_test_entry({"name": "xnn_qs8_qc8w_gemm_minmax_fp32_ukernel_1x8c2s4__neonv8_mlal",
                                  "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params",
                                  "pack": "xnn_pack_qs8_gemm_goi_w"})
    assert (sr["tile"], sr["xnnpack"]["sr"], sr["xnnpack"]["params"]) == ({"mr": 1, "nr": 8, "kr": 2}, 4,
                                                                          "fp32_neonv8")
    rndnu16 = xnnpack.from_test_entry({"name": "xnn_qu8_gemm_minmax_rndnu16_ukernel_1x16__neon_mlal_lane",
                                       "init": "xnn_init_qu8_conv_minmax_rndnu16_scalar_params",
                                       "pack": "xnn_pack_qu8_gemm_goi_w"})
    assert rndnu16["xnnpack"]["params"] == "rndnu16_scalar"
    with pytest.raises(ValueError, match="does not pack a qs8-qc8w igemm"):      # a GEMM packer for an IGEMM
        xnnpack.from_test_entry({"name": "xnn_qs8_qc8w_igemm_minmax_fp32_ukernel_1x8__neon_mlal_lane",
                                 "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_neon_params",
                                 "pack": "xnn_pack_qs8_gemm_goi_w"})
    with pytest.raises(ValueError, match="KleidiAI"):
        xnnpack.from_test_entry({"name": "xnn_qd8_f32_qb4w_gemm_minmax_ukernel_1x8c16__neoni8mm",
                                 "init": "xnn_init_f32_qb4w_minmax_scalar_params",
                                 "pack": "xnn_pack_kai_qb4_weights_and_biases"})


# ---- packing, as packing.cc's loops state it --------------------------------------------------------------------
def _qc4w_loops(B, bias, izp, nr, kr, sr, floats=()):
    """pack_qs8_qc4w_gemm_goi_w (packing.cc L436-534) element by element: per nr block the bias * 16, then per
    chunk (kr_block_start step 2*kr) per column kr bytes of (lo | hi << 4) at kc_begin + j and + kr, packed_b less
    (ksum_lo + ksum_hi) * izp * 16 (int32 wrapping), the floats."""
    K, N = B.shape
    skr = kr * sr
    kp = -(-K // (2 * skr)) * 2 * skr
    out = bytearray()
    for n0 in range(0, N, nr):
        ints, body = [16 * int(bias[n0 + n]) if n0 + n < N else 0 for n in range(nr)], bytearray()
        for kb in range(0, kp, 2 * kr):
            for n in range(nr):
                kc_begin = (kb // skr) * skr + ((kb + n * kr) & (skr - 1))
                for j in range(kr):
                    lo = int(B[kc_begin + j, n0 + n]) if kc_begin + j < K and n0 + n < N else 0
                    hi = int(B[kc_begin + j + kr, n0 + n]) if kc_begin + j + kr < K and n0 + n < N else 0
                    body.append((lo & 0xF) | ((hi & 0xF) << 4))
                    if n0 + n < N:
                        ints[n] -= (lo + hi) * izp * 16
        wrapped = (np.array(ints, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
        out += wrapped.astype("<i4").tobytes() + bytes(body)
        for f in floats:
            out += np.array([f[n0 + n] if n0 + n < N else 0 for n in range(nr)], "<f4").tobytes()
    return bytes(out)


@pytest.mark.parametrize("nr,kr,sr", [(4, 1, 1), (8, 2, 1), (16, 8, 1), (8, 4, 2), (8, 2, 4)])
@pytest.mark.parametrize("K,N", [(1, 1), (5, 3), (16, 9), (33, 20)])
def test_qc4w_packing_matches_the_loops(nr, kr, sr, K, N):
    rng = np.random.default_rng(K * 7 + N)
    B = rng.integers(-8, 8, (K, N)).astype(np.int8)
    bias = rng.integers(-(1 << 26), 1 << 26, N)
    scale = rng.random(N).astype(F32)
    got = xnnpack.pack_qc4w(B, nr=nr, kr=kr, sr=sr, bias=bias, izp=-5 + 128, column_floats=(scale,))
    assert got.tobytes() == _qc4w_loops(B, bias, 123, nr, kr, sr, (scale,))


def _qc4w_non_planar_loops(B, bias, izp, nr, kr, sr, register_bytes, floats=()):
    """xnn_pack_qs8_qc4w_gemm_goi_w_non_planar (packing.cc L1014-1133) element by element: per nr block the bias *
    16, then per chunk (kr_block_start step kr, to K rounded up to kr * sr) per group of 2R columns (R =
    register_bytes / kr) per inner column c < R kr bytes of (column n's weight | column n + R's << 4) at
    kc_begin(n) + j, n = group + c; packed_b[n] less ksum_lo * izp * 16, packed_b[n + R] less ksum_hi * izp * 16;
    then nr * kr / 2 bytes a chunk (the groups past the block's columns left as the zeroed buffer), the floats."""
    K, N = B.shape
    skr, R = kr * sr, register_bytes // kr
    kp = -(-K // skr) * skr
    out = bytearray()
    for n0 in range(0, N, nr):
        size = min(N - n0, nr)
        ints, body = [16 * int(bias[n0 + n]) if n < size else 0 for n in range(nr)], bytearray()
        for kb in range(0, kp, kr):
            chunk = bytearray(nr * kr // 2)
            at = 0
            for g in range(0, size, 2 * R):
                for c in range(R):
                    n = g + c
                    kc_begin = (kb // skr) * skr + ((kb + n * kr) & (skr - 1))
                    for j in range(kr):
                        k = kc_begin + j
                        lo = int(B[k, n0 + n]) if n0 + n < N and k < K else 0
                        hi = int(B[k, n0 + n + R]) if n0 + n + R < N and k < K else 0
                        chunk[at + j] = (lo & 0xF) | ((hi & 0xF) << 4)
                        ints[n] -= lo * izp * 16
                        ints[n + R] -= hi * izp * 16
                    at += kr
            body += chunk
        wrapped = (np.array(ints, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
        out += wrapped.astype("<i4").tobytes() + bytes(body)
        for f in floats:
            out += np.array([f[n0 + n] if n0 + n < N else 0 for n in range(nr)], "<f4").tobytes()
    return bytes(out)


@pytest.mark.parametrize("nr,kr,sr,register_bytes", [(8, 4, 1, 16), (16, 4, 1, 16), (16, 8, 1, 64),
                                                     (64, 4, 1, 64), (16, 4, 2, 16)])
@pytest.mark.parametrize("K,N", [(1, 1), (5, 3), (16, 9), (33, 20)])
def test_qc4w_non_planar_packing_matches_the_loops(nr, kr, sr, register_bytes, K, N):
    rng = np.random.default_rng(K * 7 + N)
    B = rng.integers(-8, 8, (K, N)).astype(np.int8)
    bias = rng.integers(-(1 << 26), 1 << 26, N)
    scale = rng.random(N).astype(F32)
    got = xnnpack.pack_qc4w(B, nr=nr, kr=kr, sr=sr, bias=bias, izp=-5 + 128, column_floats=(scale,),
                            non_planar=register_bytes)
    assert got.tobytes() == _qc4w_non_planar_loops(B, bias, 123, nr, kr, sr, register_bytes, (scale,))


def test_a_non_planar_packer_refuses_a_tile_its_column_pairs_do_not_cover():
    B = np.zeros((4, 4), np.int8)
    with pytest.raises(ValueError, match="non-planar"):
        xnnpack.pack_qc4w(B, nr=4, kr=4, sr=1, bias=None, izp=1, non_planar=16)     # pairs 4 apart: 8 columns


def _bf16(rng, shape):
    return (xnnpack.bf16_bits(rng.uniform(0.25, 4, shape).astype(F32)).astype(np.uint32) << 16).view(F32)


def test_qb4w_packing_matches_the_loops():
    """xnn_pack_qs8_qb4w_gemm_goi_w (packing.cc L1306-1420) with the operator's scale and bias fills: per nr block
    nr float vksum (from 0, less float(ksum) * izp * scale per chunk, rounded each step), per block of bl the
    chunks and nr bf16(scale / 16), then the biases."""
    rng = np.random.default_rng(4)
    K, N, nr, kr, bl = 128, 6, 4, 2, 32
    B = rng.integers(-8, 8, (K, N)).astype(np.int8)
    s = _bf16(rng, (N, K // bl))
    bias = rng.uniform(-1, 1, N).astype(F32)
    got = xnnpack.pack_qb4w(B, nr=nr, kr=kr, sr=1, bl=bl, scales=s, bias=bias)
    out = bytearray()
    for n0 in range(0, N, nr):
        vksum, chunks = [F32(0)] * nr, []
        for kb in range(0, K, 2 * kr):
            chunk = bytearray()
            for n in range(nr):
                col = n0 + n
                vals = [(int(B[kb + j, col]) if col < N else 0, int(B[kb + j + kr, col]) if col < N else 0)
                        for j in range(kr)]
                chunk += bytes((lo & 0xF) | ((hi & 0xF) << 4) for lo, hi in vals)
                if col < N:
                    ksum = sum(lo + hi for lo, hi in vals)
                    vksum[n] = F32(vksum[n] - F32(F32(ksum) * s[col, kb // bl]))
            chunks.append(bytes(chunk))
            if (kb + 2 * kr) % bl == 0:
                scales = [xnnpack.bf16_bits(s[n0 + n, kb // bl] / F32(16)) if n0 + n < N else 0 for n in range(nr)]
                chunks.append(np.array(scales, "<u2").tobytes())
        out += np.array(vksum, "<f4").tobytes() + b"".join(chunks)
        out += np.array([bias[n0 + n] if n0 + n < N else 0 for n in range(nr)], "<f4").tobytes()
    assert got.tobytes() == bytes(out)


def test_goki_packing_is_the_goi_packing_tap_by_tap():
    """xnn_pack_qs8_conv_goki_w (packing.cc L3682-3735): per nr block the bias less izp * the sums over every tap,
    then each tap's kc x nr block as the goi packer lays it (its own kr/sr padding)."""
    rng = np.random.default_rng(5)
    ks, kc, N, nr, kr = 3, 5, 7, 4, 4
    B = rng.integers(-128, 128, (ks * kc, N)).astype(np.int8)
    ints = rng.integers(-1000, 1000, N).astype(np.int32)
    got = xnnpack.pack_weights(B, nr=nr, kr=kr, sr=1, column_ints=ints, ks=ks)
    per_tap = [xnnpack.pack_weights(B[p * kc:(p + 1) * kc], nr=nr, kr=kr, sr=1, column_ints=ints) for p in range(ks)]
    block = 4 * nr + -(-kc // kr) * kr * nr                       # one tap's bytes of one nr block, ints included
    expect = b""
    for b in range(-(-N // nr)):
        expect += per_tap[0][b * block:b * block + 4 * nr].tobytes()
        expect += b"".join(t[b * block + 4 * nr:(b + 1) * block].tobytes() for t in per_tap)
    assert got.tobytes() == expect
    with pytest.raises(ValueError, match="ks=2 taps"):
        xnnpack.pack_weights(B[:7], nr=nr, kr=kr, sr=1, column_ints=ints, ks=2)


# ---- strides: gaps keep their poison ------------------------------------------------------------------------------
def test_strided_layout_scatter_gather_and_gaps():
    from lowp.kernels.invocation import Strided
    s = Strided((2, 5), "<i2", row=16, block=2, block_stride=6)       # 2-column blocks 6 bytes apart, rows 16
    assert s.offsets().tolist() == [[0, 2, 6, 8, 12], [16, 18, 22, 24, 28]]
    assert s.nbytes == 30 and s.gaps() == ((4, 6), (10, 12), (14, 16), (20, 22), (26, 28))
    m = np.arange(10, dtype="<i2").reshape(2, 5) - 5
    raw = s.scatter(m, np.full(64, 0xEE, np.uint8))
    assert (s.gather(raw) == m).all() and raw[4] == raw[15] == 0xEE
    assert s.where(14) == "in the gap after element (0, 4)"



def test_a_dense_layout_skips_the_byte_index_and_agrees_with_it():
    """A row-major layout with no gap (most calls' C) scatters and gathers without the layout's byte index; the
    same bytes, size and (no) gaps as the index gives, and a layout with a gap is not taken for dense."""
    from lowp.kernels.invocation import Strided, _geometry
    rng = np.random.default_rng(7)
    for (M, N), dtype, block in itertools.product([(0, 3), (1, 1), (3, 5), (7, 33)], ["<i1", "<f2", "<f4"],
                                                   [1, 4, 64]):
        item = np.dtype(dtype).itemsize
        s = Strided((M, N), dtype, row=N * item, block=block, block_stride=block * item)
        g = _geometry(s)
        assert s.dense and s.nbytes == g.nbytes and s.gaps() == g.gaps == ()
        m = rng.integers(-100, 100, (M, N)).astype(dtype)
        fill = rng.integers(0, 256, g.nbytes + 9, dtype=np.uint8)
        indexed = fill[:g.nbytes].copy()
        indexed[g.bytes] = m.view(np.uint8).reshape(M, N, item)
        assert s.scatter(m, fill).tobytes() == indexed.tobytes()
        assert s.gather(indexed).tobytes() == m.tobytes() and s.gather(indexed).shape == (M, N)
    assert not Strided((3, 5), "<i1", row=6, block=5, block_stride=5).dense          # a row stride past N
    assert not Strided((3, 5), "<i1", row=5, block=2, block_stride=3).dense          # blocks with gaps

def test_strided_invocation_lays_a_and_c_with_poisoned_gaps():
    rng = np.random.default_rng(6)
    M, N, K = 3, 6, 5
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    q = {**Q8, "bias": np.zeros(N, np.int32), "scale": np.full(N, 0.01, F32), "a_zero_point": 0}
    u = xnnpack.Ukernel("f", "qs8-qc8w", "fp32_scalar", mr=2, nr=4, kr=1)
    fill = lambda n, salt: np.full(n, 0x40 + salt, np.uint8)       # noqa: E731: one byte value per salt
    inv = xnnpack.invocation(A, B, q, u, strides={"a": 8, "cm": 11, "cn": 5}, fill=fill)
    a = inv.buffers["A"]
    assert len(a) == 2 * 8 + K and (a[K:8] == 0x42).all() and (a.view(np.int8)[8:8 + K] == A[1]).all()
    assert [call[1][4] for call in inv.calls] == [8, 8] and [call[1][7:9] for call in inv.calls] == [[11, 5]] * 2
    assert inv.gaps["C"] == ((4, 5), (7, 11), (15, 16), (18, 22), (26, 27)) and inv.buffers["C"][4] == 0x43
    with pytest.raises(ValueError, match=r"strides\['a'\]=4: below the 5 bytes a row of A takes"):
        xnnpack.invocation(A, B, q, u, strides={"a": 4})
    with pytest.raises(ValueError, match=r"strides\['cm'\]=6: below the 7 bytes a row of C takes"):
        xnnpack.invocation(A, B, q, u, strides={"cn": 5, "cm": 6})      # 4 columns, a gap of 1, 2 columns
    with pytest.raises(ValueError, match="keys among 'a', 'cm', 'cn'"):
        xnnpack.invocation(A, B, q, u, strides={"rows": 8})


STRIDES = {"a": 17, "cm": 13, "cn": 5}


@pytest.mark.native
def test_a_correct_kernel_passes_with_strides_and_the_stride_bugs_are_caught(ks):
    """XNNPACK's strided_a / strided_cm cases: the correct kernel gives the same C through any strides; the kernel
    that reads row 1 of A at a0 + kc computes wrong values once a_stride > kc, the one that writes row 1 of C at
    c0 + nc writes into row 0's gap once cm_stride > nc (an OutOfBounds naming the byte); with the dense strides
    both pass: a dense call cannot tell them from the correct one."""
    from lowp.emulator.errors import OutOfBounds
    rng = np.random.default_rng(7)
    good, bug_a, bug_c = (ks[f"xnn_qs8_qc8w_gemm_2x4_scalar{s}"] for s in ("", "_bug_a_stride", "_bug_c_stride"))
    A, B = _operands(good, rng, 5, 9, 12)
    q = _params(good, A, B)
    for k in (good, bug_a, bug_c):
        assert _agrees(k, A, B, q, runner(k).run(A, B, quant=q, seed=1))
    assert _agrees(good, A, B, q, runner(good).run(A, B, quant=q, seed=1, strides=STRIDES))
    assert not _judged(bug_a, A, B, q, runner(bug_a).run(A, B, quant=q, seed=1, strides={"a": 17}))[0]
    assert _agrees(bug_a, A, B, q, runner(bug_a).run(A, B, quant=q, seed=1, strides={"cm": 13}))
    with pytest.raises(OutOfBounds, match=r"write into a gap of buffer 'C': byte offset 9 \(in the gap after "
                                          r"element \(0, 8\)"):
        runner(bug_c).run(A, B, quant=q, seed=1, strides={"cm": 13})


@pytest.mark.emulated
@pytest.mark.parametrize("backend", ["unicorn", "qemu", "bochs"])
def test_strided_calls_on_the_emulators(ks, backend):
    name = "xnn_qs8_qc8w_gemm_2x4_scalar" + ("" if backend == "bochs" else "_aarch64")
    k = ks[name]
    ex = executor(k, backend)
    if ex.unavailable():
        pytest.skip(ex.unavailable())
    rng = np.random.default_rng(8)
    A, B = _operands(k, rng, 5, 9, 12)
    q = _params(k, A, B)
    assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=1, strides=STRIDES))
    if backend == "bochs":
        from lowp.emulator.errors import OutOfBounds
        with pytest.raises(OutOfBounds, match="gap of buffer 'C'"):
            executor(ks["xnn_qs8_qc8w_gemm_2x4_scalar_bug_c_stride"], "bochs").run(A, B, quant=q, seed=1,
                                                                                   strides={"cm": 13})


# ---- IGEMM ------------------------------------------------------------------------------------------------------------
def _conv_operands(k, rng, M=5, N=9, ks=3, kc=4):
    """A (M x ks*kc) whose taps (1, 1) and (0, 4) are padding: every value the input zero point."""
    A, B = _operands(k, rng, M, N, ks * kc)
    q = _params(k, A, B)
    zp = int(np.asarray(q["a_zero_point"]).reshape(-1)[0])
    A[1, kc:2 * kc] = zp
    A[4, 0:kc] = zp
    return A, B, q


def test_indirection_buffer_points_at_rows_less_a_offset_and_at_zero_for_padding():
    rng = np.random.default_rng(9)
    M, N, ks, kc = 3, 5, 3, 4
    A = rng.integers(-100, 100, (M, ks * kc)).astype(np.int8)
    A[2, 2 * kc:] = 7
    B = rng.integers(-128, 128, (ks * kc, N)).astype(np.int8)
    q = {**Q8, "bias": np.zeros(N, np.int32), "scale": np.full(N, 0.01, F32), "a_zero_point": 7}
    u = xnnpack.Ukernel("f", "qs8-qc8w", "fp32_scalar", mr=2, nr=4, kr=1, igemm=True)
    inv = xnnpack.invocation(A, B, q, u, igemm={"ks": ks, "a_offset": 100})
    refs = inv.pointers["indirection"]
    assert len(refs) == 2 * ks * 2                                  # 2 row blocks x ks taps x MR pointers
    # block 1 (rows 2 and 3, past M), tap 2: row 2 the zero buffer; row 3 junk, read at junk (XNNPACK's tester)
    assert refs[2 * ks + 4:2 * ks + 6] == (xnnpack.Ref("zero"), xnnpack.Ref("junk", -100))
    junk = inv.buffers["junk"]
    assert len(junk) == kc + xnnpack.EXTRA_BYTES and not any((junk[:kc] == row[p * kc:(p + 1) * kc].view(np.uint8)).all()
                                                             for row in A for p in range(ks))    # no row of A
    assert refs[:2] == (xnnpack.Ref("A", 0 - 100), xnnpack.Ref("A", 12 - 100))       # tap 0 of rows 0 and 1
    assert (inv.buffers["zero"] == 7).all() and len(inv.buffers["zero"]) == kc + xnnpack.EXTRA_BYTES
    args = dict(zip(inv.arg_names, inv.calls[1][1]))
    assert (args["ks"], args["a_offset"], args["a"], args["zero"]) == (ks * 2 * 8, 100,
                                                                      xnnpack.Ref("indirection", ks * 2 * 8),
                                                                      xnnpack.Ref("zero"))
    with pytest.raises(ValueError, match=r"igemm zero tap \(0, 0\): A\[0, 0:4\] is not all"):
        xnnpack.invocation(A, B, q, u, igemm={"ks": ks, "zero": [(0, 0)]})
    with pytest.raises(ValueError, match="ks=5 taps do not split K=12"):
        xnnpack.invocation(A, B, q, u, igemm={"ks": 5})
    with pytest.raises(ValueError, match="igemm options .* for a GEMM ukernel"):
        xnnpack.invocation(A, B, q, xnnpack.Ukernel("f", "qs8-qc8w", "fp32_scalar", 2, 4, 1), igemm={"ks": 3})


IGEMM_OPTIONS = [None, {"ks": 3, "a_offset": 0}, {"ks": 3, "a_offset": 1 << 40},
                 {"ks": 3, "a_offset": -3, "zero": [(1, 1)]}, {"ks": 2, "a_offset": 16}]


@pytest.mark.parametrize("backend", ["native", "bochs", "unicorn", "qemu"])
def test_igemm_kernel_on_every_executor(ks, backend):
    """The same scalar IGEMM on the CPU, Bochs, Unicorn and qemu: its pointers are the executor's addresses (the
    indirection buffer written after the buffers are placed, in the guest by qemu's driver), it equals its model
    and its contract with every a_offset (0, huge, negative), zero taps, and through strides."""
    k = ks["xnn_qs8_qc8w_igemm_2x4_scalar" + ("_aarch64" if backend in ("unicorn", "qemu") else "")]
    ex = executor(k, None if backend == "native" else backend)
    if ex.unavailable():
        pytest.skip(ex.unavailable())
    A, B, q = _conv_operands(k, np.random.default_rng(10))
    for options in IGEMM_OPTIONS:
        assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=2, igemm=options)), options
    assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=2, igemm={"ks": 3, "a_offset": 5}, strides=STRIDES))


@pytest.mark.native
def test_an_igemm_that_forgets_a_offset_is_caught(ks):
    from lowp.emulator.errors import OutOfBounds
    k = ks["xnn_qs8_qc8w_igemm_2x4_scalar_no_a_offset"]
    A, B, q = _conv_operands(k, np.random.default_rng(11))
    ex = runner(k)
    assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=2, igemm={"ks": 3, "a_offset": 0}))
    # 64 bytes before row 0 is the slack of A's first page: canaries, read without a fault, wrong values
    assert not _judged(k, A, B, q, ex.run(A, B, quant=q, seed=2))[0]
    with pytest.raises(OutOfBounds, match="reaches 5 bytes past its end"):     # the last row's tap, 12 further
        ex.run(A, B, quant=q, seed=2, igemm={"ks": 3, "a_offset": -12})
    with pytest.raises(OutOfBounds, match="before its start"):         # a page before A: the guard page
        ex.run(A, B, quant=q, seed=2, igemm={"ks": 3, "a_offset": 4096})


@pytest.mark.native
def test_an_igemm_row_past_m_points_at_junk_so_a_wrong_store_order_shows(ks):
    """The rows of the last call past M point at poisoned junk, as XNNPACK's tester points them (issue 34: with
    copies of the last row, a ukernel that stores row 0 before the aliased row 1 gave the right C)."""
    right, wrong = runner(ks["xnn_qs8_qc8w_igemm_2x4_scalar"]), runner(ks["xnn_qs8_qc8w_igemm_2x4_scalar_store_order"])
    k = ks["xnn_qs8_qc8w_igemm_2x4_scalar_store_order"]
    A, B, q = _conv_operands(k, np.random.default_rng(12))
    for M in (2, 4):          # whole calls: no row past M, the store order cannot show
        assert _agrees(k, A[:M], B, q, wrong.run(A[:M], B, quant=q, seed=2))
    odd = A[:3]               # the second call has mr = 1: its row 1 is junk, and the wrong order keeps junk's C
    assert _agrees(k, odd, B, q, right.run(odd, B, quant=q, seed=2))
    assert not _judged(k, odd, B, q, wrong.run(odd, B, quant=q, seed=2))[0]


@pytest.mark.native
def test_qd8_igemm_reads_zero_data_never_the_sentinel(ks):
    """A qd8 IGEMM compares with a sentinel and reads zero_data (its batch's zero point): lowp's sentinel is one
    byte before a guard page, so a kernel that read it would fault; one row of quantization parameters serves
    every row, and different ones per row are refused."""
    k = ks["xnn_qd8_f32_qc8w_igemm_2x4_scalar"]
    A, B, q = _conv_operands(k, np.random.default_rng(12))
    ex = runner(k)
    for options in IGEMM_OPTIONS:
        assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=3, igemm=options)), options
    rows = {**q, "a_zero_point": np.arange(A.shape[0], dtype=np.int32)}
    with pytest.raises(ValueError, match="one {zero_point, inv_scale} for all its rows"):
        ex.run(A, B, quant=rows, seed=3)


# ---- qdu8 ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "bochs"])
def test_qdu8_vnni_kernel_takes_u8_a_and_u8_zero_points(ks, backend):
    k = ks["xnn_qdu8_f32_qc8w_gemm_1x16c4_avx512vnni"]
    ex = executor(k, None if backend == "native" else backend)
    if ex.unavailable():
        pytest.skip(ex.unavailable())
    rng = np.random.default_rng(13)
    for style in ("typical", "ends", "limits"):
        A, B = _operands(k, rng, 3, 21, 9)
        q = _params(k, A, B, 5, style)
        zp = np.asarray(q["a_zero_point"])
        assert zp.dtype == np.int32 and zp.min() >= 0 and zp.max() <= 255
        assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=4))
    q["a_zero_point"] = np.full(3, 255, np.int32)
    A[:] = 255
    assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=4))


def test_qdu8_contract_refuses_int8_zero_points():
    from lowp.conformance.contracts.output import output_contract
    c = output_contract("qdu8-f32")
    q = c.draw(np.random.default_rng(0), 2, 3, "f32")
    assert not c.domain_problems(q, 2, 3, "f32")
    q["a_zero_point"] = np.array([-1, 3], np.int32)
    assert any("outside [0, 255] (uint8 rows" in p for p in c.domain_problems(q, 2, 3, "f32"))


# ---- 4-bit weights ------------------------------------------------------------------------------------------------------
@pytest.mark.native
def test_qc4w_kernels_match_their_models_and_contracts(ks):
    rng = np.random.default_rng(14)
    for name in ("xnn_qs8_qc4w_gemm_2x4_scalar", "xnn_qd8_f32_qc4w_gemm_2x4_scalar"):
        k = ks[name]
        for M, N, K in ((1, 1, 1), (3, 9, 7), (5, 4, 32)):
            for style in ("typical", "ends", "limits"):
                A, B = _operands(k, rng, M, N, K)
                q = _params(k, A, B, M * K, style)
                assert _agrees(k, A, B, q, runner(k).run(A, B, quant=q, seed=5)), (name, M, N, K, style)


@pytest.mark.native
def test_qc4w_bias_and_sum_wrap_at_28_bits(ks):
    """The packed int32 holds 16 x (bias - izp * sums) and the kernel adds 16x each product: bias + acc wraps at 28
    bits. At bias -2^27 and a negative sum the kernel gives what the 28-bit stage says, not the int32 one."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    from lowp.kernels.models.quant import zero_point_corrected
    k = ks["xnn_qs8_qc4w_gemm_2x4_scalar"]
    A, B = np.zeros((1, 1), np.int8), np.full((1, 1), 7, np.int8)
    q = {"bias": np.array([-(1 << 27)], np.int32), "scale": np.array([1.0], F32), "output_zero_point": 0,
         "output_min": -128, "output_max": 127, "a_zero_point": 127, "b_zero_point": 0}
    C = runner(k).run(A, B, quant=q, seed=5)
    acc = zero_point_corrected(np.zeros((1, 1), np.int64), A, B, q)            # -889
    assert C.tolist() == [[127]] == OUTPUT_STAGES["xnnpack-fp32-fmagic-acc28"].compute(acc, q, "s8").tolist()
    assert OUTPUT_STAGES["xnnpack-fp32-fmagic"].compute(acc, q, "s8").tolist() == [[-128]]
    assert _judged(k, A, B, q, C)[:2] == (True, "xnnpack-fp32-lrintf-acc28")


def test_4bit_weights_outside_the_nibble_are_refused(ks):
    k = ks["xnn_qs8_qc4w_gemm_2x4_scalar"]
    A, B = np.zeros((2, 3), np.int8), np.full((3, 2), 8, np.int8)
    with pytest.raises(ValueError, match=r"a qs8-qc4w weight is in \[-8, 7\] \(4-bit\)"):
        executor(k).run(A, B, quant=_params(k, A, np.zeros_like(B)))
    assert k.operand_ranges == ((-128, 127), (-8, 7))


def _qb4w_case(rng, M, N, K, spread=1):
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-8, 8, (K, N)).astype(np.int8)
    s = (xnnpack.bf16_bits((rng.uniform(0.5, 2, (N, K // 32)) * 2.0 ** rng.integers(-spread, spread + 1, (N, K // 32)))
                           .astype(F32)).astype(np.uint32) << 16).view(F32)
    return A, B, {"a_zero_point": rng.integers(-128, 128, M).astype(np.int32),
                  "a_inv_scale": rng.uniform(1e-3, 1, M).astype(F32), "b_block_scale": s,
                  "bias": rng.uniform(-1, 1, N).astype(F32), "output_min": F32(-np.inf), "output_max": F32(np.inf)}


@pytest.mark.native
def test_qb4w_kernel_is_the_scalar_order_bit_for_bit(ks):
    """The blockwise kernel: bit for bit XNNPACK's scalar order (the packer's float vksum times the zero point,
    then block by block), which is not the tester's reference order: the two differ on some inputs, each
    within a few ulps of the real number."""
    from lowp.kernels.models.quant import QB4W_ORDERS
    k = ks["xnn_qd8_f32_qb4w_gemm_2x4_scalar"]
    rng = np.random.default_rng(15)
    differs = 0
    for M, N, K in ((1, 1, 32), (3, 6, 64), (4, 9, 256)):
        A, B, q = _qb4w_case(rng, M, N, K, spread=8)
        C = runner(k).run(A, B, quant=q, seed=6)
        assert C.tobytes() == k.predict(A, B, q).tobytes() == QB4W_ORDERS["qb4w-scalar"](A, B, q, bl=32).tobytes()
        ref = QB4W_ORDERS["qb4w-reference"](A, B, q, bl=32)
        differs += int((ref != C).sum())
        exact = QB4W_ORDERS["qb4w-exact"](A, B, q, bl=32)
        assert np.allclose(C, exact, rtol=1e-5, atol=1e-3) and np.allclose(ref, exact, rtol=1e-5, atol=1e-3)
    assert differs > 0
    A, B, q = _qb4w_case(rng, 2, 3, 48)
    with pytest.raises(ValueError, match="K=48 is not a whole number of blocks of bl=32"):
        runner(k).run(A[:, :48], B[:48], quant={**q, "b_block_scale": q["b_block_scale"][:, :1]})


@pytest.mark.native
def test_qb4w_avx2_lanes_order_bit_for_bit(ks):
    """lowp's AVX2 qb4w kernel (VPMADDWD lanes, an FMA per block and lane, two VHADDPS, a final FMA) computes
    qb4w-fma-fused-lanes4 bit for bit on the CPU, and the qd8-f32-qb4w contract accepts it; the
    orders that convert each block's whole int32 sum (qb4w-unfused, qb4w-fma, qb4w-fma-fused) differ from it on
    some of the same cases: the lanes are part of the order, not a detail."""
    from lowp.conformance.contracts.output import BlockGeometry, output_contract
    from lowp.kernels.models.quant import qb4w_output
    k = ks["xnn_qd8_f32_qb4w_gemm_1x8c8_avx2"]
    contract, geometry = output_contract("qd8-f32-qb4w"), BlockGeometry(32, 8, 1)
    rng = np.random.default_rng(34)
    whole = {"qb4w-unfused": 0, "qb4w-fma": 0, "qb4w-fma-fused": 0}
    for M, N, K in ((1, 8, 32), (1, 13, 96), (1, 16, 256), (1, 5, 512)):
        A, B, q = _qb4w_case(rng, M, N, K, spread=8)
        C = runner(k).run(A, B, quant=q, seed=6)
        assert C.tobytes() == k.predict(A, B, q).tobytes()
        assert C.tobytes() == qb4w_output("qb4w-fma-fused-lanes4", A, B, q, "f32", bl=32, kr=8).tobytes()
        assert contract.judge_blocks(C, A, B, q, "f32", geometry)[0]
        for name in whole:
            whole[name] += int((qb4w_output(name, A, B, q, "f32", bl=32, kr=8) != C).sum())
    assert all(whole.values()), whole


def test_qb4w_scales_must_be_bf16():
    with pytest.raises(ValueError, match="not a bf16 number"):
        xnnpack.check_bf16(np.array([[0.1]], F32))


# ---- rndnu16 ------------------------------------------------------------------------------------------------------------
def _rndnu16_scalar(acc, bias, scale, zp, lo, hi):
    """xnn_qu8_requantize_rndnu16 on one accumulator, in plain Python integers."""
    x = ((acc + bias + 2 ** 31) % 2 ** 32) - 2 ** 31
    shift, mult = _rndnu16_reading(scale)
    pre = min(max(x << shift, -2 ** 31), 2 ** 31 - 1) if shift >= 0 else (x + (1 << (-shift - 1))) >> -shift
    x16 = min(max(pre, -32768), 32767)
    high = (x16 * mult + (1 << 14)) >> 15
    return min(max(min(max(high + zp, -32768), 32767), lo), hi)


def test_rndnu16_stage_is_the_reference_and_not_rndnu():
    from lowp.isa_models.requant import OUTPUT_STAGES
    rng = np.random.default_rng(16)
    scales = [2.0 ** -32, 2.0 ** -20, 0.001, 0.0123, 0.5, 0.75, 1.0, 1.999, 7.5, 255.9]
    differ = 0
    for scale in scales:
        acc = np.concatenate([rng.integers(-2 ** 31, 2 ** 31, 40), rng.integers(-3000, 3000, 40),
                              [-2 ** 31, 2 ** 31 - 1, 0, 1, -1]]).reshape(-1, 1).astype(np.int64)
        q = {"bias": np.array([int(rng.integers(-1000, 1000))], np.int32), "scale": np.array([scale], F32),
             "output_zero_point": int(rng.integers(0, 256)), "output_min": 0, "output_max": 255}
        got = OUTPUT_STAGES["xnnpack-rndnu16"].compute(acc, q, "u8")
        want = [_rndnu16_scalar(int(a), int(q["bias"][0]), scale, q["output_zero_point"], 0, 255) for a in acc[:, 0]]
        assert got[:, 0].tolist() == want, scale
        differ += int((got != OUTPUT_STAGES["xnnpack-rndnu"].compute(acc, q, "u8")).sum())
    assert differ > 0        # two roundings and an int16 narrowing are not rndnu's one rounding


@pytest.mark.native
def test_rndnu16_kernel(ks):
    k = ks["xnn_qu8_gemm_2x4_rndnu16_scalar"]
    rng = np.random.default_rng(17)
    for style in ("typical", "ends", "limits"):
        A, B = _operands(k, rng, 3, 6, 11)
        q = _params(k, A, B, 3, style)
        assert _agrees(k, A, B, q, runner(k).run(A, B, quant=q, seed=7))


# ---- the NEONv8 layout under the emulators ------------------------------------------------------------------------------
@pytest.mark.emulated
@pytest.mark.parametrize("backend", ["unicorn", "qemu"])
def test_fp32_neonv8_kernel(ks, backend):
    k = ks["xnn_qs8_qc8w_gemm_2x8c4_neonv8"]
    ex = executor(k, backend)
    if ex.unavailable():
        pytest.skip(ex.unavailable())
    rng = np.random.default_rng(18)
    for style in ("typical", "ends", "limits"):
        A, B = _operands(k, rng, 3, 11, 6)
        q = _params(k, A, B, 9, style)
        assert _agrees(k, A, B, q, ex.run(A, B, quant=q, seed=8, strides={"a": 9, "cm": 12}))


# ---- the schema ---------------------------------------------------------------------------------------------------------
def _entry(**overrides):
    entry = {"name": "k", "target": "x86-64", "source": str(HERE / "qs8_qc8w_gemm_2x4_fp32_scalar.c"),
             "symbol": "f", "signature": "xnnpack-gemm", "a_type": "s8", "b_type": "s8", "c_type": "f32",
             "tile": {"mr": 2, "nr": 4, "kr": 1}, "contract": "exact",
             "domain": {"a": [-128, 127], "b": [-128, 127]}, "model": "lowp.kernels.models:exact_gemm",
             "output": "qd8-f32", "xnnpack": {"datatype": "qd8-f32-qc8w", "params": "minmax_f32"}}
    return {**entry, **overrides}


def _problems(entry) -> str:
    from lowp.kernels.schema import validate_entry
    result = validate_entry(entry, toml=True)
    return "" if not isinstance(result, list) else "\n".join(map(str, result))


def test_schema_packing_is_optional_for_xnnpack_entries_only():
    assert _problems(_entry()) == ""
    assert "packing: missing (required)" in _problems(_entry(signature="gemm", c_type="s32", output=None,
                                                             xnnpack=None))
    assert "needs an xnnpack table" in _problems(_entry(signature="xnnpack-igemm", xnnpack=None))


def test_schema_refuses_a_shift_where_no_packer_compensates_it():
    text = _problems(_entry(a_shift=128))
    assert "a_shift = 128: datatype qd8-f32-qc8w takes no shift of A" in text and "'qdu8-f32-qc8w'" in text
    assert "qu8 A is u8 already" in _problems(_entry(a_type="u8", b_type="u8", c_type="u8", a_shift=128,
                                                     xnnpack={"datatype": "qu8", "params": "fp32_scalar"},
                                                     output="xnnpack-fp32"))
    assert _problems(_entry(c_type="s8", a_shift=128, output="xnnpack-fp32",
                            xnnpack={"datatype": "qs8-qc8w", "params": "fp32_scalar"})) == ""


def test_schema_4bit_domain_and_block_size():
    qc4w = {"datatype": "qd8-f32-qc4w", "params": "qc4w_minmax_f32"}
    assert "domain.b = [-128, 127]: a qd8-f32-qc4w weight is 4-bit, in [-8, 7]" in _problems(_entry(xnnpack=qc4w))
    assert _problems(_entry(xnnpack=qc4w, domain={"a": [-128, 127], "b": [-8, 7]})) == ""
    qb4w = {"datatype": "qd8-f32-qb4w", "params": "qb4w_minmax_f32"}
    four = {"a": [-128, 127], "b": [-8, 7]}
    assert "bl = 0: a qd8-f32-qb4w kernel's block size, a multiple of 32" in _problems(_entry(xnnpack=qb4w,
                                                                                              domain=four))
    assert _problems(_entry(xnnpack={**qb4w, "bl": 64}, domain=four)) == ""
    assert "a block size is for blockwise datatypes" in _problems(_entry(xnnpack={**qc4w, "bl": 32}, domain=four))


# ---- through the conformance suite --------------------------------------------------------------------------------------
@pytest.mark.native
@pytest.mark.parametrize("name", ["xnn_qs8_qc8w_igemm_2x4_scalar", "xnn_qdu8_f32_qc8w_gemm_1x16c4_avx512vnni",
                                  "xnn_qs8_qc4w_gemm_2x4_scalar", "xnn_qu8_gemm_2x4_rndnu16_scalar"])
def test_new_kernels_pass_their_claims_in_the_conformance_suite(ks, name):
    from lowp.conformance import check
    runner(ks[name])
    row = check(name, examples=25)
    assert row["verdict"] == "PASS" and row["executed"] == row["cases"]


@pytest.mark.native
def test_the_conformance_suite_finds_the_forgotten_a_offset(ks):
    """The generated `a_offset` case (a_offset 11, the tester's NextPrime(mr * k_block * 3 + 1)) is the
    counterexample, named so (every other case passes a_offset 0; tests/test_xnnpack_cases.py has the rest)."""
    from lowp.conformance import ConformanceFailure, check
    runner(ks["xnn_qs8_qc8w_igemm_2x4_scalar_no_a_offset"])
    with pytest.raises(ConformanceFailure, match=r"a_offset=11 \(with a_offset 0, the same call gives the right "
                                                 r"C\)(.|\n)*shrunk from case \S+:a_offset:"):
        check("xnn_qs8_qc8w_igemm_2x4_scalar_no_a_offset", examples=10)
