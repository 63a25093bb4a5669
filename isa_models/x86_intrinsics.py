"""Registry entries for the x86 models: which intrinsics spell each instruction, at which width, needing which
CPU features, with which argument order. Argument orders follow the Intel Intrinsics Guide:
  binary      plain (a, b)       mask (src, k, a, b)     maskz (k, a, b)
  accumulate  plain (src, a, b)  mask (src, k, a, b)     maskz (k, src, a, b)
  extend      plain (a)          mask (src, k, a)        maskz (k, a)
"""
from __future__ import annotations

import re

from lowp.isa_models import x86
from lowp.isa_models.lanes import DTYPES
from lowp.isa_models.registry import Instruction, Intrinsic, Param, add_instruction, add_intrinsic

PREFIX = {64: "_mm_", 128: "_mm_", 256: "_mm256_", 512: "_mm512_"}
SDM = "Intel 64 and IA-32 Architectures SDM, Vol. 2 (Instruction Set Reference), operation block"
ISE = "Intel Architecture Instruction Set Extensions Programming Reference (319433), operation block"


def _vec(name, type_name, width):
    dtype = DTYPES[type_name]
    return Param(name, "vec", dtype, width // (dtype.itemsize * 8))


def _mask(lanes):
    return Param("k", "mask", bits=max(8, lanes))


def _binary(inst, form, width, a_t, b_t, out_t):
    a, b, out = _vec("a", a_t, width), _vec("b", b_t, width), _vec("result", out_t, width)
    src, m = Param("src", "vec", out.dtype, out.lanes), inst.model
    if form == "plain":
        return (a, b), out, lambda a, b: m(a, b)
    if form == "mask":
        return (src, _mask(out.lanes), a, b), out, lambda s, k, a, b: m(a, b, mask=k, merge=s)
    return (_mask(out.lanes), a, b), out, lambda k, a, b: m(a, b, mask=k, zeroing=True)


def _accumulate(inst, form, width, a_t, b_t, out_t):
    a, b, src = _vec("a", a_t, width), _vec("b", b_t, width), _vec("src", out_t, width)
    out, m = _vec("result", out_t, width), inst.model
    if form == "plain":
        return (src, a, b), out, lambda s, a, b: m(s, a, b)
    if form == "mask":
        return (src, _mask(src.lanes), a, b), out, lambda s, k, a, b: m(s, a, b, mask=k)
    return (_mask(src.lanes), src, a, b), out, lambda k, s, a, b: m(s, a, b, mask=k, zeroing=True)


def _extend(inst, form, width, a_t, b_t, out_t):
    out = _vec("result", out_t, width)
    in_bits = DTYPES[a_t].itemsize * 8
    a = _vec("a", a_t, max(128, out.lanes * in_bits))   # the source register; only its low lanes are read
    n, m = out.lanes, inst.model
    if form == "plain":
        return (a,), out, lambda a: m(a[..., :n])
    src = Param("src", "vec", out.dtype, out.lanes)
    if form == "mask":
        return (src, _mask(n), a), out, lambda s, k, a: m(a[..., :n], mask=k, merge=s)
    return (_mask(n), a), out, lambda k, a: m(a[..., :n], mask=k, zeroing=True)


def _byte_shift(inst, form, width, a_t, b_t, out_t):
    """VPSRLDQ / VPSLLDQ: a register and the byte count (an immediate; 16 and above zero the lane, as 16 does)."""
    a, out, m = _vec("a", a_t, width), _vec("result", out_t, width), inst.model
    return (a, Param("imm", "imm", lo=0, hi=16)), out, lambda a, imm: m(a, imm)


KINDS = {"binary": _binary, "accumulate": _accumulate, "extend": _extend, "byte_shift": _byte_shift}


def family(mnemonic, model, *, extension, types, overflow, kind, plain, masked=None, masked_features=(),
           encoding_of=None, citation=SDM):
    """Register one instruction and its intrinsics.

    plain: {intrinsic name: (width, features)} for the unmasked spellings.
    masked: the intrinsic stem (e.g. 'maddubs_epi16') for the AVX-512 mask/maskz spellings at 128/256/512,
            which need `masked_features` (+ avx512vl below 512 bits).
    """
    a_t, b_t, out_t = types
    inst = add_instruction(Instruction(
        mnemonic=mnemonic, arch="x86", extension=extension,
        operands=f"{a_t} x {b_t} -> {out_t}" if b_t else f"{a_t} -> {out_t}",
        overflow=overflow, pseudocode=re.split(r"[,:]", model.__doc__)[0].strip(), citation=citation, model=model))
    build = KINDS[kind]
    for name, (width, features) in plain.items():
        encoding = (encoding_of or _encoding)(name, width, features)
        params, out, adapter = build(inst, "plain", width, a_t, b_t, out_t)
        add_intrinsic(Intrinsic(name, inst, width, tuple(features), encoding, params, out, adapter))
    if masked:
        for width in (128, 256, 512):
            features = tuple(masked_features) + (("avx512vl",) if width < 512 else ())
            for form in ("mask", "maskz"):
                params, out, adapter = build(inst, form, width, a_t, b_t, out_t)
                add_intrinsic(Intrinsic(f"{PREFIX[width]}{form}_{masked}", inst, width, features, "evex",
                                        params, out, adapter))
    return inst


def _encoding(name, width, features):
    if width == 64:
        return "mmx"
    if any(f.startswith("avx512") for f in features):
        return "evex"
    if width == 128 and features[0] in ("sse2", "ssse3", "sse4_1"):
        return "legacy"
    return "vex"


def _widths(stem, legacy_feature, avx2="avx2", avx512=("avx512bw",)):
    return {f"_mm_{stem}": (128, (legacy_feature,)), f"_mm256_{stem}": (256, (avx2,)),
            f"_mm512_{stem}": (512, avx512)}


def _vnni(stem, evex_features=("avx512_vnni",)):
    plain = {f"{PREFIX[w]}{stem}_epi32": (w, evex_features + (("avx512vl",) if w < 512 else ())) for w in W3}
    plain.update({f"{PREFIX[w]}{stem}_avx_epi32": (w, ("avx_vnni",)) for w in (128, 256)})
    return plain


W3 = (128, 256, 512)
AVX10_2 = ("avx10_2",)


def _avx10_masked(inst, stem, types):
    """AVX10.2's mask/maskz spellings at 128/256/512 bits: EVEX, no avx512vl needed (AVX10 has every width)."""
    a_t, b_t, out_t = types
    for width in W3:
        for form in ("mask", "maskz"):
            params, out, adapter = _accumulate(inst, form, width, a_t, b_t, out_t)
            add_intrinsic(Intrinsic(f"{PREFIX[width]}{form}_{stem}_epi32", inst, width, AVX10_2, "evex",
                                    params, out, adapter))


def _amx():
    """AMX-INT8 TDPB*D: instructions without a functional intrinsic (_tile_dpbssd(dst, src1, src2) names tile
    registers, not values); the models take and return tiles as arrays."""
    for mnemonic, a_t, b_t in (("tdpbssd", "s8", "s8"), ("tdpbsud", "s8", "u8"), ("tdpbusd", "u8", "s8"),
                               ("tdpbuud", "u8", "u8")):
        add_instruction(Instruction(
            mnemonic=mnemonic, arch="x86", extension="AMX-INT8",
            operands=f"{a_t} tile (M x K) x {b_t} tile (K/4 x 4N) + s32 tile (M x N) -> s32",
            overflow="exact 4-byte dot per dword; the dword accumulate wraps mod 2^32",
            pseudocode=mnemonic.upper(), citation="Intel SDM Vol. 2C, TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD; "
            "Intel ISE (319433) chapter 3", model=getattr(x86, mnemonic)))
SAT16 = "pair sum saturates to int16 (±64770 clamps to [-32768, 32767])"


def _register():
    family("vpmaddubsw", x86.vpmaddubsw, extension="SSSE3 / AVX2 / AVX512BW", types=("u8", "s8", "s16"),
           overflow=SAT16, kind="binary",
           plain={"_mm_maddubs_pi16": (64, ("ssse3",)), **_widths("maddubs_epi16", "ssse3")},
           masked="maddubs_epi16", masked_features=("avx512bw",))
    family("vpmaddwd", x86.vpmaddwd, extension="SSE2 / AVX2 / AVX512BW", types=("s16", "s16", "s32"),
           overflow="pair sum wraps to 32 bits: only 4 x 0x8000 overflows, giving INT32_MIN", kind="binary",
           plain=_widths("madd_epi16", "sse2"), masked="madd_epi16", masked_features=("avx512bw",))
    vnni = dict(extension="AVX512_VNNI / AVX-VNNI", types=("u8", "s8", "s32"), kind="accumulate")
    family("vpdpbusd", x86.vpdpbusd, overflow="exact 4-product sum; accumulator wraps mod 2^32",
           plain=_vnni("dpbusd"), masked="dpbusd_epi32", masked_features=("avx512_vnni",), **vnni)
    family("vpdpbusds", x86.vpdpbusds, overflow="exact 4-product sum; accumulator saturates to int32",
           plain=_vnni("dpbusds"), masked="dpbusds_epi32", masked_features=("avx512_vnni",), **vnni)
    wnni = dict(vnni, types=("s16", "s16", "s32"))
    family("vpdpwssd", x86.vpdpwssd, overflow="exact pair sum; accumulator wraps mod 2^32",
           plain=_vnni("dpwssd"), masked="dpwssd_epi32", masked_features=("avx512_vnni",), **wnni)
    family("vpdpwssds", x86.vpdpwssds,
           overflow="exact pair sum (2^31 for 4 x 0x8000), then saturates to int32",
           plain=_vnni("dpwssds"), masked="dpwssds_epi32", masked_features=("avx512_vnni",), **wnni)
    for mnemonic, types in (("vpdpbssd", ("s8", "s8", "s32")), ("vpdpbsud", ("s8", "u8", "s32")),
                            ("vpdpbuud", ("u8", "u8", "u32"))):
        for sat in ("", "s"):
            stem = mnemonic[2:] + sat
            # The VEX forms at 128/256 bits are AVX-VNNI-INT8's (their intrinsic names are shared with AVX10.2's
            # EVEX forms, registered once, under AVX-VNNI-INT8); the 512-bit form and the masked ones are AVX10.2's.
            inst = family(mnemonic + sat, getattr(x86, mnemonic + sat), extension="AVX-VNNI-INT8 / AVX10.2",
                          types=types, kind="accumulate", citation=f"{ISE}; {x86.AVX10}",
                          overflow=("exact 4-product sum; accumulator saturates to "
                                    + ("uint32" if "uu" in mnemonic else "int32")) if sat
                          else "exact 4-product sum; accumulator wraps mod 2^32",
                          plain={f"{PREFIX[w]}{stem}_epi32": (w, ("avx_vnni_int8",)) for w in (128, 256)}
                          | {f"_mm512_{stem}_epi32": (512, AVX10_2)},
                          encoding_of=lambda name, width, features: "evex" if features == AVX10_2 else "vex")
            _avx10_masked(inst, stem, types)
    family("vpaddsw", x86.vpaddsw, extension="SSE2 / AVX2 / AVX512BW", types=("s16", "s16", "s16"),
           overflow="saturates to int16", kind="binary", plain=_widths("adds_epi16", "sse2"),
           masked="adds_epi16", masked_features=("avx512bw",))
    family("vpaddw", x86.vpaddw, extension="SSE2 / AVX2 / AVX512BW", types=("s16", "s16", "s16"),
           overflow="wraps mod 2^16", kind="binary", plain=_widths("add_epi16", "sse2"),
           masked="add_epi16", masked_features=("avx512bw",))
    family("vpaddd", x86.vpaddd, extension="SSE2 / AVX2 / AVX512F", types=("s32", "s32", "s32"),
           overflow="wraps mod 2^32", kind="binary", plain=_widths("add_epi32", "sse2", avx512=("avx512f",)),
           masked="add_epi32", masked_features=("avx512f",))
    family("vpshufb", x86.vpshufb, extension="SSSE3 / AVX2 / AVX512BW", types=("u8", "u8", "u8"),
           overflow="none (a byte move): control bit 7 gives 0; indices stay within each 128-bit lane",
           kind="binary", plain={"_mm_shuffle_pi8": (64, ("ssse3",)), **_widths("shuffle_epi8", "ssse3")},
           masked="shuffle_epi8", masked_features=("avx512bw",))
    # the fp32 requantization's integer steps (XNNPACK's x86 output stage)
    for mnemonic, stem, legacy, types, overflow in (
            ("vpackssdw", "packs_epi32", "sse2", ("s32", "s32", "s16"), "saturates to int16"),
            ("vpacksswb", "packs_epi16", "sse2", ("s16", "s16", "s8"), "saturates to int8"),
            ("vpackuswb", "packus_epi16", "sse2", ("s16", "s16", "u8"), "saturates to uint8"),
            ("vpmaxsb", "max_epi8", "sse4_1", ("s8", "s8", "s8"), "none"),
            ("vpmaxub", "max_epu8", "sse2", ("u8", "u8", "u8"), "none"),
            ("vpsubw", "sub_epi16", "sse2", ("s16", "s16", "s16"), "wraps mod 2^16"),
            ("vpsubsw", "subs_epi16", "sse2", ("s16", "s16", "s16"), "saturates to int16"),
            ("vpaddb", "add_epi8", "sse2", ("s8", "s8", "s8"), "wraps mod 2^8")):
        family(mnemonic, getattr(x86, mnemonic), extension="SSE2 / SSE4.1 / AVX2 / AVX512BW", types=types,
               overflow=overflow, kind="binary", plain=_widths(stem, legacy))
    family("vphaddd", x86.vphaddd, extension="SSSE3 / AVX2", types=("s32", "s32", "s32"), overflow="wraps mod 2^32",
           kind="binary", plain={"_mm_hadd_epi32": (128, ("ssse3",)), "_mm256_hadd_epi32": (256, ("avx2",))})
    family("vpermd", x86.vpermd, extension="AVX2", types=("s32", "s32", "s32"),
           overflow="none (a move): the index's low 3 bits pick the lane", kind="binary",
           plain={"_mm256_permutevar8x32_epi32": (256, ("avx2",))})
    # seed 004's q4.6 / q8 drivers: COMP = -shift * colsum (VPMULLD), the tail mask (VPCMPGTD), REDUCE (VPMOVQD)
    family("vpmulld", x86.vpmulld, extension="SSE4.1 / AVX2 / AVX512F", types=("s32", "s32", "s32"),
           overflow="the low 32 bits of the 64-bit product", kind="binary",
           plain=_widths("mullo_epi32", "sse4_1", avx512=("avx512f",)), masked="mullo_epi32",
           masked_features=("avx512f",))
    family("vpsubd", x86.vpsubd, extension="SSE2 / AVX2 / AVX512F", types=("s32", "s32", "s32"),
           overflow="wraps mod 2^32", kind="binary", plain=_widths("sub_epi32", "sse2", avx512=("avx512f",)),
           masked="sub_epi32", masked_features=("avx512f",))
    family("vpcmpgtd", x86.vpcmpgtd, extension="SSE2 / AVX2", types=("s32", "s32", "s32"),
           overflow="none (a lane mask: -1 where greater, else 0)", kind="binary",
           plain={"_mm_cmpgt_epi32": (128, ("sse2",)), "_mm256_cmpgt_epi32": (256, ("avx2",))})
    family("vpmovqd", x86.vpmovqd, extension="AVX512F", types=("s64", None, "s32"),
           overflow="truncates: the low 32 bits of each qword", kind="extend",
           plain={"_mm512_cvtepi64_epi32": (256, ("avx512f",))})
    for mnemonic, stem in (("vpsrldq", "srli"), ("vpslldq", "slli")):
        family(mnemonic, getattr(x86, mnemonic), extension="SSE2 / AVX2 / AVX512BW", types=("u8", None, "u8"),
               overflow="none (a byte move per 128-bit lane; zeros shifted in)", kind="byte_shift",
               plain={f"_mm_{stem}_si128": (128, ("sse2",)), f"_mm256_{stem}_si256": (256, ("avx2",)),
                      f"_mm512_b{stem[0]}{stem[1:]}_epi128": (512, ("avx512bw",))})
    for mnemonic, stem, types, f512 in (("vpmovsxwd", "cvtepi16_epi32", ("s16", None, "s32"), "avx512f"),
                                        ("vpmovsxbw", "cvtepi8_epi16", ("s8", None, "s16"), "avx512bw"),
                                        ("vpmovzxbw", "cvtepu8_epi16", ("u8", None, "s16"), "avx512bw")):
        family(mnemonic, getattr(x86, mnemonic), extension="SSE4.1 / AVX2 / AVX512", types=types,
               overflow="exact (widening)", kind="extend",
               plain=_widths(stem, "sse4_1", avx512=(f512,)), masked=stem, masked_features=(f512,))


_register()
_amx()
