"""Registry entries for the SVE/SVE2 and SME models: the ACLE intrinsics (arm_sve.h, arm_sme.h) that spell each
instruction, in the ACLE's argument order, needing which CPU features (Linux HWCAP names: sve, sve2, svei8mm,
sme).

Every register argument is scalable (Param.scalable): its lanes follow the vector length of the arrays passed, one
VL per call; `intrinsic(name).at_vl(256)` fixes the lanes for an executor that runs at one VL. docs/sve-sme.md
says why the registry grew this way.

  unpredicated    svdot_s32(op1, op2, op3)   svdot_lane_s32(op1, op2, op3, imm_index)   svqxtnt_s32(even, op)
  predicated      svrshl_s32_m(pg, op1, op2)  (_z zeroes inactive lanes; _x takes an all-true pg only)
  SME             svmopa_za32_s8_m(za, tile, pn, pm, zn, zm) -> the new tile: `za`, the tile's contents before
                  the call, is the state ACLE keeps implicit, made the first argument.
The ACLE's overloaded spellings (svdot, svrshl_m, ...) are not registered: one name, one signature.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models import sme, sve
from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

ARM_ARM = "Arm Architecture Reference Manual for A-profile (DDI 0487 M.a.a), C8.2 (SVE) / C9.2 (SME) instructions"
SVE, SVE2, SVE_I8MM, SME = ("sve",), ("sve", "sve2"), ("sve", "svei8mm"), ("sme",)
EXTENSION = {SVE: "FEAT_SVE", SVE2: "FEAT_SVE2", SVE_I8MM: "FEAT_SVE + FEAT_I8MM", SME: "FEAT_SME"}
SIGNED = ("s8", "s16", "s32", "s64")
WRAP = "wraps mod 2^{}"


def _p(spec: str) -> Param:
    """'a:s8' -> a scalable vector (VL/8 lanes); 'pg:pred.s32' / 'pg:ptrue.s32' -> a predicate over 32-bit
    elements; 'za:tile.s32' -> a 32-bit ZA tile; 'lane:0..3' -> an immediate."""
    name, kind = spec.split(":")
    if ".." in kind:
        lo, hi = kind.split("..")
        return Param(name, "imm", lo=int(lo), hi=int(hi))
    kind, _, t = kind.rpartition(".")
    dtype = DTYPES[t]
    return Param(name, kind or "vec", dtype, 128 // (dtype.itemsize * 8), scalable=True)


_INST: dict[tuple[str, str], Instruction] = {}


def _inst(module, mnemonic, features, operands, overflow):
    model = getattr(module, mnemonic)
    inst = _INST.get((mnemonic, module.__name__))
    if inst is None:
        inst = _INST[(mnemonic, module.__name__)] = add_instruction(Instruction(
            mnemonic=mnemonic, arch="aarch64", extension=EXTENSION[features], operands=operands, overflow=overflow,
            pseudocode=model.__doc__.split(":")[0].strip(), citation=ARM_ARM, model=model))
    else:
        if operands not in inst.operands.split(" | "):
            inst.operands += " | " + operands
        if overflow not in inst.overflow.split(" | "):
            inst.overflow += " | " + overflow
    return inst


def _add(name, mnemonic, features, result, params, adapter, *, operands, overflow, module=sve, encoding="sve"):
    inst = _inst(module, mnemonic, features, operands, overflow)
    params = tuple(_p(s) for s in params)
    add_intrinsic(Intrinsic(name, inst, 128, features, encoding, params, _p("result:" + result), adapter))


def _zeroing(model):
    """_z: MOVPRFX zeroing then the merging instruction: inactive lanes become 0."""
    return lambda pg, a, b: np.where(pg, model(a, b, pg=pg), np.zeros((), a.dtype))


def _register():
    # SDOT/UDOT (4-way), vectors and indexed: 8 -> 32 and 16 -> 64 bits
    for s, mnemonic in (("s", "sdot"), ("u", "udot")):
        model = getattr(sve, mnemonic)
        for e, w, lanes in ((8, 32, 4), (16, 64, 2)):
            ops = dict(operands=f"{s}{e} x {s}{e} (4 per lane) + {s}{w} -> {s}{w}", overflow=WRAP.format(w))
            acc, src = f"{s}{w}", f"{s}{e}"
            _add(f"svdot_{s}{w}", mnemonic, SVE, acc, [f"op1:{acc}", f"op2:{src}", f"op3:{src}"],
                 lambda r, a, b, m=model: m(r, a, b), **ops)
            _add(f"svdot_lane_{s}{w}", mnemonic, SVE, acc, [f"op1:{acc}", f"op2:{src}", f"op3:{src}",
                                                           f"imm_index:0..{lanes - 1}"],
                 lambda r, a, b, i, m=model: m(r, a, b, index=i), **ops)

    # USDOT (vectors, indexed), SUDOT (indexed; the vector svsudot is USDOT with its sources swapped)
    ops = dict(operands="u8 x s8 (4 per lane) + s32 -> s32", overflow=WRAP.format(32))
    _add("svusdot_s32", "usdot", SVE_I8MM, "s32", ["op1:s32", "op2:u8", "op3:s8"],
         lambda r, a, b: sve.usdot(r, a, b), **ops)
    _add("svusdot_lane_s32", "usdot", SVE_I8MM, "s32", ["op1:s32", "op2:u8", "op3:s8", "imm_index:0..3"],
         lambda r, a, b, i: sve.usdot(r, a, b, index=i), **ops)
    _add("svsudot_s32", "usdot", SVE_I8MM, "s32", ["op1:s32", "op2:s8", "op3:u8"],
         lambda r, a, b: sve.usdot(r, b, a), **ops)
    _add("svsudot_lane_s32", "sudot", SVE_I8MM, "s32", ["op1:s32", "op2:s8", "op3:u8", "imm_index:0..3"],
         lambda r, a, b, i: sve.sudot(r, a, b, index=i), operands="s8 x u8 (4 per lane) + s32 -> s32",
         overflow=WRAP.format(32))

    # SMMLA/UMMLA/USMMLA, per 128-bit segment
    for name, mnemonic, r_t, a_t, b_t in (("svmmla_s32", "smmla", "s", "s", "s"), ("svmmla_u32", "ummla", "u", "u", "u"),
                                          ("svusmmla_s32", "usmmla", "s", "u", "s")):
        _add(name, mnemonic, SVE_I8MM, f"{r_t}32", [f"op1:{r_t}32", f"op2:{a_t}8", f"op3:{b_t}8"],
             lambda r, a, b, m=getattr(sve, mnemonic): m(r, a, b),
             operands=f"{a_t}8 2x8 x {b_t}8 8x2 per 128-bit segment + {r_t}32 2x2 -> {r_t}32", overflow=WRAP.format(32))

    # SQRDMULH, vectors (8..64-bit) and indexed (16..64-bit)
    for t in SIGNED:
        e = int(t[1:])
        ops = dict(operands=f"{t} x {t} -> {t} (high half of 2ab, rounded)",
                   overflow="saturates only for INT_MIN * INT_MIN (to INT_MAX)")
        _add(f"svqrdmulh_{t}", "sqrdmulh", SVE2, t, [f"op1:{t}", f"op2:{t}"], lambda a, b: sve.sqrdmulh(a, b), **ops)
        if e > 8:
            _add(f"svqrdmulh_lane_{t}", "sqrdmulh", SVE2, t, [f"op1:{t}", f"op2:{t}", f"imm_index:0..{128 // e - 1}"],
                 lambda a, b, i: sve.sqrdmulh(a, b, index=i), **ops)

    # SRSHL: _m (merging), _z (zeroing), _x (all-true only)
    for t in SIGNED:
        ops = dict(operands=f"{t} << ShiftSat({t}) -> {t}", overflow="left shifts wrap; right shifts round half up")
        _add(f"svrshl_{t}_m", "srshl", SVE2, t, [f"pg:pred.{t}", f"op1:{t}", f"op2:{t}"],
             lambda pg, a, b: sve.srshl(a, b, pg=pg), **ops)
        _add(f"svrshl_{t}_z", "srshl", SVE2, t, [f"pg:pred.{t}", f"op1:{t}", f"op2:{t}"], _zeroing(sve.srshl), **ops)
        _add(f"svrshl_{t}_x", "srshl", SVE2, t, [f"pg:ptrue.{t}", f"op1:{t}", f"op2:{t}"],
             lambda pg, a, b: sve.srshl(a, b), **ops)

    # SQRSHRNB/SQRSHRNT, SQXTNB/SQXTNT
    bottom, top = " into the even elements, odd ones 0", " into the odd elements, even ones kept"
    sat = dict(overflow="saturates to the narrow element type")
    for t, n in (("s16", "s8"), ("s32", "s16"), ("s64", "s32")):
        e = int(n[1:])
        _add(f"svqrshrnb_n_{t}", "sqrshrnb", SVE2, n, [f"op1:{t}", f"imm2:1..{e}"], lambda a, i: sve.sqrshrnb(a, i),
             operands=f"{t} >> n (rounded) -> {n}{bottom}", **sat)
        _add(f"svqrshrnt_n_{t}", "sqrshrnt", SVE2, n, [f"even:{n}", f"op1:{t}", f"imm2:1..{e}"],
             lambda ev, a, i: sve.sqrshrnt(ev, a, i), operands=f"{t} >> n (rounded) -> {n}{top}", **sat)
        _add(f"svqxtnb_{t}", "sqxtnb", SVE2, n, [f"op:{t}"], lambda a: sve.sqxtnb(a), operands=f"{t} -> {n}{bottom}", **sat)
        _add(f"svqxtnt_{t}", "sqxtnt", SVE2, n, [f"even:{n}", f"op:{t}"], lambda ev, a: sve.sqxtnt(ev, a),
             operands=f"{t} -> {n}{top}", **sat)

    # SME: SMOPA/UMOPA/SUMOPA/USMOPA (4-way) into a 32-bit ZA tile
    for name, mnemonic, n_t, m_t, za_t in (("svmopa_za32_s8_m", "smopa", "s8", "s8", "s32"),
                                           ("svmopa_za32_u8_m", "umopa", "u8", "u8", "u32"),
                                           ("svsumopa_za32_s8_m", "sumopa", "s8", "u8", "s32"),
                                           ("svusmopa_za32_u8_m", "usmopa", "u8", "s8", "s32")):
        _add(name, mnemonic, SME, f"tile.{za_t}", [f"za:tile.{za_t}", "tile:0..3", "pn:pred.u8", "pm:pred.u8",
                                                  f"zn:{n_t}", f"zm:{m_t}"],
             lambda za, tile, pn, pm, zn, zm, m=getattr(sme, mnemonic): m(za, zn, zm, pn, pm),
             operands=f"{n_t} x {m_t} outer product, 4-way + {za_t} tile -> {za_t} tile", overflow=WRAP.format(32),
             module=sme, encoding="sme")


_register()
