"""The built-in kernels, declared as data (XNNPACK's YAML lists are the model): one entry per kernel."""
from __future__ import annotations

from functools import partial

from lowp.kernels import models
from lowp.kernels.registry import KERNELS_DIR, Domain, Kernel, Tile, register

X86 = KERNELS_DIR / "x86"
U8, S8 = (0, 255), (-128, 127)
U7 = (0, 127)

DOT4_PACKING = ("B packed in panels of nr columns, k in groups of 4 (one 32-bit lane per column holds "
                "b[k..k+3]); A's 4-byte k-group broadcast to every lane")
PAIR_PACKING = ("B_main packed in panels of nr int16 columns, k in pairs (one 16-bit lane per column holds "
                "b[k], b[k+1]); A's 2-byte k-pair broadcast; outliers as CSC, ascending k")


# The instructions each kernel's claimed path is made of: a check fails when none of them is in its code.
REQUIRES = {"maddubs": ("*pmaddubsw",), "vpdpbusd": ("vpdpbusd",)}
# What lowp bounds proves ranges through (lowp.conformance.search.bounds.PIPELINES).


def _dot4(name, isa, features, width, dot, contract, domain, signed_a=False, description=""):
    prefix = "s8s8s32" if signed_a else "u8s8s32"
    register(Kernel(
        name=name, target="x86-64", features=features, source=X86 / "u8s8s32.c", symbol=f"lowp_{prefix}_{isa}_gemm",
        signature="gemm", a_type="s8" if signed_a else "u8", b_type="s8",
        tile=Tile(mr=4, nr=2 * width // 32, kr=4), packing=DOT4_PACKING, contract=contract, domain=domain,
        model=partial(models.dot4_gemm, width=width, dot=dot, signed_a=signed_a), description=description,
        requires=REQUIRES[dot], pipeline=dot, a_shift=128 if signed_a else 0))


MADDUBS = "VPMADDUBSW + VPMADDWD(ones) + VPADDD: each u8*s8 pair sum (k, k+1), k even, saturates to int16"
VNNI = "VPDPBUSD: exact four-product sums, int32 accumulation"

_dot4("u8s8s32_ssse3", "ssse3", ("ssse3",), 128, "maddubs", "exact", Domain(U7, S8), description="SSSE3 " + MADDUBS)
_dot4("u8s8s32_avx2", "avx2", ("avx2",), 256, "maddubs", "exact", Domain(U7, S8), description="AVX2 " + MADDUBS)
_dot4("u8s8s32_avx512bw", "avx512bw", ("avx512f", "avx512bw"), 512, "maddubs", "exact", Domain(U7, S8),
      description="AVX-512BW " + MADDUBS)
_dot4("u8s8s32_avx512vnni", "avx512vnni", ("avx512f", "avx512bw", "avx512_vnni"), 512, "vpdpbusd", "exact",
      Domain(U8, S8), description="AVX-512 VNNI " + VNNI)
_dot4("u8s8s32_avxvnni", "avxvnni", ("avx2", "avx_vnni"), 256, "vpdpbusd", "exact", Domain(U8, S8),
      description="AVX-VNNI (VEX) " + VNNI)
# oneDNN's s8s8 on u8s8 (seed 002): A + 128 as u8, then -128 * colsum(B). On the saturating path, s7 B is the
# documented safe domain (seed 002, 'use s7 [-64, 63] for the second input').
_dot4("s8s8s32_avx2", "avx2", ("avx2",), 256, "maddubs", "exact", Domain(S8, (-64, 63)), signed_a=True,
      description="AVX2 s8s8 via +128 shift and compensation; " + MADDUBS)
_dot4("s8s8s32_avx512vnni", "avx512vnni", ("avx512f", "avx512bw", "avx512_vnni"), 512, "vpdpbusd", "exact",
      Domain(S8, S8), signed_a=True, description="AVX-512 VNNI s8s8 via +128 shift and compensation; " + VNNI)

# AMX-INT8: natively where the CPU has AMX (Sapphire Rapids and later), else on Bochs with lowp's AMX models in
# place of the tile instructions (no Bochs CPU model has AMX): such rows say their AMX results rest on the models.
register(Kernel(
    name="u8s8s32_amx", target="x86-64", features=("amx_tile", "amx_int8"), source=X86 / "amx.c",
    symbol="lowp_u8s8s32_amx_gemm", signature="gemm", a_type="u8", b_type="s8", tile=Tile(mr=16, nr=16, kr=64),
    packing="A blocks of 16 rows x 64 k, B blocks of 16 k-groups x 16 columns x 4 k (VNNI layout), both copied "
            "into the workspace with zero padding", contract="exact", domain=Domain(U8, S8),
    model=models.exact_gemm, requires=("tdpbusd",), pipeline="vpdpbusd",
    description="AMX-INT8 TDPBUSD: exact four-product sums per dword, int32 accumulation in a 16x16 C tile"))

for _isa, _width, _features in (("avx2", 256, ("avx2",)), ("avx512bw", 512, ("avx512f", "avx512bw"))):
    register(Kernel(
        name=f"acc16_{_isa}", target="x86-64", features=_features, source=X86 / "acc16.c",
        symbol=f"lowp_acc16_{_isa}_gemm", signature="gemm", a_type="u8", b_type="s8",
        tile=Tile(mr=4, nr=_width // 16, kr=2, spill=256), packing=PAIR_PACKING, contract="fbgemm-acc16",
        domain=Domain(U8, S8), model=partial(models.acc16_gemm, width=_width, brow=256),
        params={"nbits": 8}, requires=("vpmaddubsw",), pipeline="acc16",
        description=f"FBGEMM-style acc16 ({_isa}): VPMADDUBSW, VPADDSW into int16, VPMOVSXWD + VPADDD every 256 k; "
                    "weights outside nbits signed bits as an exact sparse int32 pass"))


# ---- AArch64 (emulated under Unicorn) ----
from lowp.kernels.models import arm as models_arm  # noqa: E402

ARM = KERNELS_DIR / "aarch64"
S8_NO_MIN = (-127, 127)

register(Kernel(
    name="gemmlowp_s8_neon", target="aarch64", features=("asimd",), source=ARM / "gemmlowp_s8.c",
    symbol="lowp_gemmlowp_s8_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=4, nr=4, kr=16),
    packing="A and B^T k-contiguous, zero-padded to 16; int16 lane l sums products k0+l and k0+8+l",
    contract="exact", domain=Domain(S8_NO_MIN, S8), model=models_arm.smlal_sadalp_gemm, requires=("smlal*",),
    pipeline="smlal_pair",
    description="gemmlowp-style: SMULL + SMLAL (two s8 products per int16 lane), SADALP into int32; exact unless "
                "both products of a lane are (-128)^2 (gemmlowp's LhsNonzero: A in [-127, 127])"))
register(Kernel(
    name="sdot_s8_neon", target="aarch64", features=("asimd", "asimddp"), source=ARM / "sdot_s8.c",
    symbol="lowp_sdot_s8_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=4, nr=8, kr=4),
    packing="B in panels of 8 columns, k in groups of 4 (4 columns x 4 k per 16 bytes); SDOT by element",
    contract="exact", domain=Domain(S8, S8), model=models_arm.sdot_gemm, requires=("sdot",), pipeline="dot_s32",
    description="SDOT (FEAT_DotProd) by element: exact products, int32 accumulation"))
register(Kernel(
    name="smmla_s8_neon", target="aarch64", features=("asimd", "i8mm"), source=ARM / "smmla_s8.c",
    symbol="lowp_smmla_s8_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=4, nr=4, kr=8),
    packing="A in row pairs and B^T in column pairs, 2x8 bytes per 8-k block (SMMLA's operand layout)",
    contract="exact", domain=Domain(S8, S8), model=models_arm.smmla_gemm, requires=("smmla",), pipeline="dot_s32",
    description="SMMLA (FEAT_I8MM) 2x8 by 8x2 blocks; runs on lowp's SMMLA model under Unicorn 2.1"))
# Vector-length agnostic kernels on qemu-aarch64 (Unicorn has no SVE or SME), one entry per vector length.
for _bits in (128, 256, 512):
    register(Kernel(
        name=f"sve_sdot_s8_vl{_bits}", target="aarch64", features=("sve",), source=ARM / "sve_sdot_s8.c",
        symbol="lowp_sve_sdot_s8_gemm", signature="gemm", a_type="s8", b_type="s8",
        tile=Tile(mr=4, nr=_bits // 32, kr=4), cflags=("-O2", "-mcpu=cortex_a76+i8mm+sve"),
        packing="B in panels of VL/32 columns (svcntw), k in groups of 4: one vector per group, lane c column c's "
                "4 bytes; A's row group broadcast",
        contract="exact", domain=Domain(S8, S8), model=partial(models_arm.sve_sdot_gemm, vector_bits=_bits),
        requires=("sdot",), pipeline="dot_s32", backend="qemu", vector_bits=_bits,
        description=f"SVE SDOT (4-way, vectors), vector-length agnostic, checked at VL {_bits}: exact products, "
                    "int32 accumulation"))
register(Kernel(
    name="sme_smopa_s8_svl512", target="aarch64", features=("sme",), source=ARM / "sme_smopa_s8.c",
    symbol="lowp_sme_smopa_s8_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=16, nr=16, kr=4),
    cflags=("-O2", "-mcpu=cortex_a76+i8mm+sve2+sme"),
    packing="A and B in panels of SVL/32 rows / columns, k in groups of 4: lane i row (column) i's 4 bytes",
    contract="exact", domain=Domain(S8, S8), model=partial(models_arm.sme_smopa_gemm, vector_bits=512),
    requires=("smopa",), pipeline="dot_s32", backend="qemu", vector_bits=512,
    description="SME SMOPA (4-way) into ZA0.S in streaming mode, SVL 512; skipped on a qemu with issue #2083"))
register(Kernel(
    name="sme2_sdot_s8_svl512", target="aarch64", features=("sme", "sme2"), source=ARM / "sme2_sdot_s8.c",
    symbol="lowp_sme2_sdot_s8_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=1, nr=4, kr=64),
    cflags=("-O2", "-mcpu=cortex_a76+i8mm+sve2+sme2"),
    packing="A row by row and B column by column, each zero-padded to K rounded up to SVL/8",
    contract="exact", domain=Domain(S8, S8), model=partial(models_arm.sme2_sdot_gemm, vector_bits=512),
    requires=("sdot",), pipeline="dot_s32", backend="qemu", vector_bits=512,
    description="SME2 SDOT (4-way, VGx4) into ZA vector groups, read back with MOVA and summed with SADDV, SVL "
                "512; runs on a qemu with SME2 (qemu 11: lowp.emulator.aarch64.qemu_sme2)"))
_MLAL = dict(target="aarch64", features=("asimd",), source=ARM / "mlal_24x8.c", depends=(ARM / "mlal_24x8.h",),
             signature="gemm", packing="seed 004's: A in 24-row blocks, per k pair 8 rows of k then 8 of k+1 per "
             "8-row group; B in 8-column panels, per k pair (b[k][c], b[k+1][c])")
register(Kernel(
    name="q46_mlal_24x8_neon", symbol="lowp_mlal_s8_24x8_gemm", a_type="s8", b_type="s8",
    tile=Tile(mr=24, nr=8, kr=2, spill=258), contract="exact", domain=Domain((-11, 11), (-11, 11)),
    model=models_arm.mlal_flush_gemm, params={"flush": 258}, requires=("smlal*",), pipeline="mlal_flush_s16",
    description="seed 004's 4.6-bit 24x8 micro-kernel: SMLAL into int16, flushed into int32 every 258 depth "
                "steps (safe for products up to 127: here |a|, |b| <= 11, 121)", **_MLAL))
register(Kernel(
    name="u4_mlal_24x8_neon", symbol="lowp_mlal_u8_24x8_gemm", a_type="u8", b_type="u8",
    tile=Tile(mr=24, nr=8, kr=2, spill=144), contract="exact", domain=Domain((0, 15), (0, 15)),
    model=models_arm.mlal_flush_gemm, params={"flush": 144}, requires=("umlal*",), pipeline="mlal_flush_u16",
    description="4-bit (0..15) kernel: UMLAL into 16-bit lanes, flushed into int32 every 144 depth steps, the "
                "largest even depth within seed 004's int16 level of 145 = floor(32767 / 225) (the kernel steps in k pairs)", **_MLAL))
from lowp.kernels import builtin_q46  # noqa: F401
