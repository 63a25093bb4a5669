"""XNNPACK's 2-bit weights (qc2w, google/XNNPACK @75db3c0) without a checkout: the packers against packing.cc's
loops, the test entries' mapping, the qd8 ABI's depth padding and row sums, and the named float orders of the
qd8-qc2w output stage. The tree's qc2w kernels run through the campaign in tests/test_xnnpack_zoo.py."""
from __future__ import annotations

import numpy as np
import pytest

from lowp.isa_models.requant import OUTPUT_STAGES, QC2W_ORDERS
from lowp.kernels import xnnpack

F32 = np.float32


def _qc2w_loops(B, bias, izp, nr, kr, sr, *, unsigned, kzp=None, floats=()) -> bytes:
    """pack_qs8_qc2w_gemm_goi_w and xnn_pack_qd8_qc2w_gemm_goi_w as src/reference/packing.cc writes them (L653-743,
    L791-888), over B (K x N weights): per nr block, nr int32 copy_bias less ksum * izp, [nr float kernel zero
    points], per chunk of 4 kr k per column kr bytes kv_0 | kv_1 << 2 | kv_2 << 4 | kv_3 << 6 (XOR 0xAA: the
    unsigned packers), then nr floats each. The columns past N, which packing.cc skips, hold zero weights."""
    K, N = B.shape
    skr = sr * kr
    kp = -(-K // (4 * skr)) * 4 * skr
    out = bytearray()
    for n0 in range(0, N, nr):
        ints, body = [int(bias[n0 + n]) if bias is not None and n0 + n < N else 0 for n in range(nr)], bytearray()
        for kb in range(0, kp, 4 * kr):
            for n in range(nr):
                kc_begin = (kb // skr) * skr + ((kb + n * kr) & (skr - 1))
                for j in range(kr):
                    kv = [int(B[kc_begin + j + p * kr, n0 + n]) if kc_begin + j + p * kr < K and n0 + n < N else 0
                          for p in range(4)]
                    byte = sum((v & 3) << (2 * p) for p, v in enumerate(kv))
                    body.append(byte ^ 0xAA if unsigned else byte)
                    if n0 + n < N:
                        ints[n] -= sum(kv) * izp
        out += ((np.array(ints, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31).astype("<i4").tobytes()
        if kzp is not None:
            out += np.array([kzp[n0 + n] if n0 + n < N else 0 for n in range(nr)], "<f4").tobytes()
        out += bytes(body)
        for f in floats:
            out += np.array([f[n0 + n] if n0 + n < N else 0 for n in range(nr)], "<f4").tobytes()
    return bytes(out)


@pytest.mark.parametrize("nr,kr,sr", [(4, 1, 1), (8, 4, 1), (8, 8, 1), (16, 4, 2), (8, 2, 4)])
@pytest.mark.parametrize("K,N", [(1, 1), (5, 3), (16, 9), (35, 20)])
def test_qc2w_packing_matches_the_loops(nr, kr, sr, K, N):
    rng = np.random.default_rng(K * 7 + N)
    B = rng.integers(-2, 2, (K, N)).astype(np.int8)
    bias = rng.integers(-(1 << 30), 1 << 30, N)
    scale, kzp = rng.random(N).astype(F32), rng.uniform(-1, 1, N).astype(F32)
    for unsigned, izp in ((False, -5), (True, -5 + 128)):          # qs8 (signed) and qs8_to_qu8 (w + 2)
        got = xnnpack.pack_subbyte(B, bits=2, nr=nr, kr=kr, sr=sr, bias=bias, izp=izp, column_floats=(scale,),
                                   unsigned=unsigned)
        assert got.tobytes() == _qc2w_loops(B, bias, izp, nr, kr, sr, unsigned=unsigned, floats=(scale,))
    got = xnnpack.pack_subbyte(B, bits=2, nr=nr, kr=kr, sr=sr, bias=None, izp=1, column_floats=(scale, scale),
                               unsigned=True, zero_points=kzp)        # qd8: no bias, izp 1, the float zero points
    assert got.tobytes() == _qc2w_loops(B, None, 1, nr, kr, sr, unsigned=True, kzp=kzp, floats=(scale, scale))


def test_the_unsigned_crumbs_are_the_signed_ones_xor_0xaa():
    """w + 2 in each crumb: -2 -> 0, -1 -> 1, 0 -> 2, 1 -> 3; a byte of four zero weights is 0xAA."""
    B = np.array([[-2], [-1], [0], [1]], np.int8)
    signed = xnnpack.pack_subbyte(B, bits=2, nr=1, kr=1, sr=1, bias=None, izp=0)
    unsigned = xnnpack.pack_subbyte(B, bits=2, nr=1, kr=1, sr=1, bias=None, izp=0, unsigned=True)
    assert signed[4] == 0b01_00_11_10 and unsigned[4] == 0b11_10_01_00 == signed[4] ^ 0xAA
    assert xnnpack.pack_subbyte(np.zeros((1, 1), np.int8), bits=2, nr=1, kr=1, sr=1, bias=None, izp=0,
                                unsigned=True)[4] == 0xAA


def test_the_test_entries_map_to_the_2bit_packings():
    entry = {"init": "xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params", "k-block": 32, "planes": 4}
    e = xnnpack.from_test_entry({**entry, "name": "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x8c8__avx2_madd",
                                 "pack": "xnn_pack_qs8_to_qu8_qc2w_gemm_goi_w"})
    assert (e["xnnpack"]["datatype"], e["xnnpack"].get("nibbles"), e["a_shift"]) == ("qs8-qc2w", "unsigned", 128)
    e = xnnpack.from_test_entry({**entry, "name": "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x8c4__neondot",
                                 "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_neonv8_params",
                                 "pack": "xnn_pack_qs8_qc2w_gemm_goi_w"})
    assert ("nibbles" not in e["xnnpack"], e["a_shift"], e["xnnpack"]["params"]) == (True, 0, "fp32_neonv8")
    e = xnnpack.from_test_entry({**entry, "name": "xnn_qd8_f32_qc2w_gemm_minmax_ukernel_1x8c8__avx2_madd",
                                 "init": "xnn_init_f32_minmax_scalar_params", "pack": "xnn_pack_qd8_qc2w_gemm_goi_w",
                                 "unsigned-inputs": True})
    assert (e["xnnpack"]["datatype"], e["xnnpack"]["params"], e["a_type"], e["c_type"]) == (
        "qdu8-f32-qc2w", "minmax_f32", "u8", "f32")
    e = xnnpack.from_test_entry({**entry, "name": "xnn_qd8_f16_qc2w_gemm_minmax_ukernel_1x8c4__neondotfp16arith",
                                 "init": "xnn_init_f16_minmax_scalar_params", "pack": "xnn_pack_qd8_qc2w_gemm_goi_w"})
    assert (e["xnnpack"]["datatype"], e["xnnpack"]["params"], e["c_type"]) == ("qd8-f16-qc2w", "minmax_f16", "f16")
    with pytest.raises(xnnpack.Unmapped, match="planes 2: lowp packs qs8-qc2w in 4 plane"):
        xnnpack.from_test_entry({**entry, "name": "xnn_qs8_qc2w_gemm_minmax_fp32_ukernel_1x8c8__avx2_madd",
                                 "pack": "xnn_pack_qs8_qc2w_gemm_goi_w", "planes": 2})
    assert xnnpack.DATATYPES["qs8-qc2w"].weight_range == (-2, 1) and xnnpack.DATATYPES["qs8-qc2w"].planes == 4


def _ukernel(datatype="qd8-f32-qc2w", layout="minmax_f32", mr=2, nr=4):
    return xnnpack.Ukernel("k", datatype, layout, mr, nr, 1)


def _qd8_q(rng, M, N, zp):
    return {"a_zero_point": np.array(zp, np.int32), "a_inv_scale": np.full(M, 0.5, F32),
            "b_scale": np.full(N, 2, F32), "bias": np.zeros(N, F32), "b_float_zero_point": np.full(N, 0.25, F32),
            "output_min": F32(-np.inf), "output_max": F32(np.inf)}


def test_a_depth_not_a_multiple_of_4_is_padded_with_the_rows_zero_points():
    """XNNPACK calls a qc2w ukernel with kc a multiple of 4 (its tester's k4; the operator rounds input_channels up
    to planes): lowp hands over K = 5 as kc = 8, each row padded with its zero point, B with zero weights, and the
    float sums of the padded rows (then XNN_EXTRA_QUANTIZATION_PARAMS copies of the last) before the rows'
    quantization parameters; a strided A keeps its gap."""
    rng = np.random.default_rng(0)
    A = rng.integers(-128, 128, (3, 5)).astype(np.int8)
    B = rng.integers(-2, 2, (5, 4)).astype(np.int8)
    q = _qd8_q(rng, 3, 4, [3, -7, 100])
    inv = xnnpack.invocation(A, B, q, _ukernel(), strides={"a": 11})
    assert [args[2] for _, args in inv.calls] == [8, 8] and inv.arg_names[10:] == ("row_sum", "quantization_params")
    padded = np.concatenate([A, np.repeat(np.array([[3], [-7], [100]], np.int8), 3, axis=1)], axis=1)
    assert inv.calls[0][1][4] == 11 + 3                                       # a_stride grew by the pad
    rows = inv.buffers["A"].view(np.int8)
    assert all(np.array_equal(rows[m * 14:m * 14 + 8], padded[m]) for m in range(3))
    sums = inv.buffers["row_sum"].view(F32)
    assert np.array_equal(sums[:3], padded.astype(np.int64).sum(axis=1).astype(F32)) and (sums[3:] == sums[2]).all()
    assert len(sums) == 3 + xnnpack.EXTRA_QUANTIZATION_PARAMS
    assert xnnpack.row_terms("qd8-f32-qc2w", A, q) == {"a_row_sum": pytest.approx(padded.sum(axis=1)), "kc": 8}
    assert xnnpack.row_terms("qd8-f32-qc8w", A, q) == {}


def _stage(order, acc, q):
    return OUTPUT_STAGES[f"qd8-f32-qc2w-{order}"].compute(np.asarray(acc, np.int32), q, "f32")


def test_every_order_is_the_reference_where_nothing_rounds():
    """sum (a - zp)(w - kzp) * inv_scale * b_scale + bias (the tester's reference, gemm-microkernel-tester.cc
    L2116-2136): with small integers and a kzp of few bits every float step is exact, and every order gives it."""
    rng = np.random.default_rng(1)
    A = rng.integers(-128, 128, (2, 8)).astype(np.int8)
    B = rng.integers(-2, 2, (8, 3)).astype(np.int8)
    q = {**_qd8_q(rng, 2, 3, [5, -9]), "bias": np.array([1, -2, 0.5], F32)}
    q = {**q, **xnnpack.row_terms("qd8-f32-qc2w", A, q)}
    zp = q["a_zero_point"].astype(np.int64)[:, None]
    acc = ((A - zp) @ B.astype(np.int64))
    exact = ((A - zp) @ (B - 0.25)) * 0.5 * 2 + q["bias"]
    for order in QC2W_ORDERS:
        assert np.array_equal(_stage(order, acc, q), exact.astype(F32)), order


def test_the_orders_differ_where_a_rounding_does():
    """The NEON dot kernels' (kzp + 2) * row_sum then vmlaq_f32: contracted by clang (FMLA) or not (a GCC build);
    a 1x1x1 case (A 0, zero point 75, padded to 4) where they differ by an ulp, as a real neondot kernel built
    here showed (google/XNNPACK @75db3c0 qd8-f32-qc2w-gemm-2x8c4-minmax-neondot.c gave 64.19438934...)."""
    q = {"a_zero_point": np.array([75], np.int32), "a_inv_scale": np.ones(1, F32), "b_scale": np.ones(1, F32),
         "bias": np.zeros(1, F32), "b_float_zero_point": np.array([0.8559252619743347], F32),
         "output_min": F32(-np.inf), "output_max": F32(np.inf)}
    q = {**q, **xnnpack.row_terms("qd8-f32-qc2w", np.zeros((1, 1), np.int8), q)}
    assert (q["a_row_sum"].tolist(), q["kc"]) == ([225], 4)
    fmla, fadd = (_stage(o, [[0]], q)[0, 0] for o in ("neon-fmla", "neon-fmul-fadd"))
    assert fmla == F32(64.19438934326172) and fadd != fmla and abs(float(fadd) - float(fmla)) < 1e-5


def test_the_qd8_qc2w_prototype_takes_the_rows_sums():
    """xnn_qd8_f32_qc2w_gemm_ukernel_fn (src/xnnpack/microfnptr.h L140-144): the qd8 GEMM's ten parameters, then
    const float *row_sum, then the quantization parameters; a kernel built without row_sum is named before a case."""
    from types import SimpleNamespace

    from lowp.kernels.prototype import expected
    qc2w, qc8w = (SimpleNamespace(signature="xnnpack-gemm", params={}, xnnpack={"datatype": d})
                  for d in ("qd8-f32-qc2w", "qd8-f32-qc8w"))
    assert expected(qc2w) == expected(qc8w) + ("ptr",) and len(expected(qc2w)) == 12
