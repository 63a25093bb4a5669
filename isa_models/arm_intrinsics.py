"""Registry entries for the AArch64 models: which ACLE intrinsics spell each instruction, with which argument
order, needing which CPU features (Linux HWCAP names: asimd, asimddp, i8mm).

Argument names and orders follow the Arm C Language Extensions (ACLE) Neon intrinsics reference
(https://developer.arm.com/architectures/instruction-sets/intrinsics/), which is also what clang's arm_neon.h
declares. Immediates (lane index, shift count) are ints in their own argument position, as in C:
  accumulate      vmlal_s8(a, b, c)            vdotq_s32(r, a, b)           vpadalq_s8(a, b)
  by element      vmlal_lane_s16(a, b, v, lane)   vdotq_laneq_s32(r, a, b, lane)   vqrdmulhq_laneq_s32(a, v, lane)
  shift/narrow    vrshrq_n_s32(a, n)   vqrshrn_n_s32(a, n)   vqrshrn_high_n_s32(r, a, n)   vqmovn_high_s32(r, a)
Scalar forms (vqrdmulhh_s16, vrshrd_n_s64, ...) and the `_n` forms taking a C scalar are not registered: a
register operand is always a numpy array of lanes.
"""
from __future__ import annotations

import re

from lowp.isa_models import arm
from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

ARM_ARM = "Arm Architecture Reference Manual for A-profile (DDI 0487), C7.2 (A64 SIMD&FP instructions), pseudocode"
BASE, DOT, I8MM = ("asimd",), ("asimd", "asimddp"), ("asimd", "i8mm")
EXTENSION = {BASE: "AdvSIMD", DOT: "FEAT_DotProd", I8MM: "FEAT_I8MM"}


def _p(spec: str) -> Param:
    """'a:s16x8' -> a vector param; 'lane:0..3' -> an immediate."""
    name, kind = spec.split(":")
    if ".." in kind:
        lo, hi = kind.split("..")
        return Param(name, "imm", lo=int(lo), hi=int(hi))
    t, lanes = kind.split("x")
    return Param(name, "vec", DTYPES[t], int(lanes))


_INST: dict[str, Instruction] = {}


def _inst(mnemonic, features, operands, overflow):
    model = getattr(arm, mnemonic)
    inst = _INST.get(mnemonic)
    if inst is None:
        inst = _INST[mnemonic] = add_instruction(Instruction(
            mnemonic=mnemonic, arch="aarch64", extension=EXTENSION[features], operands=operands, overflow=overflow,
            pseudocode=re.split(r"[,:]", model.__doc__)[0].strip(), citation=ARM_ARM, model=model))
    else:   # one instruction, several arrangements: list each element-type form once
        if operands not in inst.operands.split(" | "):
            inst.operands += " | " + operands
        if overflow not in inst.overflow.split(" | "):
            inst.overflow += " | " + overflow
    return inst


def _add(name, mnemonic, features, result, params, adapter, *, operands, overflow):
    inst = _inst(mnemonic, features, operands, overflow)
    params = tuple(_p(s) for s in params)
    result = _p("result:" + result)
    width = max([result.width] + [p.width for p in params if p.kind == "vec"])
    add_intrinsic(Intrinsic(name, inst, width, features, "a64", params, result, adapter))


def _t(sign, bits, lanes):
    return f"{sign}{bits}x{lanes}"


WRAP = "wraps mod 2^{}"  # the accumulator width: 2^(2*esize) for the widening forms, 2^32 for dots


def _register():
    # SMLAL/UMLAL(2), SMULL/UMULL(2), vector and by element
    for s, sm in (("s", "s"), ("u", "u")):
        for e in (8, 16, 32):
            w = 2 * e
            ops = dict(operands=f"{s}{e} x {s}{e} + {s}{w} -> {s}{w}", overflow=WRAP.format(w))
            n64, n128, nw = 64 // e, 128 // e, 64 // e
            acc = _t(s, w, nw)
            m_lal, m_lal2, m_ull, m_ull2 = f"{sm}mlal", f"{sm}mlal2", f"{sm}mull", f"{sm}mull2"
            _add(f"vmlal_{s}{e}", m_lal, BASE, acc, [f"a:{acc}", f"b:{_t(s, e, n64)}", f"c:{_t(s, e, n64)}"],
                 lambda a, b, c, m=getattr(arm, m_lal): m(a, b, c), **ops)
            _add(f"vmlal_high_{s}{e}", m_lal2, BASE, acc, [f"a:{acc}", f"b:{_t(s, e, n128)}", f"c:{_t(s, e, n128)}"],
                 lambda a, b, c, m=getattr(arm, m_lal2): m(a, b, c), **ops)
            mul_ops = dict(operands=f"{s}{e} x {s}{e} -> {s}{w}", overflow="exact (cannot overflow)")
            _add(f"vmull_{s}{e}", m_ull, BASE, acc, [f"a:{_t(s, e, n64)}", f"b:{_t(s, e, n64)}"],
                 lambda a, b, m=getattr(arm, m_ull): m(a, b), **mul_ops)
            _add(f"vmull_high_{s}{e}", m_ull2, BASE, acc, [f"a:{_t(s, e, n128)}", f"b:{_t(s, e, n128)}"],
                 lambda a, b, m=getattr(arm, m_ull2): m(a, b), **mul_ops)
            if e == 8:
                continue          # there is no by-element form for 8-bit elements
            for lq, vl in (("lane", n64), ("laneq", n128)):
                v, imm = f"v:{_t(s, e, vl)}", f"lane:0..{vl - 1}"
                _add(f"vmlal_{lq}_{s}{e}", m_lal, BASE, acc, [f"a:{acc}", f"b:{_t(s, e, n64)}", v, imm],
                     lambda a, b, v, lane, m=getattr(arm, m_lal): m(a, b, v, index=lane), **ops)
                _add(f"vmlal_high_{lq}_{s}{e}", m_lal2, BASE, acc, [f"a:{acc}", f"b:{_t(s, e, n128)}", v, imm],
                     lambda a, b, v, lane, m=getattr(arm, m_lal2): m(a, b, v, index=lane), **ops)
                _add(f"vmull_{lq}_{s}{e}", m_ull, BASE, acc, [f"a:{_t(s, e, n64)}", v, imm],
                     lambda a, v, lane, m=getattr(arm, m_ull): m(a, v, index=lane), **mul_ops)
                _add(f"vmull_high_{lq}_{s}{e}", m_ull2, BASE, acc, [f"a:{_t(s, e, n128)}", v, imm],
                     lambda a, v, lane, m=getattr(arm, m_ull2): m(a, v, index=lane), **mul_ops)
        # SADALP/UADALP, SADDW/UADDW(2)
        for e in (8, 16, 32):
            w = 2 * e
            ops = dict(operands=f"{s}{e} pairs + {s}{w} -> {s}{w}", overflow=WRAP.format(w))
            for q, width in (("", 64), ("q", 128)):
                _add(f"vpadal{q}_{s}{e}", f"{sm}adalp", BASE, _t(s, w, width // w),
                     [f"a:{_t(s, w, width // w)}", f"b:{_t(s, e, width // e)}"],
                     lambda a, b, m=getattr(arm, f"{sm}adalp"): m(a, b), **ops)
            ops = dict(operands=f"{s}{w} + {s}{e} -> {s}{w}", overflow=WRAP.format(w))
            _add(f"vaddw_{s}{e}", f"{sm}addw", BASE, _t(s, w, 64 // e), [f"a:{_t(s, w, 64 // e)}", f"b:{_t(s, e, 64 // e)}"],
                 lambda a, b, m=getattr(arm, f"{sm}addw"): m(a, b), **ops)
            _add(f"vaddw_high_{s}{e}", f"{sm}addw2", BASE, _t(s, w, 64 // e),
                 [f"a:{_t(s, w, 64 // e)}", f"b:{_t(s, e, 128 // e)}"],
                 lambda a, b, m=getattr(arm, f"{sm}addw2"): m(a, b), **ops)

    # SDOT/UDOT (FEAT_DotProd), USDOT/SUDOT (FEAT_I8MM), vector and by element
    dots = (("vdot", "_s32", "sdot", DOT, "s", "s", "s"), ("vdot", "_u32", "udot", DOT, "u", "u", "u"),
            ("vusdot", "_s32", "usdot", I8MM, "s", "u", "s"), ("vsudot", "_s32", "sudot", I8MM, "s", "s", "u"))
    for stem, suffix, mnemonic, features, r_t, a_t, b_t in dots:
        ops = dict(operands=f"{a_t}8 x {b_t}8 (4 per lane) + {r_t}32 -> {r_t}32", overflow=WRAP.format(32))
        model = getattr(arm, mnemonic)
        for q, width in (("", 64), ("q", 128)):
            r, a = f"r:{_t(r_t, 32, width // 32)}", f"a:{_t(a_t, 8, width // 8)}"
            if mnemonic != "sudot":      # SUDOT exists by element only
                _add(f"{stem}{q}{suffix}", mnemonic, features, _t(r_t, 32, width // 32), [r, a, f"b:{_t(b_t, 8, width // 8)}"],
                     lambda r, a, b, m=model: m(r, a, b), **ops)
            for lq, bl in (("lane", 8), ("laneq", 16)):
                _add(f"{stem}{q}_{lq}{suffix}", mnemonic, features, _t(r_t, 32, width // 32),
                     [r, a, f"b:{_t(b_t, 8, bl)}", f"lane:0..{bl // 4 - 1}"],
                     lambda r, a, b, lane, m=model: m(r, a, b, index=lane), **ops)

    # SMMLA/UMMLA/USMMLA
    for name, mnemonic, r_t, a_t, b_t in (("vmmlaq_s32", "smmla", "s", "s", "s"), ("vmmlaq_u32", "ummla", "u", "u", "u"),
                                          ("vusmmlaq_s32", "usmmla", "s", "u", "s")):
        _add(name, mnemonic, I8MM, _t(r_t, 32, 4), [f"r:{_t(r_t, 32, 4)}", f"a:{_t(a_t, 8, 16)}", f"b:{_t(b_t, 8, 16)}"],
             lambda r, a, b, m=getattr(arm, mnemonic): m(r, a, b),
             operands=f"{a_t}8 2x8 x {b_t}8 8x2 (columns) + {r_t}32 2x2 -> {r_t}32", overflow=WRAP.format(32))

    # SQDMULH/SQRDMULH, vector and by element
    for stem, mnemonic in (("vqdmulh", "sqdmulh"), ("vqrdmulh", "sqrdmulh")):
        model = getattr(arm, mnemonic)
        for e in (16, 32):
            ops = dict(operands=f"s{e} x s{e} -> s{e} (high half of 2ab{' rounded' if 'r' in stem[2:] else ''})",
                       overflow="saturates only for INT_MIN * INT_MIN (to INT_MAX)")
            for q, width in (("", 64), ("q", 128)):
                a = _t("s", e, width // e)
                _add(f"{stem}{q}_s{e}", mnemonic, BASE, a, [f"a:{a}", f"b:{a}"], lambda a, b, m=model: m(a, b), **ops)
                for lq, vw in (("lane", 64), ("laneq", 128)):
                    _add(f"{stem}{q}_{lq}_s{e}", mnemonic, BASE, a, [f"a:{a}", f"v:{_t('s', e, vw // e)}",
                                                                      f"lane:0..{vw // e - 1}"],
                         lambda a, v, lane, m=model: m(a, v, index=lane), **ops)

    # SRSHL/URSHL, SRSHR/URSHR, SQADD/UQADD
    for s, sm in (("s", "s"), ("u", "u")):
        for e in (8, 16, 32, 64):
            for q, width in (("", 64), ("q", 128)):
                a, sh = _t(s, e, width // e), _t("s", e, width // e)
                _add(f"vrshl{q}_{s}{e}", f"{sm}rshl", BASE, a, [f"a:{a}", f"b:{sh}"], lambda a, b, m=getattr(arm, f"{sm}rshl"): m(a, b),
                     operands=f"{s}{e} << s{e}<7:0> -> {s}{e}",
                     overflow="left shifts wrap; right shifts round half up, exactly")
                _add(f"vrshr{q}_n_{s}{e}", f"{sm}rshr", BASE, a, [f"a:{a}", f"n:1..{e}"],
                     lambda a, n, m=getattr(arm, f"{sm}rshr"): m(a, n),
                     operands=f"{s}{e} >> n (rounded) -> {s}{e}", overflow="none (exact rounding)")
                _add(f"vqadd{q}_{s}{e}", f"{sm}qadd", BASE, a, [f"a:{a}", f"b:{a}"], lambda a, b, m=getattr(arm, f"{sm}qadd"): m(a, b),
                     operands=f"{s}{e} + {s}{e} -> {s}{e}", overflow="saturates to the element type")

    # SSHL/USHL, SQSHL/UQSHL (register): the shift is each lane's low byte, signed
    for s in ("s", "u"):
        for e in (8, 16, 32, 64):
            for q, width in (("", 64), ("q", 128)):
                a, sh = _t(s, e, width // e), _t("s", e, width // e)
                _add(f"vshl{q}_{s}{e}", f"{s}shl", BASE, a, [f"a:{a}", f"b:{sh}"],
                     lambda a, b, m=getattr(arm, f"{s}shl"): m(a, b), operands=f"{s}{e} << s{e}<7:0> -> {s}{e}",
                     overflow="left shifts wrap; right shifts truncate")
                _add(f"vqshl{q}_{s}{e}", f"{s}qshl", BASE, a, [f"a:{a}", f"b:{sh}"],
                     lambda a, b, m=getattr(arm, f"{s}qshl"): m(a, b), operands=f"{s}{e} << s{e}<7:0> -> {s}{e}",
                     overflow="left shifts saturate to the element type; right shifts truncate")

    # SSHLL/USHLL(2), and SXTL/UXTL(2) = the shift 0 (vmovl)
    for s in ("s", "u"):
        for e in (8, 16, 32):
            w = 2 * e
            ops = dict(operands=f"{s}{e} << n -> {s}{w}", overflow="none (the widened shift is exact)")
            narrow, upper, wide = _t(s, e, 64 // e), _t(s, e, 128 // e), _t(s, w, 64 // e)
            for name, mnemonic, src in ((f"vshll_n_{s}{e}", f"{s}shll", narrow),
                                        (f"vshll_high_n_{s}{e}", f"{s}shll2", upper)):
                _add(name, mnemonic, BASE, wide, [f"a:{src}", f"n:0..{e - 1}"],
                     lambda a, n, m=getattr(arm, mnemonic): m(a, n), **ops)
            for name, mnemonic, src in ((f"vmovl_{s}{e}", f"{s}shll", narrow),
                                        (f"vmovl_high_{s}{e}", f"{s}shll2", upper)):
                _add(name, mnemonic, BASE, wide, [f"a:{src}"], lambda a, m=getattr(arm, mnemonic): m(a, 0), **ops)

    # ADDP (vector: one instruction for signed and unsigned lanes), SMAX/SMIN/UMAX/UMIN
    for s in ("s", "u"):
        for e in (8, 16, 32, 64):
            for q, width in (("", 64), ("q", 128)):
                if e == 64 and not q:
                    continue                   # ADDP has no 1D form (the scalar ADDP Dd, Vn.2D is another)
                a = _t(s, e, width // e)
                _add(f"vpadd{q}_{s}{e}", "addp", BASE, a, [f"a:{a}", f"b:{a}"], lambda a, b: arm.addp(a, b),
                     operands=f"{s}{e} pairs of a:b -> {s}{e}", overflow=WRAP.format(e))
                if e == 64:
                    continue
                for stem, mnemonic in (("vmax", f"{s}max"), ("vmin", f"{s}min")):
                    _add(f"{stem}{q}_{s}{e}", mnemonic, BASE, a, [f"a:{a}", f"b:{a}"],
                         lambda a, b, m=getattr(arm, mnemonic): m(a, b), operands=f"{s}{e}, {s}{e} -> {s}{e}",
                         overflow="none")

    # SQRSHRN/UQRSHRN/SQRSHRUN(2), SQXTN/UQXTN/SQXTUN(2)
    narrows = (("vqrshrn", "s", "s", "sqrshrn"), ("vqrshrn", "u", "u", "uqrshrn"), ("vqrshrun", "s", "u", "sqrshrun"))
    moves = (("vqmovn", "s", "s", "sqxtn"), ("vqmovn", "u", "u", "uqxtn"), ("vqmovun", "s", "u", "sqxtun"))
    for e in (8, 16, 32):
        w = 2 * e
        for stem, in_s, out_s, mnemonic in narrows:
            ops = dict(operands=f"{in_s}{w} >> n (rounded) -> {out_s}{e}", overflow="saturates to the narrow element type")
            src, lo, out = _t(in_s, w, 128 // w), _t(out_s, e, 64 // e), _t(out_s, e, 128 // e)
            _add(f"{stem}_n_{in_s}{w}", mnemonic, BASE, lo, [f"a:{src}", f"n:1..{e}"],
                 lambda a, n, m=getattr(arm, mnemonic): m(a, n), **ops)
            _add(f"{stem}_high_n_{in_s}{w}", mnemonic + "2", BASE, out, [f"r:{lo}", f"a:{src}", f"n:1..{e}"],
                 lambda r, a, n, m=getattr(arm, mnemonic + "2"): m(r, a, n), **ops)
        for stem, in_s, out_s, mnemonic in moves:
            ops = dict(operands=f"{in_s}{w} -> {out_s}{e}", overflow="saturates to the narrow element type")
            src, lo, out = _t(in_s, w, 128 // w), _t(out_s, e, 64 // e), _t(out_s, e, 128 // e)
            _add(f"{stem}_{in_s}{w}", mnemonic, BASE, lo, [f"a:{src}"], lambda a, m=getattr(arm, mnemonic): m(a), **ops)
            _add(f"{stem}_high_{in_s}{w}", mnemonic + "2", BASE, out, [f"r:{lo}", f"a:{src}"],
                 lambda r, a, m=getattr(arm, mnemonic + "2"): m(r, a), **ops)


_register()
