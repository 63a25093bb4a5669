"""Cross-compile C, C++ or assembly for AArch64 (and RISC-V 64) with the `ziglang` package from PyPI (clang + lld
inside; no apt step), into a static ELF with no relocations, cached by everything that goes into it.

Three zig build recipes (RECIPES below: triple, cpu, runtime, ELF machine; each target of lowp.emulator.targets names
the one it builds with):
  'bare'   aarch64-freestanding, no libc, lowp's runtime.c (memset/memcpy/...) linked in, every function kept
           (--no-gc-sections) so any exported symbol can be called under Unicorn by Machine. lowp's minimal
           freestanding headers (emulator/include: assert.h, string.h, <cstdint>, <limits>, <algorithm>, ...)
           come first through -isystem; clang's own stdint.h, stddef.h, limits.h, stdbool.h and arm_neon.h
           are zig's.
  'linux'  a static aarch64 Linux program without libc (linux_runtime.c: _start, raw syscalls), for qemu-aarch64.
  'arm-linux'  the same for 32-bit Arm (linux_runtime_arm.c, EABI hard float, zig's compiler-rt linked), for
           qemu-arm.
  'riscv64-linux'  the same for RISC-V 64 (linux_runtime_riscv64.c), for qemu-riscv64; cpu baseline_rv64+v
           (zig's spelling of -march=rv64gcv: RV64GC plus the V 1.0 extension).
  'hexagon-linux'  the same for Hexagon (linux_runtime_hexagon.c), for qemu-hexagon; cpu
           hexagonv68+hvxv68+hvx_length128b (zig's spelling of -mv68 -mhvx -mhvx-length=128B, which it rejects):
           triple hexagon-linux-musl for musl's headers (math.h, stdio.h: XNNPACK's hvx kernels include them), but
           no libc is linked (-nostdlib): the runtime supplies what those kernels call.

C++ sources (.cc, .cpp, .cxx) compile with `zig c++` and -fno-exceptions -fno-rtti -fno-threadsafe-statics:
freestanding, no libc++ runtime; runtime_cxx.cc supplies the two hooks a class hierarchy references
(__cxa_pure_virtual, operator delete: both trap). Nothing runs static constructors (.init_array): a kernel
that needs a global object constructed at run time will see it zero-initialised; constexpr constructors and
constant initialisation are fine. The entry symbols are extern "C".

The cache is lowp.emulator.buildcache's: the key covers zig's version, the target, the flags, every source's (and the
runtime's) bytes and the directory the compile runs in (the first source's, so relative -I paths resolve there),
and every header the compiler itself reports reading (-MMD: found next to a source, through -I, -iquote or
-include), re-hashed on each lookup. Editing a kernel, a header it includes or upgrading zig rebuilds; nothing
else does. `depends=` still adds files to the key, for inputs the compiler does not report. Files appear in the
cache whole (os.replace), so parallel test workers either see the whole ELF or none.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from lowp.emulator import buildcache
from lowp.emulator.buildcache import Toolchain

from lowp.emulator.cpuflags import zig_command, zig_cpu
from lowp.emulator.errors import BuildError

HERE = Path(__file__).resolve().parent
# zig cc defines NDEBUG itself at -O2 and above (its release modes), which gcc and clang do not: -UNDEBUG keeps
# assert() on, as in the native build of the same flags; a kernel's own -DNDEBUG (after it) still turns it off.
BASE_FLAGS = ("-O2", "-ffreestanding", "-fno-builtin", "-nostdlib", "-static", "-fno-pic", "-fno-stack-protector",
              "-flax-vector-conversions=none", "-UNDEBUG")
CXX_RUNTIME = HERE / "runtime_cxx.cc"
INCLUDE = HERE / "include"          # lowp's freestanding headers for the bare target
CXX_FLAGS = ("-fno-exceptions", "-fno-rtti", "-fno-threadsafe-statics")


@dataclass(frozen=True)
class Recipe:
    """How build(target=name) compiles and links a static program with zig."""
    name: str                     # 'bare', 'linux', 'riscv64-linux': the build's name in build() and the cache
    triple: str                   # zig's -target
    cpu: str                      # zig's -mcpu by default
    runtime: Path                 # the C runtime linked in (no libc)
    elf_machine: str              # what pyelftools says e_machine is
    freestanding_headers: bool = False    # lowp's emulator/include first (-isystem)
    link_flags: tuple[str, ...] = ()
    compile_flags: tuple[str, ...] = ()   # after BASE_FLAGS (so they override them)
    libc_headers: tuple[str, ...] = ()    # folders of zig's lib/libc/include searched last (-idirafter): -nostdlib
                                          # drops zig's libc headers, which kernels written for a libc include


# The recipes live here, not in the targets that use them: build() takes one by name, and the targets sit above
# build (their machines build), so build cannot ask them. A new target with a new triple adds its recipe here.
# Cortex-A76 has FEAT_DotProd; +i8mm adds SMMLA/UMMLA/USMMLA/USDOT/SUDOT (zig rejects -march=armv8.6-a+i8mm).
AARCH64_CPU = "cortex_a76+i8mm"
BARE = Recipe("bare", "aarch64-freestanding", AARCH64_CPU, HERE / "runtime.c", "EM_AARCH64",
              freestanding_headers=True, link_flags=("-Wl,--no-gc-sections",))
LINUX = Recipe("linux", "aarch64-linux-none", AARCH64_CPU, HERE / "linux_runtime.c", "EM_AARCH64")
# zig's spelling of -march=rv64gcv: RV64GC plus the V 1.0 extension
RISCV64_LINUX = Recipe("riscv64-linux", "riscv64-linux-none", "baseline_rv64+v", HERE / "linux_runtime_riscv64.c",
                       "EM_RISCV")
# 32-bit Arm (AArch32, ARM state, EABI hard float): no libc, but zig's compiler-rt (the EABI helpers a 32-bit
# program calls: __aeabi_uldivmod for a 64-bit division, __aeabi_uidiv where the CPU has no divide instruction).
# The default cpu is ARMv7-A with NEON (VFPv4); lowp.emulator.targets.arm chooses one per kernel from its features.
ARM_LINUX = Recipe("arm-linux", "arm-linux-musleabihf", "cortex_a7", HERE / "linux_runtime_arm.c", "EM_ARM",
                   link_flags=("-rtlib=compiler-rt",))
# Built by the host's C compiler (lowp.emulator.x86.bochs.build_for_bochs), not zig: the recipe names the ELF it
# makes, so Binary checks it.
X86_64_STATIC = Recipe("x86-64-static", "x86_64-linux-gnu", "", HERE / "runtime_x86.c", "EM_X86_64")
# HVX v68 with 128-byte vectors: integer HVX runs right on qemu-hexagon 10, HVX floating point (qfloat, v73) does
# not (lowp.emulator.targets.hexagon says why).
HEXAGON_CPU = "hexagonv68+hvxv68+hvx_length128b"
# clang's HVX intrinsics take int vectors where HVX_Vector is a vector of long (hexagon_types.h): the same-size
# integer conversions clang allows by default, which BASE_FLAGS forbids elsewhere, are what they are written for.
# Hexagon has no divide instruction: every division calls compiler-rt (__hexagon_divsi3, ...), which -nostdlib
# leaves out unless asked for.
HEXAGON_LINUX = Recipe("hexagon-linux", "hexagon-linux-musl", HEXAGON_CPU, HERE / "linux_runtime_hexagon.c",
                       "EM_QDSP6", compile_flags=("-flax-vector-conversions=integer",),
                       link_flags=("-lcompiler_rt",),
                       libc_headers=("hexagon-linux-musl", "generic-musl", "hexagon-linux-any", "any-linux-any"))
RECIPES = {r.name: r for r in (BARE, LINUX, RISCV64_LINUX, ARM_LINUX, HEXAGON_LINUX, X86_64_STATIC)}


def recipe(name: str) -> Recipe:
    """The build recipe `name` ('bare', 'linux', 'riscv64-linux', 'arm-linux', 'hexagon-linux', 'x86-64-static')."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"target: expected one of {', '.join(RECIPES)}, got {name!r}") from None


cache_dir = buildcache.cache_dir


@lru_cache(maxsize=1)
def compiler_version() -> str:
    import importlib.metadata       # here: 28 ms of the start of every process that imports lowp.emulator (a guest)
    try:
        return "zig " + importlib.metadata.version("ziglang")
    except importlib.metadata.PackageNotFoundError:   # pragma: no cover - ziglang is a dependency
        raise BuildError("the ziglang package is not installed: pip install ziglang") from None


@dataclass(frozen=True)
class Segment:
    vaddr: int
    data: bytes
    memsz: int
    flags: int        # PF_X = 1, PF_W = 2, PF_R = 4


@dataclass(frozen=True)
class Binary:
    """A built ELF: where it is, and what a loader needs (PT_LOAD segments, function symbols)."""
    path: Path
    target: str = "bare"
    sources: tuple[str, ...] = field(default=())

    @cached_property
    def _elf(self):
        try:
            stat = os.stat(self.path)
            return _read_elf(str(self.path), self.target, stat.st_size, stat.st_mtime_ns)
        except BuildError:
            raise
        except Exception as e:  # noqa: BLE001 - pyelftools raises many kinds on a damaged file; none names it
            raise BuildError(f"{self.path}: not a readable ELF ({type(e).__name__}: {e}); if it is in lowp's cache, "
                             "delete it and it is built again") from None

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._elf[0]

    @property
    def symbols(self) -> dict[str, tuple[int, int]]:
        """Function name -> (address, size in bytes)."""
        return self._elf[1]

    @property
    def entry(self) -> int:
        return self._elf[2]

    def symbol(self, name: str) -> int:
        try:
            return self.symbols[name][0]
        except KeyError:
            known = ", ".join(sorted(n for n in self.symbols if not n.startswith(("lowp_", "_")))[:20])
            raise KeyError(f"{self.path.name}: no function {name!r}; functions: {known}") from None

    def code(self, name: str) -> tuple[int, bytes]:
        """(address, bytes) of a function's code, from its symbol size."""
        addr, size = self.symbols[name]
        for seg in self.segments:
            if seg.vaddr <= addr < seg.vaddr + len(seg.data):
                off = addr - seg.vaddr
                return addr, seg.data[off:off + size]
        raise KeyError(f"{name}: address {addr:#x} is in no loaded segment")


# A kernel's checks each run a fresh copy of its machine, and each copy read the ELF anew: pyelftools walks the symbol
# table in Python, some 10 ms an XNNPACK kernel's ELF, three times a kernel. Kept per process by the file's path,
# size and modification time (the cache's ELFs are named by their contents; a user's ELF that changes changes its
# time).
@lru_cache(maxsize=64)
def _read_elf(path: str, target: str, size: int, mtime_ns: int):
    """(PT_LOAD segments, function symbols, entry) of the ELF at path, checked against the target's recipe."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        elf = ELFFile(f)
        expected = recipe(target).elf_machine
        if elf["e_machine"] != expected:
            raise BuildError(f"{path}: not an {expected} ELF for the {target!r} build ({elf['e_machine']})")
        if elf["e_type"] != "ET_EXEC":
            raise BuildError(f"{path}: expected a static executable (ET_EXEC), got {elf['e_type']}")
        segments = tuple(Segment(s["p_vaddr"], s.data(), s["p_memsz"], s["p_flags"])
                         for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
        symtab = elf.get_section_by_name(".symtab")
        symbols = {}
        for sym in (symtab.iter_symbols() if symtab else ()):
            if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"] and sym.name:
                symbols[sym.name] = (sym["st_value"], sym["st_size"])
        return segments, symbols, elf["e_entry"]


def zig(directory: Path, driver: str = "cc") -> Toolchain:
    """`zig cc` (or `c++`) of the ziglang package, with zig's own caches under the build cache unless the environment
    places them."""
    env = {name: os.environ.get(name) or str(directory / sub)
           for name, sub in (("ZIG_GLOBAL_CACHE_DIR", "zig-global"), ("ZIG_LOCAL_CACHE_DIR", "zig-local"))}
    return Toolchain((*zig_command(), driver), compiler_version(), env)


def zig_libc_headers(how: Recipe) -> tuple[str, ...]:
    """-idirafter flags for the recipe's libc header folders, inside the installed ziglang package (after lowp's
    own headers and the kernel's, so lowp's assert.h and string.h still win)."""
    if not how.libc_headers:
        return ()
    import ziglang
    root = Path(ziglang.__file__).resolve().parent / "lib" / "libc" / "include"
    return tuple(f"-idirafter{root / name}" for name in how.libc_headers)


# musl's header folders in zig's lib/libc/include, per lowp arch: for sources written against a libc (ggml.h
# includes stdio.h) built for a guest that links none.
MUSL_HEADERS = {"aarch64": ("aarch64-linux-musl", "generic-musl", "aarch64-linux-any", "any-linux-any"),
                "riscv64": ("riscv64-linux-musl", "generic-musl", "riscv-linux-any", "any-linux-any"),
                "arm": ("arm-linux-musl", "generic-musl", "arm-linux-any", "any-linux-any")}


def libc_header_flags(arch: str) -> tuple[str, ...]:
    """-idirafter flags for musl's headers of `arch` (searched last), or () where the build has a libc of its own
    (x86-64 with the host's, wasm32 with WASI's) or lowp knows none."""
    names = MUSL_HEADERS.get(arch)
    return zig_libc_headers(Recipe("headers", "", "", HERE, "", libc_headers=names)) if names else ()


def include_files() -> list[Path]:
    """lowp's freestanding headers: -isystem keeps them out of -MMD's list, so their bytes join the key as
    inputs (a changed header in a new lowp rebuilds)."""
    return sorted(p for p in INCLUDE.iterdir() if p.is_file())


def build(*sources, target: str = "bare", flags=(), cpu: str | None = None, depends=(), cache=None) -> Binary:
    """Compile and link C (.c), C++ (.cc/.cpp/.cxx) or assembly (.S/.s) sources for AArch64; return the cached
    Binary.

    target: a recipe's name (RECIPES): 'bare' (Unicorn, Machine), 'linux' (a static program for
    qemu-aarch64) or 'riscv64-linux' (for qemu-riscv64). flags: extra compiler flags for every source (e.g. '-O3', '-DN=64', '-Iinclude', relative to
    the first source's directory); C++ sources also get CXX_FLAGS. cpu: zig's -mcpu (default: the recipe's).
    depends: extra files whose bytes join the key (headers are
    found by the compiler's -MMD without them).
    """
    how = recipe(target)
    if not sources:
        raise ValueError("build() needs at least one source file")
    cpu, flags = zig_cpu(how.triple, cpu or how.cpu, flags)     # -march=armv8.2-a+dotprod as zig spells it
    paths = [Path(s).resolve() for s in sources]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"source {p} does not exist")
    directory = Path(cache) if cache else cache_dir()
    cxx = any(buildcache.language(p) == "c++" for p in paths)
    runtime = [how.runtime, *([CXX_RUNTIME] if cxx else [])]
    headers = ("-isystem", str(INCLUDE)) if how.freestanding_headers else ()
    try:
        out = buildcache.build(
            zig(directory), [*paths, *runtime], directory=directory, stem=f"{paths[0].stem}-{target}",
            suffix=".elf", compile_flags=("-target", how.triple, f"-mcpu={cpu}", *BASE_FLAGS, *how.compile_flags, *headers,
                                         *flags, *zig_libc_headers(how)),
            link_flags=how.link_flags,
            inputs=[*depends, *(include_files() if headers else ())],
            cxx=zig(directory, "c++") if cxx else None, language_flags={"c++": CXX_FLAGS})
    except buildcache.BuildFailed as e:
        raise BuildError(f"{how.triple}: {e}", source=e.source) from None
    return Binary(out, target, tuple(str(p) for p in paths))


def build_text(text: str, *, suffix: str = ".c", name: str = "source", **kwargs) -> Binary:
    """build() for source text: the text is written (atomically, named by its hash) under the cache directory."""
    directory = Path(kwargs.get("cache") or cache_dir()) / "src"
    return build(buildcache.source_file(text, directory, name, suffix), **kwargs)
