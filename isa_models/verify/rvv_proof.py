"""Proof of the RVV models against an executor of the real instructions (qemu-riscv64: lowp.emulator.rvv), at one
VLEN: the result registers and the vxsat bit of each register, under each of the four rounding modes.

    exhaustive   the 8-bit forms: every (vs1 or x[rs1], vs2) byte pair of vmacc / vwmacc* / vsmul (2^16 per
                 vxrm), every 16-bit vs2 with every shift 0..15 of vnclip / vnclipu 16->8 (2^20 per vxrm).
                 Cases are packed into registers grouped by the model's saturation verdict (padded with a
                 repeat of the group's own case), so a register the model says does not saturate proves
                 vxsat = 0 for each of its cases, and one it says saturates is all saturating cases.
    corner       every combination of extreme values across the operands, each tiled over a register.
    random       random registers, a quarter of the elements extremes; random x[rs1] (all 64 bits for the
                 shift of vnclip.wx, whose low lg2(2*SEW) bits only count) and shift elements (all 8..32 bits).

Only `lowp isa verify` and the tests import this module; it runs nothing itself but the backend it is given.
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from lowp.isa_models.verify.proof import Disagreement, Verdict, extremes
from lowp.isa_models.rvv import VXRM


def _modes(view):
    return range(len(VXRM)) if view.fixed_point else (0,)


def _scalar_param(view):
    return next((p for p in view.params if p.kind == "scalar"), None)


def _vec_params(view):
    return [p for p in view.params if p.kind == "vec"]


def _args(view, vecs: dict, scalar, vxrm):
    """Arguments in the intrinsic's order from vector arrays by param name, the scalar array and vxrm."""
    out = []
    for p in view.params:
        if p.kind == "vec":
            out.append(vecs[p.name])
        elif p.kind == "scalar":
            out.append(scalar)
        elif p.name == "vxrm":
            out.append(vxrm)
        else:
            out.append(p.hi)                     # vl = VLMAX
    return out


def _shift_like(view) -> bool:
    return view.mnemonic.startswith("vnclip")


def exhaustive_cases(view):
    """Per vxrm: flat per-case arrays {param: (C,)} and the per-case scalar (C,) or None, or None when the input
    space of `view` is not an 8-bit one."""
    vecs = _vec_params(view)
    sp = _scalar_param(view)
    if _shift_like(view):
        wide = vecs[0]
        if wide.dtype.itemsize != 2:
            return None
        values = np.arange(65536, dtype=np.uint16).view(wide.dtype)
        shifts = np.repeat(np.arange(16, dtype=np.uint8), 65536)        # shift outer: one rs1 per register
        cases = {wide.name: np.tile(values, 16)}
        if sp is None:
            cases[vecs[1].name] = shifts
            return cases, None
        return cases, shifts.astype(np.uint64)
    narrow = [p for p in vecs if p.name != "vd"]
    if any(p.dtype.itemsize != 1 for p in narrow):
        return None
    hi = np.repeat(np.arange(256, dtype=np.uint8), 256)                # x[rs1] / vs1 outer
    lo = np.tile(np.arange(256, dtype=np.uint8), 256)
    cases, scalar = {}, None
    if sp is None:
        first, second = narrow
        cases[first.name], cases[second.name] = hi.view(first.dtype), lo.view(second.dtype)
    else:
        (only,) = narrow
        cases[only.name] = lo.view(only.dtype)
        scalar = hi.view(sp.dtype).astype(np.int64)
    vd = next((p for p in vecs if p.name == "vd"), None)
    if vd is not None:   # the accumulator: extremes and zero cycling, so wrap-around is common
        pool = np.array(extremes(vd.dtype), dtype=vd.dtype)
        cases["vd"] = pool[np.arange(65536) % len(pool)]
    return cases, scalar


def _per_case(view, cases, scalar, vxrm):
    """The model's result and saturation flag for each case (each case a one-element register)."""
    args = _args(view, {k: v[:, None] for k, v in cases.items()}, scalar, vxrm)
    out = view.adapter(*args)
    if hasattr(out, "vxsat"):
        return out.result[:, 0], out.vxsat
    return out[:, 0], np.zeros(len(out), bool)


def pack(view, cases, scalar, vxrm):
    """Cases into registers: within each run of one x[rs1], grouped by the model's saturation flag, each group
    padded to whole registers with a repeat of its first case. Returns (vectors by name, scalar per register)."""
    lanes = view.result.lanes
    _, flags = _per_case(view, cases, scalar, vxrm)
    keys = scalar if scalar is not None else np.zeros(len(flags), np.int64)
    order = []
    for key in np.unique(keys):
        for flag in (False, True):
            idx = np.flatnonzero((keys == key) & (flags == flag))
            if len(idx):
                pad = (-len(idx)) % lanes
                order.append(np.concatenate([idx, np.repeat(idx[:1], pad)]))
    order = np.concatenate(order)
    vecs = {k: v[order].reshape(-1, lanes) for k, v in cases.items()}
    per_register = None if scalar is None else scalar[order].reshape(-1, lanes)[:, 0]
    return vecs, per_register


def corner_args(view, vxrm):
    vecs = _vec_params(view)
    sp = _scalar_param(view)
    pools = [extremes(p.dtype) for p in vecs] + ([_scalar_extremes(view, sp)] if sp else [])
    rows = list(itertools.product(*pools))
    out = {p.name: np.array([r[i] for r in rows], dtype=p.dtype)[:, None].repeat(p.lanes, axis=1)
           for i, p in enumerate(vecs)}
    scalar = np.array([r[-1] for r in rows], dtype=np.uint64 if sp.dtype == np.uint64 else np.int64) if sp else None
    return _args(view, out, scalar, vxrm)


def _scalar_extremes(view, sp):
    if _shift_like(view):   # shift amounts, with bits above lg2(2*SEW) set that the instruction ignores
        bits = 2 * view.result.dtype.itemsize * 8
        return [0, 1, bits // 2 - 1, bits // 2, bits - 1, bits, bits + 1, 2 ** 63 + 1, 2 ** 64 - 1]
    return extremes(sp.dtype)


def random_args(view, n, rng, vxrm):
    vecs = {}
    for p in _vec_params(view):
        info = np.iinfo(p.dtype)
        lanes = rng.integers(info.min, info.max, size=(n, p.lanes), endpoint=True, dtype=p.dtype)
        ext = np.array(extremes(p.dtype), dtype=p.dtype)
        pick = rng.random((n, p.lanes)) < 0.25
        lanes[pick] = rng.choice(ext, size=int(pick.sum()))
        if _shift_like(view) and p.name == "vs1":       # small shifts are the interesting ones: half of them
            small = rng.random((n, p.lanes)) < 0.5
            lanes[small] = rng.integers(0, 2 * p.dtype.itemsize * 8, size=int(small.sum()))
        vecs[p.name] = lanes
    sp = _scalar_param(view)
    scalar = None
    if sp is not None:
        if sp.dtype == np.uint64:
            scalar = rng.integers(0, 2 ** 64, size=n, dtype=np.uint64)
            small = rng.random(n) < 0.5
            scalar[small] = rng.integers(0, 2 * view.result.dtype.itemsize * 8, size=int(small.sum()))
        else:
            info = np.iinfo(sp.dtype)
            scalar = rng.integers(info.min, info.max, size=n, endpoint=True).astype(np.int64)
            pick = rng.random(n) < 0.25
            scalar[pick] = rng.choice(extremes(sp.dtype), size=int(pick.sum()))
    return _args(view, vecs, scalar, vxrm)


def _compare(view, args, backend, what):
    expected, expected_sat = view.with_vxsat(*args)
    actual, actual_sat = backend.run_with_vxsat(view, args)
    bad = np.argwhere(expected != actual)
    bad_sat = np.flatnonzero(np.asarray(expected_sat) != actual_sat)
    if not len(bad) and not len(bad_sat):
        return actual.size, actual.shape[0], None
    r, lane = (int(x) for x in bad[0]) if len(bad) else (int(bad_sat[0]), -1)
    inputs = {p.name: (a[r] if p.kind == "vec" else (a if np.ndim(a) == 0 else a[r]))
              for p, a in zip(view.params, args)}
    note = what if len(bad) else f"{what}; vxsat model={bool(expected_sat[r])} qemu={bool(actual_sat[r])}"
    return actual.size, actual.shape[0], Disagreement(view.name, r, lane, inputs, expected[r], actual[r], note)


def verify(intr, backend, vlen: int, *, random_registers: int = 512, seed: int = 0, exhaustive: bool = True):
    """The intrinsic at `vlen` through model and backend: exhaustive (8-bit forms), corner and random registers,
    per vxrm; stop at the first disagreement in a result element or a vxsat bit."""
    view = intr.at(vlen)
    reason = backend.unavailable(view)
    if reason:
        return Verdict(view, backend.name, "skipped", reason=reason)
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    lanes = registers = 0
    table = exhaustive_cases(view) if exhaustive else None
    for vxrm in _modes(view):
        batches = [("corner", corner_args(view, vxrm)), ("random", random_args(view, random_registers, rng, vxrm))]
        if table is not None:
            vecs, scalar = pack(view, *table, vxrm)
            batches.insert(0, ("exhaustive", _args(view, vecs, scalar, vxrm)))
        for what, args in batches:
            n, r, bad = _compare(view, args, backend, f"{what}, vxrm={VXRM[vxrm]}")
            lanes, registers = lanes + n, registers + r
            if bad:
                return Verdict(view, backend.name, "FAILED", registers, lanes, seconds=time.perf_counter() - start,
                               disagreement=bad)
    status = "exhaustive" if table is not None else "verified"
    reason = f"VLEN={vlen}, vxrm {'/'.join(VXRM[m] for m in _modes(view))}"
    return Verdict(view, backend.name, status, registers, lanes, reason=reason, seconds=time.perf_counter() - start)
