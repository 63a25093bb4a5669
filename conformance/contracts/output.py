"""Output-stage contracts: what a library promises about a requantizing kernel's u8/s8/f32 output, given the int32
accumulator and the case's quantization parameters. Like the accumulation contracts (contracts.py), each is a set
of accepted results (the library's own paths that it considers correct) and known variants (not accepted, but
named when a kernel's output equals one: the AVX-VNNI zero-point wrap, a wrapping rndnu pre-shift, another
rounding flavour). Each result is an output stage of lowp.isa_models.requant.

A contract is promised on the parameter domain its library documents (its asserts, its params-init functions,
its docs). `domain_problems` names every parameter outside it; `draw` and `strategy` generate cases inside it,
including its ends; `outside` gives the not-claimed probe just outside; `simplifications` shrink a failure.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from lowp.isa_models.fixedpoint import quantize_multiplier
from lowp.isa_models.float32 import f16_values, fp16_bits
from lowp.isa_models.requant import OUT_RANGE, OUTPUT_STAGES, QC2W_ORDERS
from lowp.kernels.models.quant import zero_point_corrected

from lowp.conformance.contracts.int32 import EXACT

F32 = np.float32
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
XNN_INIT = "google/XNNPACK @75db3c0 src/microparams-init.c (xnn_init_qs8_conv_minmax_*_params asserts)"
XNN_REQ = "google/XNNPACK @75db3c0 src/xnnpack/requantization.h L30-34, L140-151"
TFL = "tflite-micro @90b983c tensorflow/lite/kernels/internal/common.cc L31-47 (TFLITE_DCHECK)"
GEMMLOWP = "gemmlowp @16e8662 internal/output.h L121-148 (RoundingDivideByPOT asserts 0 <= exponent <= 31)"
FBGEMM = "pytorch/FBGEMM @71d6f8b src/RefImplementations.cc L217-290, include/fbgemm/Fbgemm.h L1168-1260"
QD8 = "google/XNNPACK @75db3c0 src/qs8-gemm/MRx8c8-avxvnni.c.in L432-464; include/xnnpack.h (qd8 fully connected)"
ONEDNN = "uxlfoundation/oneDNN doc/programming_model/attributes_quantization.md"
QDU8 = ("google/XNNPACK @75db3c0 src/configs/gemm-config.c L4043-4073 (qdu8_f32_qc8w); test/gemm-microkernel-tester.cc "
        "L449-458 (unsigned_inputs: zero_point + 128, a ^ 0x80)")
RVV_SPEC = "riscv/riscv-v-spec@v1.0 v-spec.adoc"
LARGEST_BELOW_256 = np.nextafter(F32(256), F32(0))
SMALLEST_SCALE = F32(2.0 ** -32)


# ---------------------------------------------------------------------------------------------------------------
# Parameter checks shared by the domains

def _type_problems(q, M, N, spec) -> list[str]:
    """Missing keys, wrong dtypes, wrong shapes: spec is {key: (kind, shape)} with kind 'i32', 'f32', 'int',
    'float' and shape 'N', 'M' or '' (a scalar)."""
    out = []
    for key, (kind, shape) in spec.items():
        if key not in q:
            out.append(f"{key}: missing (this contract needs {', '.join(spec)})")
            continue
        v = np.asarray(q[key])
        if shape:
            n = N if shape == "N" else M
            want = np.int32 if kind == "i32" else np.float32
            if v.dtype != want:
                out.append(f"{key}: expected {np.dtype(want)} ({n},), got dtype {v.dtype}")
            elif v.shape != (n,):
                out.append(f"{key}: expected shape ({n},) (one per {'output channel' if shape == 'N' else 'row'}), "
                           f"got {v.shape}")
        elif kind == "int" and (v.ndim or v.dtype.kind not in "iu" or isinstance(q[key], bool)):
            out.append(f"{key}: expected one integer, got {q[key]!r}")
        elif kind == "float" and (v.ndim or v.dtype.kind not in "fiu"):
            out.append(f"{key}: expected one number, got {q[key]!r}")
    return out


def _out_clamp_problems(q, out_type, cite, *, zp_range=None) -> list[str]:
    lo, hi = OUT_RANGE[out_type]
    zlo, zhi = zp_range or (lo, hi)
    zp, mn, mx = int(q["output_zero_point"]), int(q["output_min"]), int(q["output_max"])
    out = []
    if not zlo <= zp <= zhi:
        out.append(f"output_zero_point={zp}: outside [{zlo}, {zhi}] ({out_type}; {cite})")
    for k, v in (("output_min", mn), ("output_max", mx)):
        if not lo <= v <= hi:
            out.append(f"{k}={v}: outside [{lo}, {hi}] ({out_type}; {cite})")
    if mn > mx:
        out.append(f"output_min={mn} > output_max={mx}: the domain needs output_min <= output_max ({cite})")
    return out


def _first_bad(values, bad):
    i = int(np.argmax(bad))
    return f"[{i}]={values[i]!r}"


def _round_to_pot(x: float) -> float:
    return float(2.0 ** np.round(np.log2(x))) if x > 0 else 1.0


# ---------------------------------------------------------------------------------------------------------------
# Domains: the parameter families of the libraries

@dataclass(frozen=True)
class ScaleDomain:
    """bias int32 (N,), scale float32 (N,), output_zero_point / output_min / output_max ints (XNNPACK fp32 and
    rndnu; FBGEMM's float requantization with its clamp rule)."""
    scale_lo: float
    scale_hi: float            # exclusive
    cite: str
    what: str
    fbgemm_clamp: bool = False
    # bias + acc must fit this many bits: 32, or 28 where the int32 accumulator holds 16x the sum (XNNPACK's 4-bit
    # weights: the packers multiply the bias by 16, the kernels shift the nibbles left by 4 and the sum right by 4)
    bias_bits: int = 32

    keys = ("bias", "scale", "output_zero_point", "output_min", "output_max")

    @property
    def bias_range(self) -> tuple[int, int]:
        return -(1 << (self.bias_bits - 1)), (1 << (self.bias_bits - 1)) - 1

    def problems(self, q, M, N, out_type):
        out = _type_problems(q, M, N, {"bias": ("i32", "N"), "scale": ("f32", "N"), "output_zero_point": ("int", ""),
                                       "output_min": ("int", ""), "output_max": ("int", "")})
        if out:
            return out
        b = np.asarray(q["bias"], np.int64)
        bad = (b < self.bias_range[0]) | (b > self.bias_range[1])
        if bad.any():
            out.append(f"bias{_first_bad(b.tolist(), bad)}: outside the {self.bias_bits}-bit range {self.bias_range} "
                       f"({self.cite})")
        s = np.asarray(q["scale"])
        bad = ~(s >= F32(self.scale_lo)) | ~(s < F32(self.scale_hi))
        if bad.any():
            out.append(f"scale{_first_bad(s.tolist(), bad)}: outside [{self.scale_lo!r}, {self.scale_hi!r}) "
                       f"({self.what}; {self.cite})")
        out += _out_clamp_problems(q, out_type, self.cite)
        if self.fbgemm_clamp:
            out += _fbgemm_clamp_problems(q)
        return out

    def typical(self, rng, M, N, out_type, acc_lo, acc_hi):
        bias = rng.integers(-10000, 10001, N).astype(np.int32)
        scale, zp = _tester_scale_zp(rng, acc_lo, acc_hi, bias, out_type)
        return {"bias": bias, "scale": np.full(N, scale, F32) if rng.random() < 0.5 else
                _jitter(rng, scale, N, self.scale_lo, self.scale_hi), **_clamp(rng, out_type, zp, self.fbgemm_clamp)}

    def ends(self, rng, M, N, out_type, acc_lo, acc_hi):
        lo, hi = OUT_RANGE[out_type]
        scale = rng.choice(np.array([LARGEST_BELOW_256, F32(self.scale_lo), F32(1), F32(0.5)], F32)
                           if self.scale_hi == 256 else np.array([F32(self.scale_lo), F32(1), F32(0.5)], F32), N)
        zp = int(rng.choice([lo, hi, lo + 1, hi - 1, 0, -1 if lo < 0 else 1]))
        lo_b, hi_b = self.bias_range
        bias = rng.choice(np.array([0, -10000, 10000, lo_b, hi_b, -(1 << 24), 1 << 24], np.int64), N)
        return {"bias": bias.astype(np.int32), "scale": scale.astype(F32), **_clamp(rng, out_type, zp,
                                                                                      self.fbgemm_clamp, ends=True)}

    def limits(self, rng, M, N, out_type, acc_lo, acc_hi):
        lo, hi = OUT_RANGE[out_type]
        big = LARGEST_BELOW_256 if self.scale_hi == 256 else F32(self.scale_hi / 2)
        scale = np.where(rng.random(N) < 0.5, big, F32(rng.uniform(1, float(big)))).astype(F32)
        lo_b, hi_b = self.bias_range
        low = np.int64(lo_b) - min(acc_lo, 0) + rng.integers(0, 1 << 20, N)     # acc + bias stays near the bottom
        high = np.int64(hi_b) - max(acc_hi, 0) - rng.integers(0, 1 << 20, N)
        bias = np.clip(np.where(rng.random(N) < 0.5, low, high), lo_b, hi_b).astype(np.int32)
        zp = int(rng.integers(lo, 0)) if lo < 0 and rng.random() < 0.6 else int(rng.integers(lo, hi + 1))
        return {"bias": bias, "scale": scale, **_clamp(rng, out_type, zp, self.fbgemm_clamp)}

    def outside(self, rng, q, out_type):
        lo, hi = OUT_RANGE[out_type]
        choice = rng.integers(4)
        q = dict(q)
        if choice == 0:
            q["scale"] = q["scale"].copy()
            q["scale"][rng.integers(len(q["scale"]))] = F32(self.scale_hi)
        elif choice == 1:
            q["scale"] = q["scale"].copy()
            q["scale"][rng.integers(len(q["scale"]))] = np.nextafter(F32(self.scale_lo), F32(0))
        elif choice == 2:
            q["output_zero_point"] = hi + 1 if rng.random() < 0.5 else lo - 1
        else:
            q["output_min"], q["output_max"] = hi, lo
        return q

    def simplify(self, q, out_type):
        yield from _simplify_bias(q)
        yield from _simplify_clamp(q, out_type, self.fbgemm_clamp)
        for s in (F32(1), None):
            new = np.full_like(q["scale"], s) if s is not None else \
                np.array([_round_to_pot(float(v)) for v in q["scale"]], F32)
            new = np.clip(new, F32(self.scale_lo), np.nextafter(F32(self.scale_hi), F32(0))).astype(F32)
            if not np.array_equal(new, q["scale"]):
                yield {**q, "scale": new}


def _fbgemm_clamp_problems(q):
    zp, mn, mx = int(q["output_zero_point"]), int(q["output_min"]), int(q["output_max"])
    out = []
    if mx != 255:
        out.append(f"output_max={mx}: FBGEMM ReQuantizeOutput clamps to 255 ({FBGEMM})")
    if mn not in (0, zp):
        out.append(f"output_min={mn}: FBGEMM clamps below at 0, or at C_zero_point={zp} with FUSE_RELU ({FBGEMM})")
    return out


def _tester_scale_zp(rng, acc_lo, acc_hi, bias, out_type):
    """XNNPACK's tester: c_scale = range >= 256 ? range / 255 : 1.00001 from the accumulators' range, scale =
    1 / c_scale, zero point so that the outputs span the type (qu8 formula), plus a random nudge.
    docs/research/xnnpack-gemm-tester.md#the-reference (gemm-microkernel-tester.cc)."""
    a_min, a_max = acc_lo + int(np.min(bias)), acc_hi + int(np.max(bias))
    rng_ = a_max - a_min
    c_scale = rng_ / 255.0 if rng_ >= 256 else 1.00001
    lo, hi = OUT_RANGE[out_type]
    zp = int(np.clip(np.rint(127.5 - 0.5 * (a_min + a_max) / c_scale) + lo + rng.integers(-8, 9), lo, hi))
    return F32(1.0 / c_scale), zp


def _jitter(rng, scale, N, lo, hi):
    s = (np.float64(scale) * rng.uniform(0.5, 1.5, N)).astype(F32)
    return np.clip(s, F32(lo), np.nextafter(F32(hi), F32(0))).astype(F32)


def _clamp(rng, out_type, zp, fbgemm, ends=False) -> dict:
    lo, hi = OUT_RANGE[out_type]
    if fbgemm:
        return {"output_zero_point": zp, "output_min": zp if rng.random() < 0.3 else 0, "output_max": 255}
    if ends:
        r = rng.integers(4)
        if r == 0:
            v = int(rng.integers(lo, hi + 1))
            return {"output_zero_point": zp, "output_min": v, "output_max": v}
        if r == 1:
            v = int(rng.integers(lo, hi))
            return {"output_zero_point": zp, "output_min": v, "output_max": v + 1}
    if rng.random() < 0.75:
        return {"output_zero_point": zp, "output_min": lo, "output_max": hi}
    a, b = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
    return {"output_zero_point": zp, "output_min": a, "output_max": b}


def _simplify_bias(q):
    b = np.asarray(q["bias"])
    if b.dtype.kind == "f":
        for i in np.flatnonzero(b):
            yield {**q, "bias": np.where(np.arange(len(b)) == i, b.dtype.type(0), b).astype(b.dtype)}
        return
    for i in np.flatnonzero(b):
        for v in (0, int(b[i]) // 2):
            new = b.copy()
            new[i] = v
            if v != b[i]:
                yield {**q, "bias": new}


def _simplify_clamp(q, out_type, fbgemm=False):
    lo, hi = OUT_RANGE[out_type]
    if q.get("output_zero_point", 0) != 0 and lo <= 0 <= hi:
        yield {**q, "output_zero_point": 0, **({"output_min": 0} if fbgemm else {})}
    if not fbgemm and (q["output_min"], q["output_max"]) != (lo, hi):
        yield {**q, "output_min": lo, "output_max": hi}


@dataclass(frozen=True)
class FixedPointDomain:
    """bias int32 (N,), multiplier / shift int32 (N,) in TFLite's convention (real ~ m * 2^(shift - 31)),
    output_zero_point / output_min / output_max ints."""
    shift_lo: int
    shift_hi: int
    cite: str
    mult_lo: int = 0
    per_tensor: bool = False
    fbgemm_clamp: bool = False

    keys = ("bias", "multiplier", "shift", "output_zero_point", "output_min", "output_max")

    def problems(self, q, M, N, out_type):
        out = _type_problems(q, M, N, {"bias": ("i32", "N"), "multiplier": ("i32", "N"), "shift": ("i32", "N"),
                                       "output_zero_point": ("int", ""), "output_min": ("int", ""),
                                       "output_max": ("int", "")})
        if out:
            return out
        m, s = np.asarray(q["multiplier"], np.int64), np.asarray(q["shift"], np.int64)
        bad = m < self.mult_lo
        if bad.any():
            out.append(f"multiplier{_first_bad(m.tolist(), bad)}: below {self.mult_lo} ({self.cite})")
        bad = (s < self.shift_lo) | (s > self.shift_hi)
        if bad.any():
            out.append(f"shift{_first_bad(s.tolist(), bad)}: outside [{self.shift_lo}, {self.shift_hi}] ({self.cite})")
        if self.per_tensor and (len(set(m.tolist())) > 1 or len(set(s.tolist())) > 1):
            out.append(f"multiplier/shift: this library takes one per tensor, the case has several ({self.cite})")
        out += _out_clamp_problems(q, out_type, self.cite)
        if self.fbgemm_clamp:
            out += _fbgemm_clamp_problems(q)
        return out

    def _from_scales(self, scales):
        ms = [quantize_multiplier(float(s), single_rounding=True) for s in scales]
        m = np.array([max(v[0], self.mult_lo) for v in ms], np.int64)
        s = np.clip([v[1] for v in ms], self.shift_lo, self.shift_hi)
        if self.per_tensor:
            m, s = np.full_like(m, m[0]), np.full_like(s, s[0])
        return m.astype(np.int32), np.asarray(s, np.int32)

    def typical(self, rng, M, N, out_type, acc_lo, acc_hi):
        bias = rng.integers(-10000, 10001, N).astype(np.int32)
        scale, zp = _tester_scale_zp(rng, acc_lo, acc_hi, bias, out_type)
        m, s = self._from_scales(_jitter(rng, scale, N, 2.0 ** -32, 2.0 ** 30))
        return {"bias": bias, "multiplier": m, "shift": s, **_clamp(rng, out_type, zp, self.fbgemm_clamp)}

    def ends(self, rng, M, N, out_type, acc_lo, acc_hi):
        lo, hi = OUT_RANGE[out_type]
        m = rng.choice(np.array([max(self.mult_lo, 0), 1 << 30, I32_MAX], np.int64), N).astype(np.int32)
        s = rng.choice(np.array([self.shift_lo, self.shift_hi, 0 if self.shift_lo <= 0 <= self.shift_hi else
                                 self.shift_hi], np.int64), N).astype(np.int32)
        if self.per_tensor:
            m, s = np.full_like(m, m[0]), np.full_like(s, s[0])
        zp = int(rng.choice([lo, hi, 0] if lo <= 0 else [lo, hi]))
        bias = rng.choice(np.array([0, I32_MIN, I32_MAX, -10000, 10000], np.int64), N).astype(np.int32)
        return {"bias": bias, "multiplier": m, "shift": s, **_clamp(rng, out_type, zp, self.fbgemm_clamp, ends=True)}

    def limits(self, rng, M, N, out_type, acc_lo, acc_hi):
        q = ScaleDomain.limits(SCALE_ANY, rng, M, N, out_type, acc_lo, acc_hi)
        m, s = self._from_scales(q.pop("scale"))
        if self.fbgemm_clamp:
            q.update(_clamp(rng, out_type, q["output_zero_point"], True))
        return {**q, "multiplier": m, "shift": s}

    def outside(self, rng, q, out_type):
        lo, hi = OUT_RANGE[out_type]
        q = dict(q)
        i = int(rng.integers(len(q["shift"])))
        choice = rng.integers(4 if self.mult_lo > I32_MIN else 3)
        if choice == 0:
            q["shift"] = q["shift"].copy()
            q["shift"][i] = self.shift_hi + 1 if rng.random() < 0.5 else self.shift_lo - 1
        elif choice == 1:
            q["output_zero_point"] = hi + 1 if rng.random() < 0.5 else lo - 1
        elif choice == 2:
            q["output_min"], q["output_max"] = hi, lo
        else:
            q["multiplier"] = q["multiplier"].copy()
            q["multiplier"][i] = self.mult_lo - 1
        return q

    def simplify(self, q, out_type):
        yield from _simplify_bias(q)
        yield from _simplify_clamp(q, out_type, self.fbgemm_clamp)
        if (q["multiplier"] != 1 << 30).any():
            yield {**q, "multiplier": np.full_like(q["multiplier"], 1 << 30)}
        if self.shift_lo <= 0 <= self.shift_hi and (q["shift"] != 0).any():
            yield {**q, "shift": np.zeros_like(q["shift"])}


SCALE_ANY = ScaleDomain(2.0 ** -32, 256.0, "", "")


@dataclass(frozen=True)
class Qd8Domain:
    """qd8 float output: bias float32 (N,), a_zero_point int32 (M,), a_inv_scale float32 (M,), b_scale float32
    (N,), output_min <= output_max float32 (the values the kernel's params hold). zp_range: the row zero points'
    type, int8 (qd8) or uint8 (qdu8: XNNPACK's unsigned inputs, A and its zero point shifted by 128). half: the
    clamp's bounds are IEEE halves (qd8-f16: struct xnn_f16_minmax_params holds two xnn_float16, microparams.h
    L90-95), so output_min / output_max must be float32 values a half holds exactly (infinities included).
    weight_zero_point: qd8-qc2w's b_float_zero_point float32 (N,), any finite value (the weights' zero point in
    the weights' own units: XNNPACK's tester draws it from [-1, 1], test/gemm-microkernel-tester.cc L2055-2062)."""
    cite: str = QD8
    zp_range: tuple[int, int] = (-128, 127)
    half: bool = False
    weight_zero_point: bool = False
    keys = ("bias", "a_zero_point", "a_inv_scale", "b_scale", "output_min", "output_max")
    qc2w_keys = keys + ("b_float_zero_point",)

    def problems(self, q, M, N, out_type):
        spec = {"bias": ("f32", "N"), "a_zero_point": ("i32", "M"), "a_inv_scale": ("f32", "M"),
                "b_scale": ("f32", "N"), "output_min": ("float", ""), "output_max": ("float", ""),
                **({"b_float_zero_point": ("f32", "N")} if self.weight_zero_point else {})}
        out = _type_problems(q, M, N, spec)
        if out:
            return out
        if self.weight_zero_point and not np.isfinite(q["b_float_zero_point"]).all():
            v = np.asarray(q["b_float_zero_point"])
            out.append(f"b_float_zero_point{_first_bad(v.tolist(), ~np.isfinite(v))}: expected finite "
                       f"({self.cite})")
        zp = np.asarray(q["a_zero_point"])
        zlo, zhi = self.zp_range
        bad = (zp < zlo) | (zp > zhi)
        if bad.any():
            out.append(f"a_zero_point{_first_bad(zp.tolist(), bad)}: outside [{zlo}, {zhi}] "
                       f"({'int8' if zlo < 0 else 'uint8'} rows; {self.cite})")
        for k in ("a_inv_scale", "b_scale", "bias"):
            v = np.asarray(q[k])
            bad = ~np.isfinite(v) | ((v <= 0) if k != "bias" else False)
            if bad.any():
                out.append(f"{k}{_first_bad(v.tolist(), bad)}: expected finite{' and > 0' if k != 'bias' else ''} "
                           f"({self.cite})")
        mn, mx = float(q["output_min"]), float(q["output_max"])
        if np.isnan(mn) or np.isnan(mx) or mn > mx:
            out.append(f"output_min={mn}, output_max={mx}: expected output_min <= output_max, not NaN ({self.cite})")
        for k in ("output_min", "output_max") if self.half else ():
            if not np.isnan(float(q[k])) and float(self._bound(q[k])) != float(q[k]):
                out.append(f"{k}={float(q[k])!r}: not an IEEE half (XNNPACK's f16 params hold xnn_float16 bounds: "
                           "src/xnnpack/microparams.h L90-95)")
        return out

    def _bound(self, v) -> np.float32:
        """A clamp bound as the kernel's params can hold it: the nearest half for an f16 output."""
        v = F32(v)
        return F32(f16_values(fp16_bits(v))) if self.half else v

    def _base(self, rng, M, N, inv, bs, bias, kzp=None):
        q = {"a_zero_point": rng.integers(self.zp_range[0], self.zp_range[1] + 1, M).astype(np.int32),
             "a_inv_scale": inv.astype(F32),
             "b_scale": bs.astype(F32), "bias": bias.astype(F32)}
        if self.weight_zero_point:
            q["b_float_zero_point"] = (rng.uniform(-1, 1, N) if kzp is None else kzp).astype(F32)
        return q

    def typical(self, rng, M, N, out_type, acc_lo, acc_hi):
        q = self._base(rng, M, N, rng.uniform(1e-3, 1, M), rng.uniform(1e-3, 1, N), rng.uniform(-10, 10, N))
        if rng.random() < 0.5:
            return {**q, "output_min": F32(-np.inf), "output_max": F32(np.inf)}
        a, b = sorted(rng.uniform(-100, 100, 2))
        return {**q, "output_min": self._bound(a), "output_max": self._bound(b)}

    def ends(self, rng, M, N, out_type, acc_lo, acc_hi):
        pick = np.array([2.0 ** -32, 1.0, 2.0 ** 32, float(np.finfo(F32).tiny)])
        q = self._base(rng, M, N, rng.choice(pick, M), rng.choice(pick, N), rng.choice([0.0, -1e30, 1e30], N),
                       rng.choice([0.0, -2.0, 1.0, 0.5], N))
        q["a_zero_point"] = rng.choice(np.array([*self.zp_range, 0 if self.zp_range[0] < 0 else 128], np.int32),
                                       M).astype(np.int32)
        v = self._bound(rng.uniform(-10, 10))
        return {**q, "output_min": v, "output_max": v if rng.random() < 0.5 else F32(np.inf)}

    def limits(self, rng, M, N, out_type, acc_lo, acc_hi):
        q = self._base(rng, M, N, rng.uniform(1, 2 ** 20, M), rng.uniform(1, 2 ** 20, N),
                       rng.choice([-3e38, 3e38], N), rng.uniform(-1e4, 1e4, N))
        return {**q, "output_min": F32(-np.inf), "output_max": F32(np.inf)}

    # the weight scale the outside probe spoils, and which of its elements (Qb4wDomain: the first block's)
    SPOILED_SCALE = ("b_scale", (0,))

    def outside(self, rng, q, out_type):
        q = dict(q)
        choice = rng.integers(3)
        if choice == 0:
            key, at = self.SPOILED_SCALE
            q[key] = q[key].copy()
            q[key][at] = F32(0) if rng.random() < 0.5 else F32(np.inf)
        elif choice == 1:
            q["a_zero_point"] = q["a_zero_point"].copy()
            q["a_zero_point"][0] = self.zp_range[1] + 1
        else:
            q["output_min"], q["output_max"] = F32(1.0), F32(-1.0)
        return q

    def simplify(self, q, out_type):
        yield from _simplify_bias(q)
        if self.weight_zero_point and (q["b_float_zero_point"] != 0).any():
            yield {**q, "b_float_zero_point": np.zeros_like(q["b_float_zero_point"])}
        for k in ("a_inv_scale", "b_scale"):
            if (q[k] != 1).any():
                yield {**q, k: np.ones_like(q[k])}
        if (q["output_min"], q["output_max"]) != (F32(-np.inf), F32(np.inf)):
            yield {**q, "output_min": F32(-np.inf), "output_max": F32(np.inf)}


@dataclass(frozen=True)
class OneDNNDomain:
    """bias float32 (N,), scale float32 (N,) (the weights' scales), src_scale / dst_scale float32 scalars,
    output_zero_point int (s32); the result saturates to the destination type."""
    cite: str = ONEDNN
    keys = ("bias", "scale", "src_scale", "dst_scale", "output_zero_point")

    def problems(self, q, M, N, out_type):
        out = _type_problems(q, M, N, {"bias": ("f32", "N"), "scale": ("f32", "N"), "src_scale": ("float", ""),
                                       "dst_scale": ("float", ""), "output_zero_point": ("int", "")})
        if out:
            return out
        for k in ("scale", "src_scale", "dst_scale", "bias"):
            v = np.atleast_1d(np.asarray(q[k]))
            if k in ("src_scale", "dst_scale") and v.dtype != F32:
                out.append(f"{k}: expected np.float32, got {v.dtype}")
                continue
            bad = ~np.isfinite(v) | ((v <= 0) if k != "bias" else False)
            if bad.any():
                out.append(f"{k}{_first_bad(v.tolist(), bad)}: expected finite{' and > 0' if k != 'bias' else ''} "
                           f"(x_f32 = scale * (x - zp); {self.cite})")
        zp = int(q["output_zero_point"])
        if not I32_MIN <= zp <= I32_MAX:
            out.append(f"output_zero_point={zp}: outside int32 (s32 zero points; {self.cite})")
        return out

    def typical(self, rng, M, N, out_type, acc_lo, acc_hi):
        lo, hi = OUT_RANGE[out_type]
        return {"bias": rng.uniform(-10, 10, N).astype(F32), "scale": rng.uniform(1e-3, 1e-1, N).astype(F32),
                "src_scale": F32(rng.uniform(1e-3, 1e-1)), "dst_scale": F32(rng.uniform(1e-2, 1)),
                "output_zero_point": int(rng.integers(lo, hi + 1))}

    def ends(self, rng, M, N, out_type, acc_lo, acc_hi):
        q = self.typical(rng, M, N, out_type, acc_lo, acc_hi)
        lo, hi = OUT_RANGE[out_type]
        q["output_zero_point"] = int(rng.choice([lo, hi, 0, I32_MIN, I32_MAX]))
        q["dst_scale"] = F32(rng.choice([2.0 ** -20, 1.0, 2.0 ** 20]))
        return q

    def limits(self, rng, M, N, out_type, acc_lo, acc_hi):
        q = self.typical(rng, M, N, out_type, acc_lo, acc_hi)
        q["scale"] = rng.uniform(1, 1e3, N).astype(F32)
        q["bias"] = rng.choice([-3e38, 3e38], N).astype(F32)
        return q

    def outside(self, rng, q, out_type):
        q = dict(q)
        if rng.random() < 0.5:
            q["dst_scale"] = F32(0)
        else:
            q["scale"] = q["scale"].copy()
            q["scale"][0] = F32(-1)
        return q

    def simplify(self, q, out_type):
        yield from _simplify_bias(q)
        if q["output_zero_point"] != 0:
            yield {**q, "output_zero_point": 0}
        for k in ("src_scale", "dst_scale"):
            if q[k] != 1:
                yield {**q, k: F32(1)}


# ---------------------------------------------------------------------------------------------------------------
# The contract

STYLES = ("typical", "ends", "limits")


@dataclass(frozen=True)
class OutputContract:
    name: str
    description: str
    out_types: tuple
    keys: tuple
    accepted: tuple
    known: tuple
    citation: str
    domain: object = field(repr=False, default=None)

    def _check_out_type(self, out_type):
        if out_type not in self.out_types:
            raise ValueError(f"output contract {self.name!r}: out_type {out_type!r} is not one of {self.out_types}")

    def judge(self, out, acc, q, out_type):
        """(ok, matched, expected): ok when `out` equals an accepted result; matched names the accepted or known
        stage it equals (None if none); expected is the first accepted result."""
        self._check_out_type(out_type)
        out = np.asarray(out)
        expected = OUTPUT_STAGES[self.accepted[0]].compute(acc, q, out_type)
        for name in self.accepted + self.known:
            try:
                r = expected if name == self.accepted[0] else OUTPUT_STAGES[name].compute(acc, q, out_type)
            except (ArithmeticError, ValueError):
                continue                     # that path is undefined here: it cannot be what the kernel did
            if r.shape == out.shape and r.dtype == out.dtype and np.array_equal(r, out, equal_nan=out.dtype.kind == "f"):
                return name in self.accepted, name, expected
        return False, None, expected

    def domain_problems(self, q, M, N, out_type) -> list[str]:
        """Every parameter outside the library's documented domain, and every missing / mistyped / misshaped one,
        as messages naming the parameter, its value, the range and the citation. Empty: in the domain."""
        if out_type not in self.out_types:
            return [f"out_type {out_type!r}: contract {self.name!r} is for {', '.join(self.out_types)}"]
        if not isinstance(q, dict):
            return [f"quantization parameters: expected a dict, got {type(q).__name__}"]
        return self.domain.problems(q, M, N, out_type)

    def draw(self, rng: np.random.Generator, M, N, out_type, style="typical", acc_lo=-(1 << 16), acc_hi=1 << 16):
        """One case's parameters inside the documented domain; style 'typical' (like XNNPACK's tester), 'ends'
        (the domain's ends) or 'limits' (biases that drive the accumulator to its int32 limits, large scales)."""
        self._check_out_type(out_type)
        if style not in STYLES:
            raise ValueError(f"style={style!r}: expected one of {STYLES}")
        for _ in range(100):
            q = getattr(self.domain, style)(rng, M, N, out_type, int(acc_lo), int(acc_hi))
            if not self.domain.problems(q, M, N, out_type):
                return q
        raise AssertionError(f"{self.name}: draw({style!r}) kept leaving the domain: {self.domain.problems(q, M, N, out_type)}")

    def strategy(self, M, N, out_type, acc_lo=-(1 << 16), acc_hi=1 << 16):
        """A hypothesis strategy of parameter dicts: a third each typical, ends, limits (seeded draws)."""
        from hypothesis import strategies as st
        return st.builds(lambda style, seed: self.draw(np.random.default_rng(seed), M, N, out_type, style, acc_lo,
                                                       acc_hi),
                         st.sampled_from(STYLES), st.integers(0, 2 ** 63 - 1))

    def outside(self, rng: np.random.Generator, M, N, out_type) -> dict:
        """Parameters just outside the documented domain (one parameter moved over its edge): the not-claimed
        probe."""
        q = self.draw(rng, M, N, out_type, "typical")
        for _ in range(100):
            r = self.domain.outside(rng, q, out_type)
            if self.domain.problems(r, M, N, out_type):
                return r
        raise AssertionError(f"{self.name}: outside() found no parameter to move out of the domain")

    def simplifications(self, q, out_type) -> Iterator[dict]:
        """Simpler parameter sets for shrinking a failure (bias toward 0 per element, zero points toward 0,
        scales toward 1 / powers of two, the clamp toward the type's ends), each still inside the domain."""
        M = np.size(q["a_zero_point"]) if np.ndim(q.get("a_zero_point", 0)) else 1   # per row (qd8) or a scalar
        N = len(np.atleast_1d(q.get("bias", q.get("scale", [0]))))
        for s in self.domain.simplify(q, out_type):
            if not self.domain.problems(s, M, N, out_type):
                yield s


QD8_F16 = "google/XNNPACK @75db3c0 src/qd8-f16-qc8w-gemm/gen/*.c (the qd8 float stage, then _mm256_cvtps_ph / " \
          "vcvt_f16_f32); test/gemm-microkernel-tester.cc (f16 outputs compared with a tolerance)"


def _half_contracts() -> list:
    """XNNPACK's qd8-f16 outputs (qd8-f16-qc8w, -qc4w, their qdu8 forms): the qd8-f32 contracts' stages stored as
    f16 rounded to nearest even; a truncating store is a known variant."""
    out = []
    for name, accepted, known, cite, zp in (
            ("qd8-f16", ("qd8-f16-fma", "qd8-f16-unfused", "qd8-f16-scale-product-unfused", "qd8-f16-unfused-ftz",
                         "qd8-f16-scale-product-unfused-ftz"),
             (), QD8, (-128, 127)),
            ("qdu8-f16", ("qd8-f16-fma", "qd8-f16-unfused", "qd8-f16-scale-product-unfused"), (), QDU8, (0, 255)),
            ("qd8-f16-qc4w", ("qd8-f16-fma-acc28", "qd8-f16-unfused-acc28", "qd8-f16-unfused-ftz-acc28"),
             ("qd8-f16-fma", "qd8-f16-unfused"),
             f"{QD8}; {XNN_QC4W}", (-128, 127)),
            ("qdu8-f16-qc4w", ("qd8-f16-fma-acc28", "qd8-f16-unfused-acc28"), ("qd8-f16-fma", "qd8-f16-unfused"),
             f"{QDU8}; {XNN_QC4W}", (0, 255))):
        unsigned = " with unsigned inputs (u8 A, uint8 row zero points)" if zp[0] == 0 else ""
        bits = " on the 28-bit 4-bit accumulator" if "qc4w" in name else ""
        out.append(OutputContract(
            name, f"XNNPACK qd8 f16 output{unsigned}{bits}: the qd8 float stage (fused or not), then the f16 store "
            "rounding to nearest even (VCVTPS2PH, FCVTN)", ("f16",), Qd8Domain.keys, accepted,
            known + tuple(f"{s}-trunc" for s in accepted), f"{cite}; {QD8_F16}",
            Qd8Domain(cite, zp, half=True)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Blockwise 4-bit weights (qb4w): no int32 accumulator describes the kernel, the float steps see every block

XNN_QB4W = "google/XNNPACK @75db3c0 src/qd8-f32-qb4w-gemm/gen/*.c, src/qd8-f16-qb4w-gemm/gen/*.c, " \
           "src/qd8-bf16-qb4w-gemm/gen/*.c; src/reference/packing.cc L1306-1420 (xnn_pack_qs8_qb4w_gemm_goi_w); " \
           "src/microparams-init.c L462-487 (bf16 scale / 16)"
QB4W_BLOCKS = 4        # the block scales a case draws; they repeat along k (lowp.kernels.xnnpack.block_scales)


def _bf16(x) -> np.ndarray:
    """float32 values truncated to bf16 numbers (a positive normal stays positive and normal)."""
    return (np.asarray(x, F32).view(np.uint32) & np.uint32(0xFFFF0000)).view(F32)


@dataclass(frozen=True)
class Qb4wDomain(Qd8Domain):
    """The qd8 float domain with one bf16 scale per block of bl k per column instead of one per column:
    b_block_scale float32 (N, blocks) holding bf16 numbers, finite and > 0 (XNNPACK takes them as bf16:
    xnn_create_fully_connected_nc_qd8_f32_qb4w). A case draws QB4W_BLOCKS columns of scales before its depth is
    known; block b of a deeper case takes column b mod QB4W_BLOCKS."""
    SPOILED_SCALE = ("b_block_scale", (0, 0))
    keys = ("bias", "a_zero_point", "a_inv_scale", "b_block_scale", "output_min", "output_max")

    def problems(self, q, M, N, out_type):
        if "b_block_scale" not in q:
            return [f"b_block_scale: missing (this contract needs {', '.join(self.keys)})"]
        s = np.asarray(q["b_block_scale"])
        if s.dtype != F32 or s.ndim != 2 or s.shape[0] != N or s.shape[1] < 1:
            return [f"b_block_scale: expected float32 (N={N}, blocks), got {s.dtype} {s.shape}"]
        out = super().problems({**{k: v for k, v in q.items() if k != "b_block_scale"},
                                "b_scale": np.ones(N, F32)}, M, N, out_type)
        bad = ~np.isfinite(s) | (s <= 0) | ((s.view(np.uint32) & 0xFFFF) != 0)
        if bad.any():
            n, b = np.argwhere(bad)[0]
            out.append(f"b_block_scale[{n}, {b}]={float(s[n, b])!r}: expected a finite bf16 number > 0 "
                       f"({XNN_QB4W})")
        return out

    def _base(self, rng, M, N, inv, bs, bias, kzp=None):
        q = super()._base(rng, M, N, inv, bs, bias, kzp)
        del q["b_scale"]
        # per block: the column's drawn scale times a factor of up to 4 either way, so blocks differ
        factors = np.exp2(rng.integers(-2, 3, (N, QB4W_BLOCKS)))
        scales = np.clip(np.asarray(bs, np.float64)[:, None] * factors, float(np.finfo(F32).tiny), 2.0 ** 120)
        return {**q, "b_block_scale": _bf16(scales.astype(F32))}

    def simplify(self, q, out_type):
        for simpler in super().simplify({**q, "b_scale": np.ones(len(q["bias"]), F32)}, out_type):
            yield {k: v for k, v in simpler.items() if k != "b_scale"}
        if (q["b_block_scale"] != 1).any():
            yield {**q, "b_block_scale": np.ones_like(q["b_block_scale"])}


@dataclass(frozen=True)
class BlockGeometry:
    """What a qb4w stage needs of the kernel besides the case: the block size, kr and sr (the packer's column sums
    are rounded per chunk of 2*kr k, in packing order)."""
    bl: int
    kr: int = 1
    sr: int = 1


@dataclass(frozen=True)
class BlockwiseContract(OutputContract):
    """An output contract on A and B themselves (a qb4w kernel scales every block in float): accepted and known
    are names of lowp.kernels.models.quant.QB4W_STAGES (or QB4W_ORDERS); `stores` the accepted f16/bf16 store
    conversions and `known_stores` the named wrong ones. A result is named `<stage>` (f32) or `<stage>:<store>`."""
    stores: tuple = ("rne",)
    known_stores: tuple = ()

    def judge(self, out, acc, q, out_type):
        raise TypeError(f"output contract {self.name!r} is blockwise: it judges A and B (judge_blocks), not an int32 "
                        "accumulator")

    def results(self, A, B, q, out_type, geometry: BlockGeometry, names=None):
        """(name, accepted, result) of every accepted and known variant (only `names` if given), the first accepted
        first; a variant undefined on the case (a parameter its packing refuses) is left out."""
        from lowp.kernels.models.quant import qb4w_floats, qb4w_store
        self._check_out_type(out_type)
        stores = [(s, True) for s in self.stores] + [(s, False) for s in self.known_stores]
        if out_type == "f32":
            stores = [("rne", True)]
        for stage in self.accepted + self.known:
            wanted = [(store, ok) for store, ok in stores
                      if names is None or (stage if out_type == "f32" else f"{stage}:{store}") in names]
            if not wanted:
                continue
            try:
                v = qb4w_floats(stage, A, B, q, bl=geometry.bl, kr=geometry.kr, sr=geometry.sr)
            except (ArithmeticError, ValueError):
                continue
            for store, store_ok in wanted:
                yield (stage if out_type == "f32" else f"{stage}:{store}"), stage in self.accepted and store_ok, \
                    qb4w_store(v, out_type, store)

    def expected_blocks(self, A, B, q, out_type, geometry: BlockGeometry) -> np.ndarray:
        return next(self.results(A, B, q, out_type, geometry))[2]

    def judge_blocks(self, out, A, B, q, out_type, geometry: BlockGeometry):
        """(ok, matched, expected) as OutputContract.judge, on A and B."""
        out = np.asarray(out)
        expected = None
        for name, accepted, r in self.results(A, B, q, out_type, geometry):
            expected = r if expected is None else expected
            if r.shape == out.shape and r.dtype == out.dtype and np.array_equal(r, out, equal_nan=out.dtype.kind == "f"):
                return accepted, name, expected
        return False, None, expected


QB4W_ACCEPTED = ("qb4w-unfused", "qb4w-fma", "qb4w-fma-fused", "qb4w-fma-fused-lanes4")
QB4W_KNOWN = ("qb4w-reference", "qb4w-unfused-fused", "qb4w-fma-lanes4", "qb4w-exact")


def _qb4w_contracts() -> list:
    """XNNPACK's blockwise kernels, f32, f16 and bf16 outputs, signed (qd8) and unsigned (qdu8) inputs."""
    out = []
    for a, zp, cite in (("qd8", (-128, 127), QD8), ("qdu8", (0, 255), QDU8)):
        unsigned = " with unsigned inputs (u8 A, uint8 row zero points)" if a == "qdu8" else ""
        for c, stores, known_stores, how in (
                ("f32", ("rne",), (), ""),
                ("f16", ("rne",), ("trunc",), ", stored as f16 rounded to nearest even (VCVTPS2PH, FCVTN)"),
                ("bf16", ("rne", "rne-nonan", "rne-daz"), (), ", stored as bf16 rounded to nearest even (NaNs "
                 "quieted or not: the NEON dot kernels' add-and-narrow has no NaN test; subnormals kept or, "
                 "VCVTNEPS2BF16 in the AVX-512 kernels, taken as zero)")):
            out.append(BlockwiseContract(
                f"{a}-{c}-qb4w", f"XNNPACK blockwise 4-bit output{unsigned}: vksum * zp, then per block f32(16 x "
                "the block's int32 sum) * bf16(scale / 16) added in float (fused or not; the AVX2 kernels per "
                f"PMADDWD lane), * inv_scale + bias (fused or not), clamp{how}", (c,), Qb4wDomain.keys,
                QB4W_ACCEPTED, QB4W_KNOWN, f"{cite}; {XNN_QB4W}", Qb4wDomain(cite, zp, half=c == "f16"),
                stores=stores, known_stores=known_stores))
    return out


XNN_QC2W = "google/XNNPACK @75db3c0 src/reference/packing.cc L791-888 (xnn_pack_qd8_qc2w_gemm_goi_w: crumbs w + 2, " \
           "a float kernel zero point per channel); test/gemm-microkernel-tester.cc L2010-2195 (the reference: " \
           "(acc - zp * ksum - row_sum * kzp + k * zp * kzp) * inv_scale * scale + bias)"


def _qc2w_contracts() -> list:
    """XNNPACK's qd8 outputs of 2-bit weights with a float weight zero point (qd8-f32-qc2w, qd8-f16-qc2w and their
    qdu8 forms): sum (a - zp)(w - kzp) * inv_scale * scale + bias, the weight zero point taken off in float with
    the rows' sums; every order XNNPACK's kernels compute it in is accepted (lowp.isa_models.requant.QC2W_ORDERS),
    each a named stage; f16: stored rounded to nearest even (a truncating store is a known variant)."""
    out = []
    for a, cite, zp in (("qd8", QD8, (-128, 127)), ("qdu8", QDU8, (0, 255))):
        for c in ("f32", "f16"):
            accepted = tuple(f"qd8-{c}-qc2w-{order}" for order in QC2W_ORDERS)
            known = tuple(f"{s}-trunc" for s in accepted) if c == "f16" else ()
            unsigned = " with unsigned inputs (u8 A, uint8 row zero points)" if a == "qdu8" else ""
            out.append(OutputContract(
                f"{a}-{c}-qc2w", f"XNNPACK qd8 {c} output of 2-bit weights{unsigned}: (acc - kzp * (row_sum - kc * "
                "zp)) * inv_scale * b_scale + bias with a float weight zero point kzp, in each order XNNPACK's "
                f"kernels take it{', stored as f16' if c == 'f16' else ''}", (c,), Qd8Domain.qc2w_keys, accepted,
                known, f"{cite}; {XNN_QC2W}" + (f"; {QD8_F16}" if c == "f16" else ""),
                Qd8Domain(cite, zp, half=c == "f16", weight_zero_point=True)))
    return out


XNN_FP32_DOMAIN = ScaleDomain(2.0 ** -32, 256.0, f"{XNN_REQ}; {XNN_INIT}", "XNNPACK fp32 asserts 2^-32 <= scale < 256")
XNN_QC4W = "google/XNNPACK @75db3c0 src/reference/packing.cc L459, L516-517 (packed_b = b * 16, less 16 * izp * ksum)"
XNN_FP32_QC4W_DOMAIN = ScaleDomain(2.0 ** -32, 256.0, f"{XNN_REQ}; {XNN_INIT}; {XNN_QC4W}",
                                   "XNNPACK fp32 asserts 2^-32 <= scale < 256", bias_bits=28)
XNN_RNDNU16 = "google/XNNPACK @75db3c0 src/xnnpack/requantization.h L107-138; src/microparams-init.c L124-154"
XNN_RNDNU_DOMAIN = ScaleDomain(2.0 ** -32, 256.0, f"{XNN_REQ}; {XNN_INIT}",
                               "XNNPACK rndnu: shift = 150 - exponent asserted in [16, 55], i.e. 2^-32 <= scale < 256")

OUTPUT_CONTRACTS: dict[str, OutputContract] = {c.name: c for c in [
    OutputContract("xnnpack-fp32", "XNNPACK fp32 requantization: lrintf(clamp(f32(acc + bias) * scale, min - zp, "
                   "max - zp)) + zp; every implementation path equals the reference on the domain",
                   ("s8", "u8"), ScaleDomain.keys,
                   ("xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
                    "xnnpack-fp32-neonv8", "xnnpack-fp32-neon", "xnnpack-fp32-armsimd32"),
                   ("xnnpack-fp32-avxvnni-wrap", "xnnpack-rndnu", "fbgemm-float-generic"),
                   f"{XNN_REQ}; {XNN_INIT}", XNN_FP32_DOMAIN),
    OutputContract("xnnpack-rndnu", "XNNPACK rndnu: (x * mantissa24 + 2^(s-1)) >> s with s from the scale's exponent, "
                   "clamp, + zp; the NEON kernels saturate, the scalar reference narrows int64 -> int32 (wraps) once "
                   "|x * scale| >= 2^31: both are XNNPACK's own, both accepted",
                   ("s8", "u8"), ScaleDomain.keys,
                   ("xnnpack-rndnu", "xnnpack-rndnu-neon", "xnnpack-rndnu-scalar"),
                   ("xnnpack-rndnu-neon-wrap", "xnnpack-fp32-lrintf"),
                   f"{XNN_REQ}; {XNN_INIT} (rndnu_scalar, rndnu_neon)", XNN_RNDNU_DOMAIN),
    OutputContract("xnnpack-fp32-qc4w", "XNNPACK fp32 requantization of the 4-bit qs8-qc4w kernels: the "
                   "xnnpack-fp32 stages on bias + acc wrapped to 28 bits (the int32 holds 16x the sum); the bias "
                   "itself within 28 bits (the packers multiply it by 16 in int32)",
                   ("s8",), ScaleDomain.keys, tuple(f"{s}-acc28" for s in (
                       "xnnpack-fp32-lrintf", "xnnpack-fp32-fmagic", "xnnpack-fp32-imagic", "xnnpack-fp32-x86",
                       "xnnpack-fp32-neonv8", "xnnpack-fp32-neon")),
                   ("xnnpack-fp32-lrintf", "xnnpack-fp32-avxvnni-wrap-acc28", "xnnpack-rndnu"),
                   f"{XNN_REQ}; {XNN_INIT}; {XNN_QC4W}", XNN_FP32_QC4W_DOMAIN),
    OutputContract("xnnpack-rndnu16", "XNNPACK rndnu16 (qu8): a rounding pre-shift by the scale's exponent + 1, "
                   "saturated to int16, times a 15-bit multiplier rounded to the high half, + zp (saturating), "
                   "clamp: two roundings, not rndnu's one", ("u8",), ScaleDomain.keys, ("xnnpack-rndnu16",),
                   ("xnnpack-rndnu", "xnnpack-rndnu-neon", "xnnpack-fp32-lrintf"), XNN_RNDNU16,
                   ScaleDomain(2.0 ** -32, 256.0, XNN_RNDNU16, "XNNPACK rndnu16 asserts 2^-32 <= scale < 256")),
    *[OutputContract(f"rvv-vnclip-{m}", f"lowp's RVV requantization of XNNPACK's rndnu_neon params: vsadd "
                     f"doublings, vsmul (vxrm rdn), vnclip int32 -> int16 rounded by vxrm {m}, vsadd zp, vnclip to "
                     "int8, clamp" + (" (equal to XNNPACK's NEON rndnu: tests/test_riscv64_kernels.py)"
                                      if m == "rnu" else ""),
                     ("s8",), ScaleDomain.keys, (f"rvv-vnclip-{m}",),
                     tuple(f"rvv-vnclip-{o}" for o in ("rnu", "rne", "rdn", "rod") if o != m)
                     + ("rvv-vnclip-rnu-vsmul-rnu", "xnnpack-rndnu-neon", "xnnpack-fp32-lrintf"),
                     f"{RVV_SPEC} sections 3.8, 12.3, 12.5; {XNN_INIT} (rndnu_neon)", XNN_RNDNU_DOMAIN)
      for m in ("rnu", "rne", "rdn", "rod")],
    OutputContract("tflite-double-rounding", "TFLite's reference MultiplyByQuantizedMultiplier (double rounding: "
                   "SRDHM then RDBPOT) + zp, clamp", ("s8", "u8"), FixedPointDomain.keys,
                   ("tflite-G",), ("tflite-G-satshift", "tflite-U", "tflite-S", "tflite-S_neon"),
                   f"{TFL}; L78-90", FixedPointDomain(-31, 30, f"{TFL}; quantization_util.cc L53-104")),
    OutputContract("tflite-single-rounding", "ruy (since 2021) / TFLITE_SINGLE_ROUNDING: (x*m + 2^(30-s)) >> (31-s) "
                   "+ zp, clamp", ("s8", "u8"), FixedPointDomain.keys,
                   ("tflite-S",), ("tflite-S_neon", "tflite-G", "tflite-U"),
                   f"ruy ruy/apply_multiplier.cc L48-65; {TFL}", FixedPointDomain(-31, 30, TFL)),
    OutputContract("gemmlowp-fixedpoint", "gemmlowp BiasAddition, QuantizeDownInt32ByFixedPoint, Clamp, "
                   "SaturatingCast (result_shift = -shift in 0..31)", ("s8", "u8"), FixedPointDomain.keys,
                   ("gemmlowp-fixedpoint",), ("tflite-U", "tflite-S"),
                   GEMMLOWP, FixedPointDomain(-31, 0, GEMMLOWP)),
    OutputContract("fbgemm-requantize", "FBGEMM ReQuantizeOutput (u8), float multiplier per tensor / group / "
                   "channel: the generic and the AVX2 path", ("u8",), ScaleDomain.keys,
                   ("fbgemm-float-generic", "fbgemm-float-avx2"), ("xnnpack-fp32-lrintf",),
                   FBGEMM, ScaleDomain(2.0 ** -32, 2.0 ** 30, FBGEMM, "FBGEMM takes a finite positive C_multiplier",
                                       fbgemm_clamp=True)),
    OutputContract("fbgemm-requantize-fixed", "FBGEMM requantize_u8acc32_ref with a fixed-point multiplier (per "
                   "tensor); C_right_shift = 31 - shift in 0..63", ("u8",), FixedPointDomain.keys,
                   ("fbgemm-fixed",), ("tflite-S", "tflite-G"),
                   FBGEMM, FixedPointDomain(-32, 31, f"{FBGEMM} (ChooseRequantizationMultiplier)", per_tensor=True,
                                            fbgemm_clamp=True)),
    OutputContract("qd8-f32", "XNNPACK qd8 float output: f32(acc) * inv_scale[m], then * b_scale[n] + bias[n] fused "
                   "(x86, AArch64) or not (scalar, AArch32), clamp", ("f32",), Qd8Domain.keys,
                   ("qd8-f32-fma", "qd8-f32-unfused", "qd8-f32-scale-product-unfused", "qd8-f32-unfused-ftz",
                    "qd8-f32-scale-product-unfused-ftz"),
                   ("qd8-f32-scale-product",), QD8, Qd8Domain()),
    OutputContract("qd8-f32-qc4w", "XNNPACK qd8 float output of the 4-bit qc4w kernels: the qd8 stages on the "
                   "accumulator wrapped to 28 bits (the int32 holds 16x the sum)", ("f32",), Qd8Domain.keys,
                   ("qd8-f32-fma-acc28", "qd8-f32-unfused-acc28", "qd8-f32-unfused-ftz-acc28"),
                   ("qd8-f32-fma", "qd8-f32-unfused"),
                   f"{QD8}; {XNN_QC4W}", Qd8Domain()),
    OutputContract("qdu8-f32-qc4w", "the same with unsigned inputs (u8 A, uint8 row zero points)", ("f32",),
                   Qd8Domain.keys, ("qd8-f32-fma-acc28", "qd8-f32-unfused-acc28"), ("qd8-f32-fma", "qd8-f32-unfused"),
                   f"{QDU8}; {XNN_QC4W}", Qd8Domain(QDU8, (0, 255))),
    OutputContract("qdu8-f32", "XNNPACK qdu8 float output (unsigned inputs: u8 A, uint8 row zero points): the qd8 "
                   "stages", ("f32",), Qd8Domain.keys, ("qd8-f32-fma", "qd8-f32-unfused",
                                                         "qd8-f32-scale-product-unfused"),
                   ("qd8-f32-scale-product",), QDU8, Qd8Domain(QDU8, (0, 255))),
    *_half_contracts(),
    *_qb4w_contracts(),
    *_qc2w_contracts(),
    OutputContract("onednn-scales", "oneDNN: f32_to_int8((src_scale * wei_scale[n] * f32(acc) + bias) / dst_scale "
                   "+ zp): the reference's orders (division, reciprocal) and the JIT's precomputed scales",
                   ("s8", "u8"), OneDNNDomain.keys, ("onednn-ref", "onednn-ref-reciprocal", "onednn-jit"),
                   ("onednn-ties-away",), ONEDNN, OneDNNDomain()),
]}


def output_contract(name: str) -> OutputContract:
    try:
        return OUTPUT_CONTRACTS[name]
    except KeyError:
        raise KeyError(f"no output contract named {name!r}; known: {', '.join(OUTPUT_CONTRACTS)}") from None


def accumulators(variant, A, B, q) -> np.ndarray:
    """What the output stage receives under an accumulation variant: its A x B with the zero-point terms. Small
    numpy cases are computed once (by their contents): a check draws every generated case's parameters from its
    exact accumulators first, then judges each case on them again."""
    if not all(isinstance(x, np.ndarray) for x in (A, B)) or A.size + B.size > CACHED_ELEMENTS:
        return zero_point_corrected(variant.compute(A, B).astype(np.int64), A, B, q)
    a_zp = _contents(np.asarray(q.get("a_zero_point", 0)))
    return _accumulators_of(variant, _contents(A), _contents(B), a_zp, int(q.get("b_zero_point", 0))).copy()


CACHED_ELEMENTS = 4096      # a cached case's A and B elements at most: 1,024 of them hold a few MB


def _contents(x: np.ndarray) -> tuple:
    """An array as a cache key: (type, shape, bytes)."""
    return x.dtype.str, x.shape, x.tobytes()


def _array(contents: tuple) -> np.ndarray:
    dtype, shape, data = contents
    return np.frombuffer(data, dtype).reshape(shape)


@functools.lru_cache(maxsize=1024)
def _accumulators_of(variant, A: tuple, B: tuple, a_zp: tuple, b_zp: int) -> np.ndarray:
    a, b = _array(A), _array(B)
    return zero_point_corrected(variant.compute(a, b).astype(np.int64), a, b,
                                {"a_zero_point": _array(a_zp), "b_zero_point": b_zp})


def exact_accumulators(A, B, q) -> np.ndarray:
    return accumulators(EXACT, A, B, q)
