"""The XNNPACK GEMM micro-kernel ABI, so a ukernel written against XNNPACK's prototype runs under lowp from a TOML
entry alone: the weight packing (bias first, then the weights in kr/sr blocks, then the per-channel floats), the
params blobs per requantization kind, and the calls a driver makes (one per MR rows of A; the ukernel walks all N
columns itself, NR at a time).

Facts, not code, from XNNPACK's public sources (docs/xnnpack-abi.md has the citations): the ukernel prototype
(src/xnnpack/gemm.h), the packing rule of xnn_pack_qs8_gemm_goi_w (src/packing.c: bias - input_zero_point * sum_k w
per channel, k index round_down(k0, kr*sr) + ((k0 + kr_offset + n_offset*kr) & (kr*sr - 1))), the newest scalar params
layouts (src/xnnpack/microparams.h) and the documented over-read of A (XNN_OOB_READS: up to kr*sr - 1 bytes past a
row's K). The C side is kernels/include/lowp/xnnpack.h.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowp.isa_models.lanes import S32, wrap

from .invocation import Invocation, Ref


@dataclass(frozen=True)
class Datatype:
    name: str
    a_type: str
    b_type: str
    c_type: str
    per_channel_floats: tuple[str, ...]   # the float arrays packed after each block's weights, in order
    bias_in_packing: bool                 # int32 bias packed before the weights (qd8: its float bias follows instead)
    params: tuple[str, ...]               # the params layouts this datatype's kernels take
    kernel_zero_point: bool = False       # qu8: the weights' zero point travels in the params and pads the packing


DATATYPES = {d.name: d for d in (
    Datatype("qs8-qc8w", "s8", "s8", "s8", ("scale",), True, ("fp32_scalar",)),
    Datatype("qs8", "s8", "s8", "s8", (), True, ("fp32_scalar", "rndnu_neon")),
    Datatype("qd8-f32-qc8w", "s8", "s8", "f32", ("b_scale", "bias"), False, ("minmax_f32",)),
    Datatype("qu8", "u8", "u8", "u8", (), True, ("fp32_scalar", "rndnu_neon"), kernel_zero_point=True),
)}

# The params blobs, as numpy structured dtypes laid out like the C structs of lowp/xnnpack.h (natural alignment).
PARAMS_LAYOUTS = {
    ("qs8-qc8w", "fp32_scalar"): np.dtype([("output_zero_point", "<i2"), ("output_min", "<i2"), ("output_max", "<i2")]),
    ("qs8", "fp32_scalar"): np.dtype([("scale", "<f4"), ("output_zero_point", "<i2"), ("output_min", "<i2"),
                                      ("output_max", "<i2")], align=True),
    ("qs8", "rndnu_neon"): np.dtype([("right_pre_shift", "<i4"), ("multiplier", "<i4"), ("right_post_shift", "<i4"),
                                     ("output_zero_point", "<i2"), ("output_min", "i1"), ("output_max", "i1")],
                                    align=True),
    ("qd8-f32-qc8w", "minmax_f32"): np.dtype([("min", "<f4"), ("max", "<f4")]),
    ("qu8", "fp32_scalar"): np.dtype([("kernel_zero_point", "<i4"), ("scale", "<f4"), ("output_zero_point", "<i2"),
                                      ("output_min", "<i2"), ("output_max", "<i2")], align=True),
    ("qu8", "rndnu_neon"): np.dtype([("kernel_zero_point", "u1"), ("padding", "u1", 3), ("right_pre_shift", "<i4"),
                                     ("multiplier", "<i4"), ("right_post_shift", "<i4"), ("output_zero_point", "<i2"),
                                     ("output_min", "u1"), ("output_max", "u1")], align=True),
}
QD8_ROW = np.dtype([("zero_point", "<i4"), ("inv_scale", "<f4")])
EXTRA_QUANTIZATION_PARAMS = 15     # include/xnnpack.h @75db3c0 (10 before 0b4168b, 2024-11-19: taller kernels)
# What each layout needs from a case's quantization parameters (lowp.isa_models.requant's q keys).
LAYOUT_KEYS = {
    "fp32_scalar": ("bias", "scale", "output_zero_point", "output_min", "output_max"),
    "rndnu_neon": ("bias", "scale", "output_zero_point", "output_min", "output_max"),
    "minmax_f32": ("bias", "a_zero_point", "a_inv_scale", "b_scale", "output_min", "output_max"),
}


def required_keys(datatype: str, layout: str) -> tuple[str, ...]:
    """The q keys a ukernel of `datatype` with params `layout` is handed: the layout's, and qu8's kernel zero
    point."""
    return LAYOUT_KEYS[layout] + (("b_zero_point",) if DATATYPES[datatype].kernel_zero_point else ())


def packed_k(K: int, kr: int, sr: int) -> int:
    """K rounded up to kr*sr: the depth a ukernel reads (XNNPACK round_up_po2(kc, kr * sr))."""
    skr = kr * sr
    return -(-K // skr) * skr


def pack_weights(B: np.ndarray, *, nr: int, kr: int, sr: int, column_ints: np.ndarray,
                 column_floats: tuple[np.ndarray, ...] = (), pad: int = 0) -> np.ndarray:
    """XNNPACK's packed weights for B (K x N): per block of nr columns, nr int32 (`column_ints`: the bias less the
    input zero point times the column sums), the weights k-block by k-block (kr values per column, the sr shuffle),
    then each of `column_floats` as nr float32. Padding (past N, past K) is `pad`: zero, or qu8's kernel zero
    point, so that a padded weight less the zero point is zero (xnn_pack_qs8_gemm_goi_w, xnn_pack_qu8_gemm_goi_w)."""
    K, N = B.shape
    if (kr & (kr - 1)) or (sr & (sr - 1)):
        raise ValueError(f"kr={kr}, sr={sr}: XNNPACK's packing needs powers of two")
    skr, kp = kr * sr, packed_k(K, kr, sr)
    blocks = -(-N // nr)
    Bp = np.full((kp, blocks * nr), pad, np.uint8).view(np.int8)
    Bp[:K, :N] = B.view(np.int8)
    # k index of (k-block start k0, column offset n, element j): round_down(k0, skr) + ((k0 + j + n*kr) & (skr-1))
    k0 = np.arange(0, kp, kr)[:, None, None]
    n = np.arange(nr)[None, :, None]
    j = np.arange(kr)[None, None, :]
    kidx = (k0 // skr) * skr + ((k0 + j + n * kr) & (skr - 1))              # (kp/kr, nr, kr)
    parts = []
    for b in range(blocks):
        cols = slice(b * nr, (b + 1) * nr)
        ints = np.zeros(nr, "<i4")
        ints[:min(nr, N - b * nr)] = column_ints[cols]
        weights = Bp[:, cols][kidx, np.broadcast_to(n, kidx.shape)]          # (kp/kr, nr, kr)
        parts += [ints.view(np.uint8), weights.reshape(-1).view(np.uint8)]
        for f in column_floats:
            block = np.zeros(nr, "<f4")
            block[:min(nr, N - b * nr)] = f[cols]
            parts.append(block.view(np.uint8))
    return np.concatenate(parts)


def column_sums(B: np.ndarray) -> np.ndarray:
    return B.astype(np.int64).sum(axis=0)


def _int32(x) -> np.ndarray:
    """The int32 a packed bias holds: exact integers wrapped as the int32 arithmetic of the packing wraps them."""
    return wrap(np.asarray(x, np.int64), S32)


def params_blob(datatype: str, layout: str, q: dict) -> np.ndarray:
    """The params struct a ukernel of `datatype` with requantization `layout` is handed, from a case's q."""
    dtype = PARAMS_LAYOUTS[(datatype, layout)]
    blob = np.zeros(1, dtype)
    if layout == "minmax_f32":
        blob["min"], blob["max"] = np.float32(q["output_min"]), np.float32(q["output_max"])
    else:
        blob["output_zero_point"], blob["output_min"], blob["output_max"] = \
            q["output_zero_point"], q["output_min"], q["output_max"]
    if DATATYPES[datatype].kernel_zero_point:
        blob["kernel_zero_point"] = q["b_zero_point"]
    if layout == "fp32_scalar" and datatype in ("qs8", "qu8"):
        blob["scale"] = _per_tensor(q["scale"], "scale")
    if layout == "rndnu_neon":
        from lowp.isa_models.requant import xnnpack_rndnu_neon_params
        fields = xnnpack_rndnu_neon_params(np.float32(_per_tensor(q["scale"], "scale")))
        for name in ("right_pre_shift", "multiplier", "right_post_shift"):
            blob[name] = int(np.asarray(fields[name]).reshape(-1)[0])
    return blob.view(np.uint8)


def _per_tensor(values, name: str):
    v = np.asarray(values).reshape(-1)
    if v.size and not (v == v[0]).all():
        raise ValueError(f"{name}: a per-tensor ABI takes one value, the case has {len(np.unique(v))} per channel")
    return v[0]


def invocation(A: np.ndarray, B: np.ndarray, q: dict, *, datatype: str, layout: str, mr: int, nr: int, kr: int,
               sr: int, symbol: str, a_shift: int = 0) -> Invocation:
    """The buffers and the ukernel calls for C = requantize(A x B) under the XNNPACK ABI. a_shift: what the ukernel
    adds to A before multiplying (128 for a VPDPBUSD kernel that reads s8 A as u8): the packed bias takes it off
    with the zero point, as XNNPACK's qs8-to-qu8 packing does (input_zero_point + 128)."""
    d = DATATYPES[datatype]
    M, K = A.shape
    N = B.shape[1]
    kzp = int(q.get("b_zero_point", 0)) if d.kernel_zero_point else 0
    if d.bias_in_packing:       # qu8 adds K * izp * kzp: the ukernel multiplies A by (w - kzp) (packing.cc qu8)
        izp = int(q.get("a_zero_point", 0)) + a_shift
        ints = _int32(np.asarray(q["bias"], np.int64) - izp * column_sums(B) + K * izp * kzp)
    else:       # qd8: -sum_k w, which the ukernel multiplies by each row's zero point (a shift of A is its own
        ints = _int32(-column_sums(B))         # business there: XNNPACK's VNNI qd8 kernels add 128 to the zero point)
    floats = tuple(np.asarray(q[name], np.float32) for name in d.per_channel_floats)
    w = pack_weights(B, nr=nr, kr=kr, sr=sr, column_ints=ints, column_floats=floats, pad=kzp)
    c_dtype = np.float32 if d.c_type == "f32" else np.int8 if d.c_type == "s8" else np.uint8
    item = np.dtype(c_dtype).itemsize
    buffers = {"A": np.ascontiguousarray(A), "w": w, "C": np.zeros((M, N), c_dtype),
               "params": params_blob(datatype, layout, q)}
    if d.name.startswith("qd8"):
        # XNNPACK's qd8 ukernels read MR rows of these whatever mr is: the operator allocates
        # XNN_EXTRA_QUANTIZATION_PARAMS (15) more and fills them with copies of the last row
        # (include/xnnpack.h; src/operator-run.c xnn_compute_pad_qd8_params).
        rows = np.zeros(M + EXTRA_QUANTIZATION_PARAMS, QD8_ROW)
        rows["zero_point"][:M], rows["inv_scale"][:M] = q["a_zero_point"], q["a_inv_scale"]
        rows[M:] = rows[M - 1]
        buffers["quantization_params"] = rows.view(np.uint8)
    calls = []
    for m0 in range(0, M, mr):
        args = [min(mr, M - m0), N, K, Ref("A", m0 * K), K, Ref("w", 0), Ref("C", m0 * N * item), N * item,
                nr * item, Ref("params", 0)]
        if "quantization_params" in buffers:
            args.append(Ref("quantization_params", m0 * QD8_ROW.itemsize))
        calls.append((symbol, args))
    names = ["mr", "nc", "kc", "a", "a_stride", "w", "c", "cm_stride", "cn_stride", "params", "quantization_params"]
    return Invocation(buffers, calls, output="C", writable=("C",), arg_names=tuple(names))
