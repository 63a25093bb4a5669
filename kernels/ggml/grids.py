"""The lattice tables of ggml's iq formats (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s).

They are data of the format, not of any kernel: every kernel reads the same table. lowp keeps no copy. A campaign
reads them from the checkout it judges (its ggml-common.h, `from_header`); without one they come from gguf, llama.cpp's
own Python package (`from_gguf`), and tests/test_ggml_blocks.py checks that the two agree where both exist.
Each grid is an array (entries, 8 or 4) of the bytes one entry unpacks to, in memory order (little-endian), as the
kernels read them through `(const uint8_t *)(grid + index)`.

The sign tables are defined, not copied: ksigns_iq2xs[i] is the 7 sign bits i with an eighth that makes the number
of minus signs even (ggml-common.h: ksigns_iq2xs; the quantizer keeps that parity), kmask_iq2xs[j] = 1 << j.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

GRID_TABLES = {"iq2xxs_grid": ("<u8", 256), "iq2xs_grid": ("<u8", 512), "iq2s_grid": ("<u8", 1024),
               "iq3xxs_grid": ("<u4", 256), "iq3s_grid": ("<u4", 512), "iq1s_grid": ("<u8", 2048)}
KMASK = (1 << np.arange(8)).astype(np.uint8)
KSIGNS = np.array([i | ((bin(i).count("1") & 1) << 7) for i in range(128)], np.uint8)


@dataclass(frozen=True, eq=False)      # hashed by identity: with_grids caches per Grids
class Grids:
    """Each grid table as (entries, bytes per entry) of uint8 (iq1s_grid: int8) and where it was read."""
    tables: dict[str, np.ndarray]
    source: str

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tables[name]


def _unpacked(name: str, words: np.ndarray) -> np.ndarray:
    kind, _ = GRID_TABLES[name]
    as_bytes = words.astype(kind).view(np.uint8).reshape(len(words), -1)
    return as_bytes.view(np.int8) if name == "iq1s_grid" else as_bytes


# A table opens at the start of a line (the header's own `#define GGML_TABLE_BEGIN(type, name, size)` does not).
_TABLE = re.compile(r"^\s*GGML_TABLE_BEGIN\(\s*\w+\s*,\s*(\w+)\s*,\s*\w+\s*\)(.*?)GGML_TABLE_END\(\)", re.S | re.M)


def from_header(path: Path) -> Grids:
    """The grids of a ggml-common.h; a table missing or of the wrong length is named."""
    text = Path(path).read_text(errors="replace")
    found = {name: body for name, body in _TABLE.findall(text) if name in GRID_TABLES}
    tables = {}
    for name, (_, entries) in GRID_TABLES.items():
        if name not in found:
            raise ValueError(f"{path}: no table {name} (GGML_TABLE_BEGIN ... GGML_TABLE_END)")
        words = np.array([int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", found[name])], np.uint64)
        if len(words) != entries:
            raise ValueError(f"{path}: {name} has {len(words)} entries, the format has {entries}")
        tables[name] = _unpacked(name, words)
    return Grids(tables, str(path))


# gguf keeps each grid as its entries' values mapped from small indices (quants.py: grid_map, grid_hex).
_GGUF_CLASSES = {"iq2xxs_grid": "IQ2_XXS", "iq2xs_grid": "IQ2_XS", "iq2s_grid": "IQ2_S", "iq3xxs_grid": "IQ3_XXS",
                 "iq3s_grid": "IQ3_S", "iq1s_grid": "IQ1_S"}


@lru_cache(maxsize=1)
def from_gguf() -> Grids:
    """The grids as gguf (PyPI) holds them; ImportError naming the package where it is not installed."""
    try:
        from gguf import quants
    except ImportError as e:
        raise ImportError("the iq formats' grids need a ggml checkout's ggml-common.h or the gguf package "
                          "(pip install gguf)") from e
    tables = {}
    for name, cls_name in _GGUF_CLASSES.items():
        cls = getattr(quants, cls_name)
        cls.init_grid()
        values = np.asarray(cls.grid).reshape(cls.grid_shape)
        tables[name] = values.astype(np.int8) if name == "iq1s_grid" else values.astype(np.uint8)
    return Grids(tables, "gguf " + _gguf_version())


def _gguf_version() -> str:
    import importlib.metadata
    return importlib.metadata.version("gguf")
