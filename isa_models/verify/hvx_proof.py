"""The proof that the HVX models (lowp.isa_models.hexagon) are the instructions: each intrinsic run on qemu-hexagon
(lowp.emulator.hexagon.HvxQemuBackend, handed in by the caller: the models know no emulator) and by its model on
the same registers, compared lane by lane. Registers: the lanes' extremes (0, 1, -1, MIN, MAX: where a sum
saturates or wraps, where a pack clips), then random lanes with the extremes weighted in; scalars Rt: the shift
and length edges (0, 1, 15, 16, 31, 32, 127, 128, 129, -1, INT32_MIN) and random words; predicates random."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RT_EDGES = (0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 127, 128, 129, 255, 256, -1, -128, 2 ** 31 - 1, -2 ** 31,
            0x01020304, -0x7F7F7F80)


@dataclass
class Verdict:
    intrinsic: str
    registers: int
    mismatch: str | None       # the first disagreeing input and both results, or None


def _lanes(p, rng, n, extremes: bool):
    info = np.iinfo(p.dtype)
    if p.kind == "pred":
        return rng.random((n, p.lanes)) < 0.5
    x = rng.integers(info.min, info.max, (n, p.lanes), dtype=np.int64, endpoint=True)
    if extremes:
        pick = rng.random((n, p.lanes)) < 0.3
        ends = rng.choice(np.array([info.min, info.max, 0, 1, -1 if info.min else 2], np.int64), (n, p.lanes))
        x = np.where(pick, ends, x)
    return x.astype(p.dtype)


def registers(intr, n: int, seed: int = 0) -> list[tuple]:
    """n argument tuples for `intr`: the first ones at the extremes (every vector all MIN, all MAX, ...), the rest
    random with extremes weighted in; a scalar runs through RT_EDGES, then random words."""
    rng = np.random.default_rng(seed)
    columns = []
    for p in intr.params:
        if p.kind == "scalar":
            edges = np.array(RT_EDGES, np.int64)
            col = np.concatenate([edges, rng.integers(-2 ** 31, 2 ** 31, max(0, n - len(edges)))])[:n]
            columns.append([int(v) for v in col])
        else:
            columns.append(list(_lanes(p, rng, n, extremes=True)))
    return list(zip(*columns))


def verify(intr, backend, *, random_registers: int = 256, seed: int = 0) -> Verdict:
    """Model against backend.run on `random_registers` argument tuples; the first mismatch named."""
    batch = registers(intr, random_registers, seed)
    real = backend.run(intr, batch)
    for args, got in zip(batch, real):
        want = np.asarray(intr(*args))
        if want.shape != got.shape or not np.array_equal(want, got):
            bad = np.flatnonzero(np.asarray(want).reshape(-1) != got.reshape(-1))
            i = int(bad[0]) if bad.size else 0
            shown = ", ".join(f"{p.name}={a if p.kind == 'scalar' else np.asarray(a)[:8]}..."
                              for p, a in zip(intr.params, args))
            return Verdict(intr.name, len(batch), f"{intr.name}({shown}): lane {i}: model {want.reshape(-1)[i]}, "
                                                  f"{backend.name} {got.reshape(-1)[i]}")
    return Verdict(intr.name, len(batch), None)
