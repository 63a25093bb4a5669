"""What an ABI adapter hands an executor: the buffers of one GEMM and the calls that compute it, with pointers as
(buffer, byte offset) references. The native executor places every buffer once behind its guard page and passes
base + offset; the emulated one passes the buffer from that offset to its end (what the pointer would see) and
copies the writable ones back after each call. Either way a ukernel sees exactly the memory a real driver gives it.

Two things a real driver hands a ukernel that are more than a buffer:
- a pointer table (`Invocation.pointers`): a buffer of addresses into the other buffers (XNNPACK's IGEMM
  indirection buffer; 8 bytes an entry, 4 on a 32-bit target: the 32-bit qemu guests and wasm32). Its addresses exist only once every buffer has its place, which natively is the arena's
  and emulated is the machine's (lowp.emulator.machine.Pointers: Unicorn and Bochs write them from their layouts,
  the qemu guest driver after its own mmaps); a buffer a table points into but no call passes is placed all the
  same (the machines' `memory`).
- a matrix with gaps (`Invocation.layouts`, `Invocation.gaps`): C written through cm_stride / cn_stride wider
  than its rows, A read through an a_stride wider than K. The gaps hold poison; after the calls a byte of a gap
  that changed is an out-of-bounds write (the rows' ends are no page boundary: only the poison can tell).

What every call's buffers start as is here too, below every executor and adapter that fills them: `poison(shape,
dtype, seed)` (C, the workspace, the gaps; the plain `gemm` signature's buffers as well as an Invocation's), and a
case's `outcome` (its result or its exception), which run_many returns per case on every executor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Ref:
    """A pointer argument: `buffer`'s base plus `offset` bytes."""
    buffer: str
    offset: int = 0


@dataclass(frozen=True)
class Strided:
    """Where an (M, N) matrix of `dtype` sits in a flat byte buffer: element (i, j) at byte
    i * row + (j // block) * block_stride + (j % block) * itemsize, XNNPACK's cm_stride, cn_stride and nr (a
    plain row-major matrix is row = N * itemsize, block = N)."""
    shape: tuple[int, int]
    dtype: str
    row: int
    block: int
    block_stride: int

    def offsets(self) -> np.ndarray:
        """The byte offset of every element, (M, N), read-only."""
        return _geometry(self).offsets

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.row if self.dense else _geometry(self).nbytes

    def _bytes(self) -> np.ndarray:
        """The byte index of every byte of every element, (M, N, itemsize), read-only."""
        return _geometry(self).bytes

    @property
    def dense(self) -> bool:
        """Row-major with no gap: the buffer is the matrix's own bytes (most calls' C)."""
        item = np.dtype(self.dtype).itemsize
        return self.row == self.shape[1] * item and \
            (self.block >= self.shape[1] or self.block_stride == self.block * item)

    def scatter(self, matrix: np.ndarray, fill: np.ndarray) -> np.ndarray:
        """The buffer's bytes: `fill` (bytes, at least nbytes) with the matrix's elements in their places."""
        if self.dense:      # every byte an element's: no index to scatter through (some 30 us a call)
            return np.ascontiguousarray(matrix, self.dtype).reshape(-1).view(np.uint8).copy()
        out = np.array(fill[:self.nbytes], np.uint8)
        values = np.ascontiguousarray(matrix, self.dtype).view(np.uint8).reshape(*self.shape, -1)
        out[self._bytes()] = values
        return out

    def gather(self, raw: np.ndarray) -> np.ndarray:
        """The matrix read out of the buffer's bytes."""
        raw = np.asarray(raw).reshape(-1).view(np.uint8)
        if self.dense:
            return raw[:self.nbytes].copy().view(self.dtype).reshape(self.shape)
        return np.ascontiguousarray(raw[self._bytes()]).view(self.dtype).reshape(self.shape)

    def gaps(self) -> tuple[tuple[int, int], ...]:
        """The [start, end) byte ranges of the buffer no element covers."""
        return () if self.dense else _geometry(self).gaps

    def where(self, offset: int) -> str:
        """Words for a byte of the buffer: the element it belongs to, or the gap after which element."""
        offsets = self.offsets().reshape(-1)
        before = np.flatnonzero(offsets <= offset)
        if not before.size:
            return "before element (0, 0)"
        i, j = divmod(int(before[np.argmax(offsets[before])]), self.shape[1])
        return f"in the gap after element ({i}, {j})"


@dataclass(frozen=True)
class _Geometry:
    offsets: np.ndarray
    bytes: np.ndarray
    nbytes: int
    gaps: tuple[tuple[int, int], ...]


@lru_cache(maxsize=256)
def _geometry(layout: Strided) -> _Geometry:
    """A layout's element offsets, byte indices, size and gaps, computed once: a check lays out hundreds of cases
    of a few shapes, and these depend on the layout alone (the arrays are read-only)."""
    M, N = layout.shape
    item = np.dtype(layout.dtype).itemsize
    j = np.arange(N)
    columns = (j // layout.block) * layout.block_stride + (j % layout.block) * item
    offsets = np.arange(M)[:, None] * layout.row + columns
    index = offsets[:, :, None] + np.arange(item)
    nbytes = int(offsets.max()) + item if offsets.size else 0
    covered = np.zeros(nbytes, bool)
    covered[index.reshape(-1)] = True
    edges = np.flatnonzero(np.diff(np.concatenate(([False], ~covered, [False])).astype(np.int8)))   # np.r_: 0.1 ms
    gaps = tuple((int(a), int(b)) for a, b in zip(edges[::2], edges[1::2]))
    for a in (offsets, index):
        a.flags.writeable = False
    return _Geometry(offsets, index, nbytes, gaps)


@dataclass
class Invocation:
    buffers: dict[str, np.ndarray]         # name -> the array placed (writable ones are filled with poison first)
    calls: list[tuple[str, list]]          # (symbol, args): args are ints or Refs
    output: str = "C"
    writable: tuple[str, ...] = ("C",)
    arg_names: tuple[str, ...] = ()        # names of the argument positions, for fault messages
    # name -> one Ref per 8-byte entry: the buffer holds their addresses (its array in `buffers` is a placeholder
    # of the right size); every executor writes them once the buffers are placed
    pointers: dict[str, tuple[Ref, ...]] = field(default_factory=dict)
    # name -> where a writable buffer's matrix sits in its bytes (absent: the buffer is the matrix itself)
    layouts: dict[str, Strided] = field(default_factory=dict)
    # name -> [start, end) byte ranges of a writable buffer that must keep their bytes (poison) through the calls
    gaps: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def result(self, written: dict[str, np.ndarray]) -> np.ndarray:
        """The output matrix from the writable buffers' bytes after the calls (gathered through its layout);
        OutOfBounds if a byte of a gap changed."""
        for name in self.gaps:
            damage = self.gap_damage(name, written[name])
            if damage is not None:
                raise damage
        raw = np.asarray(written[self.output]).reshape(-1).view(np.uint8)
        if self.output in self.layouts:
            return self.layouts[self.output].gather(raw)
        out = self.buffers[self.output]
        return raw.view(out.dtype).reshape(out.shape).copy()

    def gap_damage(self, name: str, written: np.ndarray):
        """An OutOfBounds naming the first byte of a gap of `name` the calls changed, or None."""
        from lowp.emulator.errors import OutOfBounds
        before = np.asarray(self.buffers[name]).reshape(-1).view(np.uint8)
        after = np.asarray(written).reshape(-1).view(np.uint8)
        for start, end in self.gaps[name]:
            changed = np.flatnonzero(before[start:end] != after[start:end])
            if changed.size:
                offset = start + int(changed[0])
                layout = self.layouts.get(name)
                where = f" ({layout.where(offset)}: row stride {layout.row} bytes, {layout.block}-column blocks " \
                        f"{layout.block_stride} bytes apart)" if layout else ""
                return OutOfBounds(
                    f"out-of-bounds write into a gap of buffer {name!r}: byte offset {offset}{where} was modified "
                    "(the gaps between a strided matrix's rows and blocks hold poison; found after the call)",
                    buffer=name, offset=offset, nbytes=len(before), access="write", size=1)
        return None


def call_native(inv: Invocation, resolve_symbol, arena_place, call) -> dict:
    """Run `inv` natively: `arena_place(name, array)` -> region with .base, `resolve_symbol(name)` -> address,
    `call(address, int_args)` runs one call (raising on a fault). The pointer tables are placed last, with the
    addresses of the buffers placed before them. Returns {name: region}."""
    regions = place_native(inv, arena_place)
    for symbol, args in inv.calls:
        call(resolve_symbol(symbol), native_args(args, regions))
    return regions


def place_native(inv: Invocation, arena_place) -> dict:
    """Every buffer of `inv` placed (arena_place(name, array) -> region with .base), the pointer tables last, with
    the addresses of the buffers placed before them. Returns {name: region}."""
    regions = {name: arena_place(name, array) for name, array in inv.buffers.items() if name not in inv.pointers}
    for name, refs in inv.pointers.items():
        regions[name] = arena_place(name, pointer_words(refs, regions))
    return regions


def pointer_words(refs, regions: dict) -> np.ndarray:
    """A native pointer table: the address of each Ref in the placed regions."""
    return np.array([(regions[r.buffer].base + r.offset) & 0xFFFF_FFFF_FFFF_FFFF for r in refs], np.uint64)


def native_args(args, regions: dict) -> list[int]:
    """A call's arguments as integers: a Ref is its placed buffer's address plus its offset."""
    return [regions[a.buffer].base + a.offset if isinstance(a, Ref) else int(a) for a in args]


def layout_key(inv: Invocation, align: dict) -> tuple:
    """What must be equal for cases to share one set of placed buffers and one list of calls (a native invocation
    batch): every buffer's name, type and shape, the calls with their arguments (Refs and integers), the pointer
    tables' sizes, the writable buffers and the alignment. What is not in it is each case's own bytes."""
    return (tuple((name, a.dtype.str, a.shape) for name, a in inv.buffers.items()),
            tuple((symbol, tuple(args)) for symbol, args in inv.calls),
            tuple((name, len(refs)) for name, refs in inv.pointers.items()), inv.writable,
            tuple(sorted(align.items())))


GEMM_BUFFERS = ("A", "B", "C", "work")       # the `gemm` signature's buffers


def checked_align(kernel, align, names) -> dict[str, int]:
    """A call's `align` option ({buffer name: offset from a 64-byte boundary}, lowp.emulator.placement) checked
    against the buffers the call has (`names`): ValueError naming the kernel and the key."""
    from lowp.emulator.placement import check_alignment
    try:
        align = check_alignment(align)
    except ValueError as e:
        raise ValueError(f"{kernel.name}: {e}") from None
    unknown = sorted(set(align) - set(names))
    if unknown:
        raise ValueError(f"{kernel.name}: align names no buffer of the call: {', '.join(unknown)} (its buffers: "
                         f"{', '.join(names)})")
    return align


def call_emulated(inv: Invocation, machine, *, overread: dict, seed: int, options: dict, align=None):
    """Run `inv` on an emulator's machine, one machine.call per call. The writable buffers' bytes from each pointer
    on are copied back, so the next call (the next MR rows) sees them as a real one would. A pointer table goes as
    lowp.emulator.machine.Pointers; a buffer it points into that the call does not pass at offset 0 is placed as
    the call's memory. Returns (every call's CallResult, {writable name: its bytes after the last call}). A fault's
    byte offset is counted from the pointer the faulting call was handed (a ukernel's `a` is the first of its MR
    rows). align: {buffer name: offset from a 64-byte boundary} of each buffer's start; a call handed a buffer from
    an offset on gets it placed where that pointer would be (the buffer's offset plus the pointer's)."""
    from lowp.emulator.placement import shifted
    flat = {name: np.ascontiguousarray(a).reshape(-1).view(np.uint8).copy() for name, a in inv.buffers.items()}
    results = []
    for symbol, args in inv.calls:
        values, names = [], []
        for i, a in enumerate(args):
            name = inv.arg_names[i] if i < len(inv.arg_names) else f"arg{i}"
            if isinstance(a, Ref):
                values.append(_pointers(inv, a, args) if a.buffer in inv.pointers else flat[a.buffer][a.offset:].copy())
                names.append(a.buffer)
            else:
                values.append(int(a))
                names.append(name)
        memory = [(name, flat[name]) for name in _unpassed(inv, args)]
        placed = dict(align or {})
        for a in args:
            if isinstance(a, Ref) and a.buffer not in inv.pointers and a.offset:
                placed = shifted(placed, a.buffer, a.offset)
        if placed:
            options = {**options, "align": placed}
        result = machine.call(symbol, *values, names=names, overread=overread, seed=seed, memory=memory, **options)
        results.append(result)
        for i, a in enumerate(args):
            if isinstance(a, Ref) and a.buffer in inv.writable:
                flat[a.buffer][a.offset:] = _out(result, i, args)
    return results, {name: flat[name] for name in inv.writable}


def _passed_whole(args) -> set[str]:
    return {a.buffer for a in args if isinstance(a, Ref) and a.offset == 0}


def _unpassed(inv: Invocation, args) -> list[str]:
    """The buffers a pointer table of this call points into that the call does not pass whole (at offset 0)."""
    tables = [a.buffer for a in args if isinstance(a, Ref) and a.buffer in inv.pointers]
    targets = dict.fromkeys(r.buffer for t in tables for r in inv.pointers[t])
    passed = {a.buffer for a in args if isinstance(a, Ref)}
    for name in targets:
        if name in passed and name not in _passed_whole(args):
            raise ValueError(f"pointer table into {name!r}: the call passes {name!r} at an offset, so its table "
                             "entries would point into another copy of it")
    return [name for name in targets if name not in passed]


def _pointers(inv: Invocation, ref: Ref, args):
    """The Pointers of a table argument: its entries from the argument's offset on."""
    from lowp.emulator.machine import Pointers
    size = inv.buffers[ref.buffer].itemsize          # 8, or 4 on a 32-bit target (its placeholder's entries)
    if ref.offset % size:
        raise ValueError(f"pointer table {ref.buffer!r} passed at byte offset {ref.offset}: not a whole entry")
    return Pointers(tuple((r.buffer, r.offset) for r in inv.pointers[ref.buffer][ref.offset // size:]))


def _out(result, position: int, args) -> np.ndarray:
    """The array the call left in the buffer passed at argument `position` (CallResult lists arrays in order)."""
    k = sum(1 for a in args[:position] if isinstance(a, Ref))
    return result.arrays[k].view(np.uint8).reshape(-1)


# -- what the buffers start as, and a case's outcome ------------------------------------------------------------------

def poison(shape, dtype, seed: int) -> np.ndarray:
    """What C and the workspace hold when a kernel is called: pseudo-random bytes chosen by `seed` (never zeros),
    so a kernel that accumulates into C without clearing it, or reads workspace it did not write, shows it. Every
    executor and adapter uses it, so a failure replays from its seed. (A window into one fixed random pool, POISON_POOL:
    cheap per call.)"""
    dtype = np.dtype(dtype)
    nbytes = int(math.prod(shape) if isinstance(shape, (tuple, list)) else shape) * dtype.itemsize     # math: cheaper
    start = (seed * 7919) % POISON_POOL.size
    data = np.resize(np.roll(POISON_POOL, -start), nbytes) if nbytes > POISON_POOL.size - start else \
        POISON_POOL[start:start + nbytes].copy()
    return data.view(dtype).reshape(shape)


POISON_POOL = np.random.default_rng(0x9015_0A).integers(1, 256, size=1 << 20, dtype=np.uint8)


def poison_start(seeds) -> np.ndarray:
    """Where poison(..., seed) starts in POISON_POOL, for each seed (in numpy where seed * 7919 fits 63 bits): the
    native batch hands the guard library the pool and these starts, and it lays out each case's poison itself."""
    seeds = np.asarray(seeds, np.int64)
    if len(seeds) and np.abs(seeds).max() < 1 << 48:
        return (seeds * 7919) % POISON_POOL.size
    return np.array([(int(s) * 7919) % POISON_POOL.size for s in seeds], np.int64)


def poison_rows(shape, dtype, seeds) -> np.ndarray:
    """np.stack([poison(shape, dtype, s) for s in seeds]), in a few numpy operations: poison(seed) is
    the window of the poison pool that starts at seed * 7919 (mod its size) and wraps around, so each row is a
    window of the pool laid twice end to end."""
    from numpy.lib.stride_tricks import sliding_window_view

    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > POISON_POOL.size:         # more than the pool: poison repeats it; one window at a time
        return np.stack([poison(shape, dtype, s) for s in seeds]).reshape(len(seeds), *shape)
    starts = np.array([(s * 7919) % POISON_POOL.size for s in seeds], np.int64)
    rows = sliding_window_view(_doubled_pool(), max(nbytes, 1))[starts, :nbytes]
    return rows.view(dtype).reshape(len(seeds), *shape)


@lru_cache(maxsize=1)
def _doubled_pool() -> np.ndarray:
    return np.concatenate([POISON_POOL, POISON_POOL])


def outcome(call):
    """call()'s result, or the exception it raised: a case's answer in run_many (native, emulated, or the engine's
    case-by-case fallback), returned in its place, never raised."""
    try:
        return call()
    except Exception as e:
        return e
