"""Static range proofs: propagate integer intervals through a kernel's accumulation pipeline to prove that no
intermediate saturates or wraps for given operand ranges, or to name the first step that can.

A pipeline is the chain of narrowing steps a behaviour model performs: products of A and B, then stages that
each sum some number of the previous stage's values into an accumulator type (VPMADDUBSW sums 2 products into
int16 with saturation; an SMLAL lane sums `flush` products into int16, wrapping; VPADDD sums the rest of the
depth into int32). A sum of t values each in [lo, hi] can reach exactly [t*lo, t*hi] (an adversary picks every
term at its extreme), so a stage is safe while t*hi <= max and t*lo >= min of its type: the bounds are tight.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowp.isa_models.lanes import DTYPES

DEPTH = "depth"


@dataclass(frozen=True)
class Stage:
    what: str                 # which instruction(s) of the kernel this is
    terms: int | str          # values of the previous stage summed here: a number, a kernel parameter, or DEPTH
    into: str                 # accumulator type: 's16', 'u16', 's32', ...
    overflow: str             # 'saturate' or 'wrap' (what happens when the range is exceeded)


@dataclass
class StageBound:
    stage: Stage
    terms: int | None         # resolved count (None for DEPTH)
    term_range: tuple[int, int]
    capacity: int             # largest number of terms that provably fits the accumulator
    safe: bool | None         # None for DEPTH: then `capacity` is the answer


def parse_range(text: str) -> tuple[int, int]:
    """'u8', 's7', 'u4' (0..15), or 'lo:hi'."""
    text = text.strip()
    if ":" in text:
        try:
            lo, hi = (int(x) for x in text.split(":"))
        except ValueError:
            raise ValueError(f"not a range: {text!r} (use u8, s7, u4 or lo:hi with integers)") from None
    elif text[0] in "us" and text[1:].isdigit():
        bits = int(text[1:])
        lo, hi = (0, 2 ** bits - 1) if text[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    else:
        raise ValueError(f"not a range: {text!r} (use u8, s7, u4 or lo:hi)")
    if lo > hi:
        raise ValueError(f"empty range {text!r}")
    return lo, hi


def product_range(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    ends = [x * y for x in a for y in b]
    return min(ends), max(ends)


def capacity(term: tuple[int, int], into: str) -> int:
    """The largest t with t*lo >= min and t*hi <= max of `into` (at least 1 if one term fits, else 0)."""
    info = np.iinfo(DTYPES[into])
    lo, hi = term
    caps = []
    if hi > 0:
        caps.append(int(info.max) // hi)
    if lo < 0:
        caps.append(int(info.min) // lo)
    return min(caps) if caps else 2 ** 62


def propagate(a: tuple[int, int], b: tuple[int, int], stages: list[Stage], params: dict | None = None) \
        -> list[StageBound]:
    params = params or {}
    term = product_range(a, b)
    out = []
    for st in stages:
        cap = capacity(term, st.into)
        if st.terms == DEPTH:
            out.append(StageBound(st, None, term, cap, None))
            break
        t = params[st.terms] if isinstance(st.terms, str) else st.terms
        out.append(StageBound(st, t, term, cap, t <= cap))
        term = (t * term[0], t * term[1]) if t <= cap else _clamped(term, t, st.into)
    return out


def _clamped(term, t, into):
    info = np.iinfo(DTYPES[into])
    return max(int(info.min), t * term[0]), min(int(info.max), t * term[1])


def safe_depth(a, b, stages, params=None) -> tuple[int, str | None]:
    """The largest depth K for which nothing in the pipeline saturates or wraps, and the first stage that can
    (None when every fixed stage is safe and the depth limit comes from the final accumulator)."""
    per_item = 1
    for sb in propagate(a, b, stages, params):
        if sb.safe is False:
            return 0, sb.stage.what
        if sb.terms is None:
            return sb.capacity * per_item, None
        per_item *= sb.terms
    return per_item, None


# Pipelines of the built-in kernels (the behaviour models' narrowing steps, in order).
PIPELINES = {
    "maddubs": [Stage("VPMADDUBSW pair sum (k, k+1)", 2, "s16", "saturate"),
                Stage("VPMADDWD(ones) + VPADDD over the depth", DEPTH, "s32", "wrap")],
    "vpdpbusd": [Stage("VPDPBUSD four-product sum and int32 accumulation", DEPTH, "s32", "wrap")],
    "acc16": [Stage("VPMADDUBSW pair sum (k, k+1)", 2, "s16", "saturate"),
              Stage("VPADDSW int16 accumulation between spills", "pairs_per_spill", "s16", "saturate"),
              Stage("VPMOVSXWD + VPADDD over the depth", DEPTH, "s32", "wrap")],
    "smlal_pair": [Stage("SMULL + SMLAL: two products per int16 lane", 2, "s16", "wrap"),
                   Stage("SADALP + ADDV over the depth", DEPTH, "s32", "wrap")],
    "mlal_flush_s16": [Stage("SMLAL int16 lane between flushes", "flush", "s16", "wrap"),
                       Stage("SADDW into int32 over the depth", DEPTH, "s32", "wrap")],
    "mlal_flush_u16": [Stage("UMLAL uint16 lane between flushes", "flush", "u16", "wrap"),
                       Stage("UADDW into int32 over the depth", DEPTH, "s32", "wrap")],
    "dot_s32": [Stage("SDOT / SMMLA int32 accumulation", DEPTH, "s32", "wrap")],
    "q46": [Stage("VPMADDUBSW pair sum of the shifted activations", 2, "s16", "saturate"),
            Stage("VPADDW int16 accumulation between flushes (one pair per step)", "steps_per_flush", "s16", "wrap"),
            Stage("VPMADDWD(ones) + VPADDD over the depth", DEPTH, "s32", "wrap")],
    "vpmaddwd": [Stage("VPMADDWD pair of int16 products", 2, "s32", "wrap"),
                 Stage("VPADDD over the depth", DEPTH, "s32", "wrap")],
}
def kernel_pipeline(kernel) -> tuple[list[Stage], dict]:
    """The stages and parameters of the accumulation pipeline the kernel's entry declares (`pipeline`: a name of
    PIPELINES, or its own stages)."""
    declared = kernel.pipeline
    if declared is None:
        raise KeyError(f"no accumulation pipeline is declared for kernel {kernel.name!r} (its entry's `pipeline`: "
                       f"one of {', '.join(PIPELINES)}, or a list of stages)")
    if isinstance(declared, str):
        stages = PIPELINES[declared]
    else:
        stages = [Stage(d["what"], DEPTH if d["terms"] == DEPTH else d["terms"], d["into"], d["overflow"])
                  for d in declared]
    params = dict(kernel.params)
    if kernel.tile.spill:
        params.setdefault("pairs_per_spill", kernel.tile.spill // 2)
        params.setdefault("steps_per_flush", kernel.tile.spill // kernel.tile.kr)
    return stages, params


def operand_ranges(kernel, a=None, b=None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The kernel's operand ranges as the kernel reads them: A shifted by the entry's `a_shift` (s8s8 kernels add
    128 to run on the u8 path)."""
    a = a or kernel.domain.a
    b = b or kernel.domain.b
    shift = kernel.params[kernel.a_shift] if isinstance(kernel.a_shift, str) else kernel.a_shift
    return (a[0] + shift, a[1] + shift), b


def advice(kernel, stages, params) -> list[str]:
    """For a pipeline that can saturate on the full ranges: which narrower ranges make it safe (seed 002)."""
    out = []
    ia, ib = np.iinfo(kernel.a_dtype), np.iinfo(kernel.b_dtype)
    full_a, full_b = (int(ia.min), int(ia.max)), (int(ib.min), int(ib.max))
    for label, a, b in ((f"A in {kernel.a_type[0]}{kernel.a_dtype.itemsize * 8 - 1}", _narrow(full_a), full_b),
                        (f"B in {kernel.b_type[0]}{kernel.b_dtype.itemsize * 8 - 1}", full_a, _narrow(full_b))):
        depth, first = safe_depth(*operand_ranges(kernel, a, b), stages, params)
        out.append(f"{label}: " + (f"safe up to depth {depth}" if first is None else f"still saturates at {first}"))
    return out


def _narrow(r):
    lo, hi = r
    return (lo // 2, hi // 2) if lo < 0 else (lo, hi // 2)
