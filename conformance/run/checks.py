"""One check: a kernel against its behaviour model or a contract, on a domain, through one backend. Runs the
generated cases, then a hypothesis search, and shrinks any failure to a minimal counterexample.

This module runs inside a worker process; it reports through `emit(dict)` so that the parent can journal every
case as it happens and knows which case a crashing kernel was running.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from random import Random
from typing import Callable

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import Flaky, NoSuchExample

from lowp.emulator.errors import BatchStopped, BudgetExceeded, EmulatorError
from lowp.kernels import executor, kernel as get_kernel
from lowp.kernels.entry import KeptForKernel
from lowp.kernels.executors import poison

from lowp.conformance.run import batch, shared_runs
from lowp.conformance.search import quantized
from lowp.conformance.search.cases import (Case, abi_options, cases_for, operands, options_at, problems, ranges,
                                          with_zero_row)
from lowp.conformance.contracts.int32 import contract
from lowp.conformance.run.example_database import ExampleStore, operands_from_json
from lowp.conformance.search.problem import decode, is_problem
from lowp.conformance.report.rows import check_row


@dataclass(frozen=True)
class Check:
    kernel: str
    check: str            # 'model' or a contract name
    domain: str           # 'claimed' or 'full'
    claimed: bool         # does the kernel claim this (a failure then fails the run)?

    @property
    def id(self) -> str:
        return f"{self.kernel}:{self.check}:{self.domain}"


def plan(kernels) -> list[Check]:
    """For each kernel: its behaviour model on the full type range (claimed: a kernel must do what its own model
    says), its contract on its claimed domain (claimed), and, where that domain is narrower than the types or the
    contract is not 'exact', the exact contract on the full range, to show where exactness ends (not claimed).
    A requantizing kernel's contract is its output-stage contract (over its accumulation contract), with parameters
    from the documented domain; its probes are the full operand range and parameters outside that domain."""
    out = []
    for k in kernels:
        if not k.claims:            # judged, claiming nothing: every check a probe
            out += [replace(check, claimed=False) for check in plan([replace(k, claims=True)])]
            continue
        if k.quantized:
            out += [Check(k.name, "model", "full", True), Check(k.name, k.output, "claimed", True)]
            if not _is_full(k):
                out.append(Check(k.name, k.output, "full", False))
            out.append(Check(k.name, k.output, "outside", False))
            continue
        full = _is_full(k)
        out.append(Check(k.name, "model", "full", True))
        out.append(Check(k.name, k.contract, "claimed", True))
        if not (full and k.contract == "exact"):
            out.append(Check(k.name, "exact", "full", False))
    return out


def _is_full(k) -> bool:
    """Whether the claimed domain is everything the kernel's ABI can hold (a 4-bit weight: [-8, 7])."""
    a, b = k.operand_ranges
    return k.domain.a == a and k.domain.b == b


SEARCH_SEED = 7     # the poison seed of the hypothesis search's calls (one seed: its replays must see the same)
SHRINK_TRIES = 1500
STATE_SHRINK_TRIES = 200    # each try of a state-dependent failure loads a fresh copy of the kernel
PATH_PROBE_BUDGET = 2_000_000   # instructions of the emulated path probe (counted per block in Python: slow)
SEARCH_SHRINK_SECONDS = 3.0   # hypothesis's shrinking of one failure; lowp's own shrink() finishes it


@dataclass
class Outcome:
    """What one call did: the C it returned, or the fault (an emulator exception, from either executor)."""
    C: np.ndarray | None = None
    fault: Exception | None = None

    def same_as(self, other: "Outcome") -> bool:
        if self.fault is not None or other.fault is not None:
            return type(self.fault) is type(other.fault) and str(self.fault) == str(other.fault)
        return quantized.same(self.C, other.C)

    def describe(self) -> str:
        if self.fault is not None:
            return f"{type(self.fault).__name__}: {self.fault}"
        return f"C = {_short(self.C)}"


@dataclass
class Call:
    A: np.ndarray
    B: np.ndarray
    seed: int
    case: str | None = None
    quant: dict | None = None      # a requantizing kernel's parameters (lowp.conformance.search.quantized)
    options: dict | None = None    # an XNNPACK ukernel's ABI options {"strides", "igemm"} (cases.abi_options)


@dataclass
class Failure:
    call: Call
    outcome: Outcome
    previous: Call | None      # the call the executor ran just before this one (None: this was its first)


class Recorder:
    """An executor that remembers the call it ran last, so a failure can name the call before it."""

    def __init__(self, ex):
        self.ex, self.last = ex, None

    def run(self, call: Call, work_seed: int | None = None) -> Outcome:
        try:
            out = Outcome(self.ex.run(call.A, call.B, **_run_keywords(call, work_seed)))
        except EmulatorError as e:
            out = Outcome(fault=e)
        self.last = call
        return out

    def served(self, call: Call, work_seed: int | None = None) -> bool:
        """Will run(call) take an earlier check's logged outcome (shared_runs.Reusing), running nothing?"""
        serves = getattr(self.ex, "serves", None)
        return serves is not None and serves(call.A, call.B, **_run_keywords(call, work_seed))

    def served_many(self, As, Bs, seeds, options) -> bool:
        """Will a batch of these calls take an earlier check's logged outcomes, running nothing?"""
        serves = getattr(self.ex, "serves_many", None)
        return serves is not None and serves(As, Bs, seeds, options)

    def fresh(self) -> "Recorder":
        """A Recorder on a fresh copy of the kernel (new static state): what it runs is none of this one's earlier
        calls, and it is never this one's last call."""
        return Recorder(self.ex.with_fresh_state())


def _run_keywords(call: Call, work_seed: int | None) -> dict:
    """The executor's run() keywords for a call: what Recorder.run passes, and so what Recorder.served asks the log
    about (the two must digest alike)."""
    return {"seed": call.seed, "work_seed": work_seed, **run_options(call)}


def run_options(call: Call) -> dict:
    """The keyword arguments of the executor's run for a call: its parameters and ABI options."""
    return {**({} if call.quant is None else {"quant": call.quant}), **(call.options or {})}


def reference(check: Check, kern, A, B, quant=None) -> np.ndarray:
    if kern.quantized:
        return quantized.expected(check.check, kern, A, B, quant)
    return kern.predict(A, B) if check.check == "model" else contract(check.check).reference(A, B)


def verdict_of(check: Check, kern, A, B, C, quant=None) -> tuple[bool, str | None, np.ndarray | None]:
    """(ok, matched variant, expected) for one executed case; C None is a fault."""
    if C is None:
        return False, "fault", None
    if kern.quantized:
        return quantized.judge(check.check, kern, A, B, quant, C)
    if check.check == "model":
        expected = kern.predict(A, B)
        ok = np.array_equal(C, expected)
        return ok, "behaviour model" if ok else None, expected
    j = contract(check.check).judge(C, A, B)
    return j.ok, j.matched, j.expected


def _judge(check, kern, call: Call, out: Outcome) -> tuple[bool, str | None]:
    ok, matched, _ = verdict_of(check, kern, call.A, call.B, out.C, call.quant)
    return ok, matched


def diagnose(check: Check, kern, rec: Recorder, failure: Failure, *, also=(), name: bool = True) -> tuple[str, str]:
    """(kind, cause): why the case failed, in the words a kernel author acts on. Faults name themselves; a wrong C
    is examined for poison left in it or added to it, re-run to tell a non-deterministic kernel, re-run with other
    initial contents of C and of the workspace, and re-run on a fresh copy of the kernel (new static state) to tell
    one that depends on earlier calls; what remains is a wrong value, named by the variant families it matches
    (`also`: other failures, (call, C), that narrow the names; name=False: plain "wrong value", not named). Every
    word of the cause is about `failure` itself: the report shows the case it was computed from."""
    call, out = failure.call, failure.outcome
    seen = _at_sight(check, kern, call, out, rec)
    if seen is not None and seen[0] == "fault":
        aligned = _alignment_cause(rec, call, reference(check, kern, call.A, call.B, call.quant))
        return ("fault", f"{aligned}: {seen[1]}") if aligned else seen
    if seen is not None:
        return seen
    C = out.C
    expected = reference(check, kern, call.A, call.B, call.quant)
    findings = []
    again = rec.run(call)
    fresh = rec.fresh()
    first_fresh = fresh.run(call)
    if not again.same_as(out):
        if not fresh.run(call).same_as(first_fresh):
            return "nondeterministic", (f"non-deterministic: two identical calls gave different results: "
                                        f"{out.describe()}, then {again.describe()}")
        findings.append(("state", f"depends on earlier calls: two identical calls gave different results "
                                  f"({out.describe()}, then {again.describe()}), while a fresh copy of the kernel "
                                  f"gives {first_fresh.describe()}{_right(first_fresh, expected)} every time"))
    aligned = _alignment_cause(rec, call, expected)
    abi = None if aligned else _abi_cause(rec, call, expected)
    if aligned:
        findings.append(("alignment", aligned))
    elif abi:       # (C's poison, and the poison in A's and C's gaps, follow one seed: poison-C would be confounded)
        findings.append(("abi", abi))
    elif _changes_with(rec, call, lambda: rec.run(replace(call, seed=call.seed + 7777, case=None),
                                                     work_seed=call.seed + 1)):
        findings.append(("poison-C", "reads C before writing it: the result changes with C's contents before the call"))
    if _changes_with(rec, call, lambda: rec.run(call, work_seed=call.seed + 7777)):
        findings.append(("poison-work", "reads workspace it did not write: the result changes with the workspace's "
                                        "contents before the call"))
    if not findings and not first_fresh.same_as(out):
        before = (f"after the call before it ({_shape(failure.previous)}"
                  f"{', case ' + failure.previous.case if failure.previous.case else ''})"
                  if failure.previous else "after earlier calls")
        findings.append(("state", f"depends on earlier calls: on a fresh copy of the kernel it gives "
                                  f"{first_fresh.describe()}{_right(first_fresh, expected)}; {before} it gives "
                                  f"{out.describe()}"))
    if findings:
        return findings[0][0], "; ".join(text for _, text in findings)
    return "value", "wrong value" + (_variants(check, kern, call, C, also, rec) if name else "")


def _alignment_cause(rec: Recorder, call: Call, expected) -> str | None:
    """'depends on the alignment of A: offset 1 from 64 (...)' where the call's `align` option is to blame: the
    targeted probe of a failure (docs/alignment.md). Each buffer not 64-byte aligned is moved to a 64-byte boundary,
    one at a time, the others staying where they were; those with which the same call gives the right C are named.
    Where none alone is to blame (a kernel that needs two buffers aligned), all of them move at once. None where
    the call has no alignment, or the result does not depend on it."""
    options = call.options or {}
    align = options.get("align") or {}
    moved = {buffer: offset for buffer, offset in align.items() if offset}
    if not moved:
        return None

    def right_with(placed: dict) -> bool:
        out = rec.run(replace(call, case=None, options={**options, "align": placed}))
        return out.fault is None and quantized.same(out.C, expected)

    named = [buffer for buffer in moved if right_with({**align, buffer: 0})]
    if not named and len(moved) > 1 and right_with({buffer: 0 for buffer in align}):
        named = list(moved)
    if not named:
        return None
    where = " and ".join(f"of {buffer}: offset {moved[buffer]} from 64" for buffer in named)
    whom = named[0] if len(named) == 1 else " and ".join(named)
    return (f"depends on the alignment {where} (with {whom} 64-byte aligned, the same call gives the right C; "
            "a caller may give any multiple of the element size)")


def _abi_cause(rec: Recorder, call: Call, expected) -> str | None:
    """What an XNNPACK ukernel's wrong C owes to the case's ABI options: each option the call gives is replaced by
    the plain one (dense rows, blocks nr columns apart, a_offset 0, one tap, no zero buffer), one at a time; the
    options without which the same call gives the right C are named (a kernel that reads row 1 of A at a0 + kc is
    right on dense rows). None where no option is to blame (or the call has none)."""
    named = []
    for label, plain, options in _plainer(call):
        out = rec.run(replace(call, case=None, options=options))
        if out.fault is None and quantized.same(out.C, expected):
            named.append(f"{label} ({plain}, the same call gives the right C)")
    return "wrong only through the XNNPACK ABI: " + "; ".join(named) if named else None


def _plainer(call: Call):
    """(what the option is, the plain alternative, the call's options with it) for each ABI option of `call` that
    is not the plain one already."""
    options = call.options or {}
    strides, igemm = dict(options.get("strides") or {}), dict(options.get("igemm") or {})
    K = call.A.shape[1]
    texts = {"a": ("the stride of A's rows, a_stride={} bytes at K=" + str(K), "with dense rows"),
             "cm": ("the stride of C's rows, cm_stride={} bytes", "with dense rows"),
             "cn": ("the stride of C's blocks of nr columns, cn_stride={} bytes", "with blocks nr columns apart")}
    for key, value in strides.items():
        label, plain = texts[key]
        rest = {k: v for k, v in strides.items() if k != key}
        yield label.format(value), plain, {**options, "strides": rest or None}
    for key, value, default, label, plain in (
            ("a_offset", igemm.get("a_offset", 64), 0, "a_offset={}", "with a_offset 0"),
            ("ks", igemm.get("ks"), 1, "ks={} taps", "with one tap"),
            ("zero", igemm.get("zero", "auto"), [], "the zero buffer{}", "reading the padding taps from A")):
        if value is not None and value != default and "igemm" in options:
            yield label.format("" if key == "zero" else value), plain, {**options, "igemm": {**igemm, key: default}}


def _at_sight(check: Check, kern, call: Call, out: Outcome, rec: "Recorder | None" = None) -> tuple[str, str] | None:
    """(kind, cause) of what one outcome shows: a fault, C accumulated into, elements of C never written; None for
    anything else. Shrinking keeps this the same, so a shrunk case that would read otherwise (all of A zeroed: an
    accumulating kernel's C is then all poison, "never written") is not taken. With `rec`, an element that holds
    its poison counts as never written only if it follows another poison too: an 8-bit output's wrong value can
    equal its poison byte (a wrapping zero-point add's 127 where the poison was 127), and is a wrong value. That
    rerun runs on a fresh copy of the kernel (rec.fresh()): it is not an earlier call of the kernel under
    diagnosis, so a later "depends on earlier calls" diagnosis cannot name it nor be caused by it."""
    if out.fault is not None:
        return "fault", f"{type(out.fault).__name__}: {out.fault}"
    C = out.C
    expected = reference(check, kern, call.A, call.B, call.quant)
    poisoned = poison(C.shape, C.dtype, call.seed)
    wrong = _differs(C, expected)
    if C.dtype == np.int32 and _accumulates(C, expected, poisoned, wrong):
        return "poison-C", ("accumulates into C: C = (C before the call) + A*B, the kernel reads C before writing it "
                            "(lowp fills C with poison, not zeros)")
    unwritten = wrong & ~_differs(C, poisoned)
    if unwritten.any() and rec is not None:
        other = Call(call.A, call.B, call.seed + 7777, call.case, call.quant, call.options)
        again = rec.fresh().run(other)
        if again.fault is None and again.C.shape == C.shape:
            unwritten &= ~_differs(again.C, poison(C.shape, C.dtype, other.seed))
    if unwritten.any():
        first = [int(x) for x in np.argwhere(unwritten)[0]]
        return "unwritten", (f"{int(unwritten.sum())} of {C.size} elements of C never written (they still hold the "
                             f"poison C was filled with before the call), the first at {first}")
    return None


def _accumulates(C, expected, poisoned, wrong) -> bool:
    """C = poison + expected wherever C is wrong (an int32 kernel that adds into C instead of storing)."""
    added = _wrap32(C.astype(np.int64) - expected.astype(np.int64) - poisoned.astype(np.int64))
    return bool(wrong.any() and not added[wrong].any() and (expected[wrong] != 0).any())


def _differs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise: not the same bits (floats compare as their bit patterns: -0.0 is not 0.0, NaN is itself)."""
    if x.dtype.kind == "f":
        return x.view(f"u{x.dtype.itemsize}") != np.asarray(y, x.dtype).view(f"u{x.dtype.itemsize}")
    return x != y


def _changes_with(rec: Recorder, call: Call, varied) -> bool:
    """Whether `varied()` (the call with other initial contents of C or the workspace) differs from an identical
    call made right after it, twice in a row: compared in the same state, a kernel whose state changed since the
    failure does not read as one that depends on its buffers' initial contents."""
    return all(not varied().same_as(rec.run(call)) for _ in range(2))


def _right(out: Outcome, expected) -> str:
    return " (right)" if out.fault is None and quantized.same(out.C, expected) else ""


def _variants(check, kern, call: Call, C, also=(), rec: "Recorder | None" = None) -> str:
    """The names of what the kernel computed on `call`: the contract's own known variant when C is one, then the
    parametrised families C belongs to. Every reading is tested against every failing case there is (`call`, and
    `also`: (call, C) of the case the shrunk one came from, other failing cases): those that explain the most of
    them stay (on a small case several coincide; the names stay `call`'s own: a deep case's "N=300" is not what a
    shrunk 1x1x271 shows). Where several tie, a requantizing kernel is run on cases that tell them apart
    (`_told_apart`, with `rec`). Several still tied are stated as one of them, undecided; where the best explains
    no more than half of the failing cases, "no named variant explains it", not the counterexample's nearest."""
    names = _readings(check, kern, call, C)
    if not names:
        return " (no known variant)"
    evidence = [(call, C, {key for key, _ in names})] + [(c, x, None) for c, x in also]
    kept, best = _best_explained(check, kern, names, evidence)
    if len(kept) > 1 and rec is not None and kern.quantized:
        evidence += _told_apart(check, kern, rec, call, kept)
        kept, best = _best_explained(check, kern, kept, evidence)
    total = len(evidence)
    if 2 * best <= total:
        return (f" (no named variant explains it: the counterexample alone matches {_listed(kept)}, which reads "
                f"{best} of the {total} failing cases)")
    share = f"on {best} of the {total} failing cases" if best < total else ""
    notes = "; ".join(filter(None, [share, UNDECIDED if _undecided(check, kern, kept) else ""]))
    return f": the result matches {_listed(kept)}" + (f" ({notes})" if notes else "")


UNDECIDED = "one of these, which the failing cases do not tell apart"
TELL_APART_STYLES = ("typical", "ends", "limits")
TELL_APART_SEEDS = 2


def _undecided(check, kern, kept) -> bool:
    """Whether the readings left are alternatives: more than one besides the contract's known variants, which are
    named implementations (XNNPACK's AVX-VNNI wrap) that a family reading beside them describes step by step, not
    another cause."""
    if kern.quantized:
        known = [key for key, _ in kept if key.startswith(KNOWN_PREFIXES)]
    else:
        names = {v.name for v in contract("exact" if check.check == "model" else check.check).known}
        known = [key for key, _ in kept if key in names]
    mechanisms = len(kept) - len(known)
    return mechanisms > 1 or (not mechanisms and len(kept) > 1)


KNOWN_PREFIXES = ("output stage ", "accumulation ")


def _listed(names) -> str:
    # '; ' between readings: a reading's own name may hold commas ("A read as u8, a = -128 read as 128")
    shown = [name for _, name in names]
    listed, more = (shown, "") if len(shown) <= 4 else (shown[:3], f" (and {len(shown) - 3} more)")
    return "; ".join(listed) + more


def _best_explained(check, kern, names, evidence) -> tuple[list[tuple[str, str]], int]:
    """(the readings of `names` that the most failing cases of `evidence` ((call, C, its reading keys or None))
    confirm, how many): a case confirms a reading it reads as, or cannot show (a per-channel reading on a case of
    one column); it refutes the others."""
    counts = {key: 0 for key, _ in names}
    for call, C, keys in evidence:
        for key in _confirmed(check, kern, call, C, list(counts), keys):
            counts[key] += 1
    best = max(counts.values())
    return [(key, name) for key, name in names if counts[key] == best], best


def _told_apart(check, kern, rec: Recorder, call: Call, kept: list[tuple[str, str]]) -> list:
    """More failing cases for readings that tie: the same operands with parameters drawn in each style (a few
    seeds), each run; the failing ones, until one of them refutes some of `kept` (a case the kernel gets right
    tells nothing: the readings are named only where they differ from the contract)."""
    out = []
    for i, style in enumerate(TELL_APART_STYLES * TELL_APART_SEEDS):
        try:
            quant = quantized.draw_params(kern, call.A, call.B, call.seed + 1000 + i, style)
        except (ArithmeticError, ValueError, AssertionError):
            continue
        other = Call(call.A, call.B, call.seed + 1000 + i, None, quant, call.options)
        result = rec.run(other)
        if result.fault is not None or result.C is None or _judge(check, kern, other, result)[0]:
            continue
        out.append((other, result.C, None))
        if len(_confirmed(check, kern, other, result.C, [key for key, _ in kept])) < len(kept):
            break
    return out


def _confirmed(check, kern, call: Call, C, keys, read=None) -> list[str]:
    """The keys of `keys` that a failing case (call, C) does not refute: those it reads as (`read`, if known),
    and those it cannot show (a per-channel reading on a case of one column)."""
    shared = read if read is not None else {key for key, _ in _readings(check, kern, call, C)}
    if kern.quantized:
        shared = shared | quantized.undetermined_readings(check.check, kern, call.A, call.B, call.quant, keys)
    return [key for key in keys if key in shared]


def _readings(check, kern, call: Call, C) -> list[tuple[str, str]]:
    """(key, name) of every known variant and family member C equals; the key is the variant or the family."""
    if kern.quantized:
        return quantized.named_readings(check.check, kern, call.A, call.B, call.quant, C)
    from lowp.conformance.diagnosis.variants import matches
    judge = contract("exact" if check.check == "model" else check.check).judge(C, call.A, call.B)
    out = [(judge.matched, judge.matched)] if judge.matched and not judge.ok else []
    for m in matches(C, call.A, call.B, a_type=kern.a_type, b_type=kern.b_type,
                     poison=poison(C.shape, np.int32, call.seed)):
        if m.name not in (name for _, name in out):
            out.append((m.family.name, m.name))
    return out


def _shape(call: Call) -> str:
    return f"{call.A.shape[0]}x{call.B.shape[1]}x{call.A.shape[1]}"


def _short(C) -> str:
    text = np.array2string(np.asarray(C), threshold=12, edgeitems=2).replace("\n", "")
    return text if len(text) < 160 else text[:157] + "..."


def _wrap32(x):
    return ((x + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int64)


def still_fails(check, kern, rec: Recorder, kind: str, failure: Failure, readings: set | None = None):
    """The predicate a shrink keeps true: the same kind of failure as the one found. A fault must stay the same
    fault (class, buffer, access) so shrinking does not drift to another bug; a failure that depends on earlier
    calls is replayed on a fresh copy of the kernel after the same earlier call; what a case shows at sight (a
    wrong value, C accumulated into, elements never written) stays what the found case showed; a requantizing
    kernel's wrong value keeps one of `readings` (keys of quantized.named_readings), so the shrunk case still
    shows the bug named (not a 1x1 case where any of a dozen readings fits)."""
    fault = failure.outcome.fault

    def same_fault(out: Outcome) -> bool:
        return out.fault is not None and type(out.fault) is type(fault) and \
            getattr(out.fault, "buffer", None) == getattr(fault, "buffer", None) and \
            getattr(out.fault, "access", None) == getattr(fault, "access", None)

    seen = _at_sight(check, kern, failure.call, failure.outcome, rec)
    seen = seen and seen[0]

    def fails(A, B, quant=None) -> bool:
        options = shrunk_options(failure.call, kern, A, B)
        if options is None:         # a shape the case's ABI options do not fit (a depth that is not 3 taps)
            return False
        call = Call(A, B, failure.call.seed, quant=quant, options=options)
        if kind == "fault":
            return same_fault(rec.run(call))
        if kind == "state":
            fresh = rec.fresh()
            if failure.previous is not None:
                fresh.run(failure.previous)
            out = fresh.run(call)
        else:
            out = rec.run(call)
        if _judge(check, kern, call, out)[0]:
            return False
        if kind == "state":
            return True
        # what the case shows at sight stays what the found case showed (a wrong value stays a wrong value, not a
        # fault nor C left unwritten)
        now = _at_sight(check, kern, call, out, rec)
        if (now and now[0]) != seen:
            return False
        # asked only about these readings: a few stage evaluations a try
        return not readings or bool(quantized.named_readings(check.check, kern, A, B, quant, out.C, keys=readings))
    return fails


def shrunk_options(call: Call, kern, A, B) -> dict | None:
    """The ABI options of `call`'s case at A and B's shape: the same strides, taps and a_offset, computed for the
    new shape from the case's name (cases.options_at), so a shrunk strided case is still strided; None where the
    shape cannot carry them. A call with none keeps none; one whose case has no id to read a name from keeps its
    options at its own shape only."""
    if not call.options:
        return {}
    try:
        case = Case.from_id(call.case or "")
    except ValueError:
        return call.options if (A.shape, B.shape) == (call.A.shape, call.B.shape) else None
    return options_at(case.name, A.shape[0], B.shape[1], A.shape[1], kern, seed=case.seed)


def counterexample(check: Check, kern, failure: Failure, kind: str, cause: str) -> dict:
    call, out = failure.call, failure.outcome
    A, B, C = call.A, call.B, out.C
    expected = reference(check, kern, A, B, call.quant)
    first = None
    if C is not None:
        diff = np.argwhere(_differs(C, expected))
        first = [int(x) for x in diff[0]] if len(diff) else None
    cx = {"case": call.case, "shape": [int(A.shape[0]), int(B.shape[1]), int(A.shape[1])], "seed": call.seed,
          "nonzero": int(np.count_nonzero(A) + np.count_nonzero(B)), "A": A.tolist(), "B": B.tolist(),
          "actual": None if C is None else C.tolist(), "expected": expected.tolist(), "first_diff": first,
          "actual_at_first": C[tuple(first)].item() if first else None,
          "expected_at_first": expected[tuple(first)].item() if first else None,
          "matched": "fault" if C is None else verdict_of(check, kern, A, B, C, call.quant)[1], "kind": kind,
          "cause": cause, "fault": None if out.fault is None else f"{type(out.fault).__name__}: {out.fault}",
          "previous": None, "quant": quantized.to_json(call.quant), "tile": [kern.tile.mr, kern.tile.nr],
          "options": call.options or None}
    if kind == "state" and failure.previous is not None:
        p = failure.previous
        cx["previous"] = {"A": p.A.tolist(), "B": p.B.tolist(), "seed": p.seed, "case": p.case,
                          "shape": [int(p.A.shape[0]), int(p.B.shape[1]), int(p.A.shape[1])],
                          "quant": quantized.to_json(p.quant), "options": p.options or None}
    return cx


def claimed_path(kern, ex) -> tuple[bool, str]:
    """Which instructions carried the kernel, and whether any of its `requires` executed. Emulated: the
    per-mnemonic counts of a few probe cases. Native: the instructions present in the code reachable from the
    symbol (capstone), and, for `requires`, one-shot breakpoints at every site of them in a private copy of the
    library while the probe cases run, so a path that is compiled in but never taken (a CPU dispatch that picks
    another branch) is told from one that runs."""
    probes = _path_probes(kern)
    if ex.backend == "native":
        ex._lib                                # loaded: its path is known
    key = _path_key(kern, ex, probes)
    kept = _kept_path(key)
    if kept is None:
        kept, keep = _native_path(kern, ex, probes) if ex.backend == "native" else _emulated_path(kern, ex, probes)
        if keep:
            _keep_path(key, kept)
    return kept


def _emulated_path(kern, ex, probes) -> tuple[tuple[bool, str], bool]:
    """The per-mnemonic counts of the probe cases, on a fresh copy of the kernel's machine (as natively: the
    check's own machine sees none of the probe calls, so its cases meet the state they would without them, and
    the path can be kept for the kernel's other checks and later campaigns). Also whether it may be kept: not
    where a probe faulted (a guest that died under load says nothing about the kernel)."""
    from collections import Counter

    seen, modeled = Counter(), Counter()
    probe = ex.with_fresh_state()
    try:
        for A, B, options in probes:
            try:
                probe.run(A, B, mnemonics=True, budget=PATH_PROBE_BUDGET, **options)
            except EmulatorError as e:
                if not seen:
                    return (not kern.requires, f"not determined: the {_shape(Call(A, B, 0))} probe case faulted "
                                               f"({e})"), False
                return _executed(kern, probe, seen, modeled), False
            seen.update(probe.last.mnemonics or {})
            modeled.update(probe.last.modeled or {})
    finally:
        close = getattr(probe.__dict__.get("machine"), "close", None)   # a guest process of its own: ended now
        if close is not None:
            close()
    return _executed(kern, probe, seen, modeled), True


def _executed(kern, ex, seen, modeled) -> tuple[bool, str]:
    from lowp.kernels.disasm import requires_met
    ok, text = requires_met(seen, kern.requires or ARITHMETIC, "executed") if kern.requires else \
        (True, requires_met(seen, ARITHMETIC, "executed")[1])
    return ok, text + _emulation_notes(ex, seen, modeled)


def _native_path(kern, ex, probes) -> tuple[tuple[bool, str], bool]:
    """The instructions present, and for `requires` which of their sites the probe cases reached (on a private
    copy of the library); always kept."""
    from collections import Counter

    from lowp.kernels.disasm import instruction_sites, native_instructions, requires_met
    present = native_instructions(ex.library_path, kern.symbol)
    if not kern.requires:
        return (True, requires_met(present, ARITHMETIC, "present")[1]), True
    ok, text = requires_met(present, kern.requires, "present")
    if not ok:
        return (False, text), True
    from lowp.kernels import guard
    probe = ex.with_fresh_state()
    probe._lib
    sites = instruction_sites(probe.library_path, kern.symbol, kern.requires)
    load = guard.load_address(probe.library_path)
    with guard.Breakpoints([load + a for a, _ in sites]) as bp:
        for A, B, options in probes:
            try:
                probe.run(A, B, **options)
            except EmulatorError:
                pass
    ran = Counter(name for a, name in sites if load + a in bp.hits)
    if not ran:
        return (False, (f"none of {', '.join(kern.requires)} executed in {len(probes)} probe cases, though "
                        f"present at {len(sites)} sites (a dispatch that never takes that path?)")), True
    return (True, "executed: " + ", ".join(f"{n} at {c} of {sum(m == n for _, m in sites)} sites"
                                          for n, c in ran.most_common())), True


# A native kernel's path is the same for every check of it: a kernel's three checks ran the disassembly and the
# breakpoint probe (a private copy of the library loaded) three times, some 0.1 s each. It is kept beside the build
# cache (<cache>/paths/) under the SHA-256 of lowp's code, the built library (its cache name is the build's key over
# compiler, flags, sources and headers), the symbol, the required mnemonics, the CPU features in force and the probe
# cases. Only native: an emulated probe runs on the check's own machine, whose state a later case may depend on.
def _path_key(kern, ex, probes) -> str:
    """What a kernel's path depends on: lowp's code, the built library or ELF (content-named), the symbol and its
    `requires`, what runs it (the host's features; an emulator, its version and cpu model) and the probe cases."""
    import hashlib
    import json

    from lowp.conformance.run.identity import lowp_identity
    from lowp.kernels.features import host_features
    runs_on = sorted(host_features(kern.target)) if ex.backend == "native" else ex.describe()
    artifact = ex.artifact.name if ex.backend == "native" else ex.machine.binary.path.name
    h = hashlib.sha256(json.dumps([lowp_identity(), artifact, kern.symbol, list(kern.requires), ex.backend,
                                   runs_on]).encode())
    for A, B, options in probes:
        h.update(A.tobytes() + B.tobytes() + repr(sorted((k, repr(v)) for k, v in options.get("quant", {}).items()))
                 .encode())
    return h.hexdigest()


def _path_file(key: str):
    from lowp.emulator.buildcache import cache_dir
    return cache_dir() / "paths" / key[:2] / f"{key}.json"


def _kept_path(key: str) -> tuple[bool, str] | None:
    import json
    try:
        ok, text = json.loads(_path_file(key).read_text())
    except (OSError, ValueError, TypeError):
        return None
    return (ok, text) if isinstance(ok, bool) and isinstance(text, str) else None


def _keep_path(key: str, path: tuple[bool, str]) -> None:
    """Atomically; a cache that cannot be written keeps nothing, which costs only the probe again."""
    import json

    from lowp.emulator.buildcache import write_atomic
    try:
        write_atomic(_path_file(key), json.dumps(list(path)).encode())     # (it makes the folder)
    except OSError:
        pass


def _emulation_notes(ex, seen: dict, modeled: dict) -> str:
    """What an emulated path's results rest on besides the emulator: instructions it ran on lowp's own models
    (AMX on Bochs, FEAT_I8MM on Unicorn), and instructions the emulator is known to run wrongly."""
    from lowp.kernels.disasm import canonical
    notes = []
    if modeled:
        notes.append(f"{', '.join(sorted(modeled))} ran on lowp's models ({ex.describe()} lacks them)")
    defects = getattr(ex.target, "defects", {})
    for name in sorted({canonical(m) for m in seen} & set(defects)):
        notes.append(f"{name} ran on {ex.target.backend}, which {defects[name]}")
    return "".join(f"; {n}" for n in notes)


def _path_probes(kern) -> list[tuple[np.ndarray, np.ndarray, dict]]:
    """A few cases of the claimed domain that any real path should take: one tile with a k remainder, a
    remainder on every side, and a larger block; (A, B, run options: a requantizing kernel's typical parameters)."""
    t = kern.tile
    rng = np.random.default_rng(0x9A7)
    (alo, ahi), (blo, bhi) = kern.domain.a, kern.domain.b
    out = []
    for m, n, k in ((t.mr, t.nr, 4 * t.kr + 1), (2 * t.mr + 1, 2 * t.nr + 1, 64), (4 * t.mr, 4 * t.nr, 256)):
        A = rng.integers(alo, ahi, (m, k), endpoint=True).astype(kern.a_dtype)
        B = rng.integers(blo, bhi, (k, n), endpoint=True).astype(kern.b_dtype)
        options = {"quant": quantized.draw_params(kern, A, B, m * n * k, "typical")} if kern.quantized else {}
        out.append((A, B, options))
    return out


# A call's time budget on Bochs, from the native one: as long as a real case may take there, short enough that a
# hanging kernel costs one such wait per check (the search does not run after a hang).
BOCHS_BUDGET_FACTOR, BOCHS_MIN_SECONDS = 5, 5.0

# What the path column shows when a kernel requires nothing: its multiply, dot-product and widening instructions.
ARITHMETIC = ("*mul*", "*madd*", "*dpb*", "*dpw*", "*dot*", "*mla*", "*mlal*", "*mmla*", "*adalp*", "*addw*",
              "pmadd*", "vpmadd*")


def probe_share(examples: int) -> int:
    """The search budget `lowp conformance` gives a not-claimed probe: a third of a claimed check's. A probe says
    where a contract stops holding (the generated cases, with the depth ladder and the parameters' ends, find that
    first) and fails nothing."""
    return -(-examples // 3)


def run_check(check: Check, emit: Callable[[dict], None], *, examples: int = 150, seed: int = 0,
              grid: bool = True, budget: float | None = 2.0, probe_examples: int | None = None,
              shapes=(), only=(), database: str | None = None, draws: int = 0,
              draw_seconds: float | None = None, fresh: bool = False, drawn_search: bool = False,
              probe_rotation: bool = False) -> dict:
    """Execute one check and return its row (also emitted). probe_examples: the search budget of a not-claimed
    check, if not `examples`; shapes: the user's (m, n, k) (`--shapes`), added to the generated cases; only: the
    `--case` globs the generated cases are restricted to; database: the example database (a folder or a Redis
    URL; None: none), whose counterexamples of this check the search replays first; draws: at most this many
    cases drawn from the search's distribution and run batched (conformance/run/batch.py), for at most draw_seconds
    (`lowp fuzz`; 0: none), before the search, which then runs only if they found nothing. fresh: run a fresh copy
    of the kernel (a later check of a kernel in a process that ran it already: the static state of a new process).
    drawn_search: the search's examples drawn from its distribution and run one by one (_drawn_search: the quick
    profile), not through hypothesis's engine. probe_rotation: a not-claimed probe's tile edges each in one value
    class, rotating (cases_for's rotate: the quick profile), unless `only` names the cases."""
    if not check.claimed and probe_examples is not None:
        examples = probe_examples
    kern = get_kernel(check.kernel)
    ex = executor(kern)
    if fresh:
        ex = ex.with_fresh_state()
    if ex.backend == "native":
        ex.budget = budget
    elif ex.backend == "bochs" and budget:
        # the per-call time budget of a kernel that hangs; Bochs runs a kernel some 50-100 times slower
        ex.machine_options["seconds"] = max(BOCHS_MIN_SECONDS, BOCHS_BUDGET_FACTOR * budget)
    cases = cases_for(kern, check.check, check.domain, grid=grid, seed=seed, shapes=shapes, only=only,
                      rotate=probe_rotation and not check.claimed and not only)   # --case: what was asked
    row = check_row(check, backend=ex.backend, target=kern.target, contract_claimed=kern.contract,
                    cases=len(cases) + examples)
    if ex.backend != "native":
        row["emulator"] = ex.describe()
    reason = ex.unavailable()
    if reason:
        row.update(verdict="SKIPPED", reason=reason)
        emit(row)
        return row
    emit({"event": "plan", "check": check.id, "cases": row["cases"]})
    start = time.perf_counter()
    tracked = batch.Tracked(ex)         # the calls a fresh copy replays where a batch ran more than the per-case path
    if not (batch.batchable(kern) or batch.batches_invocations(kern, ex)):
        tracked.forget()                # no batch will run: nothing to replay
    path_ok, row["path"] = claimed_path(kern, tracked)
    shared = tracked.ex = shared_runs.layer(kern, tracked.ex, fresh)      # the kernel's earlier check's runs
    rec = Recorder(tracked)
    first, first_fault, early = _run_cases(check, kern, rec, cases, row, emit, start)
    hung = first_fault is not None and isinstance(first_fault.outcome.fault, BudgetExceeded)
    found, drawn = _draws(check, kern, rec, row, seed, draws, draw_seconds, emit) if not hung else (None, 0)
    tracked.forget()
    if isinstance(shared, shared_runs.Layer) and shared.stop(failed=(first or first_fault or found) is not None):
        row["shared_runs"] = shared.shared
    if drawn:
        row["drawn"] = drawn
    if found is not None:       # the search's roles stay: its example database keeps what the draws found
        hung = isinstance(found.outcome.fault, BudgetExceeded)      # each shrinking try would cost the budget
        if database:
            ExampleStore(database, check, kern).save(found.call.A, found.call.B, found.call.quant)
        searched, replayed = 0, 0
    elif hung:
        searched, replayed = 0, 0
    elif drawn_search:
        found, searched, replayed = _drawn_search(check, kern, rec, row, examples, seed, database, emit)
    else:
        found, searched, replayed = search(check, kern, rec, examples, seed, database)
    row["searched"] = searched if examples > 0 and not hung else None      # None: the search did not run
    if replayed:
        row["replayed"] = replayed
    row["executed"] += searched + drawn
    row["cases"] = len(cases) + searched + drawn     # the search ran this many (it stops when it has found and shrunk)
    if found is not None:
        row["failed"] += 1
        row.setdefault("first_failure_seconds", round(time.perf_counter() - start, 3))
    # A fault says the most; then a generated case, whose richer values tell causes apart; shrinking follows.
    failure = first_fault or first or found
    if failure is not None:
        witnesses = [f for f in early if f.call is not failure.call][:WITNESSES[kern.quantized]]
        kind, row["cause"], failure = explain(check, kern, rec, failure, shrinking=not hung, witnesses=witnesses)
        if kind in ("state", "nondeterministic"):
            shared_runs.forget()        # its outcomes depend on more than the calls: a later check runs its own
        row["counterexample"] = counterexample(check, kern, failure, kind, row["cause"])
    if not path_ok and check.claimed:
        row["cause"] = "; ".join(filter(None, [row["cause"], "the claimed path never ran: " + row["path"]]))
    row["verdict"] = "FAIL" if row["failed"] or (not path_ok and check.claimed) else "PASS"
    row["build"] = ex.build()
    row["seconds"] = round(time.perf_counter() - start, 3)
    emit(row)
    return row


def _run_cases(check: Check, kern, rec: Recorder, cases, row: dict, emit, start: float):
    """Run the generated cases, counting into `row`; (smallest failure, first fault, witnesses). The smallest
    failing case (fewest elements) is where shrinking starts: the ladder's all-extreme case at the first
    overflowing depth beats a tile edge case that overflows later by chance; the witnesses help name the variant,
    which tiny cases cannot tell apart: the earliest failure (usually random values), and the failures with the
    most elements of C (where a reading that fits by chance, every element at output_min, does not). A runaway loop ends the loop: it would cost the budget on
    every case, and one is proof enough."""
    first = first_fault = None
    early = []
    calls = [shared_case_call(case, kern) for case in cases]
    for index, clean, got, judged in _screened(check, kern, rec, cases, calls, emit):
        case, call = cases[index], calls[index]
        if clean is not None:       # its batch was clean: the verdict the per-case judge would give
            row["executed"] += 1
            _tally(row, clean)
            rec.last = call
            emit({"event": "case", "check": check.id, "case": case.id, "ok": True, "matched": clean})
            continue
        previous = rec.last
        if got is None:
            if not rec.served(call):        # a case an earlier check's log answers runs nothing that could crash
                emit({"event": "start", "check": check.id, "case": case.id})
            out = rec.run(call)
        else:                       # its batch ran it as the per-case path would have: that outcome is the case's
            out, rec.last = got, call
        A, B = call.A, call.B
        ok, matched = judged if judged is not None else _judge(check, kern, call, out)
        row["executed"] += 1
        _tally(row, matched)
        if not ok:
            row["failed"] += 1
            if first is None:
                row["first_failure_seconds"] = round(time.perf_counter() - start, 3)
            if not early or (out.C is not None and len(early) < 1 + LARGE_WITNESSES):
                early.append(Failure(call, out, previous))
            elif out.C is not None and out.C.size > min(f.outcome.C.size for f in early[1:]):
                smallest = min(range(1, len(early)), key=lambda i: early[i].outcome.C.size)
                early[smallest] = Failure(call, out, previous)               # the earliest stays first
            if first is None or A.size + B.size < first.call.A.size + first.call.B.size:
                first = Failure(call, out, previous)
            if out.fault is not None and first_fault is None:
                first_fault = Failure(call, out, previous)
        emit({"event": "case", "check": check.id, "case": case.id, "ok": ok, "matched": matched})
        if isinstance(out.fault, BudgetExceeded):
            break
    return first, first_fault, early


def _tally(row: dict, matched: str | None, times: int = 1) -> None:
    """Count cases into the row's 'results matched' by the reading they matched (None: none, a failing case)."""
    key = matched or "none"
    row["matched"][key] = row["matched"].get(key, 0) + times


def _screened(check: Check, kern, rec: Recorder, cases, calls: list[Call], emit):
    """(index, matched reading or None, outcome or None, verdict or None) of every generated case, in order: a run
    of consecutive cases of one shape (the value classes of a tile edge, the end classes of a ladder step), as many
    as a batch holds, is screened in one batch (conformance/run/batch.py) when it comes, so the kernel sees the
    calls in the per-case path's order and a crash leaves the cases before the batch counted. A case of a clean
    batch comes with its reading; one of a batch that is not clean with the outcome the batch gave it, which is
    run()'s for the same call in the same state (each case has its own guarded buffers): the per-case path judges
    it as its own, or takes the verdict the batch's judge gave it (a quantized kernel's batch judges each case as
    the per-case judge does). A batch that could not be pinned on one case (native: a canary damaged) is rerun case
    by case on a fresh copy of the kernel that has run the calls before it (Tracked.restart), as are a case alone,
    and a kernel that is not batchable: those come with neither. After a runaway loop nothing more is batched: the per-case path meets it
    and stops, as it always did."""
    invocations = batch.batches_invocations(kern, rec.ex)
    batching = batch.ENABLED and (batch.batchable(kern) or invocations)
    index = 0
    while index < len(calls):
        run = _same_shape_run(calls, index, invocations) if batching else [index]
        done = batch.Screen(None)
        if len(run) > 1:
            A3, B3 = np.stack([calls[i].A for i in run]), np.stack([calls[i].B for i in run])
            seeds = [calls[i].seed for i in run]
            options = [run_options(calls[i]) for i in run] if invocations else None
            if not rec.served_many(A3, B3, seeds, options):
                emit({"event": "start", "check": check.id, "case": cases[index].id})   # a crash names the batch
            done = batch.screen(check, kern, rec.ex, A3, B3, seeds, options=options)
            batching = not done.hung
            if done.outcomes is not None and batch.unpinned(done.outcomes):
                rec.ex.restart(len(rec.ex) - 1)
                done = batch.Screen(None)
        matched = done.matched
        for j, i in enumerate(run):
            got = None if done.outcomes is None else _outcome(done.outcomes[j])
            judged = None if got is None or done.verdicts is None else done.verdicts[j]
            yield i, None if matched is None else matched[j], got, judged
        index += len(run)


def _outcome(result) -> Outcome | None:
    """A batch's result for one case as the per-case path's Outcome (Recorder.run: C, or an emulator's fault);
    None for anything else run() raises (the per-case path then meets it itself)."""
    if isinstance(result, np.ndarray):
        return Outcome(result)
    return Outcome(fault=result) if isinstance(result, EmulatorError) else None


def _same_shape_run(calls: list[Call], first: int, invocations: bool = False) -> list[int]:
    """The indices of the consecutive calls from `first` on with its shape, up to a batch's worth, with no per-case
    parameters unless the batch runs `invocations` (each case's own parameters and ABI options: the executor
    splits the batch where their layout changes)."""
    def batchable(call: Call) -> bool:
        return invocations or (call.quant is None and not call.options)
    A, B = calls[first].A, calls[first].B
    if not batchable(calls[first]):
        return [first]
    size = batch.cases_per_batch(A.shape[0], B.shape[1], A.shape[1])
    end = first + 1
    while end < len(calls) and end - first < size and calls[end].A.shape == A.shape and \
            calls[end].B.shape == B.shape and batchable(calls[end]):
        end += 1
    return list(range(first, end))


def _draws(check: Check, kern, rec: Recorder, row: dict, seed: int, count: int, seconds: float | None, emit):
    """(first failure or None, cases run): up to `count` cases drawn from the search's distribution
    (batch.draw_batch), for at most `seconds`, run in batches. A clean batch's cases count into `row`; one that is
    not is judged case by case, in order, from the outcomes the batch gave (run()'s), and its first failing case is
    the failure (then the draws stop). The batch ran the cases after it, which the per-case path would not have:
    the kernel goes on as a fresh copy that has run the calls up to the failing one (Tracked.restart), so a kernel
    that keeps state between calls is diagnosed and shrunk in the per-case path's state. A batch that could not be
    pinned on one case is rerun case by case on such a copy."""
    if count <= 0:
        return None, 0
    rng, shapes = batch.draw_rng(check.id, seed), batch.Shapes.of(kern, check.domain)
    stop = time.perf_counter() + seconds if seconds else float("inf")
    if not batch.batchable(kern):
        return _draws_one_by_one(check, kern, rec, row, rng, shapes, count, stop, f"{check.id}:draw:{seed}", emit)
    done = number = 0
    while done < count and time.perf_counter() < stop:
        state = rng.bit_generator.state
        A3, B3 = batch.draw_batch(kern, check.domain, shapes, rng)
        A3, B3 = A3[:count - done], B3[:count - done]
        seeds = batch.draw_seeds(number, len(A3))
        name = f"{check.id}:draw:{seed}"
        emit({"event": "start", "check": check.id, "case": f"{name}:batch-{number}"})     # a crash names the batch
        number += 1
        screened = batch.screen(check, kern, rec.ex, A3, B3, seeds,
                                regenerate=_redraw(kern, check.domain, shapes, state, len(A3)))
        if screened.reading is not None:
            done += len(A3)
            for matched, times in screened.counts().items():
                _tally(row, matched, times)
            continue
        outcomes = screened.outcomes
        if outcomes is not None and batch.unpinned(outcomes):
            rec.ex.restart(len(rec.ex) - 1)
            outcomes = None
        for i, (A, B, case_seed) in enumerate(zip(A3, B3, seeds)):     # judged case by case, in order
            call, previous = Call(A.copy(), B.copy(), int(case_seed), name), rec.last
            out = None if outcomes is None else _outcome(outcomes[i])
            if out is None:
                out = rec.run(call)
            else:
                rec.last = call
            ok, matched = _judge(check, kern, call, out)
            done += 1
            _tally(row, matched)
            if not ok:
                if outcomes is not None and _ran_past(outcomes, i):     # replay up to it
                    rec.ex.restart(len(rec.ex) - 1, then=_prefix(A3, B3, seeds, i + 1))
                return Failure(call, out, previous), done
    return None, done


def _draws_one_by_one(check: Check, kern, rec: Recorder, row: dict, rng, shapes, count: int, stop: float, name: str,
                      emit):
    """_draws for a kernel whose cases carry parameters of their own (a requantizing one): drawn as the search
    draws them (batch.draw_case) and run through the per-case path, without hypothesis's cost per example. (first
    failure or None, cases run)."""
    done = 0
    emit({"event": "start", "check": check.id, "case": f"{name}:one-by-one"})       # a crash names the draws
    while done < count and time.perf_counter() < stop:
        A, B, quant = batch.draw_case(kern, check.domain, shapes, rng)
        call, previous = Call(A, B, int(batch.draw_seeds(0, 1)[0]) + done, name, quant), rec.last
        out = rec.run(call)
        ok, matched = _judge(check, kern, call, out)
        done += 1
        _tally(row, matched)
        if not ok:
            return Failure(call, out, previous), done
    return None, done


def _redraw(kern, domain: str, shapes, state: dict, count: int):
    """How to draw a batch again (for a replay): the same draw from the same random state, its first `count`."""
    def again():
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        A3, B3 = batch.draw_batch(kern, domain, shapes, rng)
        return A3[:count], B3[:count]
    return again


def _ran_past(outcomes: list, i: int) -> bool:
    """Whether a batch ran calls after its case i (after a runaway loop it stopped: BatchStopped)."""
    return any(not isinstance(o, BatchStopped) for o in outcomes[i + 1:])


def _prefix(A3, B3, seeds, n: int):
    """The calls of a batch's first n cases, as one batch (a replay up to a failing case)."""
    A3, B3, seeds = A3[:n].copy(), B3[:n].copy(), [int(s) for s in seeds[:n]]
    return lambda ex: batch.run_many(ex, A3, B3, seeds)


# Failing cases besides the one shrunk that narrow a wrong value's names: the earliest, then the largest. A
# requantizing kernel's readings cost a few stage evaluations each; an int32 kernel's family search up to variants'
# budget, so it takes the earliest only, as it always did.
LARGE_WITNESSES = 3
WITNESSES = {True: 1 + LARGE_WITNESSES, False: 1}


def explain(check: Check, kern, rec: Recorder, failure: Failure, *, shrinking: bool = True, witnesses=()):
    """(kind, cause, minimal failure): diagnose the failure, then shrink it keeping the same kind of failure
    (not a non-deterministic one, nor a runaway loop, whose every try costs the budget), and diagnose the shrunk
    case again: the cause is the counterexample's own (its fault, its C, its variants), never the found case's. A
    wrong value is named by the shrunk case's readings, narrowed to the families the found case and `witnesses`
    (other failing cases) share. A requantizing kernel's wrong value is shrunk from the smallest of these cases
    that shows the reading most of them show, keeping it: the counterexample shows the bug named. Where the shrunk
    case diagnoses as another kind of failure than the found one, the found case is the counterexample, with its
    own cause."""
    witnesses = [f for f in witnesses if f.outcome.C is not None]
    if not shrinking:
        kind, cause = diagnose(check, kern, rec, failure, also=[(f.call, f.outcome.C) for f in witnesses])
        return kind, cause, failure
    kind, cause = diagnose(check, kern, rec, failure, name=False)      # named below, from the case shown
    if kind == "nondeterministic":
        return kind, cause, failure
    keep = None
    if kind == "value" and kern.quantized:
        failure, witnesses, keep = _most_read(check, kern, failure, witnesses)
    others = [(f.call, f.outcome.C) for f in witnesses]
    A, B, quant = _shrunk(still_fails(check, kern, rec, kind, failure, keep), failure, kern,
                          STATE_SHRINK_TRIES if kind == "state" else SHRINK_TRIES)
    call = Call(A, B, failure.call.seed, failure.call.case, quant, shrunk_options(failure.call, kern, A, B))
    runner = rec.fresh() if kind == "state" else rec
    if kind == "state" and failure.previous is not None:
        runner.run(failure.previous)
    shrunk = Failure(call, runner.run(call), failure.previous)
    found = [(failure.call, failure.outcome.C)] if failure.outcome.C is not None else []
    shrunk_kind, shrunk_cause = diagnose(check, kern, runner, shrunk, also=found + others)
    if shrunk_kind == kind:
        return kind, shrunk_cause, shrunk
    if kind == "value":
        cause += _variants(check, kern, failure.call, failure.outcome.C, others, rec)
    return kind, cause, failure


def _most_read(check, kern, failure: Failure, witnesses: list[Failure]):
    """(where to shrink from, the other failures, the readings to keep) for a requantizing kernel's wrong value:
    the readings (keys of quantized.named_readings) most of the failing cases share (a tiny case fits a dozen; the
    bug is the one every case fits), and the smallest case with one of them, which the shrink starts from. None to
    keep where no case has a reading."""
    cases = [failure, *witnesses]
    keys = [{k for k, _ in quantized.named_readings(check.check, kern, f.call.A, f.call.B, f.call.quant,
                                                      f.outcome.C)} for f in cases]
    counts: dict[str, int] = {}
    for k in keys:
        for key in k:
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return failure, witnesses, None
    keep = {key for key, n in counts.items() if n == max(counts.values())}
    # the start is a wrong value like the found case (not a witness with C left unwritten)
    starts = [f for f, k in zip(cases, keys) if k & keep and (f is failure or _at_sight(check, kern, f.call, f.outcome)
                                                              is None)]
    if not starts:
        return failure, witnesses, None
    start = min(starts, key=lambda f: f.call.A.size + f.call.B.size)
    return start, [f for f in cases if f is not start], keep


def _shrunk(fails, failure: Failure, kern, tries: int):
    """(A, B, quant) of the shrunk failure: operands, and a requantizing kernel's parameters with them."""
    A, B, q = failure.call.A.copy(), failure.call.B.copy(), failure.call.quant
    if q is None:
        return (*shrink(fails, A, B, tries=tries), None)
    return shrink(fails, A, B, tries=tries, quant=q, simpler=lambda q: quantized.simplifications(kern, q))


def search(check: Check, kern, rec: Recorder, examples: int, seed: int, database: str | None = None):
    """hypothesis.find: the smallest (A, B) the check fails on, within `examples` tries; (Failure or None, tried,
    replayed). Its random source is seeded by the check and the seed, so kernels of one tile see different shapes
    and a run repeats. With a `database` (example_database: a folder or a Redis URL), the counterexamples kept for
    this check are replayed first: one that still fails is the failure, with no new search (`tried` counts the
    replays, `replayed` says how many there were). A kernel whose result depends on earlier calls makes
    hypothesis's replays disagree (Flaky): then the first failing example, with the call before it, is the
    failure; hypothesis's own error never reaches the row."""
    if examples <= 0:       # --examples 0: the generated cases only
        return None, 0, 0
    tried, failures, seen = [0], [], {}     # failures: [(size, Failure)], the smallest first once sorted
    started = []

    def fails(problem, case=f"{check.id}:search:{seed}"):
        A, B, q = problem if len(problem) == 3 else (*problem, None)
        key = (A.shape, B.shape, A.tobytes(), B.tobytes(), repr(quantized.to_json(q)))
        if key in seen:
            return seen[key]
        if started and time.perf_counter() - started[0] > SEARCH_SHRINK_SECONDS:
            raise _OutOfShrinkTime     # hypothesis would go on drawing; the smallest failure so far is kept
        tried[0] += 1
        call, previous = Call(A, B, SEARCH_SEED, case, q), rec.last
        out = rec.run(call)
        bad = seen[key] = not _judge(check, kern, call, out)[0]
        if bad:
            started[:] = started or [time.perf_counter()]
            size = (A.size + B.size, int(np.count_nonzero(A) + np.count_nonzero(B)))
            failures.append((size, Failure(Call(A.copy(), B.copy(), SEARCH_SEED, call.case, q), out, previous)))
        return bad

    def smallest():
        return min(failures, key=lambda f: f[0])[1] if failures else None
    store = ExampleStore(database, check, kern) if database else None
    stored = store.replays() if store else []
    for problem in stored:
        fails(problem, f"{check.id}:replay")
    if failures:
        return smallest(), tried[0], len(stored)
    try:
        with _without_local_constants():
            problem = find(problems(kern, check.domain), fails,
                           settings=settings(max_examples=examples, database=None, deadline=None,
                                             derandomize=False, suppress_health_check=list(HealthCheck),
                                             phases=[Phase.generate, Phase.shrink]),
                           random=Random(f"{check.id}:{seed}"))
    except NoSuchExample:
        return None, tried[0], len(stored)
    except (Flaky, _OutOfShrinkTime):
        failure = smallest()
    else:
        A, B, q = problem if len(problem) == 3 else (*problem, None)
        call = Call(A, B, SEARCH_SEED, f"{check.id}:search:{seed}", q)
        previous = rec.last
        failure = Failure(call, rec.run(call), previous)
    if store and failure is not None:
        store.save(failure.call.A, failure.call.B, failure.call.quant)
    return failure, tried[0], len(stored)


def _drawn_search(check: Check, kern, rec: Recorder, row: dict, examples: int, seed: int, database: str | None,
                  emit):
    """search() with its `examples` drawn from its own distribution (batch.draw_case: each its own shape, elements
    and parameter style, as cases.problems gives them to hypothesis) and run one by one (_draws_one_by_one), not
    through hypothesis's engine, which costs about four times what running and judging a case costs
    (docs/xnnpack-campaign.md, "Speed"); `lowp fuzz`'s batched draws share one shape a batch, so a search's
    examples would reach few shapes. The example database's counterexamples are replayed first, as search()
    replays them; a failure found is kept there and is shrunk by lowp's shrinker (explain), as a generated case's
    is. The draws' cases count into the row's results matched. (Failure or None, tried, replayed)."""
    if examples <= 0:
        return None, 0, 0
    store = ExampleStore(database, check, kern) if database else None
    stored = store.replays() if store else []
    for tried, (A, B, *q) in enumerate(stored, 1):    # search()'s replay, smallest first: the first still failing
        call, previous = Call(A, B, SEARCH_SEED, f"{check.id}:replay", q[0] if q else None), rec.last
        out = rec.run(call)
        if not _judge(check, kern, call, out)[0]:
            return Failure(call, out, previous), tried, len(stored)
    rng, shapes = batch.draw_rng(f"{check.id}:search", seed), batch.Shapes.of(kern, check.domain)
    found, drawn = _draws_one_by_one(check, kern, rec, row, rng, shapes, examples, float("inf"),
                                     f"{check.id}:search:{seed}", emit)
    if store and found is not None:
        store.save(found.call.A, found.call.B, found.call.quant)
    return found, len(stored) + drawn, len(stored)


@contextmanager
def _without_local_constants():
    """hypothesis (6.131 on) also draws, now and then, integer literals it finds in the "local" modules loaded in
    the process (not the standard library's, not site-packages'): which modules are loaded differs between `lowp
    conformance`, `lowp fuzz`, the pytest plugin and a Ray node's check server, and with the user's own code, so
    one seed would search differently in each, and a search found a bug in one that it missed in another. During
    lowp's search that pool is empty: the draws follow from the strategies, hypothesis's global constants and the
    seed alone. The pool is hypothesis's private API: where it is not there (another version), nothing is changed."""
    try:
        from hypothesis.internal.conjecture import providers
        original, cache, empty = providers._get_local_constants, providers.CONSTANTS_CACHE, providers.Constants()
    except (ImportError, AttributeError):
        yield
        return
    providers._get_local_constants = lambda: empty
    cache.cache.clear()             # permitted constants per choice type, computed with the pool
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()


class _OutOfShrinkTime(Exception):
    pass


def shrink(fails, A, B, tries: int = SHRINK_TRIES, quant: dict | None = None, simpler=None):
    """Greedy shrinking after hypothesis (or of a generated case it did not find): delete rows, columns and depth in
    halving chunks (so a failure that needs K % 32 == 31 survives deleting 32 at a time), then zero elements in
    halving chunks, then (a requantizing kernel) try `simpler(quant)`'s parameter sets, until nothing more can go or
    `tries` attempts are spent: the fewest rows, columns, depth and nonzero elements, and the plainest parameters,
    that still fail. `fails(A, B)`, or `fails(A, B, quant)` when quant is given (its per-row and per-channel arrays
    are cut with the rows and columns). Returns (A, B), or (A, B, quant) when quant is given.
    An attempt at operands tried before takes the answer it had (a pass after the last change repeats the one before
    it: a third to a half of the attempts); it still counts against `tries`, so the result is the one every attempt
    run would give."""
    budget, answers = [tries], {}

    def attempt(A2, B2, q2) -> bool:
        if budget[0] <= 0 or not (A2.shape[0] and B2.shape[1] and A2.shape[1]):
            return False
        budget[0] -= 1
        key = _attempt_key(A2, B2, q2 if quant is not None else None)
        if key not in answers:
            answers[key] = bool(fails(A2, B2) if quant is None else fails(A2, B2, q2))
        return answers[key]

    q = quant
    changed = True
    while changed and budget[0] > 0:
        changed = False
        for axis in (2, 0, 1):
            A, B, q, cut = _truncate(A, B, q, axis, attempt)
            A, B, q, moved = _delete_chunks(A, B, q, axis, attempt)
            changed |= moved or cut
        for which in (0, 1):
            A, B, moved = _zero_chunks(A, B, q, which, attempt)
            changed |= moved
        if simpler is not None and q is not None:
            for q2 in simpler(q):
                if attempt(A, B, q2):
                    q, changed = q2, True
                    break
    return (A, B) if quant is None else (A, B, q)


def _attempt_key(A, B, q) -> bytes:
    """A digest of a shrink attempt's operands and parameters: their shapes, types and bytes."""
    return quantized.contents_key(A, B, q or {})


def _chunks(size: int):
    """Halving chunk sizes, down to one element where the axis is short and to size/64 where it is long (a deep
    case cannot afford a try per element: ladder cases are generated at the depth that matters already)."""
    chunk = 1 << max(0, size.bit_length() - 1)
    smallest = max(1, size // 64)
    while chunk >= smallest:
        yield chunk
        chunk //= 2


def _take(A, B, q, axis, n):
    """The first n rows of A (axis 0), columns of B (axis 1) or depth values of both (axis 2), and q's matching
    per-row or per-channel entries."""
    q = quantized.take(q, axis, slice(0, n))
    if axis == 0:
        return A[:n], B, q
    if axis == 1:
        return A, B[:, :n], q
    return A[:, :n], B[:n], q


def _truncate(A, B, q, axis, attempt):
    """Bisect for the shortest prefix along `axis` that still fails: a failure that needs depth (an accumulator
    that overflows from K = 274) gets its minimal depth in log2(K) tries, where deleting chunks of a long axis
    stops at 1/64 of it."""
    size = (A.shape[0], B.shape[1], A.shape[1])[axis]
    lo, hi, best = 1, size - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if attempt(*_take(A, B, q, axis, mid)):
            best, hi = mid, mid - 1
        else:
            lo = mid + 1
    if best is None:
        return A, B, q, False
    A, B, q = _take(A, B, q, axis, best)
    return A, B, q, True


def _delete_chunks(A, B, q, axis, attempt):
    moved = False
    size = (A.shape[0], B.shape[1], A.shape[1])[axis]
    for chunk in _chunks(size):
        start = size - chunk
        while start >= 0:
            idx = np.arange(start, min(start + chunk, size))
            keep = np.setdiff1d(np.arange(size), idx)
            if axis == 0:
                A2, B2 = A[keep], B
            elif axis == 1:
                A2, B2 = A, B[:, keep]
            else:
                A2, B2 = A[:, keep], B[keep]
            q2 = quantized.take(q, axis, keep)
            if attempt(A2, B2, q2):
                A, B, q, moved = A2, B2, q2, True
                size -= len(idx)
            start = min(start, size) - chunk
    return A, B, q, moved


def _zero_chunks(A, B, q, which, attempt):
    moved = False
    X = (A, B)[which]
    for chunk in _chunks(int(np.count_nonzero(X))):
        nonzero = np.flatnonzero(X)
        for start in range(0, len(nonzero), chunk):
            idx = nonzero[start:start + chunk]
            X2 = X.copy()
            X2.flat[idx] = 0
            if attempt(*((X2, B) if which == 0 else (A, X2)), q):
                X, moved = X2, True
                A, B = (X, B) if which == 0 else (A, X)
    return A, B, moved


def replay(case_id: str, journal_rows: dict | None = None) -> dict:
    """Re-run one case (by its id), one stored counterexample (by its check id: with its poison seed, and after
    the call before it on a fresh copy of the kernel where the failure depends on earlier calls), or one problem
    written out in full (lowp.conformance.search.problem), in this process."""
    previous = None
    if journal_rows and case_id in journal_rows:
        row = journal_rows[case_id]
        cx = row.get("counterexample")
        if not cx:        # a PASS (or SKIPPED, CRASH) row: nothing failed, so there is no call to repeat
            raise ValueError(f"{case_id}: the check is {row.get('verdict', 'not finished')} and has no "
                             "counterexample to replay; replay one of its cases by id (`lowp conformance list "
                             "--case '*'` lists them)")
        kern = get_kernel(row["kernel"])
        call = _call_from(cx, kern)
        previous = _call_from(cx["previous"], kern) if cx.get("previous") else None
        check = Check(row["kernel"], row["check"], row["domain"], row["claimed"])
    elif is_problem(case_id):       # a self-contained problem id (the report's repro line)
        spec = decode(case_id)
        kern = get_kernel(spec["kernel"])
        call = Call(spec["A"].astype(kern.a_dtype), spec["B"].astype(kern.b_dtype), spec["seed"], None,
                    quantized.from_json(spec["quant"]), spec["options"])
        check = Check(kern.name, spec["check"], spec["domain"], True)
    else:
        case = Case.from_id(case_id)
        kern = get_kernel(case.kernel)
        call = case_call(case, kern)
        check = Check(case.kernel, case.check, case.domain, True)
    ex = executor(kern)
    reason = ex.unavailable()
    if reason:
        return {"id": case_id, "verdict": "SKIPPED", "reason": reason}
    rec = Recorder(ex.with_fresh_state() if previous is not None else ex)   # the state the failure was found in
    if previous is not None:
        rec.run(previous)
    failure = Failure(call, rec.run(call), previous)
    ok = _judge(check, kern, call, failure.outcome)[0]
    kind, cause = ("", "") if ok else diagnose(check, kern, rec, failure)
    return {"id": case_id, "kernel": check.kernel, "check": check.check, "domain": check.domain,
            "verdict": "PASS" if ok else "FAIL", **counterexample(check, kern, failure, kind, cause)}


def case_call(case: Case, kern, made: tuple[np.ndarray, np.ndarray] | None = None) -> Call:
    """The call a generated case makes, from its id alone: operands, parameters and ABI options. A `zero_index_<i>`
    case's row i is its input zero point (padding the indirection buffer points at the zero buffer); its
    parameters are drawn again for that A (the same zero points: they are drawn first, from the seed). made: the
    case's operands, made already (shared_case_call)."""
    A, B = made or operands(case, kern)
    quant = case_quant(case, kern, A, B)
    padded = with_zero_row(case, A, quant["a_zero_point"]) if quant and "a_zero_point" in quant else A
    if padded is not A:
        A, quant = padded, case_quant(case, kern, padded, B)
    return Call(A, B, case.seed, case.id, quant, abi_options(case, kern))


# A kernel's checks share their generated cases' calls (pool.jobs_of runs them in one process): its behaviour-model
# check and its claimed contract's check make the same calls where their domains have the same ranges, and drawing
# a case's parameters (zero points, the output stage's draw fitted to the accumulators) costs more than running it.
# Kept for the kernel entry last asked about; each check gets copies.
_SHARED_CALLS = KeptForKernel(256 << 20)


def shared_case_call(case: Case, kern) -> Call:
    """case_call(case, kern), drawn once for every check of the kernel whose case is the same but for the check:
    the same name, shape, value class and seed, and a domain of the same ranges (the `outside` probe's parameters
    are drawn beyond the documented domain: its own)."""
    made = (ranges(kern, case.domain), case.m, case.n, case.k, case.values, case.seed)    # what operands() reads
    key = (case.domain == "outside", case.name, *made)
    call = _SHARED_CALLS.get(kern, key, lambda: case_call(case, kern, _shared_operands(case, kern, made)),
                             lambda call: call.A.nbytes + call.B.nbytes)
    return Call(call.A.copy(), call.B.copy(), call.seed, case.id, _copied(call.quant), _copied(call.options))


# The `outside` probe's cases are the behaviour-model check's tile edges and ladder over the same full ranges (its
# parameters are its own): their operands are made once (some 80 us a case). Never written to: calls hand out copies.
_SHARED_OPERANDS = KeptForKernel(64 << 20)


def _shared_operands(case: Case, kern, key: tuple) -> tuple[np.ndarray, np.ndarray]:
    return _SHARED_OPERANDS.get(kern, key, lambda: operands(case, kern), lambda ab: ab[0].nbytes + ab[1].nbytes)


def _copied(values: dict | None) -> dict | None:
    return None if values is None else {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}


def case_quant(case: Case, kern, A, B) -> dict | None:
    """A requantizing kernel's parameters for a generated case, from its seed and what its name pins (None for an
    int32 kernel)."""
    if not kern.quantized:
        return None
    from lowp.conformance.search.stage_edges import edge_of
    return quantized.draw_params(kern, A, B, case.seed, quantized.case_style(case.values), case.domain,
                                 quantized.case_pins(kern, case.name), edge_of(case.name))


def _call_from(cx: dict, kern) -> Call:
    A, B, quant = operands_from_json(cx, kern)
    return Call(A, B, cx.get("seed", 0), cx.get("case"), quant, cx.get("options"))
