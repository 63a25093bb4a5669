"""One ggml vec_dot as lowp judges it: a function of a checkout, built as one variant, run at one vector length,
with the contracts it claims; and the in-memory registry the campaign's checks find it in (a check's child process
is forked from the campaign, so it sees what the campaign registered; the journal keys a row by entry()).

A vec_dot is not a GEMM: its operands are blocks, its result one float. So it is not a lowp.kernels.Kernel entry
(A, B, C, tile, packing); it is this, and lowp.conformance.run.ggml runs its checks.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from lowp.kernels.ggml.dot import VEC_DOT_TYPE
from lowp.kernels.ggml.executor import GgmlBuild
from lowp.kernels.ggml.variants import variant

ENTRY_FIELDS = ("name", "symbol", "x_type", "variant", "vector_bits", "arch_source", "generic_source",
                "include_dirs", "quants_header", "order", "order_claimed", "pairs", "kind", "quants_source")
OPTIONAL = ("vector_bits", "order", "order_claimed", "pairs", "kind", "quants_source")
KINDS = ("vec_dot", "quantize", "gemv", "gemm")
REPACK_KINDS = ("gemv", "gemm")     # repack.cpp's: arch_source/generic_source are the two repack.cpp files


@dataclass(frozen=True)
class VecDotKernel:
    name: str                   # 'ggml_vec_dot_q4_0_q8_0@haswell': the symbol, '@', the variant's label
    symbol: str                 # 'ggml_vec_dot_q4_0_q8_0' (or its '_generic' twin)
    x_type: str                 # 'q4_0' (a quantizer: the activation type it writes, 'q8_K')
    build: GgmlBuild
    vector_bits: int | None = None
    order: str | None = None    # the float order of its code (lowp.kernels.ggml.orders), a quantizer's claimed
                                # variant (lowp.kernels.ggml.quantize.VARIANTS); None: none modelled
    order_claimed: bool = False     # its source is the code the order models: it claims the order, else the bound
    pairs: bool = False         # ggml also calls it with nrc == 2: two x rows by two y rows into s[j * bs + i]
    kind: str = "vec_dot"       # 'vec_dot', 'quantize' (quantize_row_<q8>(x, y, k)) or a repacked 'gemv' / 'gemm'
                                # (lowp.kernels.ggml.repack: x_type is the weight's format)

    @property
    def y_type(self) -> str:
        return VEC_DOT_TYPE[self.x_type] if self.kind in ("vec_dot", *REPACK_KINDS) else self.x_type

    @property
    def layout(self) -> str:
        """A gemv/gemm's function as lowp.kernels.ggml.repack.REPACKED names it (its _generic twin shares it)."""
        return self.symbol.removesuffix("_generic")

    def repack_build(self):
        """The RepackBuild of a gemv/gemm: the checkout is the folder holding src/ggml-cpu/repack.cpp."""
        from lowp.kernels.ggml.repack import repack_build
        return repack_build(Path(self.build.generic_source).parents[2], self.build.variant.name)

    @property
    def arch(self) -> str:
        return self.build.variant.arch

    @property
    def features(self) -> tuple[str, ...]:
        return self.build.variant.features

    @property
    def label(self) -> str:
        return self.build.variant.label(self.vector_bits)

    def entry(self) -> dict:
        """The kernel as a TOML table (what kernels.toml holds; paths absolute)."""
        b = self.build
        return {"name": self.name, "symbol": self.symbol, "x_type": self.x_type, "variant": b.variant.name,
                **({"vector_bits": self.vector_bits} if self.vector_bits else {}),
                "arch_source": str(b.arch_source), "generic_source": str(b.generic_source),
                "include_dirs": [str(d) for d in b.include_dirs], "quants_header": str(b.quants_header),
                **({"order": self.order, "order_claimed": self.order_claimed} if self.order else {}),
                **({"pairs": True} if self.pairs else {}),
                **({"kind": self.kind} if self.kind != "vec_dot" else {}),
                **({"quants_source": str(b.quants_source)} if b.quants_source else {})}

    def key(self) -> str:
        """SHA-256 of the entry, its sources' bytes (ggml-quants.c's too, where the build has it) and every header
        its build can include (the .h files of its include folders and of its arch folder): what a journal row, and
        a verdict kept for a later campaign (lowp.conformance.run.verdicts), was produced from."""
        h = hashlib.sha256(repr(sorted(self.entry().items())).encode())
        for p in self.build.sources:
            h.update(Path(p).read_bytes() if Path(p).is_file() else b"missing")
        folders = (*self.build.include_dirs, Path(self.build.arch_source).parent)
        h.update(_headers_digest(tuple(str(f) for f in folders)).encode())
        return h.hexdigest()


@functools.cache
def _headers_digest(folders: tuple[str, ...]) -> str:
    """SHA-256 over the names and bytes of the .h files directly in these folders (read once per process: a
    campaign keys thousands of kernels of one checkout)."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(Path(folder).glob("*.h")):
            h.update(f"{path}\0".encode() + path.read_bytes())
    return h.hexdigest()


def from_entry(entry: dict) -> VecDotKernel:
    """The kernel a kernels.toml table describes; ValueError naming the field that is missing or wrong."""
    missing = [f for f in ENTRY_FIELDS if f not in entry and f not in OPTIONAL]
    if missing:
        raise ValueError(f"ggml kernel entry {entry.get('name', '?')!r}: missing {', '.join(missing)}")
    kind = entry.get("kind", "vec_dot")
    if kind not in KINDS:
        raise ValueError(f"ggml kernel entry {entry['name']!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    known = ("q8_0", "q8_1", "q8_K") if kind == "quantize" else VEC_DOT_TYPE
    if entry["x_type"] not in known:
        raise ValueError(f"ggml kernel entry {entry['name']!r}: unknown x_type {entry['x_type']!r}")
    if kind in REPACK_KINDS:
        from lowp.kernels.ggml.repack import REPACKED
        if entry["symbol"].removesuffix("_generic") not in REPACKED:
            raise ValueError(f"ggml kernel entry {entry['name']!r}: {entry['symbol']} is no repacked layout lowp "
                             f"models")
    quants = entry.get("quants_source")
    build = GgmlBuild(Path(entry["arch_source"]), Path(entry["generic_source"]),
                      tuple(Path(d) for d in entry["include_dirs"]), Path(entry["quants_header"]),
                      variant(entry["variant"]), Path(quants) if quants else None)
    return VecDotKernel(entry["name"], entry["symbol"], entry["x_type"], build, entry.get("vector_bits"),
                        entry.get("order"), bool(entry.get("order_claimed", False)), bool(entry.get("pairs", False)),
                        kind)


_REGISTERED: dict[str, VecDotKernel] = {}
_ORIGINS: dict[str, Path] = {}      # the kernels.toml a campaign registered each from (a Ray node reads it again)


def register(kernel: VecDotKernel, origin: Path | None = None) -> VecDotKernel:
    _REGISTERED[kernel.name] = kernel
    if origin is not None:
        _ORIGINS[kernel.name] = Path(origin)
    return kernel


def origin(name: str) -> Path | None:
    return _ORIGINS.get(name)


def register_from_toml(path: Path, name: str) -> VecDotKernel | None:
    """Register the kernel `name` from the [[kernel]] table of that name in a campaign's kernels.toml (what a Ray
    node does before a check: the campaign registered it in the driver's process only); None if the file has no
    ggml entry of that name."""
    import tomllib
    try:
        tables = tomllib.loads(Path(path).read_text()).get("kernel", [])
    except (OSError, ValueError):
        return None
    entry = next((t for t in tables if t.get("name") == name and "x_type" in t and "variant" in t), None)
    return None if entry is None else register(from_entry(entry), path)


def registered(name: str) -> VecDotKernel | None:
    return _REGISTERED.get(name)


def get(name: str) -> VecDotKernel:
    try:
        return _REGISTERED[name]
    except KeyError:
        raise KeyError(f"no ggml vec_dot {name!r} is registered in this process") from None
