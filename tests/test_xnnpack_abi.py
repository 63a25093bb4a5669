"""lowp.kernels.xnnpack and lowp.kernels.abi against independent readings: XNNPACK's packing rule re-read as the loops
of xnn_pack_qs8_gemm_goi_w (per output channel, per k), and the params / lowp_requant layouts as the C compiler
lays out kernels/include/lowp's structs."""
from __future__ import annotations

import numpy as np
import pytest

from lowp.kernels import abi, xnnpack

INCLUDE = str(xnnpack.__file__).rsplit("/", 1)[0] + "/include"


def _packed_by_loops(B, bias, izp, nr, kr, sr, floats=(), kzp=None):
    """The packing as XNNPACK's loops state it: for each nr block, bias less izp * ksum (ksum over the packed k < K);
    then for k blocks of kr, for each column of the block, kr weights at k = round_down(k0, kr*sr) +
    ((k0 + j + n*kr) mod kr*sr); then each float array; padding zero. kzp (qu8, xnn_pack_qu8_gemm_goi_w): the
    bias starts at K * izp * kzp and the padding is kzp."""
    K, N = B.shape
    skr = kr * sr
    kp = -(-K // skr) * skr
    out = bytearray()
    for n0 in range(0, N, nr):
        ints, weights = [0] * nr, []
        for k0 in range(0, kp, kr):
            for n in range(nr):
                for j in range(kr):
                    k = (k0 // skr) * skr + ((k0 + j + n * kr) % skr)
                    v = int(B[k, n0 + n]) if k < K and n0 + n < N else (kzp or 0)
                    weights.append(v)
        for n in range(min(nr, N - n0)):
            ints[n] = int(bias[n0 + n]) - izp * int(B[:, n0 + n].astype(np.int64).sum()) + K * izp * (kzp or 0)
        wrapped = (np.array(ints, np.int64) + 2 ** 31) % 2 ** 32 - 2 ** 31
        out += wrapped.astype("<i4").tobytes() + np.array(weights, np.int64).astype(B.dtype).tobytes()
        for f in floats:
            block = [float(f[n0 + n]) if n0 + n < N else 0.0 for n in range(nr)]
            out += np.array(block, "<f4").tobytes()
    return bytes(out)


@pytest.mark.parametrize("nr,kr,sr", [(8, 8, 1), (16, 4, 1), (8, 1, 1), (4, 2, 4), (8, 8, 2), (4, 4, 4)])
@pytest.mark.parametrize("K,N", [(1, 1), (7, 3), (9, 17), (33, 8), (64, 20)])
def test_packing_matches_xnnpack_loops(nr, kr, sr, K, N):
    rng = np.random.default_rng(K * 100 + N)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    bias = rng.integers(-10000, 10000, N).astype(np.int32)
    scale = rng.random(N).astype(np.float32)
    izp = -7
    ints = (bias.astype(np.int64) - izp * B.astype(np.int64).sum(axis=0)).astype(np.int32)
    got = xnnpack.pack_weights(B, nr=nr, kr=kr, sr=sr, column_ints=ints, column_floats=(scale,))
    assert got.tobytes() == _packed_by_loops(B, bias, izp, nr, kr, sr, (scale,))


@pytest.mark.parametrize("nr,kr,sr", [(8, 8, 1), (16, 4, 1), (4, 2, 4)])
@pytest.mark.parametrize("K,N", [(1, 1), (7, 3), (9, 17), (33, 8)])
def test_qu8_invocation_packs_as_xnnpack_qu8_loops(nr, kr, sr, K, N):
    """qu8: the packed bias is bias - izp * ksum + K * izp * kzp (int32), the padding is the kernel zero point, and
    the params carry kzp; at the zero points' ends the bias wraps as XNNPACK's int32 arithmetic does."""
    rng = np.random.default_rng(K * 31 + N)
    A = rng.integers(0, 256, (3, K)).astype(np.uint8)
    B = rng.integers(0, 256, (K, N)).astype(np.uint8)
    for izp, kzp, bias in [(128, 127, rng.integers(-10000, 10000, N)), (255, 255, np.full(N, 2 ** 31 - 1))]:
        q = {"bias": np.asarray(bias, np.int32), "scale": np.full(N, 0.01, np.float32), "a_zero_point": izp,
             "b_zero_point": kzp, "output_zero_point": 3, "output_min": 0, "output_max": 255}
        inv = xnnpack.invocation(A, B, q, xnnpack.Ukernel("f", "qu8", "fp32_scalar", mr=2, nr=nr, kr=kr, sr=sr))
        assert inv.buffers["w"].tobytes() == _packed_by_loops(B, q["bias"], izp, nr, kr, sr, kzp=kzp)
        params = inv.buffers["params"].view(xnnpack.PARAMS_LAYOUTS[("qu8", "fp32_scalar")])[0]
        assert (params["kernel_zero_point"], params["scale"], params["output_zero_point"]) == (kzp, np.float32(0.01), 3)


@pytest.mark.parametrize("nr,kr,sr", [(8, 8, 1), (16, 4, 1), (4, 2, 4), (8, 4, 2), (16, 1, 4), (1, 1, 1)])
@pytest.mark.parametrize("K,N,ks", [(1, 1, 1), (7, 3, 1), (9, 17, 3), (24, 8, 2), (33, 20, 1)])
def test_packing_and_the_provers_layout_agree(nr, kr, sr, K, N, ks):
    """pack_weights (a gather over B padded to whole groups) and weight_blocks (the same layout as indices of B's
    elements, which lowp prove lays symbolic bytes out by) are two spellings of one layout: each packed weight byte
    is B's element weight_blocks names there, or the padding (-1); int16 weights take two bytes each."""
    rng = np.random.default_rng(K * 1000 + N * 10 + ks)
    for dtype, pad in ((np.int8, 0), (np.uint8, 201), (np.int16, -3)):
        info = np.iinfo(dtype)
        B = rng.integers(info.min, info.max, (K, N), endpoint=True).astype(dtype)
        ints = rng.integers(-2 ** 31, 2 ** 31, N).astype(np.int32)
        scale = rng.random(N).astype(np.float32)
        got = xnnpack.pack_weights(B, nr=nr, kr=kr, sr=sr, column_ints=ints, column_floats=(scale,), pad=pad, ks=ks)
        elements = np.append(B.reshape(-1), np.array([pad], np.int64).astype(dtype))
        want = b""
        for b, taps in xnnpack.weight_blocks(K, N, nr=nr, kr=kr, sr=sr, ks=ks):
            columns = slice(b * nr, (b + 1) * nr)
            want += np.concatenate([ints[columns], np.zeros(nr - len(ints[columns]), np.int32)]).astype("<i4").tobytes()
            want += elements[np.where(taps < 0, K * N, taps)].tobytes()
            want += np.concatenate([scale[columns], np.zeros(nr - len(scale[columns]), np.float32)]).tobytes()
        assert got.tobytes() == want


@pytest.mark.parametrize("nr,kr,sr,ks", [(16, 4, 1, 1), (128, 4, 1, 1), (64, 8, 1, 3), (32, 1, 1, 1), (8, 1, 1, 2),
                                         (8, 8, 1, 3), (4, 2, 4, 1), (8, 4, 2, 2),
                                         (16, 1, 4, 1), (8, 16, 1, 1), (16, 16, 2, 1)])
def test_the_direct_gather_of_a_large_pack_is_the_indexed_one(nr, kr, sr, ks):
    """pack_weights gathers a large pack directly (_gathered: each column's kr weights moved as one integer where
    they fit one; kr copies along the columns for an unshuffled block of WIDE_BLOCK columns or more, or kr = 1) and
    a small one through an index made once per shape; both, and the element-by-element gather, give one layout, for
    one- and two-byte weights."""
    rng = np.random.default_rng(nr * kr + sr + ks)
    kp, blocks = 64 * kr * sr, 3
    for dtype in (np.int8, np.uint8, np.int16):
        padded = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (ks, kp, blocks * nr), endpoint=True)
        padded = padded.astype(dtype)
        direct = xnnpack._gathered(padded, kp, blocks, nr, kr, sr, ks)
        assert direct.dtype == dtype
        assert np.array_equal(direct, xnnpack._gathered_elements(padded, kp, blocks, nr, kr, sr, ks))
        indexed = padded.reshape(-1)[xnnpack._packed_order(kp, blocks, nr, kr, sr, ks)]
        assert np.array_equal(direct, indexed.reshape(blocks, -1))


def _ksums_chunk_by_chunk(sums, scales, kr, bl, izp):
    """The qb4w packer's float column sums as packing.cc's loop makes them, one chunk and one column at a time in
    float32 scalars (L1353-1409): ksum -= f32(chunk sum) * izp * scale of the chunk's block."""
    out = []
    for n in range(sums.shape[1]):
        v = np.float32(0)
        for c in range(sums.shape[0]):
            block = min(c * 2 * kr // bl, scales.shape[1] - 1)
            if sums[c].any() or not np.isfinite(scales[:, block]).all():
                v = np.float32(v - np.float32(np.float32(sums[c, n]) * np.float32(izp) * scales[n, block]))
        out.append(v)
    return np.array(out, np.float32)


def test_qb4w_column_sums_are_the_packers_chunk_by_chunk_float_steps():
    """_chunk_sums_subtracted runs the packer's steps in one subtract.accumulate over the chunks: the same float32
    roundings in the same order as a scalar loop, with infinite and NaN scales, all-zero chunks and large sums."""
    rng = np.random.default_rng(36)
    with np.errstate(over="ignore", invalid="ignore"):
        for trial in range(60):
            kr, N = int(rng.choice([1, 2, 4, 8])), int(rng.integers(1, 9))
            bl = 2 * kr * int(rng.choice([1, 2, 4]))
            chunks = int(rng.integers(0, 24))
            sums = rng.integers(-240 * kr, 240 * kr, (chunks, N)) * (rng.random((chunks, 1)) < 0.7)
            scales = (rng.standard_normal((N, max(1, -(-chunks * 2 * kr // bl)))) *
                      10.0 ** rng.integers(-30, 30)).astype(np.float32)
            if trial % 4 == 1:
                scales[rng.random(scales.shape) < 0.2] = np.inf * rng.choice([-1, 1])
            if trial % 4 == 2:
                scales[rng.random(scales.shape) < 0.2] = np.nan
            izp = int(rng.choice([1, -128, 127]))
            got = xnnpack._chunk_sums_subtracted(sums, scales, kr=kr, bl=bl, izp=izp)
            assert got.dtype == np.float32
            assert got.tobytes() == _ksums_chunk_by_chunk(sums, scales, kr, bl, izp).tobytes(), trial


def test_packing_refuses_non_power_of_two_blocks():
    with pytest.raises(ValueError, match="powers of two"):
        xnnpack.pack_weights(np.zeros((4, 4), np.int8), nr=4, kr=3, sr=1, column_ints=np.zeros(4, np.int32))


def _c_layout(text: str, function: str, nfields: int):
    import cffi

    from lowp.emulator.x86.native import build_shared_library
    from lowp.emulator import buildcache
    from lowp.emulator.x86.native import cache_dir
    path = buildcache.source_file(text, cache_dir() / "src", "abi-layout")
    lib_path = build_shared_library([path], ("-O1", f"-I{INCLUDE}"), "abi-layout")
    ffi = cffi.FFI()
    ffi.cdef(f"void {function}(long *out);")
    lib = ffi.dlopen(str(lib_path))
    out = ffi.new(f"long[{nfields}]")
    getattr(lib, function)(out)
    return list(out)


@pytest.mark.native
def test_params_layouts_are_the_c_structs():
    fields = {**{(d, f"fp32_{x}"): f"lowp_xnn_qs8_qc8w_fp32_{x}_params"
                 for d in ("qs8-qc8w", "qs8-qc4w", "qs8-qc2w") for x in ("armsimd32", "neon", "neonv8")},
              **{(d, "fp32_scalar"): "lowp_xnn_qs8_qc8w_fp32_params" for d in ("qs8-qc8w", "qs8-qc4w", "qs8-qc2w")},
              ("qs8", "fp32_scalar"): "lowp_xnn_qs8_fp32_params",
              ("qs8", "rndnu_scalar"): "lowp_xnn_qs8_rndnu_scalar_params",
              ("qs8", "fp32_armsimd32"): "lowp_xnn_qs8_fp32_armsimd32_params",
              ("qs8", "fp32_neon"): "lowp_xnn_qs8_fp32_neon_params",
              ("qs8", "fp32_neonv8"): "lowp_xnn_qs8_fp32_neonv8_params",
              ("qs8", "rndnu_neon"): "lowp_xnn_qs8_rndnu_neon_params",
              ("qu8", "fp32_scalar"): "lowp_xnn_qu8_fp32_params",
              ("qu8", "rndnu_scalar"): "lowp_xnn_qu8_rndnu_scalar_params",
              ("qu8", "rndnu16_scalar"): "lowp_xnn_qu8_rndnu16_scalar_params",
              ("qu8", "fp32_armsimd32"): "lowp_xnn_qu8_fp32_armsimd32_params",
              ("qu8", "fp32_neon"): "lowp_xnn_qu8_fp32_neon_params",
              ("qu8", "fp32_neonv8"): "lowp_xnn_qu8_fp32_neonv8_params",
              ("qu8", "rndnu_neon"): "lowp_xnn_qu8_rndnu_neon_params",
              **{(d, "minmax_f32"): "lowp_xnn_f32_minmax_params" for d in ("qd8-f32-qc8w", "qdu8-f32-qc8w",
                                                                           "qd8-f32-qc2w", "qdu8-f32-qc2w")},
              **{(f"{a}-f16-qc2w", "minmax_f16"): "lowp_xnn_f16_minmax_params" for a in ("qd8", "qdu8")},
              **{(d, "qc4w_minmax_f32"): "lowp_xnn_f32_qc4w_minmax_params" for d in ("qd8-f32-qc4w",
                                                                                     "qdu8-f32-qc4w")},
              **{(d, "qb4w_minmax_f32"): "lowp_xnn_f32_qb4w_minmax_params" for d in ("qd8-f32-qb4w",
                                                                                     "qdu8-f32-qb4w")},
              **{(f"{a}-f16-{w}", layout): f"lowp_xnn_f16_{struct}_params" for a in ("qd8", "qdu8")
                 for w, layout, struct in (("qc8w", "minmax_f16", "minmax"), ("qc4w", "qc4w_minmax_f16", "qc4w_minmax"),
                                           ("qb4w", "qb4w_minmax_f16", "qb4w_minmax"))},
              **{(d, "qb4w_minmax_bf16"): "lowp_xnn_bf16_qb4w_minmax_params" for d in ("qd8-bf16-qb4w",
                                                                                       "qdu8-bf16-qb4w")}}
    assert set(fields) == set(xnnpack.PARAMS_LAYOUTS)       # every layout lowp builds has its C struct
    body = []
    for i, (key, struct) in enumerate(fields.items()):
        dtype = xnnpack.PARAMS_LAYOUTS[key]
        lines = [f"out[{j}] = offsetof(struct {struct}, {name});" for j, name in enumerate(dtype.names)]
        lines.append(f"out[{len(dtype.names)}] = sizeof(struct {struct});")
        body.append(f"void layout{i}(long *out) {{ {' '.join(lines)} }}")
    body.append("void layout_row(long *out) { out[0] = offsetof(struct lowp_xnn_qd8_quantization_params, inv_scale);"
                " out[1] = sizeof(struct lowp_xnn_qd8_quantization_params); }")
    text = "#include <stddef.h>\n#include \"lowp/xnnpack.h\"\n" + "\n".join(body)
    for i, key in enumerate(fields):
        dtype = xnnpack.PARAMS_LAYOUTS[key]
        c = _c_layout(text, f"layout{i}", len(dtype.names) + 1)
        assert c[:-1] == [dtype.fields[n][1] for n in dtype.names], key
        assert c[-1] == dtype.itemsize, key
    assert _c_layout(text, "layout_row", 2) == [xnnpack.QD8_ROW.fields["inv_scale"][1], xnnpack.QD8_ROW.itemsize]


@pytest.mark.native
def test_requant_blob_reads_back_through_the_header_macros():
    text = """#include "lowp/quant.h"
    #include <string.h>
    static const unsigned char *blob;
    void set(const unsigned char *b) { blob = b; }
    void read(long *out) {
      const struct lowp_requant *q = (const struct lowp_requant *) blob;
      float s = LOWP_SCALE(q)[2];
      out[0] = q->a_zero_point; out[1] = q->b_zero_point; out[2] = q->output_zero_point; out[3] = q->output_min;
      out[4] = q->output_max; out[5] = q->n; out[6] = LOWP_BIAS(q)[2]; memcpy(&out[7], &s, 4);
      out[8] = LOWP_MULTIPLIER(q)[2]; out[9] = LOWP_SHIFT(q)[2];
    }"""
    import cffi

    from lowp.emulator import buildcache
    from lowp.emulator.x86.native import build_shared_library, cache_dir
    path = buildcache.source_file(text, cache_dir() / "src", "requant-blob")
    ffi = cffi.FFI()
    ffi.cdef("void set(const unsigned char *b); void read(long *out);")
    lib = ffi.dlopen(str(build_shared_library([path], ("-O1", f"-I{INCLUDE}"), "requant-blob")))
    q = {"a_zero_point": -3, "b_zero_point": 5, "output_zero_point": -1, "output_min": -100, "output_max": 90,
         "bias": np.array([1, 2, -2 ** 31, 4], np.int32), "scale": np.array([0.5, 1, 0.25, 2], np.float32),
         "multiplier": np.array([1, 2, 2 ** 30 + 7, 4], np.int32), "shift": np.array([0, 0, -5, 0], np.int32)}
    blob = abi.requant_blob(q, 4)
    lib.set(ffi.from_buffer(blob))
    out = ffi.new("long[10]")
    lib.read(out)
    values = list(out)
    assert values[:7] == [-3, 5, -1, -100, 90, 4, -2 ** 31]
    assert np.array([values[7]], np.int64).astype("<u4").view("<f4")[0] == np.float32(0.25)
    assert values[8:] == [2 ** 30 + 7, -5]


def test_bad_parameters_name_the_kernel_and_key():
    from lowp.kernels import Kernel
    k = Kernel.__new__(Kernel)
    k.name = "k"
    with pytest.raises(ValueError, match="k: bad quantization parameters: 'scale' must be float32 of shape \\(3,\\)"):
        abi.check_params(k, {"scale": np.ones(3, np.float64)}, 2, 3)
    with pytest.raises(ValueError, match="'bias' missing"):
        abi.check_params(k, {}, 2, 3, required=("bias",))
    with pytest.raises(ValueError, match="unknown key 'zero_point'"):
        abi.check_params(k, {"zero_point": 1}, 2, 3)
    with pytest.raises(ValueError, match="are a dict"):
        abi.check_params(k, [1, 2], 2, 3)
    abi.check_params(k, {"a_zero_point": np.zeros(2, np.int32), "bias": np.zeros(3, np.int32)}, 2, 3)


def test_qc4uw_packs_unsigned_nibbles_and_an_unscaled_bias():
    """xnn_pack_qs8_qc4uw_gemm_goi_w by hand from its facts (src/reference/packing.cc @75db3c0 L1186-1292): per
    block of nr columns, nr int32 bias - izp x (sum of the weights) (no 16x), then per chunk of 2 kr k per column
    kr bytes, byte j holding w + 8 of k = chunk + j (low nibble) and chunk + j + kr (high nibble), padding 8
    (a zero weight), then the floats. The signed planar packer of the same B holds two's complement nibbles and
    16x the ints; the unsigned one's bytes are the signed ones XOR 0x88."""
    B = np.array([[-8, 7], [3, -1], [0, -5]], np.int8)          # K = 3, N = 2
    bias, izp, scale = np.array([100, -7], np.int32), 5, np.array([0.5, 2.0], np.float32)
    packed = xnnpack.pack_qc4w(B, nr=2, kr=1, sr=1, bias=bias, izp=izp, column_floats=(scale,), unsigned=True)
    sums = B.astype(int).sum(axis=0)                             # [-5, 1]
    want = np.concatenate([
        np.array([100 - izp * sums[0], -7 - izp * sums[1]], "<i4").view(np.uint8),
        np.array([(-8 + 8) | (3 + 8) << 4, (7 + 8) | (-1 + 8) << 4,         # k 0 and 1, columns 0 and 1
                  (0 + 8) | 8 << 4, (-5 + 8) | 8 << 4], np.uint8),          # k 2 and the padding k 3
        scale.view(np.uint8)])
    assert np.array_equal(packed, want)
    signed = xnnpack.pack_qc4w(B, nr=2, kr=1, sr=1, bias=bias, izp=izp, column_floats=(scale,))
    assert np.array_equal(signed[8:12] ^ 0x88, packed[8:12])
    assert np.array_equal(signed[:8].view("<i4"), 16 * packed[:8].view("<i4"))


def test_qc4uw_entries_map_to_unsigned_nibbles_and_the_8bit_contracts():
    from lowp.kernels.xnnpack import from_test_entry
    e = from_test_entry({"name": "xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x8c8__avx2_madd",
                         "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params",
                         "pack": "xnn_pack_qs8_to_qu8_qc4uw_gemm_goi_w", "k-block": 16})
    assert e["xnnpack"]["nibbles"] == "unsigned" and e["a_shift"] == 128
    e = from_test_entry({"name": "xnn_qd8_f32_qc4w_gemm_minmax_ukernel_1x8c8__avx2_madd",
                         "init": "xnn_init_f32_qc4w_minmax_scalar_params", "pack": "xnn_pack_qs8_qc4uw_gemm_goi_w",
                         "k-block": 16, "unsigned-inputs": True})
    assert e["xnnpack"] == {"datatype": "qdu8-f32-qc4w", "params": "qc4w_minmax_f32", "sr": 1, "nibbles": "unsigned"}
    assert "nibbles" not in from_test_entry({"name": "xnn_qs8_qc4w_gemm_minmax_fp32_ukernel_1x4__scalar_lrintf",
                                             "init": "xnn_init_qs8_qc8w_conv_minmax_fp32_scalar_params",
                                             "pack": "xnn_pack_qs8_qc4w_gemm_goi_w", "k-block": 2})["xnnpack"]


def test_f16_params_hold_half_bounds_and_refuse_others():
    q = {"output_min": np.float32(-2.5), "output_max": np.float32(np.inf)}
    blob = xnnpack.params_blob("qd8-f16-qc8w", "minmax_f16", q)
    assert blob.view("<u2").tolist() == [0xC100, 0x7C00]               # -2.5 and +inf as IEEE halves
    with pytest.raises(ValueError, match="not an IEEE half"):
        xnnpack.params_blob("qd8-f16-qc8w", "minmax_f16", {**q, "output_min": np.float32(0.1)})
    blob = xnnpack.params_blob("qd8-bf16-qb4w", "qb4w_minmax_bf16", {**q, "output_min": np.float32(0.1)}, bl=32)
    assert blob[:4].view("<f4")[0] == np.float32(0.1) and blob[8:].view("<u8")[0] == 32


def test_a_kept_invocation_is_the_one_built_afresh_with_buffers_of_its_own(monkeypatch):
    """abi.invocation keeps an XNNPACK invocation for a kernel's later checks (their calls repeat): what it hands
    out again is byte for byte what a fresh build gives, its buffers are its own (a write to one hand-out does not
    reach the next), and another seed, parameter or kernel builds anew."""
    from pathlib import Path

    from lowp.kernels.entry import KeptForKernel
    from lowp.kernels.invocation import Invocation

    from .conftest import registered
    toml = Path(__file__).parent.parent / "kernels" / "quantized" / "x86.toml"
    with registered(toml) as kernels:
        k, other = kernels["qs8_qc8w_gemm_4x8c8_fp32_avx2"], kernels["qu8_gemm_2x8c8_fp32_avx2"]
        rng = np.random.default_rng(5)
        A, B = rng.integers(-128, 128, (3, 11)).astype(np.int8), rng.integers(-127, 128, (11, 9)).astype(np.int8)
        q = {"bias": rng.integers(-999, 999, 9).astype(np.int32), "scale": np.full(9, 0.01, np.float32),
             "output_zero_point": 3, "output_min": -128, "output_max": 127, "a_zero_point": 5, "b_zero_point": 0}

        def built(kernel=k, seed=1, **changed) -> Invocation:
            return abi.invocation(kernel, A, B, {**q, **changed}, seed=seed, work_seed=None)

        def same(x: Invocation, y: Invocation) -> bool:
            return x.buffers.keys() == y.buffers.keys() and x.calls == y.calls and all(
                x.buffers[n].tobytes() == y.buffers[n].tobytes() for n in x.buffers)

        monkeypatch.setattr(abi, "_KEPT", KeptForKernel(abi._KEPT.max_bytes))
        first = built()
        first.buffers["C"][...] = 0                     # what an executor may do with its own copy
        again = built()
        monkeypatch.setattr(abi, "_KEPT", KeptForKernel(abi._KEPT.max_bytes))
        assert same(again, built()) and not same(first, again)
        assert not same(built(seed=2), again) and not same(built(output_zero_point=4), again)
        assert len(abi._KEPT.values) == 3
        qu8 = {**q, "a_zero_point": 5, "b_zero_point": 7}
        abi.invocation(other, A.view(np.uint8), B.view(np.uint8), qu8, seed=1, work_seed=None)
        assert abi._KEPT.kernel is other and len(abi._KEPT.values) == 1
        monkeypatch.setattr(abi._KEPT, "max_bytes", 0)         # past the bound: the next new one starts afresh
        built()
        built(seed=3)
        assert len(abi._KEPT.values) == 1
