"""Registry entries for the RISC-V V 1.0 models: the RVV C intrinsics v1.0 spellings
(riscv-non-isa/rvv-intrinsic-doc@v1.0-ratified, auto-generated/intrinsic_funcs.adoc), with their argument
orders, e.g.

    __riscv_vwmacc_vv_i16m1(vd, vs1, vs2, vl)      __riscv_vwmaccus_vx_i16m1(vd, rs1, vs2, vl)
    __riscv_vnclip_wx_i8m1(vs2, rs1, vxrm, vl)     __riscv_vsmul_vv_i8m1(vs2, vs1, vxrm, vl)

A vector type's element count is not fixed by its name: vint8m1_t holds VLEN/8 elements, VLEN being the
implementation's register width. So an RVV intrinsic here is scalable: called with arrays, it reads VLEN off the
first vector argument (elements * SEW / LMUL; a power of two in [128, 65536], the V extension's range) and checks
every other argument against that VLEN; `intr.at(vlen)` is the fixed-width view the executors and the proof use.
`vl` must be VLMAX: these (non-policy) intrinsics leave the tail elements unspecified (tail agnostic), so a
shorter vl has no defined register result; the instruction models (rvv.py) take the body elements directly.
`vxrm` is the C constant __RISCV_VXRM_RNU/RNE/RDN/ROD = 0/1/2/3 (rvv-intrinsic-spec.adoc, 'Fixed-point
intrinsics'); the intrinsic returns the register as C does, `intr.with_vxsat(...)` also the vxsat bit, which
the intrinsic spec leaves UNSPECIFIED after an intrinsic and the instruction defines.
Tail/mask policy variants (_tu, _m, _tum, ...) and LMUL beyond m2 are not registered.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from lowp.isa_models import rvv
from lowp.isa_models.lanes import DTYPES, is_lanes
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

INTRINSICS_DOC = "riscv-non-isa/rvv-intrinsic-doc@v1.0-ratified"
VLEN_MIN, VLEN_MAX = 128, 65536          # the V extension needs VLEN >= 128; VLEN <= 2^16 (RVV 1.0 section 2)
VXRM_C = dict(enumerate(rvv.VXRM))       # __RISCV_VXRM_RNU = 0, ... ROD = 3
LMUL = {"mf2": Fraction(1, 2), "m1": Fraction(1), "m2": Fraction(2)}


@dataclass
class RvvIntrinsic(Intrinsic):
    """A scalable RVV intrinsic (vlen=None, as registered) or its view at one VLEN (from at())."""
    lmuls: tuple = ()                     # LMUL of each param (None for scalars, vxrm, vl)
    result_lmul: Fraction = Fraction(1)
    vlen: int | None = None
    fixed_point: bool = False

    @property
    def signature(self) -> str:
        def one(p, lmul):
            if p.kind == "vec":
                return f"{p.name}:{_type_name(p.dtype, lmul)}"
            if p.kind == "scalar":
                return p.describe()
            return f"{p.name}:VLMAX" if p.name == "vl" else p.describe()
        args = ", ".join(one(p, l) for p, l in zip(self.params, self.lmuls))
        return f"{self.name}({args}) -> {_type_name(self.result.dtype, self.result_lmul)}"

    def at(self, vlen: int) -> "RvvIntrinsic":
        """This intrinsic at one VLEN: vector params with VLEN * LMUL / SEW elements, vl = VLMAX."""
        if isinstance(vlen, bool) or not isinstance(vlen, (int, np.integer)) or vlen < VLEN_MIN \
                or vlen > VLEN_MAX or vlen & (vlen - 1):
            raise ValueError(f"vlen: expected a power of two in [{VLEN_MIN}, {VLEN_MAX}], got {vlen!r}")
        vlen = int(vlen)
        result = _sized(self.result, self.result_lmul, vlen)
        # VLMAX of the vtype the intrinsic sets is its result's element count.
        params = tuple(replace(p, lo=result.lanes, hi=result.lanes) if p.name == "vl" else _sized(p, l, vlen)
                       for p, l in zip(self.params, self.lmuls))
        return replace(self, params=params, result=result, width=int(vlen * max(self.lmuls_present())),
                       vlen=vlen)

    def lmuls_present(self):
        return [l for l in self.lmuls if l is not None] + [self.result_lmul]

    def vlen_of(self, args) -> int:
        """VLEN from the first vector argument's element count."""
        for p, lmul, a in zip(self.params, self.lmuls, args):
            if p.kind == "vec" and is_lanes(a) and a.ndim:
                bits = Fraction(a.shape[-1] * p.dtype.itemsize * 8) / lmul
                if bits.denominator == 1 and VLEN_MIN <= bits <= VLEN_MAX and not int(bits) & (int(bits) - 1):
                    return int(bits)
                raise ValueError(f"{self.name}: argument {p.name!r} has {a.shape[-1]} elements, which is no "
                                 f"{_type_name(p.dtype, lmul)} register group at any VLEN in "
                                 f"[{VLEN_MIN}, {VLEN_MAX}] (elements = VLEN * {lmul} / {p.dtype.itemsize * 8})")
        raise ValueError(f"{self.name}: expected numpy arrays for the vector arguments "
                         f"({', '.join(p.name for p in self.params if p.kind == 'vec')})")

    def with_vxsat(self, *args):
        """The register result and vxsat (bool per register; False for instructions that never saturate)."""
        if len(args) != len(self.params):
            raise ValueError(f"{self.name} takes {len(self.params)} arguments ({self.signature}), got {len(args)}")
        view = self if self.vlen is not None else self.at(self.vlen_of(args))
        vl = args[-1]
        vlmax = view.params[-1].hi
        if not isinstance(vl, (bool, np.bool_)) and isinstance(vl, (int, np.integer)) and vl != vlmax:
            raise ValueError(f"{self.name}: vl={vl} but VLMAX is {vlmax} at VLEN={view.vlen}; the tail elements of "
                             "a non-policy intrinsic are unspecified (tail agnostic), so lowp models vl = VLMAX only: "
                             "for a shorter vl call the instruction model (lowp.isa_models.rvv) on the body elements")
        out = Intrinsic.__call__(view, *args)
        if isinstance(out, rvv.Fixed):
            return out.result, out.vxsat
        return out, np.zeros(out.shape[:-1], bool)

    def __call__(self, *args):
        return self.with_vxsat(*args)[0]


def _type_name(dtype, lmul) -> str:
    kind = "i" if dtype.kind == "i" else "u"
    l = f"mf{lmul.denominator}" if lmul < 1 else f"m{lmul.numerator}"
    return f"{kind}{dtype.itemsize * 8}{l}"


def _sized(p: Param, lmul, vlen: int) -> Param:
    """A vector param at one VLEN: VLEN * LMUL / SEW elements."""
    return replace(p, lanes=int(vlen * lmul) // (p.dtype.itemsize * 8)) if p.kind == "vec" else p


_INST: dict[str, Instruction] = {}


def _inst(mnemonic, operands, overflow):
    model = getattr(rvv, mnemonic.replace(".", "_"))
    inst = _INST.get(mnemonic)
    if inst is None:
        inst = _INST[mnemonic] = add_instruction(Instruction(
            mnemonic=mnemonic, arch="riscv64", extension="V 1.0", operands=operands, overflow=overflow,
            pseudocode=re.split(r"[,:]", model.__doc__)[0].strip(),
            citation=f"{rvv.SPEC}, " + re.search(r"RVV 1\.0 (section [\d.]+)", model.__doc__).group(1),
            model=model))
    elif operands not in inst.operands.split(" | "):
        inst.operands += " | " + operands
    return inst


def _spec(spec: str):
    """'vd:i16m1' -> (vec Param, LMUL); 'rs1:s8' -> (scalar Param, None)."""
    name, kind = spec.split(":")
    m = re.fullmatch(r"([iu])(8|16|32|64)(mf2|m1|m2|m4)", kind)
    if m:
        dtype = DTYPES[("s" if m[1] == "i" else "u") + m[2]]
        return Param(name, "vec", dtype, 0), LMUL.get(m[3], Fraction(4))
    dtype = DTYPES[kind]
    info = np.iinfo(dtype)
    return Param(name, "scalar", dtype, lo=int(info.min), hi=int(info.max)), None


VXRM_PARAM = Param("vxrm", "imm", lo=0, hi=3)
VL_PARAM = Param("vl", "imm", lo=0, hi=0)


def _add(name, mnemonic, result, specs, adapter, *, operands, overflow, fixed_point=False):
    inst = _inst(mnemonic, operands, overflow)
    parsed = [_spec(s) for s in specs]
    params = [p for p, _ in parsed] + ([VXRM_PARAM] if fixed_point else []) + [VL_PARAM]
    lmuls = [l for _, l in parsed] + ([None] if fixed_point else []) + [None]
    out, out_lmul = _spec("result:" + result)
    intr = RvvIntrinsic(name, inst, int(VLEN_MIN * max(l for l in lmuls + [out_lmul] if l is not None)), ("v",),
                        "rvv", tuple(params), out, adapter, lmuls=tuple(lmuls), result_lmul=out_lmul,
                        fixed_point=fixed_point)
    add_intrinsic(intr)


def _l(lmul: Fraction) -> str:
    return f"mf{lmul.denominator}" if lmul < 1 else f"m{lmul.numerator}"


def _register():
    for sew in (8, 16, 32):
        w = 2 * sew
        # vwmacc / vwmaccu / vwmaccsu (.vv, .vx) and vwmaccus (.vx): destination m1 and m2, sources half that.
        widening = (("vwmacc", "i", "i", "i", "s", True), ("vwmaccu", "u", "u", "u", "u", True),
                    ("vwmaccsu", "i", "i", "u", "s", True), ("vwmaccus", "i", "u", "i", "u", False))
        for stem, d_t, x_t, v_t, x_c, has_vv in widening:
            xs, vs_ = ("s" if x_t == "i" else "u"), ("s" if v_t == "i" else "u")
            ops = dict(operands=f"{xs}{sew} x {vs_}{sew} + {'s' if d_t == 'i' else 'u'}{w} -> "
                                f"{'s' if d_t == 'i' else 'u'}{w}",
                       overflow=f"exact 2*SEW product; the sum with vd wraps mod 2^{w}")
            for dl in (Fraction(1), Fraction(2)):
                sl = dl / 2
                vd, src = f"{d_t}{w}{_l(dl)}", f"{{}}{sew}{_l(sl)}"
                if has_vv:
                    _add(f"__riscv_{stem}_vv_{vd}", f"{stem}.vv", vd,
                         [f"vd:{vd}", f"vs1:{src.format(x_t)}", f"vs2:{src.format(v_t)}"],
                         lambda vd, vs1, vs2, vl, m=getattr(rvv, f"{stem}_vv"): m(vd, vs1, vs2), **ops)
                _add(f"__riscv_{stem}_vx_{vd}", f"{stem}.vx", vd,
                     [f"vd:{vd}", f"rs1:{x_c}{sew}", f"vs2:{src.format(v_t)}"],
                     lambda vd, rs1, vs2, vl, m=getattr(rvv, f"{stem}_vx"): m(vd, rs1, vs2), **ops)
        # vmacc (.vv, .vx), signed and unsigned: m1 and m2.
        for t, c in (("i", "s"), ("u", "u")):
            ops = dict(operands=f"{c}{sew} x {c}{sew} + {c}{sew} -> {c}{sew}",
                       overflow=f"low SEW bits of the product; the sum wraps mod 2^{sew}")
            for l in (Fraction(1), Fraction(2)):
                v = f"{t}{sew}{_l(l)}"
                _add(f"__riscv_vmacc_vv_{v}", "vmacc.vv", v, [f"vd:{v}", f"vs1:{v}", f"vs2:{v}"],
                     lambda vd, vs1, vs2, vl: rvv.vmacc_vv(vd, vs1, vs2), **ops)
                _add(f"__riscv_vmacc_vx_{v}", "vmacc.vx", v, [f"vd:{v}", f"rs1:{c}{sew}", f"vs2:{v}"],
                     lambda vd, rs1, vs2, vl: rvv.vmacc_vx(vd, rs1, vs2), **ops)
        # vnclip / vnclipu (.wv, .wx): destination mf2 and m1, source twice that.
        for stem, t, c in (("vnclip", "i", "s"), ("vnclipu", "u", "u")):
            ops = dict(operands=f"{c}{w} >> shift (vxrm) -> {c}{sew}",
                       overflow=f"rounds by vxrm, then saturates to {c}{sew}, setting vxsat")
            for dl in (Fraction(1, 2), Fraction(1)):
                vd, vs2 = f"{t}{sew}{_l(dl)}", f"{t}{w}{_l(2 * dl)}"
                _add(f"__riscv_{stem}_wv_{vd}", f"{stem}.wv", vd, [f"vs2:{vs2}", f"vs1:u{sew}{_l(dl)}"],
                     lambda vs2, vs1, vxrm, vl, m=getattr(rvv, f"{stem}_wv"): m(vs2, vs1, vxrm=VXRM_C[int(vxrm)]),
                     fixed_point=True, **ops)
                _add(f"__riscv_{stem}_wx_{vd}", f"{stem}.wx", vd, [f"vs2:{vs2}", "rs1:u64"],
                     lambda vs2, rs1, vxrm, vl, m=getattr(rvv, f"{stem}_wx"): m(vs2, rs1, vxrm=VXRM_C[int(vxrm)]),
                     fixed_point=True, **ops)
        # vsmul (.vv, .vx): m1 and m2.
        ops = dict(operands=f"s{sew} x s{sew} -> s{sew} (product >> SEW-1, vxrm)",
                   overflow="only INT_MIN * INT_MIN saturates (to INT_MAX), setting vxsat")
        for l in (Fraction(1), Fraction(2)):
            v = f"i{sew}{_l(l)}"
            _add(f"__riscv_vsmul_vv_{v}", "vsmul.vv", v, [f"vs2:{v}", f"vs1:{v}"],
                 lambda vs2, vs1, vxrm, vl: rvv.vsmul_vv(vs2, vs1, vxrm=VXRM_C[int(vxrm)]), fixed_point=True, **ops)
            _add(f"__riscv_vsmul_vx_{v}", "vsmul.vx", v, [f"vs2:{v}", f"rs1:s{sew}"],
                 lambda vs2, rs1, vxrm, vl: rvv.vsmul_vx(vs2, rs1, vxrm=VXRM_C[int(vxrm)]), fixed_point=True, **ops)


_register()
