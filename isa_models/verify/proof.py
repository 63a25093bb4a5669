"""Proof of the models against real instructions: generate registers (corners, the seeds' examples, random
lanes with the extremes weighted in), run them through a Backend and through the model, and report the first
disagreement. VPMADDUBSW is also proven over all 2^32 (a0, a1, b0, b1) pair inputs.

Only `lowp isa verify` and the tests import this module.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from lowp.isa_models.verify.backend import Backend
from lowp.isa_models.registry import Intrinsic, Param

# Named inputs from the seeds and docs/research/, as lane patterns tiled across the register.
# Keyed by mnemonic; each names the vec params it sets (others get zeros, masks all-ones).
EXAMPLES: dict[str, list[tuple[str, dict[str, list[int]]]]] = {
    "vpmaddubsw": [
        ("seed 002: {255,255}x{127,127} saturates to 32767, not 64770", {"a": [255, 255, 0, 0], "b": [127, 127, 0, 0]}),
        ("{255,255}x{-128,-128} saturates to -32768", {"a": [255, 255], "b": [-128, -128]}),
        ("seed 002 s8s8 via +128: {255,255}x{127,127}", {"a": [255, 255], "b": [127, 127]}),
        ("largest exact pair: 255*127 + 1*2", {"a": [255, 1], "b": [127, 2]}),
        ("operand roles: a=128 is +128, b=-128 is -128", {"a": [128, 0], "b": [-128, 0]}),
    ],
    "vpmaddwd": [("4 x 0x8000 wraps to INT32_MIN", {"a": [-32768, -32768], "b": [-32768, -32768]})],
    "vpdpwssds": [("pair sum 2^31 is exact, then saturates", {"a": [-32768, -32768], "b": [-32768, -32768]}),
                  ("pair sum 2^31 with src INT32_MIN gives 0",
                   {"src": [-2 ** 31], "a": [-32768, -32768], "b": [-32768, -32768]})],
    "vpdpbusds": [("src near INT32_MAX saturates", {"src": [2 ** 31 - 100], "a": [255] * 4, "b": [127] * 4}),
                  ("src near INT32_MIN saturates", {"src": [-2 ** 31 + 100], "a": [255] * 4, "b": [-128] * 4})],
    "vpdpbusd": [("src near INT32_MAX wraps", {"src": [2 ** 31 - 100], "a": [255] * 4, "b": [127] * 4})],
}


def extremes(dtype) -> list[int]:
    info = np.iinfo(dtype)
    return sorted({info.min, info.min + 1, -1 if info.min < 0 else 1, 0, 1, info.max // 2 + 1, info.max - 1,
                   info.max})


def _tile(pattern: Sequence[int], p: Param) -> np.ndarray:
    shape = (p.lanes, p.lanes) if p.kind == "tile" else p.lanes     # an SME ZA tile fills row by row
    return np.resize(np.array(pattern, dtype=p.dtype), shape)


def _predicate(p: Param, i: int) -> np.ndarray:
    """SVE predicates: all-true (what the kernels use; the only value of a 'ptrue'), or every other element."""
    return np.ones(p.lanes, bool) if p.kind == "ptrue" or i % 2 == 0 else np.arange(p.lanes) % 2 == 0


def corner_batch(intr: Intrinsic) -> list[list]:
    """Registers whose lanes are all one extreme value, every combination across the vec operands, plus
    alternating min/max lanes; masks alternate between all-ones and a checkerboard."""
    vecs = [p for p in intr.params if p.kind in ("vec", "tile")]
    rows = []
    for values in itertools.product(*[extremes(p.dtype) for p in vecs]):
        rows.append(dict(zip((p.name for p in vecs), ([v] for v in values))))
    for p in vecs:
        info = np.iinfo(p.dtype)
        rows.append({q.name: [info.min, info.max] if q is p else [np.iinfo(q.dtype).max] for q in vecs})
    return [_row(intr, patterns, i) for i, patterns in enumerate(rows)]


def example_batch(intr: Intrinsic) -> list[tuple[str, list]]:
    return [(what, _row(intr, patterns, 0)) for what, patterns in EXAMPLES.get(intr.mnemonic, [])]


def _row(intr: Intrinsic, patterns: dict, i: int) -> list:
    row = []
    for p in intr.params:
        if p.kind in ("vec", "tile"):
            row.append(_tile(patterns.get(p.name, [0]), p))
        elif p.kind in ("pred", "ptrue"):
            row.append(_predicate(p, i))
        elif p.kind == "mask":
            row.append((2 ** p.bits - 1) if i % 2 == 0 else int("01" * (p.bits // 2), 2))
        else:
            row.append(p.lo + i % (p.hi - p.lo + 1))
    return row


def random_batch(intr: Intrinsic, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """n random registers per operand: a quarter of the lanes are extremes, and one register in eight is a
    single extreme value throughout, so saturating and wrapping lanes are common."""
    out = []
    for p in intr.params:
        if p.kind in ("vec", "tile"):
            info = np.iinfo(p.dtype)
            shape = (n, p.lanes, p.lanes) if p.kind == "tile" else (n, p.lanes)
            lanes = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=p.dtype)
            ext = np.array(extremes(p.dtype), dtype=p.dtype)
            pick = rng.random(shape) < 0.25
            lanes[pick] = rng.choice(ext, size=int(pick.sum()))
            flat = rng.random(n) < 0.125
            lanes[flat] = rng.choice(ext, size=(int(flat.sum()),) + (1,) * (len(shape) - 1))
            out.append(lanes)
        elif p.kind in ("pred", "ptrue"):       # three in four elements active; a quarter of the registers all-true
            active = (rng.random((n, p.lanes)) < 0.75) | (rng.random((n, 1)) < 0.25) | (p.kind == "ptrue")
            out.append(active)
        elif p.kind == "mask":
            out.append(rng.integers(0, 2 ** p.bits, size=n, dtype=np.uint64) if p.bits < 64
                       else rng.integers(0, 2 ** 63, size=n, dtype=np.uint64) * np.uint64(2)
                       + rng.integers(0, 2, size=n, dtype=np.uint64))
        else:
            out.append(int(rng.integers(p.lo, p.hi, endpoint=True)))
    return out


def stack(rows: list[list], intr: Intrinsic) -> list:
    """Rows of per-register arguments into batch arguments (immediates must agree across the rows)."""
    cols = list(zip(*rows))
    out = []
    for p, col in zip(intr.params, cols):
        if p.kind in ("vec", "tile", "pred", "ptrue"):
            out.append(np.stack(col))
        elif p.kind == "mask":
            out.append(np.array(col, dtype=np.uint64))
        else:
            out.append(col[0])
    return out


@dataclass
class Disagreement:
    intrinsic: str
    register: int
    lane: int
    inputs: dict
    expected: np.ndarray
    actual: np.ndarray
    what: str = ""

    def __str__(self) -> str:
        ins = "\n".join(f"    {k} = {np.array2string(np.asarray(v), max_line_width=120)}" for k, v in self.inputs.items())
        return (f"{self.intrinsic}: model and CPU disagree at register {self.register}, lane {self.lane}"
                f"{' (' + self.what + ')' if self.what else ''}\n{ins}\n"
                f"    model  = {np.array2string(self.expected, max_line_width=120)}\n"
                f"    actual = {np.array2string(self.actual, max_line_width=120)}")


def first_disagreement(intr: Intrinsic, args: Sequence, expected: np.ndarray, actual: np.ndarray,
                       what: str = "") -> Disagreement | None:
    expected = expected.reshape(actual.shape)
    bad = np.argwhere((expected != actual).reshape(len(actual), -1))      # a ZA tile's lanes counted row by row
    if not len(bad):
        return None
    r, lane = (int(x) for x in bad[0])
    inputs = {p.name: (a[r] if p.kind in ("vec", "tile", "pred", "ptrue") else (int(np.asarray(a).reshape(-1)[r]) if p.kind == "mask" else a))
              for p, a in zip(intr.params, args)}
    return Disagreement(intr.name, r, lane, inputs, expected[r].reshape(-1), actual[r].reshape(-1), what)


@dataclass
class Verdict:
    intrinsic: Intrinsic
    backend: str
    status: str                # 'verified', 'exhaustive', 'skipped', 'FAILED'
    registers: int = 0
    lanes: int = 0
    reason: str = ""
    seconds: float = 0.0
    disagreement: Disagreement | None = None


def verify(intr: Intrinsic, backend: Backend, *, random_registers: int = 2048, seed: int = 0) -> Verdict:
    """Corners, named examples and random registers through model and backend; stop at the first disagreement."""
    reason = backend.unavailable(intr)
    if reason:
        return Verdict(intr, backend.name, "skipped", reason=reason)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    batches: list[tuple[str, list]] = [("corner", stack(corner_batch(intr), intr))]
    batches += [(what, stack([row], intr)) for what, row in example_batch(intr)]
    batches += _random_batches(intr, random_registers, rng)
    registers = lanes = 0
    for what, args in batches:
        actual = backend.run(intr, args)
        bad = first_disagreement(intr, args, intr(*args), actual, what)
        registers += actual.shape[0]
        lanes += actual.size
        if bad:
            return Verdict(intr, backend.name, "FAILED", registers, lanes, seconds=time.perf_counter() - start,
                           disagreement=bad)
    return Verdict(intr, backend.name, "verified", registers, lanes, seconds=time.perf_counter() - start)


def _random_batches(intr: Intrinsic, n: int, rng) -> list[tuple[str, list]]:
    imms = [p for p in intr.params if p.kind == "imm"]
    if not imms:
        return [("random", random_batch(intr, n, rng))]
    # One batch per immediate value (they are compile-time constants in C).
    out = []
    for values in itertools.product(*[range(p.lo, p.hi + 1) for p in imms]):
        args = random_batch(intr, max(16, n // 8), rng)
        it = iter(values)
        out.append((f"random, imm={values}", [next(it) if p.kind == "imm" else a for p, a in zip(intr.params, args)]))
    return out


# ---------------------------------------------------------------------------------------------------------
# Exhaustive proof of VPMADDUBSW's lane operation: every (a0, a1, b0, b1) in u8 x u8 x s8 x s8.

EXHAUSTIVE = ("_mm512_maddubs_epi16", "_mm256_maddubs_epi16", "_mm_maddubs_epi16")


def pick_exhaustive(backend: Backend, names: Iterable[str] = EXHAUSTIVE) -> Intrinsic | None:
    from lowp.isa_models.registry import intrinsic
    for name in names:
        if backend.unavailable(intrinsic(name)) is None:
            return intrinsic(name)
    return None


class PairInputs:
    """All 2^24 (a1, b0, b1) for one a0 at a time, as interleaved byte streams (a0 a1 a0 a1 ..., b0 b1 ...).
    The (a1, b0, b1) part is laid out once; each a0 only rewrites one byte column."""

    def __init__(self):
        t = np.arange(1 << 24, dtype=np.uint32)
        self.a = np.empty((1 << 24, 2), np.uint8)
        self.a[:, 1] = t >> 16
        b = np.empty((1 << 24, 2), np.uint8)
        b[:, 0] = t >> 8
        b[:, 1] = t
        self.b = b.view(np.int8).reshape(-1)

    def __call__(self, a0: int) -> tuple[np.ndarray, np.ndarray]:
        self.a[:, 0] = a0
        return self.a.reshape(-1), self.b


@dataclass
class ExhaustiveResult:
    intrinsic: str
    cases: int = 0          # pair inputs compared (one result lane each)
    registers: int = 0
    seconds: float = 0.0
    native_seconds: float = 0.0  # of which the CPU's own instructions (load, op, store)
    disagreement: Disagreement | None = None
    a0_values: list[int] = field(default_factory=list)


MODEL_CHUNK_ROWS = 8192     # registers of one model call: its intermediates stay in the cache


def in_chunks(intr: Callable[..., np.ndarray], args: list[np.ndarray], rows: int = MODEL_CHUNK_ROWS) -> np.ndarray:
    """An elementwise model (an Intrinsic, or a numpy model such as arm.smlal) over `rows` leading rows of its
    arguments at a time: 4-5x faster than one call over 2^24 pairs, whose intermediates go through memory (0.22 s
    against 0.05 s a VPMADDUBSW slice)."""
    return np.concatenate([intr(*(x[i:i + rows] for x in args)) for i in range(0, args[0].shape[0], rows)])


def exhaustive_vpmaddubsw(backend: Backend, intr: Intrinsic, a0_values: Iterable[int] = range(256),
                          progress: Callable[[int], None] | None = None) -> ExhaustiveResult:
    """Model against CPU over all 2^32 pair inputs (or the a0 slices given), 2^24 pairs per call."""
    result = ExhaustiveResult(intr.name)
    start = time.perf_counter()
    lanes = intr.params[0].lanes
    inputs = PairInputs()
    for a0 in a0_values:
        a, b = inputs(a0)
        args = [a.reshape(-1, lanes), b.reshape(-1, lanes)]
        t = time.perf_counter()
        actual = backend.run(intr, args)
        result.native_seconds += time.perf_counter() - t
        expected = in_chunks(intr, args)
        result.cases += expected.size
        result.registers += expected.shape[0]
        result.a0_values.append(a0)
        if not np.array_equal(expected, actual):
            result.disagreement = first_disagreement(intr, args, expected, actual, f"exhaustive, a0={a0}")
            break
        if progress:
            progress(a0)
    result.seconds = time.perf_counter() - start
    return result
