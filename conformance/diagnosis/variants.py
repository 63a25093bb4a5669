"""Known-variant families: parametrised readings of the ways an integer GEMM kernel goes wrong, so that a failing
row names what the kernel did ("int16-lanes-flush(N=300)", "columns 8 and 9 swapped", "compensation off by
+256*colsum(B)") instead of "no known variant".

A family is a set of results indexed by a parameter, every one measured against the exact product of A and B read
as the kernel's types (contracts.exact). `candidates(A, B, C)` proposes the parameters worth computing: it derives
them from the shapes and the data, and screens them on a few probe elements of C (where C differs from the exact
product, and a couple where it agrees) so that only plausible ones reach `compute(A, B, param)`, the member's full
result that identify() compares C with. Where several parameters give C (a flush interval longer than every lane's
first overflow, an input too short to tell), the name gives the whole range.

identify(C, A, B, a_type=..., b_type=...) returns the names; matches(...) the same as Match objects with the
parameters each name stands for. Both stop after `budget` seconds (1 s) with what they have.

The families (FAMILIES, in the order they are tried; each class's docstring names the bug): C's initial contents
kept or never overwritten (poison), rows or columns permuted, operands swapped or read in the other layout, an
operand read with the other signedness, one value read as another, a compensation off by c * colsum(B) or
c * rowsum(A), compensation sums kept in int16, k values dropped at either end, K blocks overwriting C or
restarting A or B, 16-bit lanes wrapping with a flush every N k (signed, unsigned) or along k (k and k + 8 in one
lane), pair saturation (plain, from k = 1, in K blocks), FBGEMM acc16 with any brow, saturating int16 accumulation.
Every family measures against the exact product: a kernel whose accepted result is another one (pair-saturating
on purpose) and that also has a bug gets no name.
"""
from __future__ import annotations

import contextvars
import inspect
import time
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Iterable

import numpy as np

from lowp.isa_models.lanes import DTYPES

from lowp.conformance.contracts.int32 import _wrap32, exact, pair_saturating, saturating_sum

# Every parameter value up to this is tried; beyond it, powers of two and their neighbours (and the top value).
DENSE_LIMIT = 4096
MAX_PROBES_WRONG = 6      # probe elements where C differs from the exact product
MAX_PROBES_RIGHT = 2      # ... and where it agrees (a candidate must not break those)
MAX_NAMED_PARTS = 4       # ranges or swaps listed in one name before "... and N more"

_TYPE_NAMES = {np.dtype(v): k for k, v in DTYPES.items()}
_OTHER_SIGN = {np.dtype(np.int8): np.dtype(np.uint8), np.dtype(np.int16): np.dtype(np.uint16),
               np.dtype(np.int32): np.dtype(np.uint32)}
_OTHER_SIGN.update({v: k for k, v in list(_OTHER_SIGN.items())})


# ---------------------------------------------------------------------------------------------------------- time

class _OutOfTime(Exception):
    pass


_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar("lowp_variants_deadline", default=float("inf"))


def _tick() -> None:
    """Called inside every loop over parameters: identify() gives up at its deadline with what it has."""
    if time.monotonic() > _DEADLINE.get():
        raise _OutOfTime


# ------------------------------------------------------------------------------------------- shared arithmetic

def _wrap16(x, signed: bool = True):
    low = np.asarray(x, np.int64) % 65536
    return np.where(low >= 32768, low - 65536, low) if signed else low


def _clip16(x):
    return np.clip(x, -32768, 32767)


def _depths(top: int, *, step: int = 1, start: int | None = None, limit: int = DENSE_LIMIT) -> list[int]:
    """Parameter values start..top in `step`s: every one up to `limit`, beyond it only powers of two and their
    neighbours (one step either side), and `top` itself."""
    start = step if start is None else start
    if top < start:
        return []
    values = set(range(start, min(top, limit) + 1, step))
    power = 1
    while power <= top + step:
        if power > limit:
            values.update(v for v in range(power - step, power + step + 1)
                          if start <= v <= top and (v - start) % step == 0)
        power *= 2
    values.add(top)
    return sorted(values)


@dataclass
class _Context:
    """One identify() call's inputs with what every family needs: the exact product and the probe elements."""
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    E: np.ndarray               # exact(A, B), int32
    rows: np.ndarray            # probe positions
    cols: np.ndarray
    products: np.ndarray        # (P, K) int64: A[row, k] * B[k, col] at each probe
    c: np.ndarray               # (P,) int64: C at each probe

    @property
    def K(self) -> int:
        return self.A.shape[1]

    def prefix(self) -> np.ndarray:
        """(P, K + 1): running sums of the probes' products, prefix[:, k] = sum over k' < k."""
        out = np.zeros((len(self.c), self.K + 1), np.int64)
        np.cumsum(self.products, axis=1, out=out[:, 1:])
        return out

    def agrees(self, totals) -> bool:
        """The probes' int64 totals, wrapped to int32, equal C there."""
        return bool(np.array_equal(_wrap32(np.asarray(totals, np.int64)).astype(np.int64), self.c))


_LAST: list = [None]      # one cached context: (A, B, C, context), compared by identity


def _context(A, B, C) -> _Context:
    last = _LAST[0]
    if last is not None and last[0] is A and last[1] is B and last[2] is C:
        return last[3]
    E = exact(A, B)
    wrong = np.argwhere(C != E)
    right = np.argwhere(C == E)[:MAX_PROBES_RIGHT]
    picks = wrong[np.unique(np.linspace(0, len(wrong) - 1, min(MAX_PROBES_WRONG, len(wrong))).astype(int))] \
        if len(wrong) else wrong
    at = np.concatenate([picks, right]).astype(int).reshape(-1, 2)
    rows, cols = at[:, 0], at[:, 1]
    products = A[rows].astype(np.int64) * B[:, cols].T.astype(np.int64)
    ctx = _Context(A, B, C, E, rows, cols, products, C[rows, cols].astype(np.int64))
    _LAST[0] = (A, B, C, ctx)
    return ctx


# ------------------------------------------------------------------------------------------------------ naming

def _runs(values: list[int], step: int) -> list[tuple[int, int]]:
    """Consecutive values (`step` apart) as (first, last) runs."""
    runs: list[list[int]] = []
    for v in sorted(values):
        if runs and v - runs[-1][1] == step:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return [(a, b) for a, b in runs]


def _range_text(values: list[int], step: int, top: int | None, symbol: str) -> str:
    """"N=300", "N in [271, 329]", "N>=271" (a run reaching `top`: every larger value gives the same result)."""
    runs = _runs(values, step)
    if len(runs) > MAX_NAMED_PARTS:      # an input that tells little (a 1x1 C): the values, shortened
        above = " and above" if top is not None and runs[-1][1] == top else ""
        shown = ", ".join(map(str, sorted(values)[:6]))
        return f"{symbol} in {{{shown}, ...}}: {len(values)} values in [{min(values)}, {max(values)}]{above}"
    parts = []
    for lo, hi in runs:
        if top is not None and hi == top:
            parts.append(f"{symbol}>={lo}")
        elif lo == hi:
            parts.append(f"{symbol}={lo}")
        else:
            parts.append(f"{symbol} in [{lo}, {hi}]")
    return " or ".join(parts)


def _and_more(parts: list[str], sep: str) -> str:
    if len(parts) <= MAX_NAMED_PARTS:
        return sep.join(parts)
    return sep.join(parts[:MAX_NAMED_PARTS - 1]) + f"{sep}... ({len(parts) - MAX_NAMED_PARTS + 1} more)"


def _type_name(dtype) -> str:
    return _TYPE_NAMES.get(np.dtype(dtype), str(np.dtype(dtype)))


# ------------------------------------------------------------------------------------------------------ families

@dataclass(frozen=True)
class Match:
    """A name identify() gives, with the parameters it stands for."""
    family: "Family"
    name: str
    params: tuple
    open_above: int | None = None     # every parameter >= this gives the same result (the input cannot tell)

    def includes(self, param) -> bool:
        return param in self.params or (self.open_above is not None and isinstance(param, int)
                                         and param >= self.open_above)


class Family:
    """A set of wrong results indexed by a parameter, each the result of one realistic kernel bug."""
    name = "family"
    template = "{}"           # a member's name from its parameter

    @property
    def description(self) -> str:
        return inspect.getdoc(self).split("\n\n")[0].replace("\n", " ")

    def candidates(self, A, B, C, *, poison=None) -> Iterable[Any]:
        """Parameters worth computing for this C (derived from the shapes and data, screened on probes)."""
        raise NotImplementedError

    def compute(self, A, B, param) -> np.ndarray:
        """The member's int32 result."""
        raise NotImplementedError

    def label(self, params: list, A, B) -> list[Match]:
        """Names for the parameters whose results equal C: by default one per parameter."""
        return [Match(self, self.template.format(p), (p,)) for p in params]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class RangeFamily(Family):
    """A family with one integer parameter, named by the ranges of parameters that give C."""
    symbol = "N"
    step = 1

    def top(self, A, B) -> int | None:
        """The parameter from which every larger one gives the same result (None: no such value)."""
        return None

    def label(self, params: list, A, B) -> list[Match]:
        top = self.top(A, B)
        runs = _runs(params, self.step)
        open_above = runs[-1][0] if top is not None and runs[-1][1] == top else None
        text = _range_text(params, self.step, top, self.symbol)
        return [Match(self, self.template.format(text), tuple(params), open_above)]


class LanesFlush(RangeFamily):
    """Products accumulated in 16-bit lanes that wrap, widened into int32 only every N k: NEON SMLAL/UMLAL
    (or PMULLW + PADDW) accumulation flushed too rarely for the operands' range, e.g. seed 004's 24x8 kernel
    (flush 258) driven past the depth at which its lanes wrap, or a kernel whose declared spill is wrong.

    The signed family reads the lanes as int16 (SMLAL); the unsigned one as uint16 (UMLAL, both operands unsigned,
    as the 4-bit u16 kernel with flush 144). Parameter N: the flush interval (every N >= K: never flushed)."""
    symbol = "N"

    def __init__(self, signed: bool):
        self.signed = signed
        self.name = "int16-lanes-flush" if signed else "uint16-lanes-flush"
        self.template = self.name + "({})"

    def top(self, A, B):
        return A.shape[1]

    def candidates(self, A, B, C, *, poison=None):
        if not self.signed and (A.dtype.kind != "u" or B.dtype.kind != "u"):
            return
        ctx = _context(A, B, C)
        K, S = ctx.K, ctx.prefix()
        for N in _depths(K):
            _tick()
            cuts = np.append(np.arange(0, K, N), K)
            if ctx.agrees(_wrap16(np.diff(S[:, cuts], axis=1), self.signed).sum(axis=1)):
                yield N

    def compute(self, A, B, N):
        return lanes_wrapping(A, B, N, signed=self.signed)


def lanes_wrapping(A, B, N: int, signed: bool = True) -> np.ndarray:
    """contracts.int16_lanes_wrapping(N, signed)(A, B) with the blocks in one batched product: the same result
    (tests/test_variants.py compares them), without a Python loop over K / N blocks."""
    (M, K), cols = A.shape, B.shape[1]
    full = K // N * N
    total = np.zeros((M, cols), np.int64)
    if full:
        blocks = np.matmul(A[:, :full].astype(np.int64).reshape(M, K // N, N).transpose(1, 0, 2),
                           B[:full].astype(np.int64).reshape(K // N, N, cols))
        total += _wrap16(blocks, signed).sum(axis=0)
    if full < K:
        total += _wrap16(A[:, full:].astype(np.int64) @ B[full:].astype(np.int64), signed)
    return _wrap32(total)


class Acc16Brow(RangeFamily):
    """FBGEMM's acc16 kernels with the wrong row block: u8*s8 pair sums (VPMADDUBSW) accumulated with saturation in
    int16 (VPADDSW) and added into int32 every brow k (contracts.fbgemm_acc16; FBGEMM's reference uses brow 256).
    Parameter: brow, even, from 4 (brow 2 is plain pair-saturating; every brow >= K rounded up to even: never
    flushed, saturating over the whole depth)."""
    name = "fbgemm-acc16"
    template = "fbgemm-acc16({})"
    symbol = "brow"
    step = 2
    STEPPED_PAIRS = 4096          # up to this many pairs (K = 8192), every brow up to DENSE_LIMIT in one pass
    DEEP_DENSE_LIMIT = 256        # deeper, every brow up to this, then powers of two and their neighbours

    def top(self, A, B):
        return max(4, 2 * (-(-A.shape[1] // 2)))

    def candidates(self, A, B, C, *, poison=None):
        if A.shape[1] == 0:
            return
        ctx = _context(A, B, C)
        pairs = _pairs(ctx.products)
        if pairs.shape[1] <= self.STEPPED_PAIRS:     # one pass over the pairs for every brow at once
            brows = np.array(_depths(self.top(A, B), start=4, step=2), np.int64)   # brow 2: plain pair-saturating
            yield from (int(b) for b in brows[np.all(self._screen(pairs, brows) == ctx.c[:, None], axis=0)])
            return
        # Deeper: the pass would take seconds; fewer brows, each screened with saturating sums over its blocks.
        for brow in _depths(self.top(A, B), start=4, step=2, limit=self.DEEP_DENSE_LIMIT):
            _tick()
            half = brow // 2
            blocks = np.pad(pairs, [(0, 0), (0, -pairs.shape[1] % half)]).reshape(len(pairs), -1, half)
            if ctx.agrees(saturating_sum(blocks).sum(axis=1)):
                yield brow

    @staticmethod
    def _screen(pairs, brows) -> np.ndarray:
        """(P, len(brows)): each probe's acc16 result for every brow at once, the reference's loop over the pairs
        run once with a state per (probe, brow); the int16 sum of brow b is flushed after pairs b/2 - 1, b - 1, ..."""
        P, Q = pairs.shape
        halves = brows // 2
        at = np.concatenate([np.arange(h - 1, Q, h) for h in halves])        # (pair index, brow) flush events
        which = np.concatenate([np.full(len(range(h - 1, Q, h)), i) for i, h in enumerate(halves)])
        order = np.argsort(at, kind="stable")
        at, which = at[order], which[order]
        bounds = np.searchsorted(at, np.arange(Q + 1))
        s16 = np.zeros((P, len(brows)), np.int64)
        s32 = np.zeros((P, len(brows)), np.int64)
        for q in range(Q):
            if q % 1024 == 0:
                _tick()
            np.add(s16, pairs[:, q:q + 1], out=s16)
            np.clip(s16, -32768, 32767, out=s16)
            if bounds[q] != bounds[q + 1]:
                flushed = which[bounds[q]:bounds[q + 1]]
                s32[:, flushed] += s16[:, flushed]
                s16[:, flushed] = 0
        return _wrap32(s32 + s16).astype(np.int64)

    def compute(self, A, B, brow):
        return acc16_blocks(A, B, brow)


def _by_element(A, B, reduce, chunk: int = 1 << 20) -> np.ndarray:
    """C[i, j] = reduce(products)[j] over (columns, K) blocks of each row's products A[i, k] * B[k, j], at most
    `chunk` products at a time; wrapped to int32."""
    (M, K), N = A.shape, B.shape[1]
    out = np.zeros((M, N), np.int64)
    Bt = B.T.astype(np.int64)
    step = max(1, chunk // max(K, 1))
    for i in range(M):
        for j in range(0, N, step):
            _tick()
            out[i, j:j + step] = reduce(A[i].astype(np.int64)[None, :] * Bt[j:j + step])
    return _wrap32(out)


def _pairs(products: np.ndarray) -> np.ndarray:
    """(..., K) products -> (..., ceil(K/2)) pair sums (k, k+1), k even, K padded with a zero, saturated to int16."""
    if products.shape[-1] % 2:
        products = np.concatenate([products, np.zeros(products.shape[:-1] + (1,), np.int64)], axis=-1)
    return _clip16(products[..., 0::2] + products[..., 1::2])


def acc16_blocks(A, B, brow: int) -> np.ndarray:
    """contracts.fbgemm_acc16(A, B, brow) (even brow) as saturating sums over blocks of brow/2 pairs, the blocks
    side by side (tests/test_variants.py compares them): no Python loop over the pairs."""
    half = brow // 2

    def reduce(products):
        pairs = _pairs(products)
        blocks = -(-pairs.shape[-1] // half)
        pairs = np.pad(pairs, [(0, 0), (0, blocks * half - pairs.shape[-1])])    # zeros leave a saturated sum as is
        return saturating_sum(pairs.reshape(len(pairs), blocks, half)).sum(axis=-1)
    return _by_element(A, B, reduce)


class PairSaturating(Family):
    """u8*s8 pairs (VPMADDUBSW) saturated to int16 and summed exactly in int32, where the kernel had to be exact
    (an AVX2 path claimed as VNNI-exact); with the pairs starting at k = 1 (a packing that puts k = 0 on its own);
    or with K split into blocks of N each packed on its own, so a block starting at an odd k pairs (odd, even)
    indices (oneDNN's x64 igemm, docs/findings.md section 4). Parameters: None (plain pairs), "k=1", or N (odd:
    blocks of even N pair as the plain one does)."""
    name = "pair-saturating"

    def candidates(self, A, B, C, *, poison=None):
        K = A.shape[1]
        if K == 0:
            return
        ctx = _context(A, B, C)
        blocks = _PairBlocks(ctx.products)
        if ctx.agrees(blocks.total([0])):
            yield None
        if K >= 2 and ctx.agrees(blocks.total([0, 1])):
            yield "k=1"
        for N in _depths(K - 1, start=1, step=2):
            _tick()
            if ctx.agrees(blocks.total(range(0, K, N))):
                yield N

    def compute(self, A, B, param):
        if param is None:
            return pair_saturating(A, B)
        starts = [0, 1] if param == "k=1" else range(0, A.shape[1], param)
        return pair_saturating_blocks(A, B, starts)

    def label(self, params, A, B):
        out = [Match(self, "pair-saturating", (None,))] if None in params else []
        if "k=1" in params:
            out.append(Match(self, "pair-saturating(pairs from k=1)", ("k=1",)))
        ns = [p for p in params if isinstance(p, int)]
        if ns:
            out.append(Match(self, f"pair-saturating(K blocks of {_range_text(ns, 2, None, 'odd N')})", tuple(ns)))
        return out


def pair_saturating_blocks(A, B, starts) -> np.ndarray:
    """contracts.pair_saturating_k_blocks(A, B, starts) from running sums (tests/test_variants.py compares them):
    no Python loop over the blocks, which for blocks of 1 or 3 k is a loop over K."""
    starts = list(starts)
    return _by_element(A, B, lambda products: _PairBlocks(products).total(starts))


class _PairBlocks:
    """Probe totals of pair_saturating_k_blocks for any block starts, from running sums of the clipped pairs in
    both alignments (pairs starting at even k, pairs starting at odd k) and the clipped single products."""

    def __init__(self, products: np.ndarray):
        P, K = products.shape
        width = K // 2 + 2
        padded = np.zeros((P, 2 * width + 2), np.int64)
        padded[:, :K] = products
        self.sums = {}
        for parity in (0, 1):
            pairs = _clip16(padded[:, parity::2][:, :width] + padded[:, parity + 1::2][:, :width])
            running = np.zeros((P, width + 1), np.int64)
            np.cumsum(pairs, axis=1, out=running[:, 1:])
            self.sums[parity] = running
        self.singles = _clip16(products)
        self.K = K

    def total(self, starts) -> np.ndarray:
        starts = np.asarray(list(starts), np.int64)
        ends = np.append(starts[1:], self.K)
        length = ends - starts
        q0, npairs = starts // 2, length // 2
        paired = np.where(starts % 2 == 0,
                          self.sums[0][:, q0 + npairs] - self.sums[0][:, q0],
                          self.sums[1][:, q0 + npairs] - self.sums[1][:, q0])
        single = np.where(length % 2 == 1, self.singles[:, ends - 1], 0)
        return (paired + single).sum(axis=1)


class SaturatingInt16(Family):
    """Saturating int16 accumulation never widened: each product (PMULLW, SQADD) or each u8*s8 pair sum
    (VPMADDUBSW) added with VPADDSW into one int16 accumulator over the whole depth, a kernel that forgot the
    VPMADDWD/VPADDD widening step. Parameter: "products" or "pairs"."""
    name = "int16-saturating"
    template = "int16-saturating({})"

    def candidates(self, A, B, C, *, poison=None):
        if A.shape[1]:
            yield from ("products", "pairs")

    def compute(self, A, B, unit):
        if unit == "pairs":
            return acc16_blocks(A, B, brow=2 * max(1, -(-A.shape[1] // 2)))     # one block: never flushed
        return _by_element(A, B, lambda products: saturating_sum(_clip16(products)))


class Signedness(Family):
    """An operand read with the other signedness: a u8 kernel that sign-extends its bytes (PMOVSXBW, SXTL where
    UXTL belongs), an s8 one that zero-extends them, or a signed/unsigned dot-product instruction picked wrongly
    (SDOT for UDOT). Parameter: the operands read the other way, ("A",), ("B",) or ("A", "B")."""
    name = "signedness"

    def candidates(self, A, B, C, *, poison=None):
        flippable = [n for n, X in (("A", A), ("B", B)) if X.dtype in _OTHER_SIGN]
        for r in (1, 2):
            yield from combinations(flippable, r)

    def compute(self, A, B, which):
        A2 = A.view(_OTHER_SIGN[A.dtype]) if "A" in which else A
        B2 = B.view(_OTHER_SIGN[B.dtype]) if "B" in which else B
        return exact(A2, B2)

    def label(self, params, A, B):
        return [Match(self, ", ".join(f"{n} read as {_type_name(_OTHER_SIGN[X.dtype])}"
                                      for n, X in (("A", A), ("B", B)) if n in which), (which,))
                for which in _simplest(params)]


class Layout(Family):
    """Operands or result in the wrong layout: A and B pointers swapped (with M == N the shapes even fit), B read
    column-major (its row-major buffer read as B.reshape(N, K).T: a kernel expecting packed-transposed B handed
    plain B), A read column-major (A.reshape(K, M).T), C written column-major (ldc used as the row stride of the
    transpose). Parameter: the set of those mistakes, as a tuple of "swapped", "A", "B", "C"."""
    name = "layout"
    _TEXT = {"swapped": "operands swapped (A's buffer read as B and B's as A)", "A": "A read column-major",
             "B": "B read column-major", "C": "C written column-major"}

    def candidates(self, A, B, C, *, poison=None):
        (M, K), N = A.shape, B.shape[1]
        flags = [f for f, useful in (("swapped", M == N and A.dtype.itemsize == B.dtype.itemsize and M * K > 0),
                                     ("A", M > 1 and K > 1), ("B", K > 1 and N > 1), ("C", M > 1 and N > 1)) if useful]
        for r in range(1, len(flags) + 1):
            yield from combinations(flags, r)

    def compute(self, A, B, flags):
        (M, K), N = A.shape, B.shape[1]
        if "swapped" in flags:
            A, B = B.view(A.dtype).reshape(M, K), A.view(B.dtype).reshape(K, N)
        if "A" in flags:
            A = A.reshape(K, M).T
        if "B" in flags:
            B = B.reshape(N, K).T
        E = exact(A, B)
        return E.T.reshape(M, N) if "C" in flags else E

    def label(self, params, A, B):
        return [Match(self, ", ".join(self._TEXT[f] for f in flags), (flags,)) for flags in _simplest(params)]


def _simplest(flag_sets: list[tuple]) -> list[tuple]:
    """The matched sets of mistakes without those that add a mistake to another matched set (the extra one changed
    nothing on this input)."""
    return [p for p in flag_sets if not any(set(q) < set(p) for q in flag_sets)]


class Permuted(Family):
    """Output rows or columns in the wrong places: a store with a wrong lane order (unpack/permute after
    VPDPBUSD, ZIP/UZP mixed up, a tile's columns written in register order), or one column written twice and
    another never: C[:, j] == exact[:, p(j)] with p not the identity. Parameter: ("columns" | "rows", p)."""
    name = "permuted"

    def candidates(self, A, B, C, *, poison=None):
        ctx = _context(A, B, C)
        for axis, what in ((1, "columns"), (0, "rows")):
            p = _index_map(np.moveaxis(ctx.E, axis, 0), np.moveaxis(C, axis, 0))
            if p is not None:
                yield what, p

    def compute(self, A, B, param):
        what, p = param
        E = exact(A, B)
        return E[:, list(p)] if what == "columns" else E[list(p)]

    def label(self, params, A, B):
        return [Match(self, _describe_map(p, what), ((what, p),)) for what, p in params]


def _index_map(E, C) -> tuple[int, ...] | None:
    """p with C[j] == E[p[j]] for every j (slices along the first axis), p(j) = j where possible, a permutation
    where one exists; None when some C[j] is no slice of E or p is the identity."""
    where: dict[bytes, list[int]] = {}
    for j in range(len(E)):
        where.setdefault(E[j].tobytes(), []).append(j)
    options = [where.get(C[j].tobytes()) for j in range(len(C))]
    if any(o is None for o in options):
        return None
    if all(j in o for j, o in enumerate(options)):
        return None
    owner: dict[int, int] = {}          # a permutation by augmenting paths (Kuhn), the identity preferred

    def claim(j: int, seen: set) -> bool:
        for t in sorted(options[j], key=lambda t: t != j):
            if t not in seen:
                seen.add(t)
                if t not in owner or claim(owner[t], seen):
                    owner[t] = j
                    return True
        return False

    if all(claim(j, set()) for j in range(len(C))):
        p = [0] * len(C)
        for t, j in owner.items():
            p[j] = t
        return tuple(p)
    return tuple(j if j in o else o[0] for j, o in enumerate(options))


def _describe_map(p: tuple[int, ...], what: str) -> str:
    """"columns 8 and 9 swapped", "columns 1 -> 2 -> 3 rotated (each holds the next one's values)", or for a map
    that is no permutation "column 9 holds column 8's values"."""
    one = what[:-1]
    parts = []
    if sorted(p) == list(range(len(p))):
        seen = set()
        for start in range(len(p)):
            if start in seen or p[start] == start:
                continue
            cycle, j = [], start
            while j not in seen:
                seen.add(j)
                cycle.append(j)
                j = p[j]
            parts.append(f"{what} {cycle[0]} and {cycle[1]} swapped" if len(cycle) == 2 else
                         f"{what} {' -> '.join(map(str, cycle))} rotated (each holds the next one's values)")
    else:
        parts = [f"{one} {j} holds {one} {t}'s values" for j, t in enumerate(p) if t != j]
    return _and_more(parts, ", ")


class Compensation(Family):
    """A zero-point or sign compensation off by c * colsum(B), c * rowsum(A), or both plus a constant: s8*s8
    computed as (A + 128) u8 * s8 with the -128 * colsum(B) term's sign flipped (c = 256), missing (c = 128) or
    applied twice (c = -128); a zero point subtracted with the wrong sign or from the wrong operand. The
    coefficients are solved from the data, then checked on every element; c = 256, 128, -128 are tried on any
    input, other coefficients only where C has more independent elements than unknowns (a 1x1 C fits any c).
    Parameter: ("colsum(B)", c), ("rowsum(A)", c) or ("affine", c_colsum, c_rowsum, c_constant)."""
    name = "compensation"
    PRIORS = (256, 128, -128)

    def candidates(self, A, B, C, *, poison=None):
        D = _difference(C, _context(A, B, C).E)
        colsum, rowsum = _colsum(B)[None, :], _rowsum(A)[:, None]
        single = False
        for what, sums in (("colsum(B)", colsum), ("rowsum(A)", rowsum)):
            c = _fit(D, [sums], self.PRIORS)
            if c:
                single = True
                yield what, c[0]
        if single:
            return
        one = np.ones((1, 1), np.int64)
        for used in ((1, 1, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)):
            c = _fit(D, [t for t, u in zip((colsum, rowsum, one), used) if u])
            if c:
                it = iter(c)
                yield ("affine",) + tuple(next(it) if u else 0 for u in used)
                return

    def compute(self, A, B, param):
        E = exact(A, B).astype(np.int64)
        colsum, rowsum = _colsum(B)[None, :], _rowsum(A)[:, None]
        if param[0] == "colsum(B)":
            return _wrap32(E + param[1] * colsum)
        if param[0] == "rowsum(A)":
            return _wrap32(E + param[1] * rowsum)
        _, c1, c2, c0 = param
        return _wrap32(E + c1 * colsum + c2 * rowsum + c0)

    def label(self, params, A, B):
        out = []
        for param in params:
            if param[0] == "affine":
                _, c1, c2, c0 = param
                terms = [f"{c:+d}*{t}" for c, t in ((c1, "colsum(B)"), (c2, "rowsum(A)")) if c]
                terms += [f"{c0:+d}"] if c0 else []
                name = f"zero points mishandled: off by {' '.join(terms)}" if c1 or c2 else \
                    f"off by {c0:+d} everywhere (a constant term: K*za*zb, a bias or a rounding offset)"
                out.append(Match(self, name, (param,)))
            else:
                what, c = param
                note = {256: f"the -128*{what} compensation's sign flipped",
                        128: f"the -128*{what} compensation missing",
                        -128: f"the -128*{what} compensation applied twice"}.get(c)
                name = f"compensation off by {c:+d}*{what}" + (f" ({note})" if note else "")
                out.append(Match(self, name, (param,)))
        return out


def _colsum(B) -> np.ndarray:
    return B.astype(np.int64).sum(axis=0)


def _rowsum(A) -> np.ndarray:
    return A.astype(np.int64).sum(axis=1)


def _difference(C, E) -> np.ndarray:
    """C - E in int64, modulo 2^32 into int32's range (C's arithmetic wraps)."""
    D = (C.astype(np.int64) - E.astype(np.int64)) % 2 ** 32
    return np.where(D >= 2 ** 31, D - 2 ** 32, D)


def _fit(D, terms: list[np.ndarray], priors: tuple[int, ...] = ()) -> tuple[int, ...] | None:
    """Integer coefficients c, not all zero, with D == sum c_t * terms[t] (each broadcast to D's shape, int32
    wrapping): a single term's `priors` first; otherwise solved (least squares, rounded, checked) only where D has
    more distinct equations than unknowns and the terms are independent, so that a fit says something."""
    X = np.stack([np.broadcast_to(t, D.shape).ravel() for t in terms], axis=1).astype(np.int64)
    y = D.ravel()

    def fits(c) -> bool:
        return any(c) and np.array_equal(_wrap32(X @ np.array(c, np.int64)).astype(np.int64), y)

    for c in priors if len(terms) == 1 else ():
        if fits((c,)):
            return (c,)
    if len(np.unique(np.column_stack([X, y]), axis=0)) <= len(terms) or \
            np.linalg.matrix_rank(X.astype(np.float64)) < len(terms):
        return None
    solution = np.linalg.lstsq(X.astype(np.float64), y.astype(np.float64), rcond=None)[0]
    c = tuple(int(round(x)) for x in solution)
    return c if fits(c) else None


class Int16Sums(Family):
    """Compensation sums kept in int16: the column sums of B (s8*s8 done as (A + 128) u8 * s8 minus 128 * colsum(B),
    the sums accumulated in 16-bit lanes) or the row sums of A (the zero-point term of the other operand) wrap
    once the sum passes 32767, at K = 257 for B = -128. C = exact + c * (sum - wrap16(sum)), c solved from the
    data as in Compensation (128 and -128 on any input: 128 for the s8s8 compensation). Parameter:
    ("colsum(B)" | "rowsum(A)", c)."""
    name = "int16-sums"

    def candidates(self, A, B, C, *, poison=None):
        D = _difference(C, _context(A, B, C).E)
        for what, sums in (("colsum(B)", _colsum(B)[None, :]), ("rowsum(A)", _rowsum(A)[:, None])):
            c = _fit(D, [sums - _wrap16(sums)], (128, -128))
            if c:
                yield what, c[0]

    def compute(self, A, B, param):
        what, c = param
        sums = _colsum(B)[None, :] if what == "colsum(B)" else _rowsum(A)[:, None]
        return _wrap32(exact(A, B).astype(np.int64) + c * (sums - _wrap16(sums)))

    def label(self, params, A, B):
        out = []
        for what, c in params:
            note = f": the -128*{what} compensation from a wrapped int16 sum" if c == 128 else ""
            out.append(Match(self, f"{what} kept in int16 (off by {c:+d}*({what} - wrap16({what}))){note}",
                             ((what, c),)))
        return out


class DroppedK(Family):
    """The last r k values dropped (a remainder loop that stops short, `k < K - 1` for `k < K`, or a K tail whose
    count is lost: a 4-bit field holding 16 as 0 drops a 31-k tail) or the first r (a loop that starts at the
    second group), r = 1..256. Parameter: ("last" | "first", r)."""
    name = "dropped-k"
    MAX_R = 256

    def candidates(self, A, B, C, *, poison=None):
        K = A.shape[1]
        if not K:
            return
        ctx = _context(A, B, C)
        S = ctx.prefix()
        for r in range(1, min(self.MAX_R, K) + 1):
            if ctx.agrees(S[:, K - r]):
                yield "last", r
            if ctx.agrees(S[:, K] - S[:, r]):
                yield "first", r

    def compute(self, A, B, param):
        end, r = param
        K = A.shape[1]
        return exact(A[:, :K - r], B[:K - r]) if end == "last" else exact(A[:, r:], B[r:])

    def label(self, params, A, B):
        out = []
        for end in ("last", "first"):
            rs = [r for e, r in params if e == end]
            if len(rs) == 1:
                out.append(Match(self, f"{end} {rs[0]} k value{'s' if rs[0] > 1 else ''} dropped", ((end, rs[0]),)))
            elif rs:
                out.append(Match(self, f"{end} r k values dropped ({_range_text(rs, 1, None, 'r')})",
                                 tuple((end, r) for r in rs)))
        return out


class OverwritingBlocks(RangeFamily):
    """K split into blocks of N where each block stores into C instead of adding to it (the accumulate flag of a
    K-blocked driver never set, beta = 0 on every block): only the last block survives, C is exact over
    k >= K - ((K - 1) % N + 1). Parameter: N (N >= K is one block: exact)."""
    name = "k-blocks-overwrite"
    template = "K blocks of {} overwrite C (only the last survives)"

    @staticmethod
    def last_start(K: int, N: int) -> int:
        return K - ((K - 1) % N + 1)

    def candidates(self, A, B, C, *, poison=None):
        K = A.shape[1]
        if K < 2:
            return
        ctx = _context(A, B, C)
        S = ctx.prefix()
        verdict: dict[int, bool] = {}
        for N in _depths(K - 1):
            _tick()
            s = self.last_start(K, N)
            if s not in verdict:
                verdict[s] = ctx.agrees(S[:, K] - S[:, s])
            if verdict[s]:
                yield N

    def compute(self, A, B, N):
        s = self.last_start(A.shape[1], N)
        return exact(A[:, s:], B[s:])


class _Poison:
    """A parameter holding C's initial contents (compared by identity, printed short)."""
    def __init__(self, values, mask=None):
        self.values, self.mask = values, mask

    def __repr__(self):
        return "poison" if self.mask is None else f"poison at {int(self.mask.sum())} elements"


class PoisonKept(Family):
    """C's initial contents showing through (with `poison`, the pattern C held before the call): a kernel computing
    C += A*B on a C it never cleared (C - exact == poison, wrapped), or one that never writes some elements
    (edge tiles skipped, a store mask off by one: C == poison there). Parameter: the poison (and which elements)."""
    name = "poison"

    def candidates(self, A, B, C, *, poison=None):
        if poison is None:
            return
        poison = np.asarray(poison).astype(np.int32)
        if poison.shape != C.shape:
            return
        ctx = _context(A, B, C)
        if ctx.agrees(ctx.products.sum(axis=1) + poison[ctx.rows, ctx.cols].astype(np.int64)):
            yield _Poison(poison)
        unwritten = (C == poison) & (C != ctx.E)
        if unwritten.any():
            yield _Poison(poison, unwritten)

    def compute(self, A, B, param):
        E = exact(A, B)
        if param.mask is None:
            return _wrap32(E.astype(np.int64) + param.values)
        return np.where(param.mask, param.values, E).astype(np.int32)

    def label(self, params, A, B):
        out = []
        for p in params:
            if p.mask is None:
                out.append(Match(self, "C += A*B (accumulates into C's contents before the call)", (p,)))
            else:
                first = [int(x) for x in np.argwhere(p.mask)[0]]
                out.append(Match(self, f"{int(p.mask.sum())} of {p.mask.size} elements of C never written "
                                       f"(still poison), the first at {first}", (p,)))
        return out


class RestartingBlocks(RangeFamily):
    """K split into blocks of N where every block reads one operand from its start again (the block's k offset
    left out of B's, or A's, panel pointer): C = sum over blocks of A[:, block] @ B[:len(block)] (B restarting) or
    A[:, :len(block)] @ B[block] (A restarting). Parameter: N, from those a K-blocked driver uses (every N up to 64,
    multiples of 16, powers of two and their neighbours)."""
    symbol = "N"

    def __init__(self, operand: str):
        self.operand = operand
        self.name = f"k-blocks-restart-{operand}"
        self.template = "K blocks of {} restart " + operand + " (each block reads " + operand + " from k = 0)"

    def _blocks(self, K: int) -> list[int]:
        return sorted(set(_depths(K - 1, limit=64)) | set(range(16, min(K - 1, DENSE_LIMIT) + 1, 16)))

    def candidates(self, A, B, C, *, poison=None):
        K = A.shape[1]
        if K < 2:
            return
        ctx = _context(A, B, C)
        a = A[ctx.rows].astype(np.int64)
        b = B[:, ctx.cols].T.astype(np.int64)
        moving, fixed = (a, b) if self.operand == "B" else (b, a)     # the operand that advances, the one that restarts
        for N in self._blocks(K):
            _tick()
            folded = np.pad(moving, [(0, 0), (0, -K % N)]).reshape(len(moving), -1, N).sum(axis=1)
            if ctx.agrees((folded * fixed[:, :N]).sum(axis=1)):
                yield N

    def compute(self, A, B, N):
        K = A.shape[1]
        total = np.zeros((A.shape[0], B.shape[1]), np.int64)
        for s in range(0, K, N):
            _tick()
            n = min(N, K - s)
            a, b = (A[:, s:s + n], B[:n]) if self.operand == "B" else (A[:, :n], B[s:s + n])
            total += a.astype(np.int64) @ b.astype(np.int64)
        return _wrap32(total)


class KLanes(Family):
    """Products summed in 16-bit lanes along k before a widening add: lane l of a vector of L lanes takes
    k = l, l + L, ... within each block of N k (MUL + MLA on k and k + 8, then SADALP: L = 8, N = 16; gemmlowp's
    SMULL + SMLAL pairs), wrapping at 16 bits, the lanes and blocks then summed exactly. Signed lanes, or unsigned
    ones for unsigned operands. Parameter: (L, N), N a multiple of L (L = 1 is int16-lanes-flush)."""

    def __init__(self, signed: bool):
        self.signed = signed
        self.name = "int16-k-lanes" if signed else "uint16-k-lanes"

    GROUPS = tuple(range(2, 9)) + tuple(1 << p for p in range(4, 20))     # N / L

    def _shapes(self, K: int) -> list[tuple[int, int]]:
        """(L, N) for every lane count, N up to the first one >= K (it stands for every N >= K: one block)."""
        out = []
        for L in (2, 4, 8, 16, 32):
            ns = [g * L for g in self.GROUPS]
            out += [(L, N) for N in ns if N < K] + [(L, min(N for N in ns if N >= K))]
        return out

    def candidates(self, A, B, C, *, poison=None):
        K = A.shape[1]
        if K < 2 or (not self.signed and (A.dtype.kind != "u" or B.dtype.kind != "u")):
            return
        ctx = _context(A, B, C)
        for L, N in self._shapes(K):
            _tick()
            if ctx.agrees(self._lanes(ctx.products, L, N)):
                yield L, N

    def _lanes(self, products, L, N):
        """(..., K) products -> (...) the lane sums wrapped to 16 bits, summed."""
        padded = np.pad(products, [(0, 0)] * (products.ndim - 1) + [(0, -products.shape[-1] % N)])
        lanes = padded.reshape(products.shape[:-1] + (-1, N // L, L)).sum(axis=-2)
        return _wrap16(lanes, self.signed).sum(axis=(-2, -1))

    def compute(self, A, B, param):
        L, N = param
        return _by_element(A, B, lambda products: self._lanes(products, L, N))

    def label(self, params, A, B):
        K, out = A.shape[1], []
        for L in sorted({L for L, _ in params}):
            ns = [N for l, N in params if l == L]
            parts = [f"N={N}" for N in ns if N < K] + [f"N>={K}" for N in ns if N >= K]
            pair = f": k and k + {L} share a lane" if all(L < min(N, K) <= 2 * L for N in ns) else ""
            covered = [N for N in ns if N < K] + [g * L for g in self.GROUPS if g * L >= K and max(ns) >= K]
            out.append(Match(self, f"{self.name}(L={L}, {' or '.join(parts)}){pair}", tuple((L, N) for N in covered)))
        return out


class ValueReadAs(Family):
    """One value of an operand read as another: a = 255 read as 127 (a split or a shift that loses the high bit),
    b = -128 read as 128 (a negation or absolute value that overflows), a lookup table with one wrong entry.
    C = exact with every element of A (or B) equal to v replaced by w; v is one of the values present, w is solved
    from the data and must be a value of the operand's byte width (signed or unsigned). Where the probes give
    fewer than two independent equations (a 1x1 C: some v explains almost any error), only the w a bit-level
    mistake gives are named (0, -v, v +- 2^(bits-1), v +- 2^bits, v // 2, 2v, the type's ends). Parameter:
    (operand, v, w)."""
    name = "value-read-as"

    def candidates(self, A, B, C, *, poison=None):
        ctx = _context(A, B, C)
        if not ctx.K:
            return
        D = _difference(ctx.c, ctx.E[ctx.rows, ctx.cols])
        wrong = D != 0
        for name, X in (("A", A), ("B", B)):
            values, index = np.unique(X, return_inverse=True)
            index = index.reshape(X.shape)
            # S[p, v]: the sum of the other operand over the k where this operand holds value v, at probe p.
            if name == "A":
                idx, other = index[ctx.rows], B[:, ctx.cols].T
            else:
                idx, other = index[:, ctx.cols].T, A[ctx.rows]
            S = np.stack([np.bincount(i, weights=o.astype(np.float64), minlength=len(values))
                          for i, o in zip(idx, other)]).round().astype(np.int64)
            lo, hi = _byte_range(X.dtype)
            first = int(np.argmax(wrong))
            for v in np.nonzero(np.all(S[wrong] != 0, axis=0))[0]:
                _tick()
                if D[first] % S[first, v]:
                    continue
                delta = int(D[first] // S[first, v])
                w = int(values[v]) + delta
                determined = len({(a, d) for a, d in zip(S[:, v].tolist(), D.tolist()) if a}) >= 2
                if lo <= w <= hi and (determined or w in _bit_slips(int(values[v]), X.dtype)) and \
                        np.array_equal(_wrap32(delta * S[:, v]).astype(np.int64), D):
                    yield name, int(values[v]), w

    def compute(self, A, B, param):
        name, v, w = param
        X = (A if name == "A" else B).astype(np.int64)
        X = np.where(X == v, w, X)
        return _wrap32(X @ B.astype(np.int64)) if name == "A" else _wrap32(A.astype(np.int64) @ X)

    def label(self, params, A, B):
        return [Match(self, f"{name.lower()} = {v} read as {w}", ((name, v, w),)) for name, v, w in params]


def _bit_slips(v: int, dtype) -> set[int]:
    """The values v turns into through a bit-level mistake: zeroed, negated, its top bit or a carry lost or gained,
    halved or doubled, or pinned at one end of the signed or unsigned range."""
    bits = 8 * np.dtype(dtype).itemsize
    half, full = 1 << (bits - 1), 1 << bits
    return {0, -v, v - half, v + half, v - full, v + full, v // 2, 2 * v, -half, half - 1, full - 1, -half + 1}


def _byte_range(dtype) -> tuple[int, int]:
    """The values an element of this width holds, read signed or unsigned: [-128, 255] for a byte."""
    bits = 8 * np.dtype(dtype).itemsize
    return -(1 << (bits - 1)), (1 << bits) - 1


@dataclass(frozen=True)
class ListedVariant:
    """A family member named from the shape alone (not solved from C): what a requantizing kernel's output stage
    can be fed, to name an accumulation bug through it (conformance/search/quantized.py accumulation_readings)."""
    key: str            # the family and the part of its parameter every case of one bug shares
    name: str
    family: Family
    param: Any

    def compute(self, A, B):
        return self.family.compute(A, B, self.param)


LISTED_MAX_R = 16       # dropped k values listed without C: a remainder loop loses fewer than a vector's depth


def listed_variants(A, B) -> list[ListedVariant]:
    """The members whose parameter the shape bounds: the last or first r k values dropped, r = 1..16."""
    family = next(f for f in FAMILIES if isinstance(f, DroppedK))
    K = A.shape[1]
    return [ListedVariant(f"{family.name}:{end}", f"the {end} {r} k value{'s' if r > 1 else ''} dropped", family,
                          (end, r))
            for end in ("last", "first") for r in range(1, min(LISTED_MAX_R, K - 1) + 1)]


FAMILIES: tuple[Family, ...] = (
    PoisonKept(), Permuted(), Layout(), Signedness(), ValueReadAs(), Compensation(), Int16Sums(), DroppedK(),
    OverwritingBlocks(), RestartingBlocks("B"), RestartingBlocks("A"), LanesFlush(signed=True),
    LanesFlush(signed=False), KLanes(signed=True), KLanes(signed=False), PairSaturating(), Acc16Brow(),
    SaturatingInt16(),
)


# ------------------------------------------------------------------------------------------------------ identify

def _as_type(X, type_name: str | None, what: str) -> np.ndarray:
    """X as the kernel's type (A and B arrive in it from the checks; tests may hand over plain integers)."""
    X = np.asarray(X)
    dtype = DTYPES.get(type_name) if type_name else None
    if dtype is None or X.dtype == dtype:
        return X
    cast = X.astype(dtype)
    if not np.array_equal(cast.astype(np.int64), X.astype(np.int64)):
        raise ValueError(f"{what} holds values outside {type_name}")
    return cast


def matches(C, A, B, *, a_type: str | None = None, b_type: str | None = None, poison=None,
            families: Iterable[Family] = FAMILIES, budget: float = 1.0) -> list[Match]:
    """Every family member C equals, as Match objects (name, parameters). Empty for the exact result. Gives up
    after `budget` seconds with what it has; a family cut short says so in its names."""
    A, B = _as_type(A, a_type, "A"), _as_type(B, b_type, "B")
    C = np.ascontiguousarray(np.asarray(C).astype(np.int64))
    if C.shape != (A.shape[0], B.shape[1]) or not np.array_equal(C, _wrap32(C)):
        return []
    C = C.astype(np.int32)
    A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
    token = _DEADLINE.set(time.monotonic() + budget)
    found: list[Match] = []
    try:
        if np.array_equal(C, _context(A, B, C).E):
            return []
        for family in families:
            params, cut_short = [], False
            try:
                for param in family.candidates(A, B, C, poison=poison):
                    _tick()
                    if np.array_equal(family.compute(A, B, param), C):
                        params.append(param)
            except _OutOfTime:
                cut_short = True
            if params:
                named = family.label(params, A, B)
                if cut_short:
                    named = [Match(m.family, m.name + " (search cut short by the time limit)", m.params)
                             for m in named]
                found += named
            if cut_short:
                break
    finally:
        _DEADLINE.reset(token)
        _LAST[0] = None
    return found


def identify(C, A, B, *, a_type: str | None = None, b_type: str | None = None, poison=None,
             families: Iterable[Family] = FAMILIES, budget: float = 1.0) -> list[str]:
    """The names of every known-variant family member C equals (e.g. ["int16-lanes-flush(N>=271)"]); [] for the
    exact product and for a result no family explains. a_type/b_type: the kernel's operand types ('u8', 's8', ...);
    poison: C's contents before the call, when known. Bounded by `budget` seconds."""
    return [m.name for m in matches(C, A, B, a_type=a_type, b_type=b_type, poison=poison, families=families,
                                    budget=budget)]
