"""What produced a journal row, so that `--resume` keeps a verdict only for what would produce it again.

Every row the runner journals carries `producer`: lowp's version and a hash of its own code (every source file of
the installed packages: an edit to a model or a contract in a checkout of lowp makes rows stale, which the release
string alone did not), the kernel's key and the options that change which cases run (seed, search examples, the
seed grid, --case globs, --shapes), how a verdict is reached (the example database, the per-check --timeout, the
--jobs that share the machine) and where (the backend chosen by environment). The kernel's key is a SHA-256 of its registered entry (sources, flags, defines, tile, packing, model,
contract, domain, params, ...; not its description) and of what was built from it: the build cache's artifact,
whose name is the cache's own key over the compiler, the command lines and the bytes of every source, `depends`
file and header the compiler read (lowp.emulator.buildcache). A kernel that cannot run here, and so is not built, is keyed
by the bytes of its sources and `depends` files instead. `--resume` compares a journal row's producer with the one
the run would stamp (stale_reason) and runs the check again when they differ, saying why.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from pathlib import Path

from lowp.conformance.run.identity import CODE_SUFFIXES, lowp_identity  # noqa: F401 - part of this module's API

# run_check's options that change the cases a check runs (the profile is its examples and grid)
CASE_OPTIONS = ("seed", "examples", "probe_examples", "grid", "only", "shapes", "draws", "draw_seconds", "database",
                "timeout", "jobs", "drawn_search", "probe_rotation")


def producers(checks, options: dict | None) -> dict[str, dict]:
    """The producer of each check's row, by check id (each kernel built or looked up once)."""
    common = {"lowp": lowp_identity(), "options": case_options(options or {}), "backend": backend_choices()}
    keys: dict[str, str] = {}
    out = {}
    for check in checks:
        if check.kernel not in keys:
            keys[check.kernel] = kernel_key(check.kernel)
        out[check.id] = {**common, "kernel": keys[check.kernel]}
    return out


def case_options(options: dict) -> dict:
    """The options that change the cases, run_check's defaults where not given (options {} and the defaults spelt
    out are the same run), as JSON has them (tuples become lists: a journal row compares equal)."""
    defaults = _run_check_defaults()
    return json.loads(json.dumps({k: options.get(k, defaults.get(k)) for k in CASE_OPTIONS}))


@functools.cache
def _run_check_defaults() -> dict:
    import inspect

    from lowp.conformance.run.checks import run_check
    return {name: p.default for name, p in inspect.signature(run_check).parameters.items()
            if p.default is not inspect.Parameter.empty}


# What else in the environment moves a kernel to another executor or path: the host features lowp may use
# (LOWP_DISABLE_FEATURES sends a kernel to Bochs) and the batched path (LOWP_BATCH=0).
EXECUTION_ENVS = ("LOWP_DISABLE_FEATURES", "LOWP_BATCH")


def backend_choices() -> dict[str, str]:
    """The backends chosen by environment (`--backend`, LOWP_X86_BACKEND, ...; LOWP_DISABLE_FEATURES, LOWP_BATCH):
    a row from Bochs is no native row."""
    from lowp.kernels.executors import BACKEND_ENVS
    names = sorted({*BACKEND_ENVS.values(), *EXECUTION_ENVS})
    return {name: os.environ[name] for name in names if os.environ.get(name)}


def kernel_key(name: str) -> str:
    """The SHA-256 of a registered kernel's entry and build (see the module's doc); an unregistered name keys as
    itself (its check then fails as any check of an unknown kernel does)."""
    from lowp.kernels import kernel
    from lowp.kernels.ggml.kernel import registered
    vec_dot = registered(name)
    if vec_dot is not None:            # a ggml vec_dot: its entry and its sources
        return vec_dot.key()
    try:
        k = kernel(name)
    except (KeyError, LookupError):
        return hashlib.sha256(f"unregistered {name}".encode()).hexdigest()
    h = hashlib.sha256()
    h.update(json.dumps(entry(k), sort_keys=True, default=_plain).encode())
    h.update(b"\0built:" + (built_artifact(k) or "").encode())
    for path in (*k.sources, *k.depends):
        h.update(b"\0file:" + _file_digest(path).encode())
    return h.hexdigest()


def entry(k) -> dict:
    """What a kernel's registration says, but its description (it changes no verdict)."""
    return {f.name: getattr(k, f.name) for f in dataclasses.fields(k) if f.name != "description"}


def _plain(value):
    """JSON for what json.dumps does not know: dataclasses, paths, callables (by name: an address changes per
    process), sets."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(map(str, value))
    if isinstance(value, functools.partial):
        return {"partial": _plain(value.func), "args": repr(value.args), "keywords": repr(sorted(value.keywords))}
    if callable(value):
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', type(value).__qualname__)}"
    return repr(value)


def built_artifact(k) -> str | None:
    """The name of the kernel's build in the build cache (its key over compiler, flags, sources and headers), or
    None for a kernel that does not build or cannot run here (the run reports that as its rows)."""
    from lowp.kernels import executor
    try:
        ex = executor(k)
        if ex.unavailable():
            return None
        if ex.backend == "native":
            ex._lib                     # noqa: B018 - builds, or finds the build in the cache
            return ex.artifact.name
        return Path(ex.machine.binary.path).name
    except Exception:       # noqa: BLE001 - a kernel that does not build is keyed by its files; its check says why
        return None


def _file_digest(path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as e:
        return f"unreadable: {type(e).__name__}"


def stale_reason(row: dict, producer: dict) -> str | None:
    """Why a journal row is not what this run would produce (None: it is): no key, another lowp, another kernel
    build, other case options or another backend."""
    old = row.get("producer")
    if not isinstance(old, dict):
        return "its row has no producer key (written by an older lowp)"
    if old.get("lowp") != producer["lowp"]:
        return f"lowp {old.get('lowp')} -> {producer['lowp']}"
    if old.get("kernel") != producer["kernel"]:
        return "the kernel changed (its sources, headers, flags, model or contract)"
    before, now = old.get("options") or {}, producer["options"]
    changed = [f"{k} {_show(before.get(k))} -> {_show(now.get(k))}" for k in CASE_OPTIONS
               if before.get(k) != now.get(k)]
    if changed:
        return ", ".join(changed)
    if old.get("backend") != producer["backend"]:
        return f"backend {_show(old.get('backend'))} -> {_show(producer['backend'])}"
    return None


def _show(value) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)
