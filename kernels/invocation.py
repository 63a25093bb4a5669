"""What an ABI adapter hands an executor: the buffers of one GEMM and the calls that compute it, with pointers as
(buffer, byte offset) references. The native executor places every buffer once behind its guard page and passes
base + offset; the emulated one passes the buffer from that offset to its end (what the pointer would see) and
copies the writable ones back after each call. Either way a ukernel sees exactly the memory a real driver gives it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ref:
    """A pointer argument: `buffer`'s base plus `offset` bytes."""
    buffer: str
    offset: int = 0


@dataclass
class Invocation:
    buffers: dict[str, np.ndarray]         # name -> the array placed (writable ones are filled with poison first)
    calls: list[tuple[str, list]]          # (symbol, args): args are ints or Refs
    output: str = "C"
    writable: tuple[str, ...] = ("C",)
    arg_names: tuple[str, ...] = ()        # names of the argument positions, for fault messages


def call_native(inv: Invocation, resolve_symbol, arena_place, call) -> None:
    """Run `inv` natively: `arena_place(name, array)` -> region with .base, `resolve_symbol(name)` -> address,
    `call(address, int_args)` runs one call (raising on a fault)."""
    regions = {name: arena_place(name, array) for name, array in inv.buffers.items()}
    for symbol, args in inv.calls:
        values = [regions[a.buffer].base + a.offset if isinstance(a, Ref) else int(a) for a in args]
        call(resolve_symbol(symbol), values)
    return regions


def call_emulated(inv: Invocation, machine, *, overread: dict, seed: int, options: dict):
    """Run `inv` under Unicorn, one machine.call per call; returns the last CallResult. The writable buffers'
    bytes from each pointer on are copied back, so the next call (the next MR rows) sees them as a real one would.
    Returns (every call's CallResult, {writable name: its bytes after the last call}). A fault's byte offset is
    counted from the pointer the faulting call was handed (a ukernel's `a` is the first of its MR rows)."""
    flat = {name: np.ascontiguousarray(a).reshape(-1).view(np.uint8).copy() for name, a in inv.buffers.items()}
    results = []
    for symbol, args in inv.calls:
        values, names = [], []
        for i, a in enumerate(args):
            name = inv.arg_names[i] if i < len(inv.arg_names) else f"arg{i}"
            if isinstance(a, Ref):
                values.append(flat[a.buffer][a.offset:].copy())
                names.append(a.buffer)
            else:
                values.append(int(a))
                names.append(name)
        result = machine.call(symbol, *values, names=names, overread=overread, seed=seed, **options)
        results.append(result)
        for i, a in enumerate(args):
            if isinstance(a, Ref) and a.buffer in inv.writable:
                flat[a.buffer][a.offset:] = _out(result, i, args)
    return results, {name: flat[name] for name in inv.writable}


def _out(result, position: int, args) -> np.ndarray:
    """The array the call left in the buffer passed at argument `position` (CallResult lists arrays in order)."""
    k = sum(1 for a in args[:position] if isinstance(a, Ref))
    return result.arrays[k].view(np.uint8).reshape(-1)
