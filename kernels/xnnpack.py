"""The XNNPACK GEMM and IGEMM micro-kernel ABI, so a ukernel written against XNNPACK's prototypes runs under lowp
from a TOML entry alone: the weight packing (bias first, then the weights in kr/sr blocks, 4-bit weights two to a
byte, blockwise scales between the blocks, then the per-channel floats), every params layout of the int8
datatypes, the indirection buffer of an IGEMM, strided A and C, and the calls a driver makes (one per MR rows of A;
the ukernel walks all N columns itself, NR at a time).

Facts, not code, from XNNPACK's public sources (google/XNNPACK @75db3c0; docs/xnnpack-abi.md has the citations
with lines): the prototypes (src/xnnpack/gemm.h, igemm.h), the packers (src/reference/packing.cc), the params unions
(src/xnnpack/microparams.h) and their init functions (src/microparams-init.c), the indirection buffer and the zero
buffer of the convolution operator (src/indirection.c, src/operators/convolution-nhwc.c, src/operator-run.c) and
the test generator's tables (tools/generate-gemm-test.py, test/*.yaml). The C side is
kernels/include/lowp/xnnpack.h.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import dataclass

import numpy as np

from lowp.isa_models.float32 import bf16_bits, f16_values, fp16_bits   # bf16_bits: math_cvt_bf16_fp32 (qb4w scales)
from lowp.isa_models.lanes import S32, symbolic, wrap

from lowp.kernels.invocation import Invocation, Ref, Strided

XNN = "google/XNNPACK @75db3c0"
EXTRA_QUANTIZATION_PARAMS = 15     # include/xnnpack.h L117 (10 before 0b4168b, 2024-11-19: taller kernels)
EXTRA_BYTES = 16                   # include/xnnpack.h L31 (XNN_EXTRA_BYTES): the zero buffer's slack
# What differs on a 32-bit target: sizeof(void *) (an IGEMM's ks and indirection entries: convolution-nhwc.c L2980)
# and XNN_EXTRA_BYTES, 128 on Hexagon (include/xnnpack.h L28-32). target -> (pointer bytes, XNN_EXTRA_BYTES).
# wasm32's pointers are 4-byte linear-memory addresses (its machine writes them: lowp.emulator.wasm.machine).
TARGET_ABI = {"arm": (4, EXTRA_BYTES), "hexagon": (4, 128), "wasm32": (4, EXTRA_BYTES)}
TESTER_BLOCKSIZE = 32              # the block size of every qb4w test XNNPACK generates (generate-gemm-test.py .bl(32))
MIN_BLOCKSIZE = 32                 # include/xnnpack.h L120 (XNN_MIN_BLOCKSIZE): qb4w block sizes are multiples


# ---- datatypes ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Datatype:
    name: str
    a_type: str
    b_type: str
    c_type: str
    params: tuple[str, ...]               # the params layouts its kernels take (the first: the scalar one)
    floats: tuple[str, ...] = ()          # q keys of the float32 arrays packed after each block's weights
    int_bias: bool = True                 # an int32 bias (less the zero-point terms) leads each packed block
    kernel_zero_point: bool = False       # qu8: the weights' zero point travels in the params and pads the packing
    dynamic: bool = False                 # qd8/qdu8: a {zero_point, inv_scale} per row of A; packed -column sums
    weight_bits: int = 8                  # 4: two weights a byte, the int32 accumulators carry 16x the sum;
                                          # 2: four weights a byte (qc2w), the int32 holds the plain sum
    blockwise: bool = False               # qb4w: one bf16 scale per block of `bl` k per column
    shiftable: bool = False               # a qs8_to_qu8 packer exists: a kernel may read A + 128 (a_shift)
    row_sums: bool = False                # qd8-qc2w: a float weight zero point per column packed after the int32
                                          # column sums, and the ukernel is handed the float sums of A's rows

    @property
    def weight_range(self) -> tuple[int, int]:
        """The values of B the packing can hold: a sub-byte weight is its field's two's complement value (4-bit
        [-8, 7], 2-bit [-2, 1])."""
        if self.weight_bits < 8:
            return -(1 << (self.weight_bits - 1)), (1 << (self.weight_bits - 1)) - 1
        return (-128, 127) if self.b_type == "s8" else (0, 255)

    @property
    def planes(self) -> int:
        """k values per packed byte position of a column (XNNPACK's test generator's `planes`: 2 nibbles, 4
        crumbs)."""
        return 8 // self.weight_bits


QC8W_PARAMS = ("fp32_scalar", "fp32_armsimd32", "fp32_neon", "fp32_neonv8")
DATATYPES = {d.name: d for d in (
    Datatype("qs8-qc8w", "s8", "s8", "s8", QC8W_PARAMS, ("scale",), shiftable=True),
    Datatype("qs8", "s8", "s8", "s8", ("fp32_scalar", "rndnu_scalar", "fp32_armsimd32", "fp32_neon", "fp32_neonv8",
                                      "rndnu_neon"), shiftable=True),
    Datatype("qu8", "u8", "u8", "u8", ("fp32_scalar", "rndnu_scalar", "rndnu16_scalar", "fp32_armsimd32",
                                      "fp32_neon", "fp32_neonv8", "rndnu_neon"), kernel_zero_point=True),
    Datatype("qd8-f32-qc8w", "s8", "s8", "f32", ("minmax_f32",), ("b_scale", "bias"), False, dynamic=True),
    Datatype("qdu8-f32-qc8w", "u8", "s8", "f32", ("minmax_f32",), ("b_scale", "bias"), False, dynamic=True),
    Datatype("qs8-qc4w", "s8", "s8", "s8", QC8W_PARAMS, ("scale",), weight_bits=4, shiftable=True),
    Datatype("qd8-f32-qc4w", "s8", "s8", "f32", ("qc4w_minmax_f32",), ("b_scale", "bias"), False, dynamic=True,
             weight_bits=4),
    Datatype("qdu8-f32-qc4w", "u8", "s8", "f32", ("qc4w_minmax_f32",), ("b_scale", "bias"), False, dynamic=True,
             weight_bits=4),
    Datatype("qd8-f32-qb4w", "s8", "s8", "f32", ("qb4w_minmax_f32",), ("bias",), False, dynamic=True,
             weight_bits=4, blockwise=True),
    Datatype("qdu8-f32-qb4w", "u8", "s8", "f32", ("qb4w_minmax_f32",), ("bias",), False, dynamic=True,
             weight_bits=4, blockwise=True),
    # half-precision outputs: the qd8 float stage stored as IEEE binary16 (f16) or bfloat16 (bf16, C as its bits)
    *(Datatype(f"{a}-f16-qc8w", t, "s8", "f16", ("minmax_f16",), ("b_scale", "bias"), False, dynamic=True)
      for a, t in (("qd8", "s8"), ("qdu8", "u8"))),
    *(Datatype(f"{a}-f16-qc4w", t, "s8", "f16", ("qc4w_minmax_f16",), ("b_scale", "bias"), False, dynamic=True,
               weight_bits=4) for a, t in (("qd8", "s8"), ("qdu8", "u8"))),
    *(Datatype(f"{a}-{c}-qb4w", t, "s8", c, (f"qb4w_minmax_{c}",), ("bias",), False, dynamic=True, weight_bits=4,
               blockwise=True) for a, t in (("qd8", "s8"), ("qdu8", "u8")) for c in ("f16", "bf16")),
    # 2-bit weights (qc2w): four to a byte; the qd8 forms take a float zero point per column and the rows' sums
    Datatype("qs8-qc2w", "s8", "s8", "s8", QC8W_PARAMS, ("scale",), weight_bits=2, shiftable=True),
    *(Datatype(f"{a}-{c}-qc2w", t, "s8", c, (f"minmax_{c}",), ("b_scale", "bias"), False, dynamic=True,
               weight_bits=2, row_sums=True) for a, t in (("qd8", "s8"), ("qdu8", "u8")) for c in ("f32", "f16")),
)}


# ---- params layouts -----------------------------------------------------------------------------------------
def _struct(*fields) -> np.dtype:
    """A C struct's layout (natural alignment, as the compiler lays out microparams.h's structs)."""
    return np.dtype(list(fields), align=True)


ZP16, MIN16, MAX16 = ("output_zero_point", "<i2"), ("output_min", "<i2"), ("output_max", "<i2")
SCALE, KZP8, PAD3 = ("scale", "<f4"), ("kernel_zero_point", "u1"), ("padding", "u1", 3)
MAGIC = (("magic_bias", "<f4"), ("magic_bias_less_output_zero_point", "<i4"))
ARMSIMD = (("magic_bias", "<f4"), ("magic_bias_less_zero_point", "<i4"), ("output_min", "<u4"),
           ("output_max", "<u4"))
RNDNU_NEON = (("right_pre_shift", "<i4"), ("multiplier", "<i4"), ("right_post_shift", "<i4"), ZP16)
RNDNU_SCALAR = (("multiplier", "<i4"), ("shift", "<u4"), MIN16, MAX16, ("output_zero_point", "<i4"))


def _qc8w_layouts(name):
    """union xnn_qs8_qc8w_conv_minmax_params (microparams.h L228-255), shared by qs8-qc8w and qs8-qc4w."""
    return {(name, "fp32_scalar"): _struct(ZP16, MIN16, MAX16),
            (name, "fp32_armsimd32"): _struct(*ARMSIMD),
            (name, "fp32_neon"): _struct(*MAGIC, ("output_min", "i1"), ("output_max", "i1")),
            (name, "fp32_neonv8"): _struct(ZP16, ("output_min", "u1"), ("output_max", "u1"))}


# The params structs, laid out like XNNPACK's (microparams.h @75db3c0: the unions L179-322, the float minmax structs
# L97-132) and lowp/xnnpack.h's copies of them.
PARAMS_LAYOUTS = {
    **_qc8w_layouts("qs8-qc8w"), **_qc8w_layouts("qs8-qc4w"), **_qc8w_layouts("qs8-qc2w"),
    # union xnn_qs8_conv_minmax_params, L179-226
    ("qs8", "fp32_scalar"): _struct(SCALE, ZP16, MIN16, MAX16),
    ("qs8", "rndnu_scalar"): _struct(*RNDNU_SCALAR, ("rounding", "<i8")),
    ("qs8", "fp32_armsimd32"): _struct(SCALE, *ARMSIMD),
    ("qs8", "fp32_neon"): _struct(SCALE, *MAGIC, ("output_min", "i1"), ("output_max", "i1")),
    ("qs8", "fp32_neonv8"): _struct(SCALE, ZP16, ("output_min", "i1"), ("output_max", "i1")),
    ("qs8", "rndnu_neon"): _struct(*RNDNU_NEON, ("output_min", "i1"), ("output_max", "i1")),
    # union xnn_qu8_conv_minmax_params, L257-322
    ("qu8", "fp32_scalar"): _struct(("kernel_zero_point", "<i4"), SCALE, ZP16, MIN16, MAX16),
    ("qu8", "rndnu_scalar"): _struct(*RNDNU_SCALAR, ("kernel_zero_point", "<i4"), ("rounding", "<i8")),
    ("qu8", "rndnu16_scalar"): _struct(KZP8, PAD3, ("left_pre_shift", "<i4"), ("multiplier", "<i2"), ZP16,
                                       ("output_min", "u1"), ("output_max", "u1")),
    ("qu8", "fp32_armsimd32"): _struct(SCALE, ("magic_bias", "<f4"), ("minus_kernel_zero_point", "<u4"),
                                       ("magic_bias_less_zero_point", "<i4"), ("output_min", "<u4"),
                                       ("output_max", "<u4")),
    ("qu8", "fp32_neon"): _struct(KZP8, PAD3, SCALE, *MAGIC, ("output_min", "u1"), ("output_max", "u1")),
    ("qu8", "fp32_neonv8"): _struct(KZP8, PAD3, SCALE, ZP16, ("output_min", "u1"), ("output_max", "u1")),
    ("qu8", "rndnu_neon"): _struct(KZP8, PAD3, *RNDNU_NEON, ("output_min", "u1"), ("output_max", "u1")),
    # struct xnn_f32_minmax_params L97-102, xnn_f32_qc4w_minmax_params L118-124, xnn_f32_qb4w_minmax_params
    # L126-132 (blocksize a size_t)
    **{(d, "minmax_f32"): _struct(("min", "<f4"), ("max", "<f4")) for d in ("qd8-f32-qc8w", "qdu8-f32-qc8w",
                                                                           "qd8-f32-qc2w", "qdu8-f32-qc2w")},
    **{(d, "qc4w_minmax_f32"): _struct(("min", "<f4"), ("max", "<f4"), ("kernel_zero_point", "<i4"))
       for d in ("qd8-f32-qc4w", "qdu8-f32-qc4w")},
    **{(d, "qb4w_minmax_f32"): _struct(("min", "<f4"), ("max", "<f4"), ("blocksize", "<u8"))
       for d in ("qd8-f32-qb4w", "qdu8-f32-qb4w")},
    # struct xnn_f16_minmax_params L90-95, xnn_f16_qc4w_minmax_params L104-109, xnn_f16_qb4w_minmax_params
    # L111-117 (xnn_float16 bounds: their bits), xnn_bf16_qb4w_minmax_params L135-141 (float bounds)
    **{(d, "minmax_f16"): _struct(("min", "<u2"), ("max", "<u2")) for d in ("qd8-f16-qc8w", "qdu8-f16-qc8w",
                                                                           "qd8-f16-qc2w", "qdu8-f16-qc2w")},
    **{(d, "qc4w_minmax_f16"): _struct(("min", "<u2"), ("max", "<u2")) for d in ("qd8-f16-qc4w", "qdu8-f16-qc4w")},
    **{(d, "qb4w_minmax_f16"): _struct(("min", "<u2"), ("max", "<u2"), ("blocksize", "<u8"))
       for d in ("qd8-f16-qb4w", "qdu8-f16-qb4w")},
    **{(d, "qb4w_minmax_bf16"): _struct(("min", "<f4"), ("max", "<f4"), ("blocksize", "<u8"))
       for d in ("qd8-bf16-qb4w", "qdu8-bf16-qb4w")},
}
QD8_ROW = np.dtype([("zero_point", "<i4"), ("inv_scale", "<f4")])     # struct xnn_qd8_quantization_params L174
MAGIC_BIAS, MAGIC_BIAS_BITS = np.float32(12582912.0), 0x4B400000      # microparams-init.c: 1.5 * 2^23 and its bits

# What each layout needs from a case's quantization parameters (lowp.isa_models.requant's q keys).
REQUANT_KEYS = ("bias", "scale", "output_zero_point", "output_min", "output_max")
FLOAT_KEYS = ("a_zero_point", "a_inv_scale", "output_min", "output_max")
LAYOUT_KEYS = {**{layout: REQUANT_KEYS for layout in ("fp32_scalar", "fp32_armsimd32", "fp32_neon", "fp32_neonv8",
                                                      "rndnu_scalar", "rndnu16_scalar", "rndnu_neon")},
               "minmax_f32": ("bias", "b_scale", *FLOAT_KEYS), "qc4w_minmax_f32": ("bias", "b_scale", *FLOAT_KEYS),
               "qb4w_minmax_f32": ("bias", "b_block_scale", *FLOAT_KEYS),
               "minmax_f16": ("bias", "b_scale", *FLOAT_KEYS), "qc4w_minmax_f16": ("bias", "b_scale", *FLOAT_KEYS),
               "qb4w_minmax_f16": ("bias", "b_block_scale", *FLOAT_KEYS),
               "qb4w_minmax_bf16": ("bias", "b_block_scale", *FLOAT_KEYS)}


def required_keys(datatype: str, layout: str) -> tuple[str, ...]:
    """The q keys a ukernel of `datatype` with params `layout` is handed: the layout's, qu8's kernel zero point and
    qd8-qc2w's float weight zero points."""
    d = DATATYPES[datatype]
    return LAYOUT_KEYS[layout] + (("b_zero_point",) if d.kernel_zero_point else ()) + \
        (("b_float_zero_point",) if d.row_sums else ())


def params_blob(datatype: str, layout: str, q: dict, *, bl: int = 0, kernel_zero_point: int = 8) -> np.ndarray:
    """The params struct a ukernel of `datatype` with `layout` is handed, from a case's q, filled as XNNPACK's
    init function for that layout fills it (src/microparams-init.c @75db3c0). bl: a qb4w kernel's block size;
    kernel_zero_point: what a 4-bit params struct is told (0 or 8: XNNPACK's two nibble encodings)."""
    blob = np.zeros(1, PARAMS_LAYOUTS[(datatype, layout)])
    d = DATATYPES[datatype]
    if d.dynamic:
        blob["min"], blob["max"] = (_float_bound(blob.dtype["min"], q[k], k) for k in ("output_min", "output_max"))
        if layout == "qc4w_minmax_f32":
            blob["kernel_zero_point"] = kernel_zero_point
        if "blocksize" in blob.dtype.names:
            blob["blocksize"] = bl
        return blob.view(np.uint8)
    zp, lo, hi = (int(q[k]) for k in ("output_zero_point", "output_min", "output_max"))
    if d.kernel_zero_point and "kernel_zero_point" in blob.dtype.names:     # armsimd32 holds it negated
        blob["kernel_zero_point"] = int(q["b_zero_point"])
    _FILL[layout](blob, d, zp, lo, hi, q)
    return blob.view(np.uint8)


def _float_bound(field: np.dtype, value, name: str):
    """A float clamp bound as a params field holds it: float32, or an xnn_float16's bits (the value must be a half:
    XNNPACK's f16 init functions take xnn_float16 bounds, so a caller rounds before, never the kernel)."""
    v = np.float32(value)
    if field != np.dtype("<u2"):
        return v
    bits = fp16_bits(v)
    if not np.isnan(v) and np.float32(f16_values(bits)) != v:
        raise ValueError(f"{name}={float(v)!r}: not an IEEE half; an f16 kernel's params hold xnn_float16 bounds "
                         "(src/xnnpack/microparams.h L90-95)")
    return bits


def _scale(d: Datatype, q) -> np.float32:
    """The per-tensor scale of a qs8/qu8 params struct (qc8w/qc4w carry theirs in the packed weights)."""
    return np.float32(_per_tensor(q["scale"], "scale"))


def _fill_fp32_scalar(blob, d, zp, lo, hi, q):
    blob["output_zero_point"], blob["output_min"], blob["output_max"] = zp, lo, hi
    if "scale" in blob.dtype.names:
        blob["scale"] = _scale(d, q)


def _fill_fp32_neonv8(blob, d, zp, lo, hi, q):
    # qs8-qc8w's struct holds the int8 clamp in uint8 fields: the bits (init_..._fp32_neonv8_params L62-73)
    blob["output_zero_point"] = zp
    blob["output_min"], blob["output_max"] = np.array([lo, hi]).astype(blob.dtype["output_min"])
    if "scale" in blob.dtype.names:
        blob["scale"] = _scale(d, q)


def _fill_fp32_neon(blob, d, zp, lo, hi, q):
    blob["magic_bias"], blob["magic_bias_less_output_zero_point"] = MAGIC_BIAS, MAGIC_BIAS_BITS - zp
    blob["output_min"], blob["output_max"] = np.array([lo, hi]).astype(blob.dtype["output_min"])
    if "scale" in blob.dtype.names:
        blob["scale"] = _scale(d, q)


def _fill_fp32_armsimd32(blob, d, zp, lo, hi, q):
    # the clamp's byte repeated four times (a SIMD32 word); qu8 adds -kernel_zero_point as two uint16 halves
    blob["magic_bias"], blob["magic_bias_less_zero_point"] = MAGIC_BIAS, MAGIC_BIAS_BITS - zp
    blob["output_min"], blob["output_max"] = ((v & 0xFF) * 0x01010101 for v in (lo, hi))
    if "scale" in blob.dtype.names:
        blob["scale"] = _scale(d, q)
    if "minus_kernel_zero_point" in blob.dtype.names:
        blob["minus_kernel_zero_point"] = ((-int(q["b_zero_point"])) & 0xFFFF) * 0x00010001


def _fill_rndnu_scalar(blob, d, zp, lo, hi, q):
    from lowp.isa_models.requant import xnnpack_rndnu_scalar_params
    p = xnnpack_rndnu_scalar_params(_scale(d, q))
    for name in ("multiplier", "shift", "rounding"):
        blob[name] = int(np.asarray(p[name]).reshape(-1)[0])
    blob["output_zero_point"], blob["output_min"], blob["output_max"] = zp, lo, hi


def _fill_rndnu_neon(blob, d, zp, lo, hi, q):
    from lowp.isa_models.requant import xnnpack_rndnu_neon_params
    p = xnnpack_rndnu_neon_params(_scale(d, q))
    for name in ("right_pre_shift", "multiplier", "right_post_shift"):
        blob[name] = int(np.asarray(p[name]).reshape(-1)[0])
    blob["output_zero_point"], blob["output_min"], blob["output_max"] = zp, lo, hi


def _fill_rndnu16_scalar(blob, d, zp, lo, hi, q):
    from lowp.isa_models.requant import xnnpack_rndnu16_params
    p = xnnpack_rndnu16_params(_scale(d, q))
    blob["left_pre_shift"], blob["multiplier"] = int(p["left_pre_shift"][0]), int(p["multiplier"][0])
    blob["output_zero_point"], blob["output_min"], blob["output_max"] = zp, lo, hi


_FILL = {"fp32_scalar": _fill_fp32_scalar, "fp32_neonv8": _fill_fp32_neonv8, "fp32_neon": _fill_fp32_neon,
         "fp32_armsimd32": _fill_fp32_armsimd32, "rndnu_scalar": _fill_rndnu_scalar,
         "rndnu_neon": _fill_rndnu_neon, "rndnu16_scalar": _fill_rndnu16_scalar}


def _per_tensor(values, name: str):
    v = np.asarray(values).reshape(-1)
    if v.size and not (v == v[0]).all():
        raise ValueError(f"{name}: a per-tensor ABI takes one value, the case has {len(np.unique(v))} per channel")
    return v[0]


# ---- XNNPACK's names: init functions, packers, test entries ---------------------------------------------------
def _init_name(family: str, layout: str) -> str:
    return f"xnn_init_{family}_conv_minmax_{layout}_params"


# The params init function a test YAML entry names (`init:`) -> (datatype, layout). The qc8w union is also the
# params of qs8-qc4w kernels and f32_minmax those of every qd8/qdu8-f32-qc8w kernel: the datatype here is the
# union's own; from_test_entry() takes the kernel's from its name.
LAYOUT_OF_INIT: dict[str, tuple[str, str]] = {
    **{_init_name("qs8_qc8w", layout): ("qs8-qc8w", layout) for layout in QC8W_PARAMS},
    **{_init_name("qs8", layout): ("qs8", layout) for layout in DATATYPES["qs8"].params},
    **{_init_name("qu8", layout): ("qu8", layout) for layout in DATATYPES["qu8"].params},
    "xnn_init_f32_minmax_scalar_params": ("qd8-f32-qc8w", "minmax_f32"),
    "xnn_init_f32_qc4w_minmax_scalar_params": ("qd8-f32-qc4w", "qc4w_minmax_f32"),
    "xnn_init_f32_qb4w_minmax_scalar_params": ("qd8-f32-qb4w", "qb4w_minmax_f32"),
    "xnn_init_f16_minmax_scalar_params": ("qd8-f16-qc8w", "minmax_f16"),
    "xnn_init_f16_qc4w_minmax_scalar_params": ("qd8-f16-qc4w", "qc4w_minmax_f16"),
    "xnn_init_f16_qb4w_minmax_scalar_params": ("qd8-f16-qb4w", "qb4w_minmax_f16"),
    "xnn_init_bf16_qb4w_minmax_scalar_params": ("qd8-bf16-qb4w", "qb4w_minmax_bf16"),
}
# Init functions of the int8 families lowp does not take, and why.
UNSUPPORTED_INITS: dict[str, str] = {}


def layout_of_init(name: str) -> tuple[str, str]:
    """(datatype, layout) of an XNNPACK params init function; ValueError naming why lowp does not take it."""
    if name in LAYOUT_OF_INIT:
        return LAYOUT_OF_INIT[name]
    if name in UNSUPPORTED_INITS:
        raise ValueError(f"{name}: {UNSUPPORTED_INITS[name]}")
    raise ValueError(f"{name}: not an init function of XNNPACK's int8 GEMM params lowp knows "
                     f"({', '.join(LAYOUT_OF_INIT)})")


@dataclass(frozen=True)
class Packing:
    """What an XNNPACK packer does, as lowp reproduces it: the datatypes it packs, the shift of A its bias
    compensates (128: the qs8_to_qu8 packers, for kernels that read A + 128 as u8), whether it packs a
    convolution's ks taps (goki: IGEMM) and where XNNPACK defines it."""
    kind: str
    datatypes: tuple[str, ...]
    a_shift: int = 0
    conv: bool = False
    source: str = ""
    unsigned_nibbles: bool = False    # qc4uw: 4-bit weights as w + 8 for madd kernels, their sums not scaled by 16;
                                      # qs8_to_qu8 qc2w: 2-bit weights as w + 2 (qd8-qc2w packs so always)
    # the non-planar 4-bit packers' register_bytes (16: aarch64, 64: avx512): a byte pairs column n and column
    # n + register_bytes / kr at one k; 0: planar (a byte pairs k and k + kr of one column)
    non_planar: int = 0

    @property
    def planes(self) -> int | None:
        """The planes its test entries give (XNNPACK's test generator's `planes`): 1 for a non-planar packer,
        None for the datatype's own."""
        return 1 if self.non_planar else None


_QD8 = ("qd8-f32-qc8w", "qdu8-f32-qc8w", "qd8-f16-qc8w", "qdu8-f16-qc8w")
_QC4W_DYNAMIC = ("qd8-f32-qc4w", "qdu8-f32-qc4w", "qd8-f16-qc4w", "qdu8-f16-qc4w")
_QB4W = tuple(f"{a}-{c}-qb4w" for a in ("qd8", "qdu8") for c in ("f32", "f16", "bf16"))
_QC2W_DYNAMIC = tuple(f"{a}-{c}-qc2w" for a in ("qd8", "qdu8") for c in ("f32", "f16"))
PACKINGS = {p.kind: p for p in (
    Packing("qs8-goi", ("qs8-qc8w", "qs8", *_QD8), 0, False, "src/reference/packing.cc L329-377"),
    Packing("qs8-to-qu8-goi", ("qs8-qc8w", "qs8"), 128, False, "src/reference/packing.cc L379-427"),
    Packing("qu8-goi", ("qu8",), 0, False, "src/reference/packing.cc L278-327"),
    Packing("qs8-goki", ("qs8-qc8w", "qs8", *_QD8), 0, True, "src/reference/packing.cc L3682-3735"),
    Packing("qs8-to-qu8-goki", ("qs8-qc8w", "qs8"), 128, True, "src/reference/packing.cc L3628-3680"),
    Packing("qu8-goki", ("qu8",), 0, True, "src/reference/packing.cc L3571-3626"),
    Packing("qc4w-goi", ("qs8-qc4w", *_QC4W_DYNAMIC), 0, False,
            "src/reference/packing.cc L434-546"),
    Packing("qs8-to-qu8-qc4w-goi", ("qs8-qc4w",), 128, False, "src/reference/packing.cc L548-558"),
    Packing("qc4uw-goi", ("qs8-qc4w", *_QC4W_DYNAMIC), 0, False, "src/reference/packing.cc L1186-1292", True),
    Packing("qs8-to-qu8-qc4uw-goi", ("qs8-qc4w",), 128, False, "src/reference/packing.cc L1294-1304", True),
    Packing("qb4w-goi", _QB4W, 0, False, "src/reference/packing.cc L1306-1420"),
    Packing("qc2w-goi", ("qs8-qc2w",), 0, False, "src/reference/packing.cc L653-743, L756-765"),
    Packing("qs8-to-qu8-qc2w-goi", ("qs8-qc2w",), 128, False, "src/reference/packing.cc L653-743, L779-789", True),
    Packing("qd8-qc2w-goi", _QC2W_DYNAMIC, 0, False, "src/reference/packing.cc L791-888"),
    Packing("qc4w-goi-non-planar-aarch64", ("qs8-qc4w", *_QC4W_DYNAMIC), 0, False,
            "src/reference/packing.cc L1014-1133, L1149-1159", non_planar=16),
    Packing("qc4w-goi-non-planar-avx512", ("qs8-qc4w", *_QC4W_DYNAMIC), 0, False,
            "src/reference/packing.cc L1014-1133, L1161-1171", non_planar=64),
    Packing("qs8-to-qu8-qc4w-goi-non-planar-avx512", ("qs8-qc4w",), 128, False,
            "src/reference/packing.cc L1014-1133, L1173-1183", non_planar=64),
)}
# The pack function a test YAML entry names (`pack:`) -> the packing kind lowp reproduces. XNNPACK's packw
# micro-kernels write the reference packer's layout (test/packw-microkernel-tester.h L112-165 compares them with
# xnn_pack_qs8_gemm_goi_w / xnn_pack_qs8_to_qu8_gemm_goi_w).
PACKING_OF_PACK: dict[str, str] = {
    "xnn_pack_qs8_gemm_goi_w": "qs8-goi", "xnn_pack_qs8_to_qu8_gemm_goi_w": "qs8-to-qu8-goi",
    "xnn_pack_qu8_gemm_goi_w": "qu8-goi", "xnn_pack_qs8_conv_goki_w": "qs8-goki",
    "xnn_pack_qs8_to_qu8_conv_goki_w": "qs8-to-qu8-goki", "xnn_pack_qu8_conv_goki_w": "qu8-goki",
    "xnn_pack_qs8_qc4w_gemm_goi_w": "qc4w-goi", "xnn_pack_qs8_to_qu8_qc4w_gemm_goi_w": "qs8-to-qu8-qc4w-goi",
    "xnn_pack_qs8_qb4w_gemm_goi_w": "qb4w-goi",
    "xnn_pack_qs8_qc4uw_gemm_goi_w": "qc4uw-goi", "xnn_pack_qs8_to_qu8_qc4uw_gemm_goi_w": "qs8-to-qu8-qc4uw-goi",
    "xnn_pack_qs8_qc2w_gemm_goi_w": "qc2w-goi", "xnn_pack_qs8_to_qu8_qc2w_gemm_goi_w": "qs8-to-qu8-qc2w-goi",
    "xnn_pack_qd8_qc2w_gemm_goi_w": "qd8-qc2w-goi",
    "xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_aarch64": "qc4w-goi-non-planar-aarch64",
    "xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_avx512": "qc4w-goi-non-planar-avx512",
    "xnn_pack_qs8_to_qu8_qc4w_gemm_goi_w_non_planar_avx512": "qs8-to-qu8-qc4w-goi-non-planar-avx512",
    "xnn_qs8_packw_gemm_goi_ukernel_x16c4__neondot": "qs8-goi",
    "xnn_qs8_packw_gemm_goi_ukernel_x8c4__neondot": "qs8-goi",
}
# Packers of the int8 families lowp does not reproduce, and why.
UNSUPPORTED_PACKS = {
    **{name: "KleidiAI's own packed layout (src/reference/packing.cc xnn_pack_kai_*)" for name in (
        "xnn_pack_kai_qb4_weights_and_biases", "xnn_pack_kai_qs4_weights_and_biases",
        "xnn_pack_kai_qs4_weights_and_biases_sme", "xnn_pack_kai_qs8_conv_goki_w_sme",
        "xnn_pack_kai_qs8_qc8w_weights_and_biases_sme", "xnn_pack_kai_qs8_weights_and_biases")},
}


def packing_of_pack(name: str) -> Packing:
    """The Packing an XNNPACK pack function reproduces; ValueError naming why lowp does not take it."""
    if name in PACKING_OF_PACK:
        return PACKINGS[PACKING_OF_PACK[name]]
    if name in UNSUPPORTED_PACKS:
        raise ValueError(f"{name}: {UNSUPPORTED_PACKS[name]}")
    raise ValueError(f"{name}: not a packer of XNNPACK's int8 GEMMs lowp knows ({', '.join(PACKING_OF_PACK)})")


# The name grammar (tools/generate-gemm-test.py split_ukernel_name L43-135 and its token loop L780-810; the target's
# tokens: tools/xnncommon.py parse_target_name L181).
_NAME = re.compile(r"^xnn_(?P<datatype>[a-z0-9_]+?)_(?P<op>gemm|igemm)_(?:minmax_)?(?:(?P<requantization>fp32|"
                   r"rndnu16|rndnu)_)?ukernel_(?P<tile>[0-9a-z]+)__(?P<target>[a-z0-9_]+)$")
_TILE = re.compile(r"(?P<mr>\d+)x(?P<nr>\d+)(?P<v>v?)(?:c(?P<kr>\d+))?(?:s(?P<sr>\d+))?")
ARCH_TOKENS = ("aarch32", "aarch64", "amd64", "x86", "wasm32")     # tools/xnncommon.py _ARCH_TO_MACRO_MAP


@dataclass(frozen=True)
class UkernelName:
    """What a ukernel name says (tools/generate-gemm-test.py split_ukernel_name, tools/xnncommon.py
    parse_target_name)."""
    name: str
    datatype: str            # 'qs8-qc8w', 'qd8-f32-qc8w', 'qu8'
    op: str                  # 'gemm' or 'igemm'
    requantization: str | None   # 'fp32', 'rndnu', 'rndnu16'; None (qd8: float output)
    mr: int
    nr: int
    kr: int
    sr: int
    vector_tile: bool        # NR counts vectors (RVV: times vlenb / sizeof(output))
    mstep: int | None        # packed-LHS kernels (mr_packed = mr / mstep)
    isa: str | None          # the last target token among the caller's ISA tokens, or None
    arch: str | None         # an explicit arch token: 'aarch32', 'aarch64', 'amd64'
    assembly: bool
    variant: tuple[str, ...]     # the other target tokens: ld64, prfm, mlal, lane, cortex_a53, fmagic, ...


def parse_ukernel_name(name: str, isas=()) -> UkernelName:
    """The parts of an XNNPACK GEMM/IGEMM ukernel name; ValueError naming what does not fit the grammar. `isas`:
    the ISA tokens the caller knows (the campaign's ISA table): the last target token among them is the ISA, the
    tokens that are neither an ISA, an arch nor `asm` are the variant. The ABI needs only the datatype, op,
    requantization and tile, which do not depend on them."""
    m = _NAME.match(name)
    if not m:
        raise ValueError(f"{name!r} does not read as xnn_<datatype>_<gemm|igemm>_[minmax_][fp32|rndnu|rndnu16_]"
                         "ukernel_<MR>x<NR>[v][c<KR>][s<SR>]__<target>")
    t = _TILE.fullmatch(m["tile"])
    if not t:
        raise ValueError(f"{name!r}: tile {m['tile']!r} does not read as <MR>x<NR>[v][c<KR>][s<SR>]")
    tokens = m["target"].split("_")
    found = [tok for tok in tokens if tok in isas]
    mstep = re.search(r"mstep(\d+)", m["target"])
    return UkernelName(name, m["datatype"].replace("_", "-"), m["op"], m["requantization"], int(t["mr"]),
                       int(t["nr"]), int(t["kr"] or 1), int(t["sr"] or 1), bool(t["v"]),
                       int(mstep[1]) if mstep else None, found[-1] if found else None,
                       next((tok for tok in tokens if tok in ARCH_TOKENS), None), "asm" in tokens,
                       tuple(tok for tok in tokens if tok not in isas and tok not in ARCH_TOKENS and tok != "asm"))


class Unmapped(ValueError):
    """Why from_test_entry cannot map a test entry: `step`, the step that failed, named as the reason a campaign
    counts it under ('datatype not supported yet', 'params layout not supported yet', 'packing not supported yet',
    'entry inconsistent', 'name unreadable'); the message names what lowp lacks or what does not fit."""

    def __init__(self, step: str, message: str):
        super().__init__(message)
        self.step = step


def from_test_entry(entry: dict) -> dict:
    """What a kernel entry of lowp says for one entry of an XNNPACK test YAML (test/<family>.yaml: name, init,
    pack, k-block, optional unsigned-inputs and planes): {symbol, signature, tile {mr, nr, kr}, xnnpack {datatype,
    params, sr}, a_shift, a_type, b_type, c_type}. The datatype is the name's, made qdu8 by `unsigned-inputs:
    True` (the qd8 kernels XNNPACK registers as qdu8 in src/configs/gemm-config.c take u8 A with a u8 zero point);
    the layout is the init function's, the a_shift the packer's. The steps go in order (the datatype, the init
    function, the packer, the planes, then whether they fit the name and each other: the campaign's order), and the first that fails
    raises Unmapped naming it."""
    try:
        facts = parse_ukernel_name(entry["name"])
    except ValueError as e:
        raise Unmapped("name unreadable", str(e)) from None
    datatype = facts.datatype
    if entry.get("unsigned-inputs") and datatype.startswith("qd8-"):
        datatype = "qdu8-" + datatype[4:]
    if datatype not in DATATYPES:
        raise Unmapped("datatype not supported yet", f"datatype {datatype}: not supported yet (lowp knows "
                                                     f"{', '.join(DATATYPES)})")
    _, layout = _looked_up(entry, "init", layout_of_init, "params layout not supported yet")
    packing = _looked_up(entry, "pack", packing_of_pack, "packing not supported yet")
    d = DATATYPES[datatype]
    planes, packed_planes = entry.get("planes"), packing.planes or d.planes
    if planes is not None and planes != packed_planes:
        raise Unmapped("packing not supported yet", f"planes {planes}: lowp packs {datatype} in {packed_planes} "
                                                    "plane(s)")
    _check_consistent(entry, facts, datatype, layout, packing)
    return {"symbol": entry["name"], "signature": f"xnnpack-{facts.op}",
            "tile": {"mr": facts.mr, "nr": facts.nr, "kr": facts.kr},
            "xnnpack": {"datatype": datatype, "params": layout, "sr": facts.sr,
                        **({"nibbles": "unsigned"} if packing.unsigned_nibbles else {}),
                        **({"non_planar": packing.non_planar} if packing.non_planar else {}),
                        # XNNPACK's tester runs every qb4w test with .bl(32) (tools/generate-gemm-test.py L196-551)
                        **({"bl": TESTER_BLOCKSIZE} if d.blockwise else {})},
            "a_shift": packing.a_shift, "a_type": d.a_type, "b_type": d.b_type, "c_type": d.c_type}


def _looked_up(entry: dict, key: str, lookup, step: str):
    """lookup(entry[key]), its ValueError raised as the Unmapped `step` naming the key."""
    try:
        return lookup(str(entry[key]))
    except ValueError as e:
        raise Unmapped(step, f"{key} {e}") from None


def _check_consistent(entry: dict, facts: UkernelName, datatype: str, layout: str, packing: Packing) -> None:
    """The entry's parts, each known to lowp, must fit the name and each other: unsigned inputs on a qd8 kernel,
    the init function's layout one of the datatype's, the packer one of the datatype's and the op's."""
    name = entry["name"]
    if entry.get("unsigned-inputs") and not facts.datatype.startswith("qd8-"):
        raise Unmapped("entry inconsistent", f"{name}: unsigned-inputs on a {datatype} kernel (only qd8 has a qdu8 "
                                             "form)")
    if layout not in DATATYPES[datatype].params:
        raise Unmapped("entry inconsistent", f"{name}: init {entry['init']} gives layout {layout!r}, not one of "
                                             f"{datatype}'s ({', '.join(DATATYPES[datatype].params)})")
    if datatype not in packing.datatypes or packing.conv != (facts.op == "igemm"):
        raise Unmapped("entry inconsistent", f"{name}: pack {entry['pack']} ({packing.kind}) does not pack a "
                                             f"{datatype} {facts.op}")
    if packing.non_planar and not non_planar_fits(facts.nr, facts.kr, packing.non_planar):
        raise Unmapped("entry inconsistent", f"{name}: pack {entry['pack']} pairs columns {packing.non_planar} / kr "
                                             f"apart, which does not tile nr={facts.nr} with kr={facts.kr}")


def non_planar_fits(nr: int, kr: int, register_bytes: int) -> bool:
    """Whether a non-planar packer's column pairs (n, n + register_bytes / kr) tile nr columns: the packer's loop
    walks groups of 2 * register_bytes / kr columns (packing.cc L1030, L1048-1052), so nr must be a multiple of it."""
    pair = register_bytes // kr
    return pair >= 1 and nr % (2 * pair) == 0


def describe_packing(datatype: str, layout: str, *, nr: int, kr: int, sr: int = 1, igemm: bool = False,
                     a_shift: int = 0, bl: int = 0, unsigned_nibbles: bool = False, non_planar: int = 0) -> str:
    """The packed weights in words, for a kernel entry that leaves `packing` to the xnnpack table."""
    d = DATATYPES[datatype]
    if unsigned_nibbles or d.row_sums:
        izp = "(izp + 128)" if a_shift else "izp" if d.int_bias else "1"
        head = f"int32 {'bias - ' if d.int_bias else '-'}{izp} x column sums"
        head += f", {nr} float32 weight zero points" if d.row_sums else ""
        floats = f", then {nr} float32 {' and '.join(d.floats)}" if d.floats else ""
        bits, half = d.weight_bits, 1 << (d.weight_bits - 1)
        many = {4: "two", 2: "four"}[bits]
        return f"XNNPACK {datatype} ({layout}): per {nr} columns {nr} {head}, unsigned {bits}-bit weights w + " \
               f"{half} {many} to a byte{' (qc4uw)' if bits == 4 else ''} in {kr}-deep k blocks (sr {sr}){floats}"
    taps = "per tap (ks of them, goki) " if igemm else ""
    weights = f"{ {4: '4-bit weights two to a byte', 2: '2-bit weights four to a byte'}.get(d.weight_bits, 'int8 weights')}" \
              f" in {kr}-deep k blocks " \
              f"{taps}(sr {sr})"
    if non_planar:
        weights = f"4-bit weights two to a byte, columns n and n + {non_planar // kr} at one k (non-planar, " \
                  f"{non_planar}-byte registers) in {kr}-deep k blocks (sr {sr})"
    head = "int32 bias - izp x column sums (K padded to a multiple of 4)" if d.weight_bits == 2 else \
        "int32 16 x (bias - (izp + 128) x column sums)" if d.weight_bits == 4 and a_shift else \
        "int32 16 x (bias - izp x column sums)" if d.weight_bits == 4 and d.int_bias else \
        "int32 -16 x column sums" if d.weight_bits == 4 and not d.blockwise else \
        "float -sum of block scale x block column sums" if d.blockwise else \
        "int32 -column sums" if d.dynamic else \
        "int32 bias - izp x column sums + K x izp x kernel_zp (padded with the kernel zero point)" \
        if d.kernel_zero_point else f"int32 bias - {'(izp + 128)' if a_shift else 'izp'} x column sums"
    blocks = f", a bf16 scale / 16 per column after each block of {bl} k" if d.blockwise else ""
    floats = f", then {nr} float32 {' and '.join(d.floats)}" if d.floats else ""
    return f"XNNPACK {datatype} ({layout}): per {nr} columns {nr} {head}, {weights}{blocks}{floats}"


# ---- packing --------------------------------------------------------------------------------------------------
def packed_k(K: int, kr: int, sr: int, planes: int = 1) -> int:
    """K rounded up to kr*sr*planes: the depth a ukernel reads (XNNPACK round_up_po2(kc, kr * sr * planes))."""
    skr = kr * sr * planes
    return -(-K // skr) * skr


def _check_blocks(kr: int, sr: int) -> None:
    if (kr & (kr - 1)) or (sr & (sr - 1)):
        raise ValueError(f"kr={kr}, sr={sr}: XNNPACK's packing needs powers of two")


def _k_index(kp: int, kr: int, sr: int, nr: int, step: int) -> np.ndarray:
    """The k of each packed weight (chunk start k0 a multiple of `step`, column n, element j):
    round_down(k0, kr*sr) + ((k0 + n*kr) & (kr*sr - 1)) + j, as every goi packer of packing.cc computes kc_begin."""
    skr = kr * sr
    k0 = np.arange(0, kp, step)[:, None, None]
    n = np.arange(nr)[None, :, None]
    j = np.arange(kr)[None, None, :]
    return (k0 // skr) * skr + ((k0 + n * kr) & (skr - 1)) + j          # (kp/step, nr, kr)


def _weights_8bit(Bb: np.ndarray, nr: int, kr: int, sr: int, pad: int) -> np.ndarray:
    """One block of nr columns of one tap (kc x nr, padded) as the goi/goki packers lay it: kr values per column
    per k block, the sr shuffle (packing.cc L346-364)."""
    kc = Bb.shape[0]
    kp = packed_k(kc, kr, sr)
    kidx = _k_index(kp, kr, sr, nr, kr)
    cols = np.broadcast_to(np.arange(nr)[None, :, None], kidx.shape)
    padded = np.full((kp + kr * sr, nr), pad, np.int64)
    padded[:kc] = Bb
    return padded[kidx, cols].reshape(-1)


def pack_weights(B: np.ndarray, *, nr: int, kr: int, sr: int, column_ints: np.ndarray,
                 column_floats: tuple[np.ndarray, ...] = (), pad: int = 0, ks: int = 1) -> np.ndarray:
    """XNNPACK's packed int8 weights for B (K x N, K = ks * kc): per block of nr columns, nr int32
    (`column_ints`), the weights tap by tap (ks of them: the conv goki packers; 1: goi) in k blocks of kr with the
    sr shuffle, then each of `column_floats` as nr float32. Padding (past N, past kc) is `pad`: zero, or qu8's
    kernel zero point, so that a padded weight less the zero point is zero.
    The shuffle as a reshape: with k0 = (g * sr + s) * kr, the packers' kc_begin (packing.cc L346-364) is
    g * kr * sr + ((s + n) % sr) * kr, so chunk s of column n holds sub-block (s + n) % sr of group g of its column:
    one gather over B padded to whole groups and blocks, with no index of the shape's own to build (a check meets a
    hundred shapes, one of them 2^17 deep, each new to its process). weight_blocks gives the same layout as
    indices, for lowp prove."""
    _check_blocks(kr, sr)
    K, N = B.shape
    if K % ks:
        raise ValueError(f"K={K} is not ks={ks} taps of equal depth")
    kc, blocks = K // ks, -(-N // nr)
    kp = packed_k(kc, kr, sr)
    padded = np.full((ks, kp, blocks * nr), np.array([pad], np.int64).astype(B.dtype)[0], B.dtype)
    padded[:, :kc, :N] = B.reshape(ks, kc, N)
    if padded.size <= (ORDERED_ELEMENTS if sr > 1 else ORDERED_ELEMENTS_UNSHUFFLED):
        weights = padded.reshape(-1)[_packed_order(kp, blocks, nr, kr, sr, ks)]
    else:               # a deep or wide case (the ladder's 2^17, HVX's 128 columns): the gather itself
        weights = _gathered(padded, kp, blocks, nr, kr, sr, ks)
    parts = [_padded_columns(values, N, blocks * nr, dtype).reshape(blocks, 4 * nr)
             for values, dtype in [(column_ints, "<i4"), *((f, "<f4") for f in column_floats)]]
    return np.concatenate([parts[0], weights.reshape(blocks, -1).view(np.uint8), *parts[1:]], axis=1).reshape(-1)


# The padded weights of at most this many elements are gathered through an index made once per shape (a check meets
# each tile edge in every value class and check); larger ones, met once, are gathered directly (_gathered). Without
# the sr shuffle the direct gather moves whole kr-runs and beats the index from some 4,096 elements on (measured:
# 8,192 int8 at nr = 16, kr = 4: 13 us through the index, 6 us direct; HVX's 262,144: 348 and 219 us).
ORDERED_ELEMENTS = 1 << 16
ORDERED_ELEMENTS_UNSHUFFLED = 1 << 12
# A column's kr consecutive weights as one unsigned integer of their width: the gather moves those whole.
_RUNS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _gathered(padded: np.ndarray, kp: int, blocks: int, nr: int, kr: int, sr: int, ks: int) -> np.ndarray:
    """pack_weights' layout of the padded weights (ks, kp, blocks * nr): per block of nr columns, (ks, groups, sr,
    nr, kr) in order, as (blocks, the block's weights). The columns are made rows first, so that each column's
    kr weights of a chunk lie together and move as one integer (`_RUNS`); weights too wide for that go element by
    element (_gathered_elements)."""
    if sr == 1 and (nr >= WIDE_BLOCK or kr == 1):
        return _gathered_by_k(padded, kp, blocks, nr, kr, ks)
    run = _RUNS.get(kr * padded.itemsize)
    if run is None:
        return _gathered_elements(padded, kp, blocks, nr, kr, sr, ks)
    runs = np.ascontiguousarray(padded.transpose(0, 2, 1)).view(run).reshape(ks, blocks, nr, kp // (kr * sr), sr)
    if sr == 1:
        ordered = runs[..., 0].transpose(1, 0, 3, 2)                            # (blocks, ks, groups, nr)
    else:               # chunk s of column n: the column's sub-block (s + n) % sr
        n = np.arange(nr)
        ordered = runs[:, :, n, :, (np.arange(sr)[:, None] + n) % sr].transpose(3, 2, 4, 0, 1)
    return np.ascontiguousarray(ordered).view(padded.dtype).reshape(blocks, -1)


# From this many columns a block on, an unshuffled pack is gathered as kr copies along the block's columns
# (_gathered_by_k) instead of as whole kr-runs: the runs' transpose reads a column down the whole depth, which a deep
# wide pack does not hold in cache (HVX's 131,072 x 128 int8: 59 ms as runs, 12 ms as kr copies); narrower blocks make
# the copies' inner loops short, where the runs win (nr = 8: 2.4 against 6.1 us).
WIDE_BLOCK = 32


def _gathered_by_k(padded: np.ndarray, kp: int, blocks: int, nr: int, kr: int, ks: int) -> np.ndarray:
    """_gathered without the sr shuffle, as one copy per position j of a kr-run: the j-th weight of every column's
    run of every chunk, its source a row of the block's nr columns (kr = 1: a plain copy of the blocks)."""
    rows = padded.reshape(ks, kp // kr, kr, blocks, nr)
    out = np.empty((blocks, ks, kp // kr, nr, kr), padded.dtype)
    for j in range(kr):
        out[..., j] = rows[:, :, j].transpose(2, 0, 1, 3)
    return out.reshape(blocks, -1)


def _gathered_elements(padded: np.ndarray, kp: int, blocks: int, nr: int, kr: int, sr: int, ks: int) -> np.ndarray:
    """_gathered, element by element."""
    grouped = padded.reshape(ks, kp // (kr * sr), sr, kr, blocks, nr).transpose(4, 0, 1, 2, 5, 3)
    n = np.arange(nr)
    return np.ascontiguousarray(grouped[:, :, :, (np.arange(sr)[:, None] + n) % sr, n, :]).reshape(blocks, -1)


@functools.lru_cache(maxsize=256)
def _packed_order(kp: int, blocks: int, nr: int, kr: int, sr: int, ks: int) -> np.ndarray:
    """_gathered's order as one index into the padded weights, flat (read-only)."""
    index = _gathered(np.arange(ks * kp * blocks * nr, dtype=np.int32).reshape(ks, kp, blocks * nr), kp, blocks, nr,
                      kr, sr, ks)
    index.flags.writeable = False
    return index


def _padded_columns(values, N: int, columns: int, dtype) -> np.ndarray:
    """A per-column array as the bytes of `columns` entries of `dtype` (zeros past N)."""
    out = np.zeros(columns, dtype)
    out[:N] = np.asarray(values)[:N]
    return out.view(np.uint8)


def weight_blocks(K: int, N: int, *, nr: int, kr: int, sr: int, ks: int = 1):
    """The blocks of nr columns of the packed weights, in order: (block, the index k * N + n into B of each weight
    byte of the block, tap by tap, -1 for padding): pack_weights' layout as indices, which lowp prove lays symbolic
    bytes out by (tests/test_xnnpack_abi.py holds the two to each other)."""
    return enumerate(_weight_layout(K, N, nr, kr, sr, ks))


@functools.lru_cache(maxsize=256)
def _weight_layout(K: int, N: int, nr: int, kr: int, sr: int, ks: int) -> tuple[np.ndarray, ...]:
    """weight_blocks' index arrays, one per block (read-only): a check packs hundreds of cases of a few shapes, and
    the layout depends on the shape alone."""
    _check_blocks(kr, sr)
    if K % ks:
        raise ValueError(f"K={K} is not ks={ks} taps of equal depth")
    kc = K // ks
    blocks = -(-N // nr)
    index = np.full((K, blocks * nr), -1, np.int64)
    index[:, :N] = np.arange(K * N).reshape(K, N)
    layout = []
    for b in range(blocks):
        cols = slice(b * nr, (b + 1) * nr)
        taps = np.concatenate([_weights_8bit(index[p * kc:(p + 1) * kc, cols], nr, kr, sr, -1) for p in range(ks)])
        taps.flags.writeable = False
        layout.append(taps)
    return tuple(layout)


def _column_block(values, b: int, nr: int, N: int, dtype) -> np.ndarray:
    """Block b's nr entries of a per-column array (zeros past N), as bytes."""
    out = np.zeros(nr, dtype)
    out[:min(nr, N - b * nr)] = np.asarray(values)[b * nr:(b + 1) * nr]
    return out.view(np.uint8)


def _packed_fields(Bb: np.ndarray, nr: int, kr: int, sr: int, bits: int, non_planar: int = 0) -> np.ndarray:
    """One block of nr columns of sub-byte weights (K x nr) as XNNPACK's packers lay them, each the weight's two's
    complement field (0 past K): _subbyte_fields of one block. Returns (values (chunks, nr, fields a byte of the
    column holds, kr), bytes)."""
    values, packed = _subbyte_fields(Bb, nr, kr, sr, bits, non_planar)
    return values[0], packed[0]


def _subbyte_fields(B: np.ndarray, nr: int, kr: int, sr: int, bits: int, non_planar: int = 0):
    """Every block of nr columns of sub-byte weights (K x N, N padded with zero columns to whole blocks), as
    XNNPACK's packers lay them, each the weight's two's complement field (0 past K). Planar (non_planar 0): per
    chunk of planes * kr k per column (planes = 8 / bits: 2 nibbles, 4 crumbs), kr bytes, byte j holding
    k = kc_begin + j + p * kr in its field p (bits p * bits up); packing.cc L434-534 (4-bit: both encodings of the
    input, kernel_zero_point 0 and 8, pack to these nibbles), L653-743 and L791-888 (2-bit: kv_0 | kv_1 << 2 |
    kv_2 << 4 | kv_3 << 6). Non-planar (4-bit; non_planar: the packer's register_bytes; packing.cc L1014-1133): per
    chunk of kr k, per group of 2R columns (R = register_bytes / kr), for each of its first R columns n kr bytes,
    byte j holding column n's weight at k = kc_begin(n) + j in its low nibble and column n + R's at the same k in
    its high nibble; the chunks are kr * sr deep (planes 1). kc_begin is a multiple of kr, so each field reads a
    whole kr-deep sub-block of its column (_field_blocks): one gather over B cut into sub-blocks.
    Returns (values (blocks, chunks, nr, fields a byte of the column holds, kr), bytes (blocks, bytes a block))."""
    planes = 1 if non_planar else 8 // bits
    K, N = B.shape
    blocks = -(-N // nr)
    chunks = packed_k(K, kr, sr, planes) // (planes * kr)
    q = _field_blocks(chunks, nr, planes, sr)                               # (chunks, nr, planes)
    padded = np.zeros(((int(q.max()) + 1) * kr, blocks * nr), np.int64)
    padded[:K, :N] = B
    sub = padded.reshape(-1, kr, blocks, nr).transpose(2, 3, 0, 1)         # (blocks, column, sub-block, kr)
    if non_planar:
        pair = non_planar // kr
        low = np.flatnonzero(np.arange(nr) // pair % 2 == 0)              # the first R columns of each group
        lo, hi = sub[:, low, q[:, low, 0], :], sub[:, low + pair, q[:, low, 0], :]   # (blocks, chunks, R's, kr)
        values = np.zeros((blocks, chunks, nr, 1, kr), np.int64)
        values[:, :, low, 0], values[:, :, low + pair, 0] = lo, hi
        return values, ((lo & 0xF) | ((hi & 0xF) << 4)).astype(np.uint8).reshape(blocks, -1)
    values = sub[:, np.arange(nr)[:, None], q, :]                            # (blocks, chunks, nr, planes, kr)
    mask = (1 << bits) - 1
    packed = sum((values[:, :, :, p, :] & mask) << (bits * p) for p in range(planes))
    return values, packed.astype(np.uint8).reshape(blocks, -1)


@functools.lru_cache(maxsize=64)
def _field_blocks(chunks: int, nr: int, planes: int, sr: int) -> np.ndarray:
    """The kr-deep sub-block of its column (k // kr) that field p of column n reads in chunk c: with k0 = c *
    planes * kr, the packers' kc_begin = round_down(k0, kr*sr) + ((k0 + n*kr) & (kr*sr - 1)) (_k_index) is
    kr * (round_down(c * planes, sr) + (c * planes + n) % sr), and field p reads p sub-blocks on."""
    c = np.arange(chunks)[:, None, None] * planes
    n = np.arange(nr)[None, :, None]
    out = c // sr * sr + (c + n) % sr + np.arange(planes)[None, None, :]
    out.flags.writeable = False
    return out


def _nibbles(Bb: np.ndarray, nr: int, kr: int, sr: int, non_planar: int = 0) -> np.ndarray:
    """_packed_fields of 4-bit weights (the qc4w and qb4w packers)."""
    return _packed_fields(Bb, nr, kr, sr, 4, non_planar)


def sign_bits(bits: int) -> np.uint8:
    """Every field's top bit, as a byte: XORed into a field it adds 2^(bits-1) to its two's complement value, the
    unsigned encodings (0x88: qc4uw's w + 8, packing.cc L1186-1292; 0xAA: qc2w's w + 2, packing.cc L731, L874)."""
    return np.uint8(sum((1 << (bits - 1)) << (bits * p) for p in range(8 // bits)))


def pack_subbyte(B: np.ndarray, *, bits: int, nr: int, kr: int, sr: int, bias, izp: int,
                 column_floats: tuple[np.ndarray, ...] = (), unsigned: bool = False,
                 zero_points=None, non_planar: int = 0) -> np.ndarray:
    """XNNPACK's planar sub-byte packers. bits 4: xnn_pack_qs8_qc4w_gemm_goi_w (and its qs8_to_qu8 form with izp +
    128): per block of nr columns, nr int32 16 * bias - 16 * izp * (the sum of the packed weights), int32 wrapping
    as the packer's arithmetic does (the kernels shift each nibble into the high half of a byte, so their
    accumulators hold 16x the sum and shift right by 4 at the end), the nibbles, then the floats. bias None: zero
    (qd8 packs with izp = 1 and no bias). unsigned: xnn_pack_qs8_qc4uw_gemm_goi_w and
    xnn_pack_qs8_to_qu8_qc4uw_gemm_goi_w (src/reference/packing.cc L1186-1304, "for qd8_qc4w madd"): the same
    chunks, each nibble w + 8 (the two's complement nibble XOR 8, in [0, 15]; padding 8, a zero weight), the int32
    bias - izp * (the sum) not multiplied by 16: the madd kernels subtract 8 from each nibble in a register
    (_mm256_dpbusd_offset_epi32_madd, src/xnnpack/intrinsics-polyfill.h L210-230), so their accumulators hold the
    plain sum.
    bits 2 (qc2w, packing.cc L653-888): four crumbs a byte, the int32 bias - izp * (the sum) never scaled (the
    kernels mask each crumb into the low bits of a byte); unsigned: each crumb w + 2 (XOR 0xAA: the qs8_to_qu8 and
    qd8 packers; the madd kernels subtract 2, _mm256_dpbusd_epi32_madd_kzp2, intrinsics-polyfill.h L234-238; the
    others multiply w + 2 and take 2 x the row sum off in float). zero_points: qd8-qc2w's nr float32 weight zero
    points, packed right after the int32 (packing.cc L822-833). non_planar: the register_bytes of
    xnn_pack_qs8_qc4w_gemm_goi_w_non_planar_{aarch64,avx512} and xnn_pack_qs8_to_qu8_qc4w_gemm_goi_w_non_planar_avx512
    (packing.cc L1014-1183): the same ints and floats, the nibbles paired across columns (_packed_fields)."""

    _check_blocks(kr, sr)
    if non_planar and (unsigned or not non_planar_fits(nr, kr, non_planar)):
        raise ValueError(f"non_planar={non_planar} with nr={nr}, kr={kr}{', unsigned' if unsigned else ''}: XNNPACK's "
                         "non-planar packers pair signed nibbles of columns register_bytes / kr apart, in groups "
                         "that tile nr")
    K, N = B.shape
    blocks = -(-N // nr)
    bias = np.zeros(N, np.int64) if bias is None else np.asarray(bias, np.int64)[:N]
    scale = 16 if bits == 4 and not unsigned else 1
    values, packed = _subbyte_fields(B, nr, kr, sr, bits, non_planar)
    sums = values.sum(axis=(1, 3, 4)).reshape(-1)[:N]
    ints = wrap(scale * bias - scale * izp * sums, S32)
    if unsigned:
        packed = packed ^ sign_bits(bits)
    columns = blocks * nr
    parts = [_padded_columns(ints, N, columns, "<i4").reshape(blocks, -1)]
    if zero_points is not None:
        parts.append(_padded_columns(zero_points, N, columns, "<f4").reshape(blocks, -1))
    parts.append(packed)
    parts += [_padded_columns(f, N, columns, "<f4").reshape(blocks, -1) for f in column_floats]
    return np.concatenate(parts, axis=1).reshape(-1)


def pack_qc4w(B: np.ndarray, **options) -> np.ndarray:
    """pack_subbyte of 4-bit weights: XNNPACK's qc4w and qc4uw packers."""
    return pack_subbyte(B, bits=4, **options)


def check_bf16(scales: np.ndarray, name: str = "b_block_scale") -> np.ndarray:
    """scales as float32 that are bf16 values (XNNPACK takes qb4w scales as bf16): ValueError otherwise."""
    s = np.asarray(scales)
    if s.dtype != np.float32:
        raise ValueError(f"{name}: expected float32 values that are bf16 numbers, got {s.dtype}")
    if (s.view(np.uint32) & 0xFFFF).any():
        raise ValueError(f"{name}: {s.reshape(-1)[np.argmax((s.view(np.uint32) & 0xFFFF).reshape(-1) != 0)]!r} is "
                         "not a bf16 number (XNNPACK takes blockwise scales as bf16: the low 16 bits are zero)")
    return s


def pad_to_blocks(A: np.ndarray, B: np.ndarray, bl: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B with K grown to the next whole number of blocks of bl by zero activations and zero weights: the same
    GEMM (an added k contributes 0 to every block sum and to the packer's column sums) on a depth XNNPACK accepts.
    A conformance case of a qb4w entry with xnnpack.depth = "padded" runs so at a depth that is not a whole number
    of blocks; its models pad the same way."""
    grow = -A.shape[1] % bl if bl > 0 else 0
    if not grow:
        return A, B
    return (np.concatenate([A, np.zeros((A.shape[0], grow), A.dtype)], axis=1),
            np.concatenate([B, np.zeros((grow, B.shape[1]), B.dtype)], axis=0))


def block_scales(scales, K: int, bl: int) -> np.ndarray:
    """The (N, K / bl) bf16 scales of a qb4w case: b_block_scale's block b, or, where b_block_scale has fewer
    columns than K has blocks, its block b mod that width (a conformance case draws its scales before its depth
    is known, and a shrunk case keeps them: the scales repeat along k). ValueError for a K that is not a whole
    number of blocks (XNNPACK refuses it: fully-connected-nc.c check_block_size)."""
    s = check_bf16(np.asarray(scales))
    if s.ndim != 2 or bl <= 0 or K % bl:
        raise ValueError(f"b_block_scale: (N, blocks) bf16 scales for K = {K} in blocks of bl = {bl} (K a whole "
                         f"number of blocks), got shape {s.shape}")
    return s[:, np.arange(K // bl) % s.shape[1]]


def qb4w_ksums(B: np.ndarray, scales: np.ndarray, *, kr: int, sr: int, bl: int, izp: int = 1) -> np.ndarray:
    """The float32 each packed qb4w column starts with, as xnn_pack_qs8_qb4w_gemm_goi_w accumulates it: from 0,
    minus float(ksum) * izp * scale[block] for every chunk of 2*kr packed weights in packing order, each step
    rounded to float32 (packing.cc L1353-1409). izp is 1 for qd8 (the kernel multiplies by the row's zero point)."""
    K, N = B.shape
    scales = block_scales(scales, K, bl)
    if sr == 1:                  # the chunks' k do not depend on the column: all columns at once
        sums = _nibbles(B, N, kr, sr)[0].sum(axis=(2, 3))                   # (chunks, N)
    else:
        sums = np.concatenate([_nibbles(B[:, n:n + 1], 1, kr, sr)[0].sum(axis=(2, 3)) for n in range(N)], axis=1)
    key = hashlib.blake2b(sums.tobytes() + scales.tobytes(), digest_size=16).digest(), sums.shape, scales.shape, \
        kr, bl, izp
    if key not in _KSUMS:
        if len(_KSUMS) >= KSUMS_KEPT:   # a check packs a batch of cases, then judges each under several stages
            _KSUMS.pop(next(iter(_KSUMS)))
        _KSUMS[key] = _chunk_sums_subtracted(sums, scales, kr=kr, bl=bl, izp=izp)
    return _KSUMS[key].copy()


_KSUMS: dict = {}
KSUMS_KEPT = 64


def _chunk_sums_subtracted(sums: np.ndarray, scales: np.ndarray, *, kr: int, bl: int, izp: int) -> np.ndarray:
    """0 - f32(sum_c) * izp * scale[block of c] for every chunk c in order, each step rounded to float32 (a
    subtract.accumulate over the chunks runs the steps in order in float32, as the packer's loop does). A chunk
    that is zero in every column under finite scales subtracts +-0 and changes nothing: skipped (deep sparse
    cases)."""
    blocks = np.minimum(np.arange(len(sums)) * 2 * kr // bl, scales.shape[1] - 1)
    kept = np.flatnonzero(sums.any(axis=1) | ~np.isfinite(scales).all(axis=0)[blocks])
    with np.errstate(over="ignore", invalid="ignore"):                      # inf and NaN as the packer gets them
        steps = np.zeros((len(kept) + 1, sums.shape[1]), np.float32)
        steps[1:] = (sums[kept].astype(np.float32) * np.float32(izp)) * scales[:, blocks[kept]].T
        return np.subtract.accumulate(steps, axis=0)[-1].copy()


def pack_qb4w(B: np.ndarray, *, nr: int, kr: int, sr: int, bl: int, scales: np.ndarray, bias: np.ndarray,
              izp: int = 1) -> np.ndarray:
    """xnn_pack_qs8_qb4w_gemm_goi_w then the operator's scale and bias fills: per block of nr columns, nr float32
    (qb4w_ksums), then per block of bl k the nibbles of its chunks and nr bf16 scales / 16 (the kernels shift the
    nibbles left by 4: xnn_init_blockwise_scale_bf16_params, src/microparams-init.c L462-487), then nr float32
    biases (xnn_init_qs8_qc8w_scale_fp32_params)."""
    _check_blocks(kr, sr)
    K, N = B.shape
    scales = block_scales(scales, K, bl)
    blocks = -(-N // nr)
    ksums = qb4w_ksums(B, scales, kr=kr, sr=sr, bl=bl, izp=izp)
    scaled = np.zeros((blocks * nr, scales.shape[1]), np.uint16)
    scaled[:N] = bf16_bits(scales / np.float32(16))
    per_block = bl // (2 * kr)                                            # chunks of 2*kr k in a block
    parts = []
    _, packed_blocks = _subbyte_fields(B, nr, kr, sr, 4)
    for b in range(blocks):
        chunks = packed_blocks[b].reshape(-1, nr * kr)
        parts.append(_column_block(ksums, b, nr, N, "<f4"))
        for j in range(0, len(chunks), per_block):
            parts += [chunks[j:j + per_block].reshape(-1), np.ascontiguousarray(scaled[b * nr:(b + 1) * nr, j // per_block]).view(np.uint8)]
        parts.append(_column_block(bias, b, nr, N, "<f4"))
    return np.concatenate(parts)


def column_sums(B: np.ndarray) -> np.ndarray:
    return B.astype(np.int64).sum(axis=0)


def _int32(x) -> np.ndarray:
    """The int32 a packed bias holds: exact integers wrapped as the int32 arithmetic of the packing wraps them."""
    return wrap(x if symbolic(x) else np.asarray(x, np.int64), S32)


# ---- the ukernel and its calls ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ukernel:
    """What lowp needs to know of a ukernel to call it as XNNPACK does (from its kernel entry)."""
    symbol: str
    datatype: str
    layout: str
    mr: int
    nr: int
    kr: int
    sr: int = 1
    a_shift: int = 0                 # what the kernel adds to A before multiplying: the packing takes it off
    igemm: bool = False              # signature 'xnnpack-igemm': an indirection buffer, ks taps, a zero buffer
    bl: int = 0                      # qb4w: the block size
    kernel_zero_point: int = 8       # 4-bit: what the params struct is told (0 or 8; the nibbles are the same)
    unsigned_nibbles: bool = False   # qc4uw: nibbles w + 8, the kernel subtracts 8 (madd); int32 sums not 16x
    pointer_bytes: int = 8           # sizeof(void *) on the kernel's target (TARGET_ABI): an IGEMM's ks, its table
    extra_bytes: int = EXTRA_BYTES   # XNN_EXTRA_BYTES on the kernel's target
    pad_blocks: bool = False         # qb4w: a K that is no whole number of blocks padded with zeros (pad_to_blocks)
    non_planar: int = 0              # a non-planar 4-bit packer's register_bytes (Packing.non_planar); 0: planar

    @property
    def d(self) -> Datatype:
        return DATATYPES[self.datatype]


def _weights(u: Ukernel, B: np.ndarray, q: dict, ks: int) -> np.ndarray:
    """The packed weights of B for u with the case's parameters (the zero-point terms folded into the bias)."""
    d = u.d
    floats = column_floats(u, q)
    if d.blockwise:
        return pack_qb4w(B, nr=u.nr, kr=u.kr, sr=u.sr, bl=u.bl, scales=np.asarray(q["b_block_scale"]),
                         bias=floats[0])
    if d.weight_bits < 8:
        return pack_subbyte(B, bits=d.weight_bits, nr=u.nr, kr=u.kr, sr=u.sr, bias=q["bias"] if d.int_bias else None,
                            izp=_packing_zero_point(u, q), column_floats=floats,
                            unsigned=u.unsigned_nibbles or d.row_sums, non_planar=u.non_planar,
                            zero_points=np.asarray(q["b_float_zero_point"], np.float32) if d.row_sums else None)
    return pack_weights(B, nr=u.nr, kr=u.kr, sr=u.sr, column_ints=column_ints(u, B, q), column_floats=floats,
                        pad=weight_padding(u, q), ks=ks)


def column_floats(u: Ukernel, q: dict) -> tuple[np.ndarray, ...]:
    """The float32 arrays packed after each block's weights (per-channel scales, qd8's scales and biases)."""
    return tuple(np.asarray(q[name], np.float32) for name in u.d.floats)


def _packing_zero_point(u: Ukernel, q: dict) -> int:
    # qd8 packs with 1 (the ukernel multiplies by the row's zero point later)
    return 1 if u.d.dynamic else int(q.get("a_zero_point", 0)) + u.a_shift


def weight_padding(u: Ukernel, q: dict) -> int:
    """The byte padding weights hold: 0, or qu8's kernel zero point (a padded weight less it is zero)."""
    return int(q.get("b_zero_point", 0)) if u.d.kernel_zero_point else 0


def column_ints(u: Ukernel, B, q: dict):
    """The int32 packed before each block's 8-bit weights: the bias less the input zero point times the column sums
    (qu8 adds K * izp * kzp: the ukernel multiplies A by (w - kzp), packing.cc L290); qd8: minus the column sums
    (the ukernel multiplies it by each row's zero point). B may be symbolic lanes (lowp prove)."""
    izp, kzp = _packing_zero_point(u, q), weight_padding(u, q)
    if u.d.dynamic:
        return _int32(-column_sums(B))
    return _int32(np.asarray(q["bias"], np.int64) - izp * column_sums(B) + B.shape[0] * izp * kzp)


def depth_padded(d: Datatype, A: np.ndarray, q: dict) -> np.ndarray:
    """A as lowp hands it to a ukernel of datatype d. XNNPACK calls a qc2w ukernel with kc a multiple of 4 (its
    tester passes k4 = round_up_po2(k, 4), test/gemm-microkernel-tester.cc L727-731, L2024-2026; the fully
    connected operator rounds input_channels up to its planes, src/operators/fully-connected-nc.c L3046-3047), and
    its qd8 kernels count every k below kc in the row sums and kc * zero point terms: so a K that is not a multiple
    of 4 is handed over with each row padded by its zero point (and B by zero weights), every padded product
    (zp - zp) * w being 0. The pad is stored in A's type as C would store it. Other datatypes: A unchanged."""
    if d.weight_bits != 2:
        return A
    M, K = A.shape
    kc = packed_k(K, 1, 1, d.planes)
    if kc == K:
        return A
    zp = np.broadcast_to(np.asarray(q.get("a_zero_point", 0), np.int64).reshape(-1), (M,))
    return np.concatenate([A, np.repeat(zp[:, None], kc - K, axis=1).astype(A.dtype)], axis=1)


def row_terms(datatype: str, A: np.ndarray, q: dict) -> dict:
    """What a qd8-qc2w output stage reads beside the accumulator (lowp.isa_models.requant): a_row_sum, the sum of
    each row of A as the ukernel is handed it (depth_padded; XNNPACK's operator sums the quantized row with its
    rsum ukernel and passes it as float, src/operator-run.c L1620-1628), and kc, the depth the ukernel is called
    with. {} for a datatype whose kernels take no row sums."""
    d = DATATYPES[datatype]
    if not d.row_sums:
        return {}
    padded = depth_padded(d, A, q)
    return {"a_row_sum": padded.astype(np.int64).sum(axis=1), "kc": padded.shape[1]}


def _check_operands(u: Ukernel, A: np.ndarray, B: np.ndarray) -> None:
    lo, hi = u.d.weight_range
    if B.size and (B.min() < lo or B.max() > hi):
        raise ValueError(f"{u.symbol}: B holds {int(B.min())}..{int(B.max())}; a {u.datatype} weight is in "
                         f"[{lo}, {hi}] ({u.d.weight_bits}-bit)")
    if u.d.blockwise:
        if u.bl <= 0 or u.bl % MIN_BLOCKSIZE:
            raise ValueError(f"{u.symbol}: block size bl={u.bl}: XNNPACK takes multiples of {MIN_BLOCKSIZE} "
                             "(include/xnnpack.h XNN_MIN_BLOCKSIZE; fully-connected-nc.c check_block_size)")
        if u.bl % (2 * u.kr * u.sr):
            raise ValueError(f"{u.symbol}: block size bl={u.bl} is not a whole number of packed chunks of "
                             f"2*kr*sr={2 * u.kr * u.sr} k (src/reference/packing.cc L1331-1338 asserts it)")
        if A.shape[1] % u.bl:
            raise ValueError(f"{u.symbol}: K={A.shape[1]} is not a whole number of blocks of bl={u.bl}: XNNPACK's "
                             "fully connected operator refuses input_channels % block_size != 0 "
                             "(src/operators/fully-connected-nc.c check_block_size)")


@dataclass(frozen=True)
class Strides:
    """The byte strides of a call: a (rows of A, >= K), cm (rows of C, >= N * sizeof(out)), cn (blocks of nr
    columns of C, >= nr * sizeof(out)); None: XNNPACK's operator's defaults for a dense GEMM."""
    a: int | None = None
    cm: int | None = None
    cn: int | None = None

    @classmethod
    def of(cls, strides) -> "Strides":
        if strides is None or isinstance(strides, Strides):
            return strides or cls()
        if not isinstance(strides, dict) or set(strides) - {"a", "cm", "cn"}:
            raise ValueError(f"strides: expected a dict with keys among 'a', 'cm', 'cn' (bytes), got {strides!r}")
        for key, value in strides.items():
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"strides[{key!r}]: expected a byte count (a non-negative int), got {value!r}")
        return cls(**{k: int(v) for k, v in strides.items()})


def _layouts(u: Ukernel, M: int, K: int, N: int, strides: Strides, item: int, c_dtype) -> tuple[int, Strided]:
    """(a_stride, C's layout) of a call, checked: a stride below a row's bytes is no stride XNNPACK passes."""
    a_stride = K if strides.a is None else strides.a
    cn = u.nr * item if strides.cn is None else strides.cn
    blocks = -(-N // u.nr)
    row = (blocks - 1) * cn + (N - (blocks - 1) * u.nr) * item if N else 0     # the bytes a row of C spans
    cm = N * item if strides.cm is None and cn == u.nr * item else row if strides.cm is None else strides.cm
    for name, value, least in (("a", a_stride, K), ("cn", cn, u.nr * item), ("cm", cm, row)):
        if value < least:
            raise ValueError(f"strides[{name!r}]={value}: below the {least} bytes "
                             f"{'a row of A' if name == 'a' else 'nr columns' if name == 'cn' else 'a row of C'} "
                             "takes; rows and blocks would overlap")
    return a_stride, Strided((M, N), np.dtype(c_dtype).str, cm, u.nr, cn)


# XNN_ALLOCATION_ALIGNMENT (src/xnnpack/common.h L416-424 @75db3c0): where XNNPACK's own buffers (the packed
# weights among them) start, by target; 16 elsewhere.
ALLOCATION_ALIGNMENT = {"wasm32": 4, "x86-64": 64, "hexagon": 128}
DEFAULT_ALLOCATION_ALIGNMENT = 16


def packed_alignment(u: Ukernel, target: str) -> int:
    """The alignment XNNPACK's operators give a ukernel's `w` on `target`: the packed weights start at an
    allocation (ALLOCATION_ALIGNMENT) and a call's `w` is a whole number of column blocks into them, each block nr
    columns of int32 / float32 words (the bias, sums, qc2w's weight zero points and the scales), the k bytes and,
    for qb4w, bf16 block scales: the gcd of what those sizes always share. A planar sub-byte packer pads K to
    kr * sr * planes (packed_k), so a column's k bytes come kr * sr at a time, as for 8-bit weights; a non-planar
    one pads K to kr * sr, two k a byte. XNNPACK's HVX kernels load w with aligned vector loads
    (src/qs8-qc8w-gemm/gen/*-hvx.c @75db3c0: *((HVX_Vector *) w)) and may: there it is 128."""
    d = u.d
    words = 4 * (1 + len(d.floats) + d.row_sums)
    k_bytes = max(1, u.kr * u.sr // d.planes) if u.non_planar else u.kr * u.sr
    block = u.nr * math.gcd(words, k_bytes)
    if d.blockwise:
        block = math.gcd(block, 2 * u.nr)
    return math.gcd(ALLOCATION_ALIGNMENT.get(target, DEFAULT_ALLOCATION_ALIGNMENT), block)


def caller_alignment(u: Ukernel, a_item: int, c_item: int, target: str) -> dict[str, int]:
    """The least alignment, in bytes, XNNPACK lets a ukernel call's buffers have: A and C their element's and no
    more (the ukernel prototypes take `const int8_t *a`, `void *c`; the operator passes the user's tensors, a row
    or a batch within them), the packed weights what the packing always gives (packed_alignment), the params
    struct and a qd8 kernel's {zero_point, inv_scale} rows their C alignment (microparams.h @75db3c0). A
    requantizing ukernel's params are a union of every layout of its datatype (xnn_qs8_qc8w_conv_minmax_params,
    ...): the union's alignment is its widest member's; a dynamic one's are a struct of their own."""
    layouts = [PARAMS_LAYOUTS[(u.datatype, u.layout)]] if u.d.dynamic else \
        [layout for (datatype, _), layout in PARAMS_LAYOUTS.items() if datatype == u.datatype]
    out = {"A": a_item, "w": packed_alignment(u, target), "C": c_item,
           "params": max(layout.alignment for layout in layouts)}
    if u.d.dynamic:
        out["quantization_params"] = max(QD8_ROW.fields[name][0].alignment for name in QD8_ROW.names)
    return out


def _qd8_rows(u: Ukernel, q: dict, M: int) -> np.ndarray:
    """The {zero_point, inv_scale} rows a qd8/qdu8 ukernel reads: M of them and XNN_EXTRA_QUANTIZATION_PARAMS
    copies of the last (src/operator-run.c xnn_compute_pad_qd8_params); an IGEMM reads one for all its rows (the
    batch's: src/operator-run.c xnn_compute_hmp_dqigemm passes &quantization_params[batch_index])."""
    zp, inv = np.broadcast_to(q["a_zero_point"], (M,)), np.broadcast_to(q["a_inv_scale"], (M,))
    if u.igemm:
        if len(np.unique(zp)) > 1 or len(np.unique(inv)) > 1:
            raise ValueError(f"{u.symbol}: a qd8 IGEMM takes one {{zero_point, inv_scale}} for all its rows (the "
                             "batch's); the case has one per row that differ")
        M = 1
    rows = np.zeros(M + EXTRA_QUANTIZATION_PARAMS, QD8_ROW)
    rows["zero_point"][:M], rows["inv_scale"][:M] = zp[:M], inv[:M]
    rows[M:] = rows[M - 1]
    return rows.view(np.uint8)


def invocation(A: np.ndarray, B: np.ndarray, q: dict, u: Ukernel, *, strides=None, igemm=None,
               fill=None) -> Invocation:
    """The buffers and the ukernel calls for C = the output stage of A x B under the XNNPACK ABI.
    strides: {"a", "cm", "cn"} in bytes (Strides); the gaps hold poison and C's must keep it. igemm: {"ks",
    "a_offset", "zero"} for an IGEMM (Indirection.of). fill(nbytes, salt) -> poison bytes (default: a fixed
    pattern); C's elements get fill's first M*N*size bytes, so a contiguous C is the poison it always was."""
    d = u.d
    A, B, strides = _depth_padded_call(u, A, B, q, strides)
    _check_operands(u, A, B)
    M, K = A.shape
    N = B.shape[1]
    fill = fill or (lambda n, salt: np.full(n, 0xA5 ^ salt, np.uint8))
    c_dtype = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "s8": np.int8, "u8": np.uint8}[d.c_type]
    item = np.dtype(c_dtype).itemsize
    s = Strides.of(strides)
    a_stride, c_layout = _layouts(u, M, K, N, s, item, c_dtype)
    a_layout = Strided((M, K), np.dtype(A.dtype).str, a_stride, K, 0)
    poisoned_c = c_layout.scatter(fill(M * N * item, 0).view(c_dtype).reshape(M, N), fill(c_layout.nbytes, 3))
    if igemm is not None and not u.igemm:
        raise ValueError(f"{u.symbol}: igemm options {igemm!r} for a GEMM ukernel (signature 'xnnpack-gemm')")
    ind = Indirection.of(igemm, K) if u.igemm else None
    buffers = {"A": a_layout.scatter(A, fill(a_layout.nbytes, 2)) if a_stride != K else np.ascontiguousarray(A),
               "w": _weights(u, B, q, ind.ks if ind else 1), "C": poisoned_c,
               "params": params_blob(u.datatype, u.layout, q, bl=u.bl, kernel_zero_point=u.kernel_zero_point)}
    if d.dynamic:
        buffers["quantization_params"] = _qd8_rows(u, q, M)
    if d.row_sums:
        buffers["row_sum"] = _padded_rows(np.float32(A.astype(np.int64).sum(axis=1)))
    inv = Invocation(buffers, [], output="C", writable=("C",), layouts={"C": c_layout},
                     gaps={"C": c_layout.gaps()} if c_layout.gaps() else {})
    if ind is None:
        _gemm_calls(inv, u, M, K, N, a_stride, c_layout)
    else:
        _igemm_calls(inv, u, A, q, ind, a_stride, c_layout, lambda n: fill(n, 5))
    return inv


def _depth_padded_call(u: Ukernel, A: np.ndarray, B: np.ndarray, q: dict, strides) -> tuple[np.ndarray, np.ndarray,
                                                                                            Strides]:
    """(A and B as the ukernel is handed them, the strides with an a stride grown by the pad: the gap after each row
    keeps its size). qc2w: A as depth_padded hands it over (its rows' zero points to a multiple of 4); qb4w with
    xnnpack.depth = "padded": pad_to_blocks (zeros to the next whole block); B grown by zero weights to A's depth."""
    if u.d.blockwise and u.pad_blocks and u.bl > 0:
        padded, B = pad_to_blocks(A, B, u.bl)
    else:
        padded = depth_padded(u.d, A, q)
        if padded.shape[1] > len(B):
            B = np.concatenate([B, np.zeros((padded.shape[1] - B.shape[0], B.shape[1]), B.dtype)])
    grown = padded.shape[1] - A.shape[1]
    s = Strides.of(strides)
    if grown and s.a is not None:
        s = Strides(s.a + grown * A.itemsize, s.cm, s.cn)
    return padded, B, s


def _padded_rows(values: np.ndarray) -> np.ndarray:
    """Per-row values as XNNPACK's operator leaves them for a ukernel: XNN_EXTRA_QUANTIZATION_PARAMS copies of the
    last after them (src/operator-run.c xnn_compute_pad_qd8_params L1575-1588 pads the row sums too)."""
    return np.concatenate([values, np.repeat(values[-1:], EXTRA_QUANTIZATION_PARAMS)]).astype(values.dtype)


def _gemm_calls(inv: Invocation, u: Ukernel, M, K, N, a_stride, c: Strided) -> None:
    qp, rs = "quantization_params" in inv.buffers, "row_sum" in inv.buffers
    for m0 in range(0, M, u.mr):
        args = [min(u.mr, M - m0), N, K, Ref("A", m0 * a_stride), a_stride, Ref("w", 0), Ref("C", m0 * c.row),
                c.row, c.block_stride, Ref("params", 0)]
        args += [Ref("row_sum", m0 * 4)] if rs else []          # xnn_qd8_f32_qc2w_gemm_ukernel_fn's row_sum
        inv.calls.append((u.symbol, args + ([Ref("quantization_params", m0 * QD8_ROW.itemsize)] if qp else [])))
    names = ("mr", "nc", "kc", "a", "a_stride", "w", "c", "cm_stride", "cn_stride", "params",
             *(("row_sum",) if rs else ()), "quantization_params")
    inv.arg_names = names[:len(inv.calls[0][1]) if inv.calls else 10]


# ---- IGEMM: the indirection buffer -------------------------------------------------------------------------------
def default_taps(K: int) -> int:
    """The taps (ks) an IGEMM case splits K into unless it names them: the largest of 3, 2, 1 that divides K."""
    return next(k for k in (3, 2, 1) if K % k == 0)


@dataclass(frozen=True)
class Indirection:
    """How an IGEMM call gathers its rows: K = ks taps of kc; row m's tap p is A[m, p*kc:(p+1)*kc], reached
    through a pointer the indirection buffer holds less a_offset (the ukernel adds a_offset to every pointer that
    is not the zero pointer, as XNNPACK's operator passes the input's offset from where the buffer was built).
    zero: the taps read from the zero buffer instead: 'auto' (every tap whose kc values all equal the zero
    buffer's, the input zero point: convolution padding), or a list of (p, m) (each must hold those values)."""
    ks: int
    a_offset: int
    zero: str | tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, options, K: int) -> "Indirection":
        """From a case's igemm={"ks", "a_offset", "zero"}: ks defaults to the largest of 3, 2, 1 that divides K
        (XNNPACK's tester uses 3 for its small_kernel cases), a_offset to 64 (nonzero, so a ukernel that drops
        it reads the wrong bytes), zero to 'auto'."""
        options = dict(options or {})
        unknown = set(options) - {"ks", "a_offset", "zero"}
        if unknown:
            raise ValueError(f"igemm: unknown key(s) {', '.join(sorted(unknown))} (known: ks, a_offset, zero)")
        ks = options.get("ks") or default_taps(K)
        if not isinstance(ks, (int, np.integer)) or ks < 1 or K % ks:
            raise ValueError(f"igemm: ks={ks!r} taps do not split K={K} into taps of equal depth")
        zero = options.get("zero", "auto")
        if zero != "auto":
            zero = tuple((int(p), int(m)) for p, m in zero)
        return cls(int(ks), int(options.get("a_offset", 64)), zero)

    def zero_taps(self, A: np.ndarray, fill_value) -> np.ndarray:
        """(ks, M) bools: the taps the indirection buffer points at the zero buffer."""
        M, K = A.shape
        kc = K // self.ks
        taps = (np.asarray(A).reshape(M, self.ks, kc).astype(np.int64) == np.asarray(fill_value).reshape(-1, 1, 1)
                ).all(axis=2).T
        if self.zero == "auto":
            return taps
        chosen = np.zeros_like(taps)
        for p, m in self.zero:
            if not (0 <= p < self.ks and 0 <= m < M):
                raise ValueError(f"igemm zero tap {(p, m)}: outside ks={self.ks} taps x M={M} rows")
            if not taps[p, m]:
                raise ValueError(f"igemm zero tap {(p, m)}: A[{m}, {p * kc}:{(p + 1) * kc}] is not all the zero "
                                 f"buffer's value {fill_value!r} (the input zero point): reading the zero buffer "
                                 "there would not compute the same GEMM")
            chosen[p, m] = True
        return chosen


def _igemm_calls(inv: Invocation, u: Ukernel, A, q, ind: Indirection, a_stride, c: Strided, junk) -> None:
    """The indirection buffer (per block of mr rows, ks groups of MR pointers: src/indirection.c L118-148; the
    rows of the last call past M point at `junk(n)`, n poisoned bytes, as XNNPACK's tester points them
    (test/gemm-microkernel-tester.cc L239-243): a ukernel reads all MR rows and must store only mr, so a store or
    a read by a row past mr shows in C only when those rows hold other values than the last one), the zero
    buffer (XNN_EXTRA_BYTES past the packed depth, filled with the input zero point: convolution-nhwc.c L841; a qd8 IGEMM compares with a sentinel and reads a
    zero_data buffer of its batch's zero point: operator-run.c L782-787), and one call per mr rows with
    ks = ks * MR * sizeof(void *) (convolution-nhwc.c L2980; the target's pointer size). The table's entries are Refs
    the executor turns into addresses of the target's size (lowp.emulator.machine.Pointers: 8 bytes natively and on
    the 64-bit machines; 4 on a 32-bit qemu guest, whose driver writes them, and on wasm32, whose machine writes
    linear-memory addresses); the buffer here is a placeholder of entries of that size."""
    d = u.d
    M, K = A.shape
    kc = K // ind.ks
    zp = int(np.asarray(q.get("a_zero_point", 0)).reshape(-1)[0])
    zero_bytes = packed_k(kc, u.kr, u.sr, d.planes) + u.extra_bytes
    zero_value = np.array([zp]).astype(A.dtype)
    taps = ind.zero_taps(A, zp)
    if d.dynamic:       # the sentinel is never read: one poison byte at a page's end, a read there faults
        inv.buffers["zero"] = np.full(1, 0x5A, np.uint8)
        inv.buffers["zero_data"] = np.full(zero_bytes, zero_value.view(np.uint8)[0], np.uint8)
    else:
        inv.buffers["zero"] = np.full(zero_bytes, zero_value.view(np.uint8)[0], np.uint8)
    if M % u.mr:        # the last call's rows past M: junk, as XNNPACK's tester gives them
        inv.buffers["junk"] = junk(kc + u.extra_bytes)
    refs = []
    for m0 in range(0, M, u.mr):
        for p in range(ind.ks):
            for r in range(u.mr):
                m = m0 + r
                refs.append(Ref("junk", -ind.a_offset) if m >= M else Ref("zero") if taps[p, m]
                            else Ref("A", m * a_stride + p * kc - ind.a_offset))
    inv.pointers["indirection"] = tuple(refs)
    inv.buffers["indirection"] = np.zeros(len(refs), np.uint64 if u.pointer_bytes == 8 else np.uint32)
    table = ind.ks * u.mr * u.pointer_bytes             # ks as the ukernel takes it: bytes of pointers per block
    zero_args = [Ref("zero"), Ref("zero_data")] if d.dynamic else [Ref("zero")]
    for i, m0 in enumerate(range(0, M, u.mr)):
        args = [min(u.mr, M - m0), c.shape[1], kc, table, Ref("indirection", i * table),
                Ref("w", 0), Ref("C", m0 * c.row), c.row, c.block_stride,
                ind.a_offset & ((1 << (8 * u.pointer_bytes)) - 1),
                *zero_args, Ref("params", 0)]
        inv.calls.append((u.symbol, args + ([Ref("quantization_params", 0)] if d.dynamic else [])))
    inv.arg_names = ("mr", "nc", "kc", "ks", "a", "w", "c", "cm_stride", "cn_stride", "a_offset", "zero",
                     *(["zero_data"] if d.dynamic else []), "params", *(["quantization_params"] if d.dynamic else []))
