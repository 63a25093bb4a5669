"""The 4.6-bit kernels of seed 004 and their like-for-like exact 8-bit baselines, declared as data: one entry
per kernel (kernels/x86/q46.c, one template gemm_q46.h: same packing, blocking and 8x8 micro-kernel)."""
from __future__ import annotations

from functools import partial

from lowp.kernels.models import q46 as models_q46
from lowp.kernels.registry import KERNELS_DIR, Domain, Kernel, Tile, register

X86 = KERNELS_DIR / "x86"
S8 = (-128, 127)
# The registered entries claim the widest pair of seed 004: (Nx, Nw) = (255, 3), the most levels (765, 4.79
# bits) and the whole symmetric s8 range for activations. models_q46.for_pair(kernel, nx, nw[, flush]) gives the
# same kernel for any other pair (shift, domain and a validated flush interval).
WIDEST = (255, 3)

PACKING = ("A' = A + xmax (u8, the A_m shift) row-major, rows padded to 8; B in panels of 8 columns, per step "
           "one vector: column c holds its KG values of k (PSHUFB pairs the rows, unpacks make quads/octets); "
           "8x8 micro-kernel, each row's KG bytes of A' broadcast from memory")
PACKING_S16 = PACKING.replace("A + xmax (u8, the A_m shift)", "A sign-extended to int16").replace(
    "KG values", "KG int16 values")
PACKING_XOR = PACKING.replace("A + xmax (u8, the A_m shift)", "A XOR 0x80 (u8)")


def _q46(isa, width, features):
    kg = width // 64
    nx, nw = WIDEST
    flush = models_q46.safe_flush(nx, nw, kg)
    register(Kernel(
        name=f"q46_{isa}", target="x86-64", features=features, source=X86 / "q46.c", symbol=f"lowp_q46_{isa}_gemm",
        signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=8, nr=8, kr=kg, spill=flush), packing=PACKING,
        contract="exact", domain=models_q46.pair_domain(nx, nw), model=partial(models_q46.q46_gemm, width=width),
        params={"shift": nx // 2, "flush": flush}, depends=(X86 / "gemm_q46.h",), requires=("vpmaddubsw",),
        pipeline="q46", a_shift="shift",
        description=f"4.6-bit (seed 004), {isa}: VPMADDUBSW(a + shift, b) + VPADDW into int16, VPMADDWD(ones) + "
                    f"VPADDD into int32 every `flush` k, -shift * colsum(B); exact on (Nx, Nw) = ({nx}, {nw}) "
                    "(models_q46.for_pair for the others)"))


def _q8(isa, width, features, dot, kg, packing, what):
    register(Kernel(
        name=f"q8_{isa}", target="x86-64", features=features, source=X86 / "q46.c", symbol=f"lowp_q8_{isa}_gemm",
        signature="gemm", a_type="s8", b_type="s8", tile=Tile(mr=8, nr=8, kr=kg), packing=packing,
        contract="exact", domain=Domain(S8, S8), model=partial(models_q46.q8_gemm, width=width, dot=dot),
        depends=(X86 / "gemm_q46.h",), requires=(dot,), pipeline=dot, a_shift=128 if dot == "vpdpbusd" else 0,
        description=f"exact 8-bit s8s8 baseline of the 4.6-bit kernel ({isa}, same packing and 8x8 blocking): {what}"))


_q46("avx2", 256, ("avx2",))
_q46("avx512bw", 512, ("avx512f", "avx512bw"))
_q8("avx2", 256, ("avx2",), "vpmaddwd", 2, PACKING_S16, "int16 operands, VPMADDWD + VPADDD")
_q8("avx512bw", 512, ("avx512f", "avx512bw"), "vpmaddwd", 4, PACKING_S16, "int16 operands, VPMADDWD + VPADDD")
_q8("avx512vnni", 512, ("avx512f", "avx512bw", "avx512_vnni"), "vpdpbusd", 8, PACKING_XOR,
    "a XOR 0x80 as u8, VPDPBUSD, -128 * colsum(B)")
