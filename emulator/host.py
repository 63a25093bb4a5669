"""This machine as lowp describes it: architecture, CPU model, /proc/cpuinfo flags and lowp's own CPUID + XGETBV
detection (Host, host()), the feature names a kernel may list here (known_features) and those the user turned off
(LOWP_DISABLE_FEATURES: disabled_features).

Below the targets (lowp.emulator.targets), which read it to say what they run, and below the native executors
(lowp.emulator.x86.native); it reaches the CPU only through lowp.emulator.x86.cpuid, which imports neither.
"""
from __future__ import annotations

import os
import re
import platform
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from lowp.emulator.buildcache import CacheError
from lowp.emulator.features import AARCH64_HWCAPS, ARM_ARCHITECTURES, ARM_HWCAPS, ARM_HWCAPS2, COMPILER_NAMES, \
    HEXAGON_FEATURES, RISCV64_EXTENSIONS, TARGETS, WASM32_FEATURES, X86_LINUX_FLAGS, did_you_mean
from lowp.emulator.x86.cpuid import FEATURE_BITS, detected_x86_features


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
    """lowp's name of this machine's (or `machine`'s) architecture, as kernels give `target`; None for others."""
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
        try:
            x86 = detected_x86_features()
        except CacheError:
            raise                 # an unusable cache folder is the user's to fix, not a CPU without features
        except Exception as e:  # noqa: BLE001 - no C compiler: the report says why instead of failing
            error = str(e)
    return Host(platform.machine(), arch, model, flags, x86, error)


def known_features(target: str) -> frozenset[str]:
    """Every name a kernel of `target` may list: Linux's names, lowp's own, and whatever this host's
    /proc/cpuinfo prints for its own architecture (a kernel newer than lowp.emulator.features' tables may add
    flags)."""
    if target == "x86-64":
        names = set(X86_LINUX_FLAGS) | set(FEATURE_BITS)   # lowp detects avx_vnni_int8, which Linux does not print
    elif target == "aarch64":
        names = set(AARCH64_HWCAPS)
    elif target == "riscv64":
        names = set(RISCV64_EXTENSIONS)
    elif target == "arm":
        names = set(ARM_HWCAPS) | set(ARM_HWCAPS2) | set(ARM_ARCHITECTURES)
    elif target == "hexagon":
        names = set(HEXAGON_FEATURES)
    elif target == "wasm32":
        names = set(WASM32_FEATURES)
    else:
        raise ValueError(f"unknown target {target!r}; known: {', '.join(TARGETS)}")
    if host_arch() == target:
        names |= proc_cpuinfo_flags()
    return frozenset(names)


def disabled_features() -> frozenset[str]:
    """The names in LOWP_DISABLE_FEATURES (comma-separated): lowp acts as if the CPU lacked them. ValueError naming
    the variable and the name for one that no target knows (a misspelling would disable nothing, silently)."""
    return _disabled(os.environ.get("LOWP_DISABLE_FEATURES", ""))


@cache
def _disabled(value: str) -> frozenset[str]:
    if not value.strip():
        return frozenset()
    items = [f.strip() for f in value.split(",")]
    if "" in items:
        raise ValueError(f"LOWP_DISABLE_FEATURES={value!r}: an empty name (a comma too many); it takes the feature "
                         "names Linux prints in /proc/cpuinfo, comma-separated (e.g. avx512_vnni,avx_vnni)")
    for item in items:
        junk = re.search(r"[^\w.+-]", item)
        if junk:
            raise ValueError(f"LOWP_DISABLE_FEATURES={value!r}: {junk.group()!r} in {item!r}; the names are "
                             "separated by commas (e.g. avx512_vnni,avx_vnni)")
    names = frozenset(items)
    known = frozenset().union(*(known_features(t) for t in TARGETS))
    aliases = {k: v for names_of in COMPILER_NAMES.values() for k, v in names_of.items()}
    for name in sorted(names - known):
        close = did_you_mean(name, known, aliases=aliases)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ValueError(f"LOWP_DISABLE_FEATURES: unknown feature {name!r}{hint}; it takes the feature names Linux "
                         "prints in /proc/cpuinfo, comma-separated (e.g. avx512_vnni,avx_vnni)")
    return names
