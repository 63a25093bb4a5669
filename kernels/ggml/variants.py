"""The builds ggml ships of its CPU backend: one Variant per GGML_CPU_ALL_VARIANTS flag set, the natural matrix of a
ggml campaign. A kernel of arch/<arch>/quants.c is judged once per variant of its arch (and per vector length,
where the code reads it at run time: SVE, RVV), because the same source compiles to different paths per flag set.

Sources: ggml-org/ggml @d99724f src/CMakeLists.txt L484-576 (the variants and their feature lists) and
src/ggml-cpu/CMakeLists.txt L170-212 (ARM: -march and the +ext tags), L306-366 (x86: one -m flag per feature),
L504-510 (RISC-V: -march=rv64gc_v -mabi=lp64d), L740 (wasm: -msimd128).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str                           # ggml's: 'haswell', 'armv8.2_1', 'riscv64_v'
    arch: str                           # lowp's target arch: 'x86-64', 'aarch64', 'riscv64', 'wasm32', or ggml's
                                        # folder name for an arch no lowp target runs ('powerpc', ...)
    flags: tuple[str, ...]              # the compile flags ggml's CMake gives the variant
    features: tuple[str, ...]           # the CPU features (Linux names) the build needs to run
    vector_bits: tuple[int | None, ...] = (None,)   # the vector lengths it is judged at (SVE, RVV: several)

    def label(self, vector_bits: int | None) -> str:
        """The variant as a report names it: 'armv8.2_3@256' for one vector length of a scalable build."""
        return self.name if vector_bits is None else f"{self.name}@{vector_bits}"


# x86: ggml-cpu/CMakeLists.txt L309-366, one flag per feature name of the variant list.
X86_FLAGS = {
    "SSE42": (("-msse4.2",), ("sse4_2",)),
    "AVX": (("-mavx",), ("avx",)),
    "F16C": (("-mf16c",), ("f16c",)),
    "FMA": (("-mfma",), ("fma",)),
    "BMI2": (("-mbmi2",), ("bmi2",)),
    "AVX2": (("-mavx2",), ("avx2",)),
    "AVX_VNNI": (("-mavxvnni",), ("avx_vnni",)),
    "AVX512": (("-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512dq", "-mavx512bw"),
               ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    "AVX512_VBMI": (("-mavx512vbmi",), ("avx512vbmi",)),
    "AVX512_VNNI": (("-mavx512vnni",), ("avx512_vnni",)),
    "AVX512_BF16": (("-mavx512bf16",), ("avx512_bf16",)),
    "AMX_TILE": (("-mamx-tile",), ("amx_tile",)),
    "AMX_INT8": (("-mamx-int8",), ("amx_int8",)),
}
_HASWELL = ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2")
X86_VARIANTS = {          # src/CMakeLists.txt L491-521
    "x64": (),
    "sse42": ("SSE42",),
    "sandybridge": ("SSE42", "AVX"),
    "ivybridge": ("SSE42", "AVX", "F16C"),
    "piledriver": ("SSE42", "AVX", "F16C", "FMA"),
    "haswell": _HASWELL,
    "skylakex": (*_HASWELL, "AVX512"),
    "cannonlake": (*_HASWELL, "AVX512", "AVX512_VBMI"),
    "cascadelake": (*_HASWELL, "AVX512", "AVX512_VNNI"),
    "icelake": (*_HASWELL, "AVX512", "AVX512_VBMI", "AVX512_VNNI"),
    "cooperlake": (*_HASWELL, "AVX512", "AVX512_VNNI", "AVX512_BF16"),
    "zen4": (*_HASWELL, "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"),
    "alderlake": (*_HASWELL, "AVX_VNNI"),
    "sapphirerapids": (*_HASWELL, "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8"),
}

# ARM (Linux): ggml-cpu/CMakeLists.txt L171-212: -march=<the first version with every feature>+<tags>.
ARM_TAGS = {"DOTPROD": ("+dotprod", "asimddp"), "FP16_VECTOR_ARITHMETIC": ("+fp16", "asimdhp"),
            "SVE": ("+sve", "sve"), "MATMUL_INT8": ("+i8mm", "i8mm"), "SVE2": ("+sve2", "sve2"),
            "SME": ("+sme", "sme")}
ARM_VERSION = {"DOTPROD": "armv8.2-a", "FP16_VECTOR_ARITHMETIC": "armv8.2-a", "SVE": "armv8.2-a",
               "MATMUL_INT8": "armv8.6-a", "SVE2": "armv8.6-a", "SME": "armv9.2-a"}
ARM_VARIANTS = {          # src/CMakeLists.txt L529-536
    "armv8.0_1": (),
    "armv8.2_1": ("DOTPROD",),
    "armv8.2_2": ("DOTPROD", "FP16_VECTOR_ARITHMETIC"),
    "armv8.2_3": ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE"),
    "armv8.6_1": ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8"),
    "armv8.6_2": ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8", "SVE2"),
    "armv9.2_1": ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8", "SME"),
    "armv9.2_2": ("DOTPROD", "FP16_VECTOR_ARITHMETIC", "SVE", "MATMUL_INT8", "SVE2", "SME"),
}
SVE_BITS = (128, 256, 512)        # the vector lengths ggml's SVE code switches on (arch/arm/quants.c svcntb())
RVV_BITS = (128, 256, 512, 1024)  # the VLENs arch/riscv/quants.c specialises its bodies for


def _x86(name: str, tags: tuple[str, ...]) -> Variant:
    flags = tuple(f for t in tags for f in X86_FLAGS[t][0])
    features = tuple(f for t in tags for f in X86_FLAGS[t][1])
    return Variant(name, "x86-64", flags, features)


def _arm(name: str, tags: tuple[str, ...]) -> Variant:
    version = "armv8-a"
    for t in tags:
        version = max(version, ARM_VERSION[t], key=_arm_version)
    march = "-march=" + version + "".join(ARM_TAGS[t][0] for t in tags)
    bits = SVE_BITS if "SVE" in tags else (None,)
    return Variant(name, "aarch64", (march,), tuple(ARM_TAGS[t][1] for t in tags), bits)


def _arm_version(v: str) -> tuple[int, int]:
    major, minor = v.removeprefix("armv").removesuffix("-a").split(".") if "." in v else (v[4], "0")
    return int(major), int(minor)


VARIANTS: tuple[Variant, ...] = (
    *(_x86(n, t) for n, t in X86_VARIANTS.items()),
    *(_arm(n, t) for n, t in ARM_VARIANTS.items()),
    Variant("riscv64_0", "riscv64", ("-march=rv64gc",), ()),       # no RVV: the generic fallbacks
    Variant("riscv64_v", "riscv64", ("-march=rv64gcv",), ("v",), RVV_BITS),
    Variant("wasm_simd128", "wasm32", ("-msimd128",), ("simd128",)),
)

# ggml's arch folders (src/ggml-cpu/arch/<folder>) -> lowp's arch; folders no lowp target runs are their own name.
ARCH_OF_FOLDER = {"x86": "x86-64", "arm": "aarch64", "riscv": "riscv64", "wasm": "wasm32"}
UNRUN_FOLDERS = ("powerpc", "loongarch", "s390")


def variants_of(arch: str) -> tuple[Variant, ...]:
    return tuple(v for v in VARIANTS if v.arch == arch)


def variant(name: str) -> Variant:
    for v in VARIANTS:
        if v.name == name:
            return v
    raise KeyError(f"no ggml variant {name!r}; known: {', '.join(v.name for v in VARIANTS)}")
