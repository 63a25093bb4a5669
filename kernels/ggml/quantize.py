"""ggml's activation quantizers bit for bit: quantize_row_q8_0, quantize_row_q8_1 and quantize_row_q8_K, one
named variant per code path, because the paths round differently and a checker must never pick one silently.

Each vec_dot multiplies weights by activations that ggml quantized first (q8_0, q8_1 or q8_K, ggml-cpu.c's
vec_dot_type): the reference (ggml-quants.c) and each SIMD path of arch/<arch>/quants.c make that block from the
same float32 row, and where they differ is named here:

    variant       multiplier of x       rounding                      ggml-org/ggml @d99724f
    ref           id = 1/(amax/127)     roundf: half away from zero   src/ggml-quants.c L276, L302
                  q8_K: -127/max        nearest_int: half even        src/ggml-quants.c L2768
    ref-fma       q8_K: -127/max        the exact product, half even  L2768 with nearest_int's add fused (GCC)
    x86-avx       id = 127/amax         _mm256_round_ps: half even    src/ggml-cpu/arch/x86/quants.c L302, L400
    neon          id = 1/(amax/127)     vcvtnq: half even             src/ggml-cpu/arch/arm/quants.c L41, L85
    rvv           id = 1/(amax/127)     vfncvt (frm RNE): half even   src/ggml-cpu/arch/riscv/quants.c L32, L73
                  q8_K: -127/max        vfcvt RNE; min wins ties      ... L122
    wasm-simd128  id = 1/(amax/127)     trunc_sat: TOWARD ZERO        src/ggml-cpu/arch/wasm/quants.c L41, L88
                  q8_K: -127/max        f32x4_nearest; max wins ties  ... L145

Every path finds amax = max |x| of a block the same way on finite input (fabsf and MAX, andnot + max_ps, vabsq +
vmaxq, vfabs + vfredmax, f32x4_abs + max), d = amax/127 in float32, and stores d as fp16 rounded to nearest even:
ggml_compute_fp32_to_fp16 and F16C's _cvtss_sh(x, 0) agree on every non-NaN float32, numpy's astype(float16)
with F16C on every rounding case, AArch64's __fp16 on every d measured (docs/ggml.md); finite input makes no NaN
d. x86 and ARM quantize q8_K with the reference (x86 quants.c L505, arm quants.c L134).

Where the paths differ beyond rounding:
- q8_1's s = fp16(d * sum): the reference and RVV sum the stored int8 codes, x86, NEON and wasm the int32 lanes
  before they are narrowed (equal whenever the codes fit in int8, which they do unless id overflows).
- q8_K's signed maximum: the reference takes the first element of largest |x|, RVV the minimum and wasm the
  maximum when the largest |x| occurs with both signs; the codes and d then have opposite signs (same values).
- q8_K of an all-zero block: the reference and wasm write d and qs but leave bsums as they were (`prior`), RVV
  zeroes them.
- GCC (-ffp-contract=fast, its default for GNU C) fuses the reference q8_K's product iscale*x[j] with
  nearest_int's add where the target has an FMA: ref-fma, measured on x86 -mfma; clang's default does not.
- The multiplier overflows to inf when 0 < amax < 127/FLT_MAX (~3.7e-37, blocks of tiny or subnormal values):
  each path then converts inf and NaN (0 * inf) its own way. SIMD intrinsics define it (x86 cvtps2dq: INT_MIN,
  then saturating packs; NEON/wasm: saturate, NaN -> 0; RVV: saturate, NaN -> max), the reference's scalar
  float -> int8_t conversion is C undefined behaviour and is modelled as each compiler emits it, a variant of its
  own: ref (x86-64's cvttss2si: INT_MIN, byte 0), ref-saturating (AArch64's fcvtzs, wasm's i32.trunc_sat_f32_s:
  NaN -> 0), ref-saturating-nan-max (RISC-V's fcvt.w.s: NaN -> INT_MAX). Measured: docs/ggml.md.
Input must be finite (NaN and inf are outside the model: the max instructions disagree on NaN; quantize raises).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lowp.kernels.ggml.blocks import FORMATS, QK_K

QK8 = 32                                      # QK8_0 == QK8_1 (ggml-common.h)
Y_TYPES = ("q8_0", "q8_1", "q8_K")
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
F32 = np.float32


# ---- amax, multiplier, d ------------------------------------------------------------------------------------------
def _amax(blocks: np.ndarray) -> np.ndarray:
    """max |x| of each block: every path's (ggml-quants.c L283 fabsf/MAX; x86 L319-328; arm L54-60; riscv L46-49;
    wasm L57-66): equal on finite input."""
    return np.max(np.abs(blocks), axis=1).astype(F32)


def _d(amax: np.ndarray) -> np.ndarray:
    """d = amax / 127 in float32 (ggml-quants.c L286, x86 L331, arm L62, riscv L51, wasm L68)."""
    return (amax / F32(127)).astype(F32)


def _reciprocal_of_d(amax: np.ndarray) -> np.ndarray:
    """id = d ? 1.0f/d : 0.0f: the reference's, NEON's, RVV's and wasm's (ggml-quants.c L287, arm L63, riscv L52,
    wasm L69). 1/d is inf when d < 2^-128."""
    d = _d(amax)
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)


def _direct(amax: np.ndarray) -> np.ndarray:
    """id = max != 0 ? 127.f/max : 0: x86's AVX and AVX2 (x86 quants.c L333, L431). Rounds once where the
    reference rounds twice, so a few id differ by an ulp, and with them a code next to a half."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(amax != 0, F32(127) / np.where(amax != 0, amax, F32(1)), F32(0)).astype(F32)


def _scaled(blocks: np.ndarray, id_: np.ndarray) -> np.ndarray:
    """x * id in float32 (one multiply per element in every path); inf * 0 is NaN where id overflowed."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (blocks * id_[:, None]).astype(F32)


# ---- rounding to an integer-valued float --------------------------------------------------------------------------
def _half_away(v: np.ndarray) -> np.ndarray:
    """roundf: to nearest, halves away from zero (ggml-quants.c L294, L324). Exact: the fraction of |v| is exact
    in float32, and floor(|v| + 0.5) would not be (0.49999997 + 0.5 rounds up)."""
    a = np.abs(v)
    with np.errstate(invalid="ignore"):
        up = np.where(a - np.floor(a) >= F32(0.5), np.floor(a) + F32(1), np.floor(a)).astype(F32)
    return np.where(np.isfinite(v), np.copysign(up, v), v).astype(F32)


def _half_even(v: np.ndarray) -> np.ndarray:
    """To nearest, halves to even: _mm256_round_ps(_MM_ROUND_NEAREST) (x86 L342), vcvtnq_s32_f32 (arm L69),
    vfncvt/vfcvt in frm = RNE (riscv L57, L180), wasm_f32x4_nearest (wasm L191), nearest_int's 1.5 * 2^23 add
    (ggml-quants.c L621)."""
    return np.rint(v).astype(F32)


def _toward_zero(v: np.ndarray) -> np.ndarray:
    """wasm_i32x4_trunc_sat_f32x4: truncation (wasm quants.c L74, L119): wasm's q8_0 and q8_1 do not round."""
    return np.trunc(v).astype(F32)


# ---- float -> integer conversions (they differ only on inf, NaN and out-of-range values) -----------------------
def _convert(r: np.ndarray, bits: int, nan: int | None) -> np.ndarray:
    """An integer-valued float to a signed `bits`-bit integer, saturating; NaN to `nan` (None: the most negative,
    x86's 'integer indefinite', which is also what x86 gives for every out-of-range value)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    finite = np.nan_to_num(r.astype(np.float64), nan=0.0, posinf=hi, neginf=lo)
    out = np.clip(finite, lo, hi).astype(np.int64)
    if nan is None:                               # cvtps2dq / cvttss2si: NaN and |r| >= 2^31 -> INT_MIN
        return np.where(np.isnan(r) | (np.abs(np.nan_to_num(r.astype(np.float64))) > hi), lo, out)
    return np.where(np.isnan(r), nan, out)


def _x86_cvt(r):
    """_mm256_cvtps_epi32 (x86 L348) and cvttss2si, the reference's (int8_t)roundf on x86-64."""
    return _convert(r, 32, None)


def _arm_cvt(r):
    """vcvtnq_s32_f32 (arm L69), fcvtzs for (int8_t)roundf on AArch64, wasm's trunc_sat (wasm L74; and
    i32.trunc_sat_f32_s for the reference's): int32 saturation, NaN -> 0."""
    return _convert(r, 32, 0)


def _riscv_cvt(r):
    """fcvt.w.s for (int8_t)roundf on RISC-V and vfcvt_x_f (riscv L180): int32 saturation, NaN -> max."""
    return _convert(r, 32, INT32_MAX)


def _riscv_cvt16(r):
    """__riscv_vfncvt_x_f_w_i16m4 (riscv L57): straight to int16, saturating, NaN -> INT16_MAX."""
    return _convert(r, 16, (1 << 15) - 1)


# How a float becomes an int32 where it is inf, NaN or out of range, by what the instruction does.
CONVERSIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "indefinite": _x86_cvt, "saturating": _arm_cvt, "saturating-nan-max": _riscv_cvt}


def _wrap8(i: np.ndarray) -> np.ndarray:
    """An int32 lane stored to int8_t (GCC: modulo 2^8): NEON's vgetq_lane stores (arm L71), wasm's (wasm L76),
    RVV's vncvt_x_x_w (riscv L58), the reference's int -> int8_t."""
    return (np.asarray(i, np.int64) & 0xFF).astype(np.uint8).view(np.int8)


def _saturate8(i: np.ndarray) -> np.ndarray:
    """Signed saturation to int8: _mm256_packs_epi32 + _mm256_packs_epi16 (x86 L353-357), vnclip (riscv L181-182),
    wasm_i8x16_narrow_i16x8 (wasm L200)."""
    return np.clip(np.asarray(i, np.int64), -128, 127).astype(np.int8)


def _wrap32(total: np.ndarray) -> np.ndarray:
    """An int32 sum as the adds compute it: modulo 2^32."""
    t = np.asarray(total, np.int64) & 0xFFFFFFFF
    return np.where(t > INT32_MAX, t - (1 << 32), t)


def _fp16_bits(v: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16 / GGML_CPU_FP32_TO_FP16 on finite float32: round to nearest even (ggml-impl.h L407,
    simd-mappings.h L42-64)."""
    with np.errstate(over="ignore"):
        return np.asarray(v, F32).astype(np.float16).view(np.uint16)


# ---- q8_0 and q8_1 --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Q8Path:
    """One path of quantize_row_q8_0 / q8_1: the multiplier, the rounding, the conversion to the int32 (or int16)
    lane, its narrowing to int8, and whether q8_1's sum is of the lanes or of the stored codes."""
    multiplier: Callable[[np.ndarray], np.ndarray]
    rounding: Callable[[np.ndarray], np.ndarray]
    lane: Callable[[np.ndarray], np.ndarray]
    narrow: Callable[[np.ndarray], np.ndarray]
    sum_of_lanes: bool

    def codes(self, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(d as float32, the int lanes, the stored int8 codes) of each block."""
        amax = _amax(blocks)
        lanes = self.lane(self.rounding(_scaled(blocks, self.multiplier(amax))))
        return _d(amax), lanes, self.narrow(lanes)

    def q8_0(self, blocks: np.ndarray, records: np.ndarray) -> None:
        d, _, qs = self.codes(blocks)
        records["d"], records["qs"] = _fp16_bits(d), qs

    def q8_1(self, blocks: np.ndarray, records: np.ndarray) -> None:
        """s = fp16(d * (float)sum): ggml-quants.c L329 (sum*d), x86 L442 and L477, arm L124, riscv L111, wasm
        L130."""
        d, lanes, qs = self.codes(blocks)
        total = _wrap32(lanes.sum(axis=1)) if self.sum_of_lanes else qs.astype(np.int64).sum(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            s = (d * total.astype(F32)).astype(F32)
        records["d"], records["qs"], records["s"] = _fp16_bits(d), qs, _fp16_bits(s)


# ---- q8_K -----------------------------------------------------------------------------------------------------
def _first_of_largest(blocks: np.ndarray) -> np.ndarray:
    """The reference's max: the first x of largest |x| (`if (ax > amax)`, ggml-quants.c L2776-2779)."""
    return blocks[np.arange(blocks.shape[0]), np.argmax(np.abs(blocks), axis=1)]


def _negative_on_ties(blocks: np.ndarray) -> np.ndarray:
    """RVV: |max| > |min| ? max : min over the signed max and min (riscv quants.c L151-158): -a wins over +a."""
    hi, lo = blocks.max(axis=1), blocks.min(axis=1)
    return np.where(np.abs(hi) > np.abs(lo), hi, lo)


def _positive_on_ties(blocks: np.ndarray) -> np.ndarray:
    """wasm: -min > max ? min : max over pmax/pmin (wasm quants.c L153-165): +a wins over -a."""
    hi, lo = blocks.max(axis=1), blocks.min(axis=1)
    return np.where(-lo > hi, lo, hi)


def _nearest_int_bits(val: np.ndarray) -> np.ndarray:
    """nearest_int's result from val = fval + 1.5 * 2^23 (ggml-quants.c L623-625): the low 23 bits minus 2^22."""
    return (val.astype(F32).view(np.uint32).astype(np.int64) & 0x7FFFFF) - 0x400000


def _nearest_int(blocks: np.ndarray, iscale: np.ndarray) -> np.ndarray:
    """nearest_int(iscale*x[j]) as written (ggml-quants.c L621, L2790): the product rounded to float32, then
    + 1.5 * 2^23 rounded: half even for |v| <= 2^22; inf and NaN give -2^22 and 0 (0 after the int8 store)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _nearest_int_bits(_scaled(blocks, iscale) + F32(12582912))


def _nearest_int_fused(blocks: np.ndarray, iscale: np.ndarray) -> np.ndarray:
    """nearest_int(iscale*x[j]) contracted into fma(iscale, x, 1.5 * 2^23), as GCC compiles GNU C
    (-ffp-contract=fast) where the target has an FMA: the exact product rounded once, to the nearest integer, half
    even (exact in float64: two 24-bit significands). Measured on x86 -mfma (docs/ggml.md)."""
    with np.errstate(invalid="ignore", over="ignore"):
        exact = blocks.astype(np.float64) * iscale.astype(np.float64)[:, None]
        finite = np.isfinite(exact)
        val = np.where(finite, np.rint(np.where(finite, exact, 0)) + 12582912.0, exact)   # |exact| <= 127: exact
    return _nearest_int_bits(val)


@dataclass(frozen=True)
class QKPath:
    """One path of quantize_row_q8_K: which signed maximum, how codes are made, whether a zero block's bsums are
    written."""
    signed_max: Callable[[np.ndarray], np.ndarray]
    codes: Callable[[np.ndarray, np.ndarray], np.ndarray]      # (blocks, iscale) -> int8 codes
    zero_bsums: bool

    def q8_K(self, blocks: np.ndarray, records: np.ndarray) -> None:
        m = self.signed_max(blocks).astype(F32)
        zero = m == 0
        with np.errstate(divide="ignore", over="ignore"):
            iscale = (F32(-127) / np.where(zero, F32(1), m)).astype(F32)       # ggml-quants.c L2788
            d = (F32(1) / iscale).astype(F32)                                 # ggml-quants.c L2799
        qs = self.codes(blocks, iscale)
        bsums = qs.astype(np.int64).reshape(-1, QK_K // 16, 16).sum(axis=2).astype(np.int16)   # L2793-2797
        records["d"] = np.where(zero, F32(0), d)
        records["qs"] = np.where(zero[:, None], np.int8(0), qs)
        written = ~zero | self.zero_bsums
        records["bsums"][written] = np.where(zero[:, None], np.int16(0), bsums)[written]


def _ref_q8k_codes(blocks, iscale):
    """v = nearest_int(iscale*x); qs = MIN(127, v) stored to int8_t (ggml-quants.c L2790-2791)."""
    return _wrap8(np.minimum(127, _nearest_int(blocks, iscale)))


def _ref_q8k_codes_fused(blocks, iscale):
    """The same with nearest_int's multiply and add fused (an FMA)."""
    return _wrap8(np.minimum(127, _nearest_int_fused(blocks, iscale)))


def _rvv_q8k_codes(blocks, iscale):
    """vfmul, vfcvt_x_f (RNE) to int32, vnclip to int16 and int8 (riscv quants.c L177-182)."""
    return _saturate8(_riscv_cvt(_half_even(_scaled(blocks, iscale))))


def _wasm_q8k_codes(blocks, iscale):
    """f32x4_mul, f32x4_nearest, trunc_sat to int32, narrow (saturating) to int16 and int8 (wasm L191-202)."""
    return _saturate8(_arm_cvt(_half_even(_scaled(blocks, iscale))))


# ---- the variants ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantVariant:
    """A named way ggml's code quantizes activations; `quantize` gives the blocks' bytes as ggml writes them."""
    name: str
    describe: str
    q8: Q8Path | None = None
    qk: QKPath | None = None
    y_types: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        types = (("q8_0", "q8_1") if self.q8 else ()) + (("q8_K",) if self.qk else ())
        object.__setattr__(self, "y_types", types)

    def quantize(self, y_type: str, x: np.ndarray, k: int, prior: np.ndarray | None = None) -> np.ndarray:
        """The bytes quantize_row_<y_type>(x, y, k) leaves in y: k / QK blocks of FORMATS[y_type]. `prior`: what
        y held before (bytes a path leaves unwritten keep it; default zeros)."""
        if y_type not in self.y_types:
            raise KeyError(f"variant {self.name!r} has no {y_type} path (it has {', '.join(self.y_types)})")
        fmt = FORMATS[y_type]
        blocks = _rows(x, k, fmt.qk)
        records = np.zeros(blocks.shape[0], fmt.dtype) if prior is None else fmt.records(np.copy(prior)).copy()
        if records.size != blocks.shape[0]:
            raise ValueError(f"prior holds {records.size} {y_type} blocks, k = {k} makes {blocks.shape[0]}")
        getattr(self.q8 if y_type != "q8_K" else self.qk, y_type)(blocks, records)
        return records.view(np.uint8).reshape(-1).copy()


def _rows(x: np.ndarray, k: int, qk: int) -> np.ndarray:
    x = np.ascontiguousarray(x, F32).reshape(-1)
    if k % qk or k > x.size:
        raise ValueError(f"k = {k}: ggml asserts k % {qk} == 0 (and x holds {x.size} floats)")
    blocks = x[:k].reshape(-1, qk)
    if not np.all(np.isfinite(blocks)):
        raise ValueError("x holds NaN or inf: outside the modelled domain (the max instructions disagree on NaN)")
    return blocks


def _ref_path(conversion: str) -> Q8Path:
    return Q8Path(_reciprocal_of_d, _half_away, CONVERSIONS[conversion], _wrap8, sum_of_lanes=False)


REF_QK = QKPath(_first_of_largest, _ref_q8k_codes, zero_bsums=False)
_REF_DOC = ("ggml-quants.c L276/L302/L2768 (the _generic and scalar paths): id = 1/(amax/127), roundf half away "
            "from zero; q8_K: -127/max of the first largest |x|, nearest_int half even, MIN(127), a zero block's "
            "bsums unwritten; ")
VARIANTS: dict[str, QuantVariant] = {v.name: v for v in [
    QuantVariant("ref", _REF_DOC + "(int8_t) of inf/NaN (C UB, where id overflows) as x86-64 compiles it "
                 "(cvttss2si: INT_MIN, stored 0)", _ref_path("indefinite"), REF_QK),
    QuantVariant("ref-saturating", _REF_DOC + "(int8_t) of inf/NaN as AArch64 (fcvtzs) and wasm32 "
                 "(i32.trunc_sat_f32_s) compile it: +inf -> INT_MAX (stored -1), NaN -> 0",
                 _ref_path("saturating"), REF_QK),
    QuantVariant("ref-saturating-nan-max", _REF_DOC + "(int8_t) of inf/NaN as RISC-V compiles it (fcvt.w.s): "
                 "+inf and NaN -> INT_MAX (stored -1)", _ref_path("saturating-nan-max"), REF_QK),
    QuantVariant("ref-fma", "ggml-quants.c L2768 q8_K with nearest_int(iscale*x) contracted to one FMA (GCC's "
                 "-ffp-contract=fast where the target has FMA): the exact product rounded half even",
                 qk=QKPath(_first_of_largest, _ref_q8k_codes_fused, zero_bsums=False)),
    QuantVariant("x86-avx", "x86 quants.c L302/L400 (AVX and AVX2): id = 127/amax, _mm256_round_ps half even, "
                 "cvtps2dq + saturating packs, q8_1 s from the int32 lanes; q8_K is ref (L505)",
                 Q8Path(_direct, _half_even, _x86_cvt, _saturate8, sum_of_lanes=True)),
    QuantVariant("neon", "arm quants.c L41/L85: id = 1/(amax/127), vcvtnq half even, lanes stored to int8 "
                 "(modulo), q8_1 s from the int32 lanes; q8_K is ref (L134)",
                 Q8Path(_reciprocal_of_d, _half_even, _arm_cvt, _wrap8, sum_of_lanes=True)),
    QuantVariant("rvv", "riscv quants.c L32/L73/L122: id = 1/(amax/127), vfncvt to int16 (frm RNE) half even, "
                 "vncvt (modulo), q8_1 s from the int8 codes; q8_K: -127/max with min winning ties, vfcvt RNE, "
                 "vnclip, bsums always written",
                 Q8Path(_reciprocal_of_d, _half_even, _riscv_cvt16, _wrap8, sum_of_lanes=False),
                 QKPath(_negative_on_ties, _rvv_q8k_codes, zero_bsums=True)),
    QuantVariant("wasm-simd128", "wasm quants.c L41/L88/L145: id = 1/(amax/127), trunc_sat TOWARD ZERO (no "
                 "rounding), q8_1 s from the int32 lanes; q8_K: -127/max with max winning ties, f32x4_nearest "
                 "half even, saturating narrows, a zero block's bsums unwritten",
                 Q8Path(_reciprocal_of_d, _toward_zero, _arm_cvt, _wrap8, sum_of_lanes=True),
                 QKPath(_positive_on_ties, _wasm_q8k_codes, zero_bsums=False)),
]}


def claimed_variant(arch: str, features: frozenset[str], y_type: str, compiler: str | None = None) -> str:
    """The variant ggml's code takes for `y_type` on `arch` with `features` (Linux feature names): the #if of each
    arch/<arch>/quants.c quantizer (x86 L309: __AVX2__ || __AVX__; arm L48: __ARM_NEON, always on AArch64; riscv
    L39: __riscv_v; wasm L48: __wasm_simd128__), else the reference (the scalar fallback, the _generic wrappers of
    ggml-cpu/quants.c L49-122) as `compiler` builds it: 'gcc' contracts the reference q8_K's nearest_int into an
    FMA where the target has one (x86 'fma', AArch64, RISC-V), 'clang' does not (-ffp-contract=on stays within
    an expression). None: as lowp builds it (the host's GCC natively on x86-64, zig's clang for the guests)."""
    if y_type not in Y_TYPES:
        raise KeyError(f"{y_type!r} is not an activation type ({', '.join(Y_TYPES)})")
    features = frozenset(features)
    simd = {"x86-64": "x86-avx" if features & {"avx", "avx2"} else None,
            "aarch64": "neon",
            "riscv64": "rvv" if "v" in features else None,
            "wasm32": "wasm-simd128" if "simd128" in features else None}
    if arch not in simd:
        raise KeyError(f"unknown arch {arch!r}; known: {', '.join(simd)}")
    path = simd[arch]
    if path is not None and y_type in VARIANTS[path].y_types:
        return path
    return generic_variant(arch, features, y_type, compiler)


def generic_variant(arch: str, features: frozenset[str], y_type: str, compiler: str | None = None) -> str:
    """The variant of quantize_row_<y_type>_generic (ggml-cpu/quants.c L49-122: the reference) on `arch` with
    `features`, built by `compiler` (as in claimed_variant)."""
    compiler = compiler or ("gcc" if arch == "x86-64" else "clang")
    if y_type == "q8_K" and compiler == "gcc" and _has_fma(arch, frozenset(features)):
        return "ref-fma"
    return reference_variant(arch)


def _has_fma(arch: str, features: frozenset[str]) -> bool:
    """Whether GCC has a fused multiply-add to contract into: x86 with FMA, AArch64 and RISC-V (F) always."""
    return {"x86-64": "fma" in features, "aarch64": True, "riscv64": True}.get(arch, False)


def reference_variant(arch: str) -> str:
    """The reference (ggml-quants.c) as `arch`'s compiler builds it without contraction: the _generic quantizers'
    variant there (q8_K: see claimed_variant for the FMA-contracted one)."""
    return REFERENCE_OF_ARCH[arch]


# Measured (docs/ggml.md): GCC 12 for x86-64; zig cc (clang) for AArch64, RISC-V 64 and wasm32.
REFERENCE_OF_ARCH = {"x86-64": "ref", "aarch64": "ref-saturating", "wasm32": "ref-saturating",
                     "riscv64": "ref-saturating-nan-max"}


def matching_variants(y_type: str, x: np.ndarray, k: int, got_bytes, prior: np.ndarray | None = None) -> list[str]:
    """Every variant whose bytes for quantize_row_<y_type>(x, k) equal `got_bytes` (for naming a failure)."""
    got = np.frombuffer(bytes(got_bytes), np.uint8) if isinstance(got_bytes, (bytes, bytearray)) \
        else np.asarray(got_bytes, np.uint8).reshape(-1)
    return [v.name for v in VARIANTS.values() if y_type in v.y_types
            and np.array_equal(v.quantize(y_type, x, k, prior), got)]


__all__ = ["VARIANTS", "QuantVariant", "claimed_variant", "generic_variant", "matching_variants", "reference_variant",
           "CONVERSIONS", "Y_TYPES"]
