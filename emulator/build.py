"""Cross-compile C or assembly for AArch64 with the `ziglang` package from PyPI (clang + lld inside; no apt
step), into a static ELF with no relocations, cached by content.

Two targets:
  'bare'   aarch64-freestanding, no libc, lowp's runtime.c (memset/memcpy/...) linked in, every function kept
           (--no-gc-sections) so any exported symbol can be called under Unicorn by Machine.
  'linux'  a static aarch64 Linux program without libc (linux_runtime.c: _start, raw syscalls), for qemu-aarch64.

The cache key is the SHA-256 of the target, the flags, the compiler's version and every source's (and runtime's)
bytes, so editing a kernel or upgrading zig rebuilds and nothing else does. Files are written under a temporary
name in the cache directory and moved into place with os.replace, so parallel test workers either see the
whole ELF or none. Local headers a source #includes are not hashed: pass them as `depends=`.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from .errors import BuildError

HERE = Path(__file__).resolve().parent
# Cortex-A76 has FEAT_DotProd; +i8mm adds SMMLA/UMMLA/USMMLA/USDOT/SUDOT (zig rejects -march=armv8.6-a+i8mm).
DEFAULT_CPU = "cortex_a76+i8mm"
BASE_FLAGS = ("-O2", "-ffreestanding", "-fno-builtin", "-nostdlib", "-static", "-fno-pic", "-fno-stack-protector",
              "-flax-vector-conversions=none")
RUNTIME = {"bare": HERE / "runtime.c", "linux": HERE / "linux_runtime.c"}
RUNTIME_LIBC = HERE / "runtime_libc.h"      # #included by both runtimes
TRIPLE = {"bare": "aarch64-freestanding", "linux": "aarch64-linux-none"}
FORMAT = "lowp-build-1"        # bump when the command line below changes meaning


def cache_dir() -> Path:
    """$LOWP_CACHE_DIR, else ~/.cache/lowp (XDG_CACHE_HOME honoured)."""
    env = os.environ.get("LOWP_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lowp"


@lru_cache(maxsize=1)
def compiler_version() -> str:
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
        from elftools.elf.elffile import ELFFile
        with open(self.path, "rb") as f:
            elf = ELFFile(f)
            if elf["e_machine"] != "EM_AARCH64":
                raise BuildError(f"{self.path}: not an AArch64 ELF ({elf['e_machine']})")
            if elf["e_type"] != "ET_EXEC":
                raise BuildError(f"{self.path}: expected a static executable (ET_EXEC), got {elf['e_type']}")
            segments = tuple(Segment(s["p_vaddr"], s.data(), s["p_memsz"], s["p_flags"])
                             for s in elf.iter_segments() if s["p_type"] == "PT_LOAD")
            symtab = elf.get_section_by_name(".symtab")
            symbols = {}
            for sym in (symtab.iter_symbols() if symtab else ()):
                if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"] and sym.name:
                    symbols[sym.name] = (sym["st_value"], sym["st_size"])
            return segments, symbols, elf["e_entry"]

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


def build(*sources, target: str = "bare", flags=(), cpu: str = DEFAULT_CPU, depends=(), cache=None) -> Binary:
    """Compile and link C (.c) or assembly (.S/.s) sources for AArch64; return the cached Binary.

    target: 'bare' (Unicorn, Machine) or 'linux' (a static program for qemu-aarch64). flags: extra compiler
    flags (e.g. '-O3', '-DN=64'). cpu: zig's -mcpu. depends: extra files (headers) whose bytes join the key.
    """
    if target not in TRIPLE:
        raise ValueError(f"target: expected one of {', '.join(TRIPLE)}, got {target!r}")
    if not sources:
        raise ValueError("build() needs at least one source file")
    paths = [Path(s) for s in sources]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"source {p} does not exist")
    flags = tuple(flags)
    command_flags = ("-target", TRIPLE[target], f"-mcpu={cpu}") + BASE_FLAGS + flags
    h = hashlib.sha256()
    for part in (FORMAT, target, compiler_version(), *command_flags):
        h.update(part.encode() + b"\0")
    for p in [*paths, RUNTIME[target], RUNTIME_LIBC, *map(Path, depends)]:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    key = h.hexdigest()[:32]
    directory = Path(cache) if cache else cache_dir()
    out = directory / f"{paths[0].stem}-{target}-{key}.elf"
    binary = Binary(out, target, tuple(str(p) for p in paths))
    if out.is_file():
        return binary
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{out.name}.", suffix=".tmp")
    os.close(fd)
    env = dict(os.environ)
    env.setdefault("ZIG_GLOBAL_CACHE_DIR", str(directory / "zig-global"))
    env.setdefault("ZIG_LOCAL_CACHE_DIR", str(directory / "zig-local"))
    link = ["-Wl,--no-gc-sections"] if target == "bare" else []
    cmd = [sys.executable, "-m", "ziglang", "cc", *command_flags, *link, *map(str, paths), str(RUNTIME[target]),
           "-o", tmp]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise BuildError(f"compiling {', '.join(map(str, paths))} for {TRIPLE[target]} failed:\n"
                             f"{proc.stderr.strip()}\ncommand: {' '.join(cmd)}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return binary


def build_text(text: str, *, suffix: str = ".c", name: str = "source", **kwargs) -> Binary:
    """build() for source text: the text is written (atomically, named by its hash) under the cache directory."""
    directory = Path(kwargs.get("cache") or cache_dir()) / "src"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"
    if not path.is_file():
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return build(path, **kwargs)
