"""CPU flags as kernel authors write them for GCC and clang (-march, -mcpu, -mfpu, -mtune, -mv68, -mhvx...), in
zig's spelling: one `-mcpu=<cpu>+<feature>...` whose names are LLVM's (underscores, not dashes).

Authors copy their build's flags (XNNPACK: `-march=armv8.2-a+dotprod`, `-march=rv64gcv`, `-mfpu=neon`), and zig
takes none of them: it answers `-march=armv8.2-a+dotprod` with the list of every CPU it knows. So lowp translates
them, per architecture, and checks every name against the CPUs and features this zig knows; a name it does not
know is refused in one line that names the flag (with the closest names), never with zig's list.

The translations follow the compilers' documented spellings: GCC's AArch64, ARM, RISC-V and x86 options
(gcc.gnu.org/onlinedocs/gcc/Submodel-Options.html: -march=armv8.2-a+ext, +noext, -mfpu=neon-vfpv4,
-march=rv64gc_zvl256b) and clang's Hexagon options (-mv68, -mhvx[=v68], -mhvx-length=128B). -mtune only tunes
for speed and is dropped: it cannot change what a kernel computes.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from lowp.emulator.errors import BuildError
from lowp.emulator.features import did_you_mean


@functools.lru_cache(maxsize=1)
def zig_command() -> tuple[str, ...]:
    """How to run the ziglang package's zig (the builds' cross compiler, and the CPU lists below): its executable
    itself, which `python -m ziglang` only execs. A build runs zig three times (two compiles and a link), and a
    Python start came before each (`zig cc --version` 0.15 s that way, 0.045 s direct; an AArch64 mutant build,
    alternated, 0.50-0.65 s against 0.37-0.49 s). `python -m ziglang` where the package has no executable beside
    its module (another layout)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is not None and spec.origin:
        exe = Path(spec.origin).parent / ("zig.exe" if os.name == "nt" else "zig")
        if exe.is_file() and os.access(exe, os.X_OK):
            return (str(exe),)
    return (sys.executable, "-m", "ziglang")


# GCC's +extension names that LLVM (zig) spells otherwise; every other name maps by '-' -> '_'.
AARCH64_EXTENSIONS = {"fp16": ("fullfp16",), "simd": ("neon",), "fp": ("fp_armv8",), "crypto": ("aes", "sha2"),
                      "rdma": ("rdm",), "memtag": ("mte",), "sve2-bitperm": ("sve2_bitperm",)}
ARM_EXTENSIONS = {"simd": ("neon",), "fp": ("fp_armv8",), "fp16": ("fullfp16",), "crypto": ("crypto",)}
# GCC's -mfpu values (ARM): the FPU and Advanced SIMD features each one enables.
ARM_FPUS = {"vfp": ("vfp2",), "vfpv2": ("vfp2",), "vfpv3": ("vfp3",), "vfpv3-d16": ("vfp3d16",),
            "vfpv3-fp16": ("vfp3", "fp16"), "vfpv4": ("vfp4",), "vfpv4-d16": ("vfp4d16",),
            "neon": ("neon", "vfp3"), "neon-vfpv3": ("neon", "vfp3"), "neon-fp16": ("neon", "vfp3", "fp16"),
            "neon-vfpv4": ("neon", "vfp4"), "fp-armv8": ("fp_armv8",), "neon-fp-armv8": ("neon", "fp_armv8"),
            "crypto-neon-fp-armv8": ("neon", "fp_armv8", "crypto"), "fpv5-d16": ("fp_armv8d16",), "auto": ()}
# RISC-V: 'g' is IMAFD with Zicsr and Zifencei (the ISA manual's "general-purpose" shorthand).
RISCV_G = ("i", "m", "a", "f", "d", "zicsr", "zifencei")
ZIG_ARCH = {"aarch64": "aarch64", "arm": "arm", "riscv64": "riscv64", "x86_64": "x86_64", "hexagon": "hexagon",
            "wasm32": "wasm32"}
CPU_FLAGS = ("-march=", "-mcpu=", "-mfpu=", "-mtune=", "-mhvx", "-mv")


class CpuFlagError(BuildError):
    """A CPU flag lowp cannot translate for zig, named in one line."""


def is_cpu_flag(flag: str) -> bool:
    return flag.startswith(CPU_FLAGS[:4]) or flag.startswith("-mhvx") or re.fullmatch(r"-mv\d+t?", flag) is not None


def zig_cpu(triple: str, default_cpu: str, flags: Sequence[str]) -> tuple[str, list[str]]:
    """(zig's -mcpu value, the other flags) for `flags` as GCC or clang take them, building for `triple`. Without a
    CPU flag, `default_cpu` (the recipe's). CpuFlagError naming the flag where one cannot be translated."""
    arch = triple.split("-", 1)[0]
    cpu_flags = [f for f in flags if is_cpu_flag(f)]
    rest = [f for f in flags if not is_cpu_flag(f)]
    if not cpu_flags:
        return default_cpu, rest
    translate = {"aarch64": _aarch64, "arm": _arm, "riscv64": _riscv, "x86_64": _x86, "hexagon": _hexagon,
                 "wasm32": _wasm}.get(arch)
    if translate is None:
        raise CpuFlagError(f"{cpu_flags[0]}: lowp does not translate CPU flags for {arch}; write zig's "
                           f"-mcpu=<cpu>+<feature> instead")
    cpu, features = translate(cpu_flags, default_cpu)
    _check(arch, cpu, features, cpu_flags)
    return "+".join([cpu, *dict.fromkeys(features)]).replace("+-", "-"), rest


def _split(value: str) -> tuple[str, list[str]]:
    """'cortex-a76+dotprod+nofp16' -> ('cortex-a76', ['dotprod', 'nofp16'])."""
    head, *extensions = value.split("+")
    return head, extensions


def _extensions(names: list[str], table: dict) -> list[str]:
    """GCC +ext / +noext names -> LLVM features ('-name' removes one)."""
    out = []
    for name in names:
        off = name.startswith("no")
        base = name[2:] if off else name
        for feature in table.get(base, (base.replace("-", "_"),)):
            out.append(("-" if off else "") + feature)
    return out


def _arm_version(value: str, flag: str) -> str:
    """'armv8.2-a' -> 'v8_2a', 'armv7-a' -> 'v7a', 'armv6' -> 'v6', 'armv9-a' -> 'v9a'."""
    m = re.fullmatch(r"armv(\d+)(?:\.(\d+))?(?:-?([arm]))?", value)
    if not m:
        raise CpuFlagError(f"{flag}: not an Arm architecture name lowp reads (armv7-a, armv8.2-a+dotprod, ...)")
    return "v" + m[1] + (f"_{m[2]}" if m[2] else "") + (m[3] or "")


def _cpu_name(value: str) -> str:
    """GCC's CPU names use dashes (cortex-a76, skylake-avx512, x86-64-v3); LLVM's underscores."""
    return value.replace("-", "_").replace(".", "_")


def _aarch64(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    return _arm_family(flags, default_cpu, AARCH64_EXTENSIONS, None, "an AArch64 option (it takes -march, -mcpu, "
                                                                     "-mtune)")


def _arm(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    return _arm_family(flags, default_cpu, ARM_EXTENSIONS, ARM_FPUS, "an AArch32 CPU option (it takes -march, "
                                                                     "-mcpu, -mfpu, -mtune)")


def _arm_family(flags: list[str], default_cpu: str, extensions: dict, fpus: dict | None,
                what: str) -> tuple[str, list[str]]:
    """-march=armvX.Y-a+ext / -mcpu=<cpu>+ext (the last one wins, as with GCC), and AArch32's -mfpu."""
    cpu, features, fpu = default_cpu.split("+")[0], default_cpu.split("+")[1:], []
    for flag in flags:
        key, _, value = flag.partition("=")
        if key == "-march":
            head, names = _split(value)
            cpu, features = "generic", [_arm_version(head, flag), *_extensions(names, extensions)]
        elif key == "-mcpu":
            head, names = _split(value)
            _not_native(head, flag)
            cpu, features = _cpu_name(head), _extensions(names, extensions)
        elif key == "-mfpu" and fpus is not None:
            if value not in fpus:
                raise CpuFlagError(f"{flag}: not a -mfpu value lowp knows ({', '.join(fpus)})")
            fpu = list(fpus[value])
        elif key != "-mtune":
            raise CpuFlagError(f"{flag}: not {what}")
    return cpu, [*features, *fpu]


def _riscv(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    cpu, features = default_cpu.split("+")[0], default_cpu.split("+")[1:]
    for flag in flags:
        key, _, value = flag.partition("=")
        if key == "-march":
            cpu, features = "generic_rv64", _riscv_extensions(value, flag)
        elif key == "-mcpu":
            _not_native(value, flag)
            cpu, features = _cpu_name(value), []
        elif key != "-mtune":
            raise CpuFlagError(f"{flag}: not a RISC-V CPU option (it takes -march, -mcpu, -mtune)")
    return cpu, features


def _riscv_extensions(value: str, flag: str) -> list[str]:
    """'rv64gcv_zvl256b' -> ['i', 'm', 'a', 'f', 'd', 'zicsr', 'zifencei', 'c', 'v', 'zvl256b']."""
    m = re.fullmatch(r"rv64([a-z]*?)((?:_[a-z][a-z0-9]*)*)", value.lower())
    if not m:
        raise CpuFlagError(f"{flag}: not a 64-bit RISC-V ISA string lowp reads (rv64gcv, rv64imafdcv_zvl256b, ...)")
    singles, multis = m[1], [x for x in m[2].split("_") if x]
    out = []
    for letter in singles:
        out += RISCV_G if letter == "g" else (letter,)
    return out + multis


def _x86(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    cpu = default_cpu
    for flag in flags:
        key, _, value = flag.partition("=")
        if key in ("-march", "-mcpu"):
            _not_native(value, flag)
            cpu = _cpu_name(value)
        elif key != "-mtune":
            raise CpuFlagError(f"{flag}: not an x86 CPU option (it takes -march, -mtune; -mavx2 and the like pass "
                               "through)")
    return cpu, []


def _hexagon(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    cpu, features = default_cpu.split("+")[0], default_cpu.split("+")[1:]
    for flag in flags:
        key, _, value = flag.partition("=")
        version = re.fullmatch(r"-mv(\d+t?)", flag)
        if version or key in ("-mcpu", "-march"):
            cpu = f"hexagonv{version[1]}" if version else _cpu_name(value)
        elif key == "-mhvx":
            level = value or cpu.removeprefix("hexagon")
            features.append(f"hvx{level}" if level.startswith("v") else "hvx")
        elif key == "-mhvx-length":
            features.append("hvx_length" + value.lower())
        elif key in ("-mhvx-qfloat", "-mhvx-ieee-fp"):
            features.append(key.removeprefix("-m").replace("-", "_"))
        elif key != "-mtune":
            raise CpuFlagError(f"{flag}: not a Hexagon CPU option (it takes -mv<N>, -mcpu, -mhvx[=v<N>], "
                               "-mhvx-length=64B|128B)")
    return cpu, features


def _wasm(flags: list[str], default_cpu: str) -> tuple[str, list[str]]:
    cpu = default_cpu
    for flag in flags:
        key, _, value = flag.partition("=")
        if key in ("-mcpu", "-march"):
            cpu = _cpu_name(value)
        elif key != "-mtune":
            raise CpuFlagError(f"{flag}: not a WebAssembly CPU option (features are -msimd128, -mrelaxed-simd)")
    return cpu, []


def _not_native(value: str, flag: str) -> None:
    if value == "native":
        raise CpuFlagError(f"{flag}: 'native' names the build machine, and lowp builds for the emulated one; name "
                           "the CPU or the architecture and its extensions")


def _check(arch: str, cpu: str, features: list[str], flags: list[str]) -> None:
    """Every name known to this zig, or a one-line refusal naming the flag and the closest names."""
    cpus, known = zig_names(arch)
    where = " ".join(flags)
    if cpus and cpu not in cpus:
        close = did_you_mean(cpu, cpus)
        raise CpuFlagError(f"{where}: zig knows no {arch} CPU {cpu!r}" +
                           (f" (did you mean {' or '.join(close)}?)" if close else ""))
    for feature in features:
        name = feature.lstrip("-")
        if known and name not in known:
            close = did_you_mean(name, known)
            raise CpuFlagError(f"{where}: zig knows no {arch} feature {name!r}" +
                               (f" (did you mean {' or '.join(close)}?)" if close else ""))


@functools.lru_cache(maxsize=None)
def zig_names(arch: str) -> tuple[frozenset[str], frozenset[str]]:
    """(CPU names, feature names) this zig knows for `arch`: what it lists when asked for an unknown one (its
    only way of telling). Empty sets where zig cannot be run (the build then says why)."""
    triple = {"aarch64": "aarch64-linux-none", "arm": "arm-linux-musleabihf", "riscv64": "riscv64-linux-none",
              "x86_64": "x86_64-linux-gnu", "hexagon": "hexagon-linux-musl", "wasm32": "wasm32-wasi"}[arch]

    def listed(cpu: str) -> frozenset[str]:
        try:
            out = subprocess.run([*zig_command(), "cc", "-target", triple, f"-mcpu={cpu}", "-E",
                                  "-x", "c", "/dev/null", "-o", "/dev/null"], capture_output=True, text=True,
                                 timeout=60)
        except (OSError, subprocess.SubprocessError):
            return frozenset()
        return frozenset(line.split(":")[0].strip() for line in out.stderr.splitlines()
                         if line.startswith(" ") and line.strip())
    return listed("lowp_no_such_cpu"), listed("generic+lowp_no_such_feature")
