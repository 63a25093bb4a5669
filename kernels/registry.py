"""The kernel registry: one declarative entry per kernel, built-in or the user's own.

An entry says what a kernel is (source, entry symbol, target, CPU features, signature kind, operand types, tile
sizes and packing), what it claims (the contract and the input domain on which it claims it) and what it
really computes (its behaviour model, composed from lowp.isa_models). Executors run it; the conformance suite
judges it. User kernels register the same way, from Python (`register(Kernel(...))`) or a TOML file
(`load_toml(path)`).
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

# The entry's types live in lowp.kernels.entry (below the schema, which builds Kernels); re-exported here, where
# kernels have always been declared from: `from lowp.kernels.registry import Domain, Kernel, Tile, register`.
from lowp.kernels.entry import (QUANTIZED_SIGNATURES, SIGNATURES, XNNPACK_SIGNATURES, Domain,  # noqa: F401
                                Kernel, ModelResultError, Tile, model_name, workspace_symbol)
from lowp.kernels.schema import (KernelConfigError, Problem, entry_label, resolve_paths, specs_from_toml,
                                 validate_entry, validate_kernel)

KERNELS_DIR = Path(__file__).parent


_KERNELS: dict[str, Kernel] = {}
_ORIGINS: dict[str, Path] = {}     # kernel name -> the TOML file or Python file that registered it


def register(kernel: Kernel) -> Kernel:
    """Add a kernel to the registry after checking it against the kernel schema (lowp.kernels.schema):
    KernelConfigError, naming the file that called register(), if it is malformed or its name is taken."""
    origin = _caller_file()
    validate_kernel(kernel, path=origin)
    return _add(kernel, origin)


def _add(kernel: Kernel, origin) -> Kernel:
    if kernel.name in _KERNELS:
        raise KernelConfigError(Problem(origin, kernel.name, "name", f"kernel {kernel.name!r} is registered twice "
                                        f"(first by {_ORIGINS.get(kernel.name, 'an earlier call')})"))
    _KERNELS[kernel.name] = kernel
    _ORIGINS[kernel.name] = origin
    return kernel


def origin(name: str) -> Path | None:
    """The TOML file, or the Python file, that registered the kernel `name` (None if it is not registered)."""
    return _ORIGINS.get(name)


def _caller_file() -> Path | None:
    """The file of the first caller outside the registry and lowp.conformance (whose check() registers kernels
    it is handed): the file a problem with a Python-registered kernel is in."""
    here = {Path(__file__).resolve(), Path(__file__).with_name("schema.py").resolve()}
    conformance = (KERNELS_DIR.parent / "conformance").resolve()
    frame = sys._getframe(1)
    while frame is not None:
        file = Path(frame.f_code.co_filename).resolve()
        if file not in here and conformance not in file.parents:
            return file
        frame = frame.f_back
    return None


def kernel(name: str) -> Kernel:
    _builtin()
    try:
        return _KERNELS[name]
    except KeyError:
        raise KeyError(f"no kernel named {name!r}; registered: {', '.join(sorted(_KERNELS))}") from None


def kernels(target: str | None = None) -> list[Kernel]:
    _builtin()
    return [k for k in _KERNELS.values() if target in (None, k.target)]


def _builtin() -> None:
    importlib.import_module("lowp.kernels.builtin")


def load_toml(path: str | Path) -> list[Kernel]:
    """Register the kernels of a TOML file: one [[kernel]] table each, with the Kernel fields; `model` is
    'module:function', `tile` = {mr, nr, kr, spill}, `domain` = {a = [lo, hi], b = [lo, hi]}. `source` (or
    `sources`, several files), `include_dirs`, `depends` and the paths of include options in `cflags` (-I,
    -isystem, -iquote, -include, ...) are relative to the file. Every entry is checked against the kernel schema
    first: one KernelConfigError lists every problem of the file, and then none of its kernels is registered."""
    specs = specs_from_toml(path)
    taken = [Problem(path, s.name, "name", f"kernel {s.name!r} is already registered (by "
                     f"{_ORIGINS.get(s.name, 'an earlier call')})") for s in specs if s.name in _KERNELS]
    if taken:
        raise KernelConfigError(taken)
    return [_add(spec.to_kernel(), Path(path)) for spec in specs]


def register_entries(entries: list[dict], path: str | Path) -> tuple[list[Kernel], dict[str, list[Problem]]]:
    """Register TOML-shaped entries (what a [[kernel]] table holds; `path` is the file they are written to, their
    origin and the base of relative paths) one by one, each checked against the kernel schema: a campaign registers
    what it can and reports the rest. Returns (the kernels registered, {entry name: its problems})."""
    path = Path(path)
    base, kernels, problems = path.resolve().parent, [], {}
    for index, entry in enumerate(entries):
        label = entry_label(entry, index)
        result = validate_entry(resolve_paths(entry, base), path=path, kernel=label, toml=True)
        if isinstance(result, list):
            problems[label] = result
        elif result.name in _KERNELS:
            problems[label] = [Problem(path, label, "name", f"kernel {label!r} is already registered (by "
                                                            f"{_ORIGINS.get(label, 'an earlier call')})")]
        else:
            kernels.append(_add(result.to_kernel(), path))
    return kernels, problems
