"""What lowp itself is, for keys that must change when lowp's code does: its release and a hash of its sources.
Its own module so that both the provenance of a row and the check runner's caches can use it."""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

CODE_SUFFIXES = (".py", ".c", ".cc", ".h", ".S", ".toml")


@functools.cache
def lowp_identity() -> str:
    """'<version>+<hash>': lowp's release and a SHA-256 (12 digits) of every source file of its packages, by path
    inside the package and bytes."""
    import importlib

    from lowp import __version__
    h = hashlib.sha256()
    for name in ("lowp", "lowp.isa_models", "lowp.emulator", "lowp.kernels", "lowp.conformance"):
        for root in importlib.import_module(name).__path__:
            base = Path(root)
            for path in sorted(base.rglob("*")):
                if path.suffix in CODE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                    h.update(f"{name}/{path.relative_to(base)}\0".encode())
                    h.update(path.read_bytes())
    return f"{__version__}+{h.hexdigest()[:12]}"
