"""Targets: where lowp builds and runs code. One object per (architecture, executor): x86-64 native, AArch64 on
Unicorn, AArch64 on qemu-user, RISC-V 64 on qemu-user. A target says how its programs are built (compiler triple,
cpu, flags, runtime, ELF machine), which CPU features it gives a kernel, its calling convention, the backends that
prove instruction models on it (`lowp isa verify`) and how a kernel runs on it (a machine with `call()`, or
natively). kernels/executors.py and emulator/build.py ask the targets instead of branching over hard-coded facts.

Adding a target is a module in this folder that creates a Target subclass instance with `register()` (and its
runtime or guest driver beside it): every module here is imported by `all_targets()`. See docs/emulator.md, "How to
add a target".
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import platform
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

EMULATOR = Path(__file__).resolve().parent.parent      # lowp/emulator: the runtimes and drivers live there


@dataclass(frozen=True)
class Recipe:
    """How emulator.build.build(target=name) compiles and links a static program with zig."""
    name: str                     # 'bare', 'linux', 'riscv64-linux': the build's name in build() and the cache
    triple: str                   # zig's -target
    cpu: str                      # zig's -mcpu by default
    runtime: Path                 # the C runtime linked in (no libc)
    elf_machine: str              # what pyelftools says e_machine is
    freestanding_headers: bool = False    # lowp's emulator/include first (-isystem)
    link_flags: tuple[str, ...] = ()


class Target:
    """One place lowp runs kernels. Subclasses set the attributes and override what differs."""
    name: str                     # 'aarch64-qemu'
    arch: str                     # the kernels' `target` field: 'x86-64', 'aarch64', 'riscv64'
    isa: str                      # the instruction registry's arch: 'x86', 'aarch64', 'riscv64'
    backend: str                  # what a report row names: 'native', 'unicorn', 'qemu'
    preference: int = 0           # lower first among one arch's targets
    recipe: Recipe | None = None  # None: built by the host's own compiler (native)
    convention = None             # the calling convention object its machine uses
    models_only: frozenset[str] = frozenset()   # features it runs only on lowp's models (not proof of a kernel)
    defects: dict = {}            # mnemonic -> how this executor runs it wrongly (a kernel's row says so)

    def unavailable(self) -> str | None:
        """Why this target cannot run anything here (and how to fix it), or None."""
        return None

    def features(self, vector_bits: int | None = None, **options) -> frozenset[str]:
        """The CPU features (Linux names) a kernel can use here, before LOWP_DISABLE_FEATURES. options: the
        machine's (qemu: `cpu`, `qemu`), where they change the answer."""
        raise NotImplementedError

    def cannot_run(self, features=(), vector_bits: int | None = None, **options) -> str | None:
        """Why a kernel needing `features` (at `vector_bits`) cannot run here, or None."""
        reason = self.unavailable()
        if reason:
            return reason
        have = self.features(vector_bits, **options) - disabled_features()
        missing = [f for f in features if f not in have]
        return f"{self.describe(vector_bits, **options)} lacks {', '.join(missing)}" if missing else None

    def describe(self, vector_bits: int | None = None, **options) -> str:
        return self.name

    def known_defect(self, features=(), vector_bits: int | None = None, **options) -> str | None:
        """Why this target, though it runs `features`, runs one of them wrongly here (so it cannot judge a kernel
        using it), or None. Not part of cannot_run: choose() still picks this target, whose row then says why."""
        return None

    def machine(self, sources, *, flags=(), depends=(), vector_bits: int | None = None, features=(), **options):
        """A machine with call() that runs functions of these sources (emulated targets)."""
        raise NotImplementedError(f"{self.name} runs kernels natively, not on a machine")

    def intrinsic_backends(self) -> list:
        """The executors `lowp isa verify` proves this ISA's models against here (each says when it cannot)."""
        return []


_TARGETS: dict[str, Target] = {}


def register(target: Target) -> Target:
    _TARGETS[target.name] = target
    return target


@cache
def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def all_targets() -> list[Target]:
    _discover()
    return sorted(_TARGETS.values(), key=lambda t: (t.arch, t.preference))


def get(name: str) -> Target:
    _discover()
    try:
        return _TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(_TARGETS)}") from None


def of_arch(arch: str) -> list[Target]:
    """The targets that run `arch` kernels, in order of preference."""
    found = [t for t in all_targets() if t.arch == arch]
    if not found:
        raise ValueError(f"unknown target {arch!r}; known: {', '.join(arches())}")
    return found


def arches() -> list[str]:
    return list(dict.fromkeys(t.arch for t in all_targets()))


def backends(arch: str) -> list[str]:
    return [t.backend for t in of_arch(arch)]


def find(arch: str, backend: str) -> Target:
    for t in of_arch(arch):
        if t.backend == backend:
            return t
    known = backends(arch)
    where = "natively" if known == ["native"] else "on " + " or ".join(known)
    raise ValueError(f"unknown backend {backend!r}: {arch} kernels run {where}")


def choose(arch: str, features=(), vector_bits: int | None = None, backend: str | None = None) -> Target:
    """The target an `arch` kernel runs on: `backend`'s if given; else the first (by preference) that runs every
    one of its features itself (not on lowp's models only); else the first that runs them at all; else the most
    preferred, which then says why it cannot."""
    if backend is not None:
        return find(arch, backend)
    candidates = of_arch(arch)
    for t in candidates:
        if not set(features) & t.models_only and t.cannot_run(features, vector_bits) is None:
            return t
    for t in candidates:
        if t.cannot_run(features, vector_bits) is None:
            return t
    return candidates[0]


@lru_cache(maxsize=None)
def recipe(name: str) -> Recipe:
    """The build recipe `name` ('bare', 'linux', 'riscv64-linux'), from whichever target declares it."""
    recipes = {t.recipe.name: t.recipe for t in all_targets() if t.recipe is not None}
    try:
        return recipes[name]
    except KeyError:
        raise ValueError(f"target: expected one of {', '.join(recipes)}, got {name!r}") from None


def disabled_features() -> frozenset[str]:
    """The names in LOWP_DISABLE_FEATURES (comma-separated): lowp acts as if the CPU lacked them. ValueError naming
    the variable and the name for one that no target knows (a misspelling would disable nothing, silently)."""
    return _disabled(os.environ.get("LOWP_DISABLE_FEATURES", ""))


@cache
def _disabled(value: str) -> frozenset[str]:
    names = frozenset(f.strip() for f in value.split(",") if f.strip())
    if not names:
        return names
    from lowp.kernels.features import COMPILER_NAMES, TARGETS, did_you_mean, known_features
    known = frozenset().union(*(known_features(t) for t in TARGETS))
    aliases = {k: v for names_of in COMPILER_NAMES.values() for k, v in names_of.items()}
    for name in sorted(names - known):
        close = did_you_mean(name, known, aliases=aliases)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ValueError(f"LOWP_DISABLE_FEATURES: unknown feature {name!r}{hint}; it takes the feature names Linux "
                         "prints in /proc/cpuinfo, comma-separated (e.g. avx512_vnni,avx_vnni)")
    return names


# -- the host ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Host:
    """What this machine is, as every report, study and executor describes it."""
    machine: str                  # platform.machine()
    arch: str | None              # lowp's name: 'x86-64', 'aarch64', or None
    cpu_model: str                # /proc/cpuinfo's model name
    flags: frozenset[str]         # /proc/cpuinfo's flags / Features line
    x86_features: frozenset[str] = field(default_factory=frozenset)   # lowp's CPUID + XGETBV detection
    x86_error: str | None = None  # why lowp's detection could not run (no compiler), or None

    def environment(self) -> dict:
        """The host part of a report's environment block (JSON-ready)."""
        env = {"python": platform.python_version(), "machine": self.machine, "cpu": self.cpu_model}
        env["x86_features"] = sorted(self.x86_features) if self.x86_error is None else \
            f"unavailable: {self.x86_error}"
        try:
            import unicorn
            env["unicorn"] = unicorn.__version__
        except ImportError:
            env["unicorn"] = None
        return env

    def summary(self, prefixes=("avx", "ssse", "amx")) -> str:
        """'<cpu model>; <its SIMD features>' for a one-line description."""
        flags = " ".join(sorted(f for f in self.x86_features if f.startswith(prefixes)))
        return f"{self.cpu_model}; {flags}" if flags else self.cpu_model


def host_arch(machine: str | None = None) -> str | None:
    machine = (machine or platform.machine()).lower()
    return {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "aarch64", "arm64": "aarch64",
            "riscv64": "riscv64"}.get(machine)


def proc_cpuinfo_flags(path: str | Path = "/proc/cpuinfo") -> frozenset[str]:
    """The feature names of the first processor in /proc/cpuinfo (x86 'flags', AArch64 'Features'); empty if
    the file is missing or has neither line."""
    return _flags(proc_cpuinfo(path))


def _flags(info: dict[str, str]) -> frozenset[str]:
    return frozenset((info.get("flags") or info.get("Features") or "").split())


def proc_cpuinfo(path: str | Path = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty if the file is missing)."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


@cache
def host() -> Host:
    """The one description of this machine (cached per process): architecture, CPU model, flags, and on x86-64
    lowp's own CPUID + XGETBV detection (LOWP_DISABLE_FEATURES is applied by the callers that choose kernels)."""
    info = proc_cpuinfo()
    arch = host_arch()
    flags = _flags(info)
    model = info.get("model name") or platform.processor() or platform.machine()
    x86, error = frozenset(), None
    if arch == "x86-64":
        from lowp.emulator.buildcache import CacheError
        try:
            from lowp.emulator.x86.native import detected_x86_features
            x86 = detected_x86_features()
        except CacheError:
            raise                 # an unusable cache folder is the user's to fix, not a CPU without features
        except Exception as e:  # noqa: BLE001 - no C compiler: the report says why instead of failing
            error = str(e)
    return Host(platform.machine(), arch, model, flags, x86, error)
