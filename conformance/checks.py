"""One check: a kernel against its behaviour model or a contract, on a domain, through one backend. Runs the
generated cases, then a hypothesis search, and shrinks any failure to a minimal counterexample.

This module runs inside a worker process; it reports through `emit(dict)` so that the parent can journal every
case as it happens and knows which case a crashing kernel was running.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample

from lowp.kernels import executor, kernel as get_kernel

from .cases import Case, cases_for, operands, problems
from .contracts import contract


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
    contract is not 'exact', the exact contract on the full range, to show where exactness ends (not claimed)."""
    out = []
    for k in kernels:
        full = _is_full(k)
        out.append(Check(k.name, "model", "full", True))
        out.append(Check(k.name, k.contract, "claimed", True))
        if not (full and k.contract == "exact"):
            out.append(Check(k.name, "exact", "full", False))
    return out


def _is_full(k) -> bool:
    ia, ib = np.iinfo(k.a_dtype), np.iinfo(k.b_dtype)
    return k.domain.a == (ia.min, ia.max) and k.domain.b == (ib.min, ib.max)


def verdict_of(check: Check, kern, A, B, C) -> tuple[bool, str | None, np.ndarray]:
    """(ok, matched variant, expected) for one executed case."""
    if check.check == "model":
        expected = kern.predict(A, B)
        ok = np.array_equal(C, expected)
        return ok, "behaviour model" if ok else None, expected
    j = contract(check.check).judge(C, A, B)
    return j.ok, j.matched, j.expected


def counterexample(check: Check, kern, A, B, C, case_id: str) -> dict:
    ok, matched, expected = verdict_of(check, kern, A, B, C)
    diff = np.argwhere(C != expected)
    first = [int(x) for x in diff[0]] if len(diff) else None
    return {"case": case_id, "shape": [int(A.shape[0]), int(B.shape[1]), int(A.shape[1])],
            "nonzero": int(np.count_nonzero(A) + np.count_nonzero(B)), "A": A.tolist(), "B": B.tolist(),
            "actual": C.tolist(), "expected": expected.tolist(), "first_diff": first,
            "actual_at_first": int(C[tuple(first)]) if first else None,
            "expected_at_first": int(expected[tuple(first)]) if first else None, "matched": matched}


def run_check(check: Check, emit: Callable[[dict], None], *, examples: int = 150, seed: int = 0,
              grid: bool = True) -> dict:
    """Execute one check and return its row (also emitted)."""
    kern = get_kernel(check.kernel)
    ex = executor(kern)
    row = {"event": "row", **asdict(check), "id": check.id, "backend": ex.backend, "target": kern.target,
           "contract_claimed": kern.contract, "cases": 0, "executed": 0, "failed": 0, "matched": {},
           "verdict": "NOT RUN", "reason": "", "counterexample": None, "seconds": 0.0}
    reason = ex.unavailable()
    cases = cases_for(kern, check.check, check.domain, grid=grid, seed=seed)
    row["cases"] = len(cases) + examples
    if reason:
        row.update(verdict="SKIPPED", reason=reason)
        emit(row)
        return row
    start = time.perf_counter()
    first_fail = None
    for case in cases:
        emit({"event": "start", "check": check.id, "case": case.id})
        A, B = operands(case, kern)
        C = ex.run(A, B)
        ok, matched, _ = verdict_of(check, kern, A, B, C)
        row["executed"] += 1
        row["matched"][matched or "none"] = row["matched"].get(matched or "none", 0) + 1
        if not ok:
            row["failed"] += 1
            first_fail = first_fail or (A, B, C, case.id)
        emit({"event": "case", "check": check.id, "case": case.id, "ok": ok, "matched": matched})
    found, searched = search(check, kern, ex, examples, seed)
    row["executed"] += searched
    row["cases"] = len(cases) + searched      # the search ran this many (it stops shrinking when it is done)
    if found is not None:
        row["failed"] += 1
    if found is None and first_fail is not None:
        found = first_fail[0], first_fail[1], first_fail[3]
    if found is not None:   # hypothesis shrinks within its budget; a greedy pass finishes the job
        A, B = shrink(check, kern, ex, found[0].copy(), found[1].copy())
        case_id = found[2]
        row["counterexample"] = counterexample(check, kern, A, B, ex.run(A, B), case_id)
    row["verdict"] = "FAIL" if row["failed"] else "PASS"
    row["seconds"] = round(time.perf_counter() - start, 3)
    emit(row)
    return row


def search(check: Check, kern, ex, examples: int, seed: int):
    """hypothesis.find: the smallest (A, B) the check fails on, within `examples` tries; (found, tried)."""
    tried = [0]

    def fails(problem):
        tried[0] += 1
        A, B = problem
        return not verdict_of(check, kern, A, B, ex.run(A, B))[0]
    try:
        A, B = find(problems(kern, check.domain), fails,
                    settings=settings(max_examples=examples, database=None, deadline=None, derandomize=True,
                                      suppress_health_check=list(HealthCheck),
                                      phases=[Phase.generate, Phase.shrink]))
    except NoSuchExample:
        return None, tried[0]
    return (A, B, f"{check.id}:search:{seed}"), tried[0]


def shrink(check: Check, kern, ex, A, B):
    """Greedy shrinking of a failing case hypothesis did not find: drop rows, columns and depth, then zero
    elements, keeping the failure."""
    def fails(A, B):
        return A.size and B.size and not verdict_of(check, kern, A, B, ex.run(A, B))[0]
    changed = True
    while changed:
        changed = False
        for axis, size in ((0, A.shape[0]), (1, B.shape[1]), (2, A.shape[1])):
            for i in reversed(range(size)):
                if axis == 0:
                    A2, B2 = np.delete(A, i, 0), B
                elif axis == 1:
                    A2, B2 = A, np.delete(B, i, 1)
                else:
                    A2, B2 = np.delete(A, i, 1), np.delete(B, i, 0)
                if A2.shape[0] and B2.shape[1] and A2.shape[1] and fails(A2, B2):
                    A, B, changed = A2, B2, True
        for X in (A, B):
            for idx in zip(*np.nonzero(X)):
                old = X[idx]
                X[idx] = 0
                if fails(A, B):
                    changed = True
                else:
                    X[idx] = old
    return A, B


def replay(case_id: str, journal_rows: dict | None = None) -> dict:
    """Re-run one case (by its id) or one stored counterexample (by its check id), in this process."""
    if journal_rows and case_id in journal_rows:
        row = journal_rows[case_id]
        cx = row["counterexample"]
        kern = get_kernel(row["kernel"])
        A, B = np.array(cx["A"], kern.a_dtype).reshape(cx["shape"][0], cx["shape"][2]), \
            np.array(cx["B"], kern.b_dtype).reshape(cx["shape"][2], cx["shape"][1])
        check = Check(row["kernel"], row["check"], row["domain"], row["claimed"])
    else:
        case = Case.from_id(case_id)
        kern = get_kernel(case.kernel)
        A, B = operands(case, kern)
        check = Check(case.kernel, case.check, case.domain, True)
    ex = executor(kern)
    reason = ex.unavailable()
    if reason:
        return {"id": case_id, "verdict": "SKIPPED", "reason": reason}
    C = ex.run(A, B)
    cx = counterexample(check, kern, A, B, C, case_id)
    ok = verdict_of(check, kern, A, B, C)[0]
    return {"id": case_id, "verdict": "PASS" if ok else "FAIL", **cx}
