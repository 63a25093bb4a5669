"""Proof of the SME2 multi-vector SDOT model (sme.sdot_za, C9.2.202) against an executor of the ACLE forms
svdot_za32_s8_vg1x2 and _vg1x4 (lowp.emulator.aarch64.sme2.Sme2QemuBackend): edge groups (every byte one extreme, ZA at
INT32_MIN/MAX so the accumulate wraps) and random ones, at slice values that cover every ZA vector group and wrap
past vstride, compared element for element over the whole ZA array (untouched vectors included).

Only `lowp isa verify` and the tests import this module. The forms are not in the intrinsic registry: a register
group and the whole ZA array are operand kinds it does not have.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from lowp.isa_models import sme

FORMS = {"svdot_za32_s8_vg1x2": 2, "svdot_za32_s8_vg1x4": 4}     # ACLE name -> registers per group


@dataclass
class Sme2Verdict:
    form: str
    vl: int
    backend: str
    status: str          # 'verified', 'skipped', 'FAILED'
    registers: int = 0   # register sets (one call each)
    lanes: int = 0       # ZA elements compared
    reason: str = ""
    seconds: float = 0.0
    disagreement: str = ""


def operands(form: str, vl: int, count: int, rng) -> tuple[np.ndarray, ...]:
    """Edge register sets, then `count` random ones: (za, zn, zm, slices)."""
    nreg, b = FORMS[form], vl // 8
    edges = list(itertools.product((-128, 127, 0, -1), (-128, 127, 1), (-2 ** 31, 2 ** 31 - 1, 0)))
    n = len(edges) + count
    zn = rng.integers(-128, 128, (n, nreg, b)).astype(np.int8)
    zm = rng.integers(-128, 128, (n, nreg, b)).astype(np.int8)
    za = rng.integers(-2 ** 31, 2 ** 31, (n, b, b // 4)).astype(np.int32)
    for i, (x, y, acc) in enumerate(edges):
        zn[i], zm[i], za[i] = x, y, acc
    slices = (np.arange(n) % (2 * b + 3)).astype(np.uint32)     # every vector group, and past vstride (mod)
    return za, zn, zm, slices


def verify(form: str, runner, *, count: int = 64, seed: int = 0) -> Sme2Verdict:
    reason = runner.unavailable(form)
    if reason:
        return Sme2Verdict(form, runner.vl, runner.name, "skipped", reason=reason)
    start = time.perf_counter()
    za, zn, zm, slices = operands(form, runner.vl, count, np.random.default_rng(seed))
    got = runner.run(form, za, zn, zm, slices)
    for i in range(len(za)):
        want = sme.sdot_za(za[i], zn[i], zm[i], int(slices[i]))
        if not np.array_equal(got[i], want):
            v, e = (int(x) for x in np.argwhere(got[i] != want)[0])
            return Sme2Verdict(form, runner.vl, runner.name, "FAILED", i + 1, (i + 1) * za[0].size,
                               seconds=time.perf_counter() - start,
                               disagreement=f"{form} at VL {runner.vl}, register set {i} (slice {int(slices[i])}): "
                                            f"ZA[{v}][{e}] is {int(got[i][v, e])}, the model says {int(want[v, e])}")
    return Sme2Verdict(form, runner.vl, runner.name, "verified", len(za), got.size,
                       seconds=time.perf_counter() - start)
