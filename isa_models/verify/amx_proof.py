"""Proof of the AMX-INT8 tile models (x86.tdpb*d) against the CPU (native_amx.NativeAmx): edge tiles (every byte
one extreme, C at INT32_MIN/MAX so the dword accumulate wraps) and random tiles of every shape class (full
16 x 64, one dword, odd row/column counts), compared element for element.

Only `lowp isa verify` and the tests import this module.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from lowp.isa_models import x86
from lowp.isa_models.x86 import AMX_TYPES as TYPES

SHAPES = ((16, 64, 16), (1, 4, 1), (7, 12, 5), (16, 64, 3), (3, 64, 16), (16, 8, 16))   # (M, K, N)


@dataclass
class AmxVerdict:
    mnemonic: str
    status: str          # 'verified', 'skipped', 'FAILED'
    tiles: int = 0
    elements: int = 0
    reason: str = ""
    seconds: float = 0.0
    disagreement: str = ""


def _info(t):
    return np.iinfo(t)


def edge_tiles(mnemonic, shape):
    """Every (a byte, b byte, c dword) combination of extremes, each filling its whole tile."""
    a_t, b_t = TYPES[mnemonic]
    m, k, n = shape
    ia, ib = _info(a_t), _info(b_t)
    rows = list(itertools.product((ia.min, ia.max, 0, 1), (ib.min, ib.max, 0, -1 if ib.min else 1),
                                  (-2 ** 31, 2 ** 31 - 1, 0)))
    a = np.array([r[0] for r in rows]).astype(a_t)[:, None, None].repeat(m, 1).repeat(k, 2)
    b = np.array([r[1] for r in rows]).astype(b_t)[:, None, None].repeat(k // 4, 1).repeat(4 * n, 2)
    c = np.array([r[2] for r in rows], np.int64).astype(np.int32)[:, None, None].repeat(m, 1).repeat(n, 2)
    return c, a, b


def random_tiles(mnemonic, shape, count, rng):
    a_t, b_t = TYPES[mnemonic]
    m, k, n = shape
    ia, ib = _info(a_t), _info(b_t)
    a = rng.integers(ia.min, ia.max, size=(count, m, k), endpoint=True).astype(a_t)
    b = rng.integers(ib.min, ib.max, size=(count, k // 4, 4 * n), endpoint=True).astype(b_t)
    c = rng.integers(-2 ** 31, 2 ** 31, size=(count, m, n)).astype(np.int32)
    return c, a, b


def verify(mnemonic, runner, *, count: int = 64, seed: int = 0) -> AmxVerdict:
    reason = runner.unavailable(mnemonic)
    if reason:
        return AmxVerdict(mnemonic, "skipped", reason=reason)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    model = getattr(x86, mnemonic)
    tiles = elements = 0
    for shape in SHAPES:
        for what, (c, a, b) in (("edge", edge_tiles(mnemonic, shape)), ("random", random_tiles(mnemonic, shape,
                                                                                              count, rng))):
            expected, actual = model(c, a, b), runner.run(mnemonic, c, a, b)
            tiles, elements = tiles + len(c), elements + actual.size
            bad = np.argwhere(expected != actual)
            if len(bad):
                t, i, j = bad[0]
                return AmxVerdict(mnemonic, "FAILED", tiles, elements, seconds=time.perf_counter() - start,
                                  disagreement=f"{mnemonic} {what} tiles M,K,N={shape}: tile {t} C[{i},{j}] model "
                                               f"{expected[t, i, j]} CPU {actual[t, i, j]}")
    return AmxVerdict(mnemonic, "verified", tiles, elements, reason=f"{len(SHAPES)} tile shapes, edge + random",
                      seconds=time.perf_counter() - start)
