"""Registry entries for the HVX models (lowp.isa_models.hexagon.hvx): the Q6_* C intrinsics of clang's
hvx_hexagon_protos.h (the Hexagon SDK's names: Q6_<result>_<op>_<operands>[_sat|_rnd_sat]), each with the
instruction it compiles to and its argument order, e.g.

    Q6_Vw_vrmpyacc_VwVbVb(Vx, Vu, Vv)      Vx.w += vrmpy(Vu.b, Vv.b)
    Q6_Vh_vpack_VwVw_sat(Vu, Vv)           Vd.h = vpack(Vu.w, Vv.w):sat

Registers are 128-byte HVX vectors (hvx_length128b): lanes of the element type the intrinsic's name gives (Vb: s8
x 128, Vub: u8 x 128, Vh: s16 x 64, Vw: s32 x 32, Vuw: u32 x 32; an untyped V: u8 x 128). A Q register (vector
predicate) is a bool array of 128 entries; R (Rt) is the 32-bit scalar register's value as an int. The masked
stores Q6_vmem_QRIV / Q6_vmem_QnRIV take the memory they write as `block` (the 128 bytes at the aligned address
before the store) and return those bytes after it.
"""
from __future__ import annotations

import numpy as np

from lowp.isa_models.hexagon import hvx
from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

ARCH = "hexagon"
LANES = {"s8": 128, "u8": 128, "s16": 64, "u16": 64, "s32": 32, "u32": 32}
SCALAR = Param("Rt", "scalar", np.dtype(np.int32), lo=-2 ** 31, hi=2 ** 31 - 1)


def _p(spec: str) -> Param:
    """'Vu:s8' -> a vector; 'Qv:q' -> a vector predicate; 'Rt:r' -> the scalar register."""
    name, kind = spec.split(":")
    if kind == "r":
        return Param(name, "scalar", SCALAR.dtype, lo=SCALAR.lo, hi=SCALAR.hi)
    if kind == "q":
        return Param(name, "pred", np.dtype(np.int8), 128)
    return Param(name, "vec", DTYPES[kind], LANES[kind])


# (intrinsic, instruction tag, HVX version, operands, overflow, result, params)
TABLE = (
    ("Q6_Vw_vrmpy_VbVb", "vrmpybv", 60, "s8 x s8 -> s32 (4-wide)", "exact", "s32", ("Vu:s8", "Vv:s8")),
    ("Q6_Vw_vrmpyacc_VwVbVb", "vrmpybv_acc", 60, "s32 += s8 x s8 (4-wide)", "wraps mod 2^32", "s32",
     ("Vx:s32", "Vu:s8", "Vv:s8")),
    ("Q6_Vuw_vrmpy_VubVub", "vrmpyubv", 60, "u8 x u8 -> u32 (4-wide)", "exact", "u32", ("Vu:u8", "Vv:u8")),
    ("Q6_Vuw_vrmpyacc_VuwVubVub", "vrmpyubv_acc", 60, "u32 += u8 x u8 (4-wide)", "wraps mod 2^32", "u32",
     ("Vx:u32", "Vu:u8", "Vv:u8")),
    ("Q6_Vw_vrmpy_VubVb", "vrmpybusv", 60, "u8 x s8 -> s32 (4-wide)", "exact", "s32", ("Vu:u8", "Vv:s8")),
    ("Q6_Vw_vrmpyacc_VwVubVb", "vrmpybusv_acc", 60, "s32 += u8 x s8 (4-wide)", "wraps mod 2^32", "s32",
     ("Vx:s32", "Vu:u8", "Vv:s8")),
    ("Q6_Vw_vrmpy_VubRb", "vrmpybus", 60, "u8 x s8 (Rt's 4 bytes) -> s32", "exact", "s32", ("Vu:u8", "Rt:r")),
    ("Q6_Vw_vrmpyacc_VwVubRb", "vrmpybus_acc", 60, "s32 += u8 x s8 (Rt's 4 bytes)", "wraps mod 2^32", "s32",
     ("Vx:s32", "Vu:u8", "Rt:r")),
    ("Q6_V_vsplat_R", "lvsplatw", 60, "r32 -> s32", "none", "s32", ("Rt:r",)),
    ("Q6_Vh_vsplat_R", "lvsplath", 62, "r32 (low 16 bits) -> s16", "truncates Rt", "s16", ("Rt:r",)),
    ("Q6_Vb_vsplat_R", "lvsplatb", 62, "r32 (low byte) -> s8", "truncates Rt", "s8", ("Rt:r",)),
    ("Q6_V_vand_VV", "vand", 60, "bits", "none", "u8", ("Vu:u8", "Vv:u8")),
    ("Q6_V_vor_VV", "vor", 60, "bits", "none", "u8", ("Vu:u8", "Vv:u8")),
    ("Q6_Vb_vmax_VbVb", "vmaxb", 62, "s8", "none", "s8", ("Vu:s8", "Vv:s8")),
    ("Q6_Vb_vmin_VbVb", "vminb", 62, "s8", "none", "s8", ("Vu:s8", "Vv:s8")),
    ("Q6_Vh_vadd_VhVh_sat", "vaddhsat", 60, "s16 + s16", "saturates to s16", "s16", ("Vu:s16", "Vv:s16")),
    ("Q6_Vh_vsub_VhVh_sat", "vsubhsat", 60, "s16 - s16", "saturates to s16", "s16", ("Vu:s16", "Vv:s16")),
    ("Q6_Vw_vadd_VwVw", "vaddw", 60, "s32 + s32", "wraps mod 2^32", "s32", ("Vu:s32", "Vv:s32")),
    ("Q6_Vw_vsub_VwVw", "vsubw", 60, "s32 - s32", "wraps mod 2^32", "s32", ("Vu:s32", "Vv:s32")),
    ("Q6_Vw_vadd_VwVw_sat", "vaddwsat", 62, "s32 + s32", "saturates to s32", "s32", ("Vu:s32", "Vv:s32")),
    ("Q6_Vw_vasl_VwR", "vaslw", 60, "s32 << (Rt & 31)", "bits shifted out are lost", "s32", ("Vu:s32", "Rt:r")),
    ("Q6_Vw_vasr_VwR", "vasrw", 60, "s32 >> (Rt & 31), arithmetic", "none", "s32", ("Vu:s32", "Rt:r")),
    ("Q6_Vh_vasr_VwVwR_rnd_sat", "vasrwh_rnd_sat", 60, "s32 -> s16: round, >> (Rt & 15)", "saturates to s16",
     "s16", ("Vu:s32", "Vv:s32", "Rt:r")),
    ("Q6_Vh_vpack_VwVw_sat", "vpackwh_sat", 60, "s32 -> s16 (Vv low half, Vu high)", "saturates to s16", "s16",
     ("Vu:s32", "Vv:s32")),
    ("Q6_Vb_vpack_VhVh_sat", "vpackhb_sat", 60, "s16 -> s8 (Vv low half, Vu high)", "saturates to s8", "s8",
     ("Vu:s16", "Vv:s16")),
    ("Q6_Vub_vpack_VhVh_sat", "vpackhub_sat", 60, "s16 -> u8 (Vv low half, Vu high)", "saturates to u8", "u8",
     ("Vu:s16", "Vv:s16")),
    ("Q6_Vb_vshuff_Vb", "vshuffb", 60, "s8 (interleave halves)", "none", "s8", ("Vu:s8",)),
    ("Q6_Vb_vdeal_Vb", "vdealb", 60, "s8 (even lanes, then odd)", "none", "s8", ("Vu:s8",)),
    ("Q6_V_vlalign_VVR", "vlalignb", 60, "u8 pair shifted left by Rt & 127 bytes", "none", "u8",
     ("Vu:u8", "Vv:u8", "Rt:r")),
    ("Q6_Q_vsetq_R", "vsetq", 60, "r32 -> q (first Rt & 127 bytes)", "Rt = 128 gives none", "q", ("Rt:r",)),
    ("Q6_Q_vsetq2_R", "vsetq2", 62, "r32 -> q (first ((Rt - 1) & 127) + 1 bytes)", "Rt = 128 gives all", "q",
     ("Rt:r",)),
    ("Q6_Q_vcmp_eq_VbVb", "veqb", 60, "s8 == s8 -> q", "none", "q", ("Vu:s8", "Vv:s8")),
    ("Q6_Q_or_QQn", "pred_or_n", 60, "q | ~q", "none", "q", ("Qs:q", "Qt:q")),
    ("Q6_vmem_QRIV", "vS32b_qpred_ai", 60, "u8 where Qv (aligned block)", "none", "u8",
     ("Qv:q", "block:u8", "Vs:u8")),
    ("Q6_vmem_QnRIV", "vS32b_nqpred_ai", 60, "u8 where !Qv (aligned block)", "none", "u8",
     ("Qv:q", "block:u8", "Vs:u8")),
)


def _register() -> None:
    for name, tag, version, operands, overflow, result, params in TABLE:
        model = getattr(hvx, tag)
        inst = add_instruction(Instruction(
            mnemonic=tag, arch=ARCH, extension=f"HVX v{version}", operands=operands, overflow=overflow,
            pseudocode=model.__doc__.split(":", 1)[0].strip(), citation=f"{hvx.MANUAL}; {hvx.IDEF} V6_{tag}",
            model=model))
        features = ("hvx", "hvx_length128b") + ((f"hvxv{version}",) if version > 60 else ())
        ps = tuple(_p(s) for s in params)
        add_intrinsic(Intrinsic(name, inst, 1024, features, "hvx", ps, _p(f"result:{result}"), model))


_register()
