"""One check of a ggml vec_dot (lowp.kernels.ggml.kernel.VecDotKernel): its generated cases, then drawn ones, each
run on the variant's executor and judged by its contract; the first failure shrinks to a block count and block
values, and its row carries the counterexample as the report prints it.

The checks of a vec_dot (plan):
- exact, claimed: the exact domain (lowp.kernels.ggml.exact), bit for bit;
- ordered:<order> (where the kernel's order is modelled) or bounded, claimed: scales of every size;
- exact, outside (not claimed): activation codes of -128, which ggml's preconditions exclude.

Runs in the pool's child process, like lowp.conformance.run.checks.run_check, and reports through emit(dict).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lowp.emulator.errors import EmulatorError, EmulatorLacksInstruction, ExecutorDisagrees
from lowp.kernels.ggml.dot import exact_dot
from lowp.kernels.ggml.kernel import REPACK_KINDS, VecDotKernel, get
from lowp.kernels.ggml.executor import VecDot

from lowp.conformance.contracts import ggml as contracts
from lowp.conformance.search import ggml_cases as cases
from lowp.conformance.report.rows import check_row
from lowp.conformance.run.checks import Check

CASE_BUDGET = 5.0           # seconds one vec_dot call may take before it counts as hung
# The executor's problems, not the kernel's: a row says no executor here runs the kernel, never FAIL
EXECUTOR_GAPS = (ExecutorDisagrees, EmulatorLacksInstruction)


def plan(kernels: list[VecDotKernel]) -> list[Check]:
    out = []
    for k in kernels:
        if k.kind in REPACK_KINDS:          # every element of s exact (lowp.kernels.ggml.repack)
            out.append(Check(k.name, "exact", "claimed", True))
            continue
        if k.kind == "quantize":            # its bytes are its claimed variant's (lowp.kernels.ggml.quantize)
            out.append(Check(k.name, f"variant:{k.order}", "claimed", True))
            continue
        out.append(Check(k.name, "exact", "claimed", True))
        if k.pairs:
            out.append(Check(k.name, "exact", "nrc2", True))
        if k.order and k.order_claimed:
            out.append(Check(k.name, f"ordered:{k.order}", "claimed", True))
        else:
            out.append(Check(k.name, "bounded", "claimed", True))
            if k.order:             # its file is not the code the order models: the order is a probe
                out.append(Check(k.name, f"ordered:{k.order}", "probe", False))
        out.append(Check(k.name, "exact", "outside", False))
    return out


@dataclass
class Outcome:
    s: np.float32 | None = None
    fault: Exception | None = None

    def describe(self) -> str:
        if self.fault is not None:
            return str(self.fault)
        return f"{float(self.s)!r} ({contracts._bits(self.s)})"


def _call(vd: VecDot, k: VecDotKernel, case: cases.Case) -> Outcome:
    try:
        return Outcome(vd.call(k.symbol, case.x, case.y, case.n))
    except EXECUTOR_GAPS:
        raise                   # the executor's problem: the check's row says no executor here runs the kernel
    except EmulatorError as e:
        return Outcome(fault=e)


def _executor_gap(row: dict, k: VecDotKernel, vd, error: Exception, emit) -> dict:
    """The row of a check an executor could not run faithfully (EXECUTOR_GAPS): SKIPPED, naming it, emitted."""
    row.update(verdict="SKIPPED", reason=f"{k.label}: {vd.describe()}: {error}")
    emit(row)
    return row


def _judge(check: Check, k: VecDotKernel, case: cases.Case, out: Outcome) -> contracts.Judgement:
    if out.fault is not None:
        return contracts.Judgement(False, float("nan"), "fault")
    return contracts.judge(check.check, k.x_type, case.x, case.y, case.n, out.s)


def _generated(check: Check, k: VecDotKernel, seed: int) -> list[cases.Case]:
    if check.domain == "outside":
        return cases.outside_cases(k.x_type, seed)
    if check.domain == "probe":         # an order not claimed: the float contracts' cases
        return cases.scaled_cases(k.x_type, seed)
    return cases.exact_cases(k.x_type, seed) if check.check == "exact" else cases.scaled_cases(k.x_type, seed)


def _drawn(check: Check, k: VecDotKernel, rng) -> cases.Case:
    return cases.random_exact(k.x_type, rng) if check.check == "exact" else cases.random_scaled(k.x_type, rng)


def run_check(check: Check, emit: Callable[[dict], None], *, examples: int = 30, seed: int = 0,
              probe_examples: int | None = None, budget: float | None = None, **_ignored) -> dict:
    """Execute one check of a registered vec_dot and return its row (also emitted)."""
    k = get(check.kernel)
    if k.kind in REPACK_KINDS:
        return run_repacked(check, k, emit, seed, budget or CASE_BUDGET)
    vd = VecDot(k.build, k.vector_bits, budget=budget or CASE_BUDGET)
    if not check.claimed and probe_examples is not None:
        examples = probe_examples
    if check.domain == "outside":
        examples = 0                    # the probes are the generated cases
    if check.domain == "nrc2":
        return run_pairs(check, k, vd, emit, seed)
    if k.kind == "quantize":
        return run_quantizer(check, k, vd, emit, seed)
    generated = _generated(check, k, seed)
    row = _opened(check, k, vd, emit, _claimed(k), len(generated) + examples)
    if row["verdict"] == "SKIPPED":
        return row
    start = time.perf_counter()
    rng = np.random.default_rng(seed + 99)
    try:
        return _cases_and_shrink(check, k, vd, emit, row, generated, examples, rng, start)
    except EXECUTOR_GAPS as e:
        return _executor_gap(row, k, vd, e, emit)
    finally:
        vd.close()


def _cases_and_shrink(check: Check, k: VecDotKernel, vd: VecDot, emit, row: dict, generated: list, examples: int,
                      rng, start: float) -> dict:
    """run_check's cases in order until the first failure, which is shrunk into the row's counterexample."""
    failure = None
    for i in range(len(generated) + examples):
        case = generated[i] if i < len(generated) else _drawn(check, k, rng)
        emit({"event": "case", "check": check.id, "case": case.name})
        out = _call(vd, k, case)
        verdict = _judge(check, k, case, out)
        row["executed"] += 1
        row["matched"][verdict.matched or "other"] = row["matched"].get(verdict.matched or "other", 0) + 1
        if not verdict.ok:
            row["failed"] += 1
            row.setdefault("first_failure_seconds", round(time.perf_counter() - start, 3))
            failure = (case, out)
            break
    if failure is not None:
        case, out = failure
        small = cases.shrink(lambda c: not _judge(check, k, c, _call(vd, k, c)).ok, k.x_type, case)
        small_out = _call(vd, k, small)
        verdict = _judge(check, k, small, small_out)
        row["cause"] = _cause(check, small_out, verdict)
        row["counterexample"] = counterexample(check, k, vd, small, small_out, verdict)
    row["cases"] = row["executed"] if failure is not None else row["cases"]
    row["searched"] = max(0, row["executed"] - len(generated))
    return _closed(row, start, emit)


def run_pairs(check: Check, k: VecDotKernel, vd: VecDot, emit, seed: int) -> dict:
    """The nrc == 2 path: every pair case's four dot products exact, s[2] (between the two output rows at bs = 3)
    left alone."""
    def one(case) -> str | None:
        expected = np.array([[np.float32(float(exact_dot(k.x_type, x, y, case.n))) for y in case.ys]
                             for x in case.xs], np.float32)
        return _pairs_problem(*vd.call_pairs(k.symbol, case.xs, case.ys, case.n), expected)
    return _run_until_first_problem(check, k, vd, emit, cases.pair_cases(k.x_type, seed), one, "exact",
                                    "exact (nrc == 2: s[j*bs + i] = x_i . y_j)")


# A repacked gemv/gemm's cases, smallest first (so the first failure is the fewest blocks and columns): (blocks,
# column groups of N); nr cycles through GEMM_ROWS for a gemm (x86's gemms tile 16 rows with 4-row tails and 16
# columns with 8-column ones, arch/x86/repack.cpp L662-664: 4, 8, 16 and 20 rows reach every path), 1 for a gemv.
REPACK_CASES = ((1, 1), (1, 2), (2, 1), (3, 2), (4, 1), (5, 3), (7, 1), (8, 2))
GEMM_ROWS = (4, 8, 16, 20)


def run_repacked(check: Check, k: VecDotKernel, emit, seed: int, budget: float) -> dict:
    """A gemv/gemm's row: each case's every result exact (bit for bit), every other float of s (bs = nc + 3: the
    three between rows) left as the NaN poison, no read past its operands; the first failing case is shrunk to
    one column group and the fewest rows that still fail."""
    from lowp.kernels.ggml import repack
    runner = repack.RepackRunner(k.repack_build(), k.vector_bits, budget=budget)
    layout = repack.REPACKED[k.layout]
    rng = np.random.default_rng(seed + 35)
    shapes = [(nb, layout.ncols * g, 1 if layout.kind == "gemv" else GEMM_ROWS[i % len(GEMM_ROWS)])
              for i, (nb, g) in enumerate(REPACK_CASES)]

    def attempt(nb: int, nc: int, nr: int):
        xs, ys, n = repack.draw_case(k.layout, nb, nc, nr, rng)
        return (nb, nc, nr, xs, ys, n), _repacked_problem(runner, k, xs, ys, n, nr, nc)

    row = _opened(check, k, runner, emit, f"exact, every element ({layout.kind} {layout.ncols}x{layout.blocklen})",
                  len(shapes))
    if row["verdict"] == "SKIPPED":
        return row
    start = time.perf_counter()
    try:
        for nb, nc, nr in shapes:
            emit({"event": "case", "check": check.id, "case": f"blocks{nb}_nc{nc}_nr{nr}"})
            try:
                case, problem = attempt(nb, nc, nr)
            except EXECUTOR_GAPS as e:
                return _executor_gap(row, k, runner, e, emit)
            row["executed"] += 1
            if problem:
                row["failed"] += 1
                row.setdefault("first_failure_seconds", round(time.perf_counter() - start, 3))
                for smaller in ((nb, layout.ncols, min(nr, 4)), (nb, layout.ncols, 1 if nr == 1 else 4)):
                    if smaller[1:] != case[1:3]:
                        again, problem_again = attempt(*smaller)
                        if problem_again:
                            case, problem = again, problem_again
                            break
                row["cause"] = problem[0]
                row["counterexample"] = _repacked_counterexample(k, runner, case, problem)
                break
            row["matched"]["exact"] = row["matched"].get("exact", 0) + 1
    finally:
        runner.close()
    return _closed(row, start, emit)


def _repacked_problem(runner, k: VecDotKernel, xs, ys, n: int, nr: int, nc: int) -> tuple[str, list] | None:
    """None when the call gives every element exactly and leaves the rest of s alone, else (cause, the differing
    elements as (row, column, got, want))."""
    from lowp.kernels.ggml import repack
    vx, vy = repack.operands(k.layout, xs, ys)
    bs = nc + 3
    try:
        s = runner.call(k.symbol, vx, vy, n, nr, nc, bs)
    except EXECUTOR_GAPS:
        raise                   # the executor's problem, not the kernel's: run_repacked skips the row
    except EmulatorError as e:
        return f"fault: {e}", []
    got, clean = repack.result_matrix(k.layout, s, nr, nc, bs)
    want = repack.expected(k.layout, xs, ys)
    wrong = np.argwhere(got.view(np.uint32) != want.view(np.uint32))
    bad = [(int(r), int(c), float(got[r, c]), float(want[r, c])) for r, c in wrong]
    if not len(bad) and clean:
        return None
    if not len(bad):
        return "wrong value: stores outside its results: a float of s between rows (bs = nc + 3) was written", []
    rows, cols = sorted({b[0] for b in bad}), sorted({b[1] for b in bad})
    layout = repack.REPACKED[k.layout]
    reading = ("results left unwritten (the NaN poison)" if all(np.isnan(b[2]) for b in bad) else
               "every result wrong" if len(bad) == got.size else "some results wrong")
    reading += f" ({layout.x_type} {layout.ncols}x{layout.blocklen})"      # one finding per layout, not per symptom
    return (f"wrong value: {reading}: {len(bad)} of {got.size} differ, rows {_span(rows)}, columns {_span(cols)}",
            bad)


def _span(values: list[int]) -> str:
    return f"{values[0]}" if len(values) == 1 else f"{values[0]}..{values[-1]} ({len(values)})"


def _repacked_counterexample(k: VecDotKernel, runner, case, problem) -> dict:
    """The shrunk case as the row keeps it: the weight and activation rows' blocks (before repacking) as hex, the
    shape, and the first differing elements."""
    from lowp.kernels.ggml import repack
    nb, nc, nr, xs, ys, n = case
    cause, bad = problem
    vx, vy = repack.operands(k.layout, xs, ys)
    expected = repack.expected(k.layout, xs, ys)
    lines = [f"{k.name} ({k.label}, {runner.describe()}): `{k.symbol}(n = {n}, s, bs = {nc + 3}, vx, vy, "
             f"nr = {nr}, nc = {nc})` on {nb} block(s) per row of {k.x_type} weights (repacked) and {k.y_type} "
             f"activations.", "", "```"]
    lines += [f"s[{r} * bs + {c}] = {got!r}, expected {want!r}" for r, c, got, want in bad[:6]]
    lines += [f"... and {len(bad) - 6} more"] if len(bad) > 6 else []
    lines += [cause, "```"]
    return {"case": f"blocks{nb}_nc{nc}_nr{nr}", "shape": [nr, nc, n], "seed": 0, "x_type": k.x_type,
            "y_type": k.y_type, "blocks": nb, "nc": nc, "nr": nr, "bs": nc + 3, "vx": vx.hex(), "vy": vy.hex(),
            "differ": [list(b) for b in bad[:16]], "expected": expected.astype(float).tolist(),
            "kind": "fault" if cause.startswith("fault") else "value",
            "cause": cause, "lines": lines}


POISON = 0xA5      # what y holds before a quantizer's call: bytes it leaves unwritten keep it, as the model's prior


def run_quantizer(check: Check, k: VecDotKernel, vd: VecDot, emit, seed: int) -> dict:
    """A quantizer's rows: the bytes it writes must be its claimed variant's, bit for bit; a failure names every
    variant that explains the bytes (or none)."""
    from lowp.kernels.ggml.blocks import FORMATS
    from lowp.kernels.ggml.quantize import VARIANTS

    def claimed(r) -> tuple[np.ndarray, np.ndarray]:
        """(y before the call: poison, the bytes the claimed variant leaves in it) for row r."""
        prior = np.full(r.k // FORMATS[k.x_type].qk * FORMATS[k.x_type].dtype.itemsize, POISON, np.uint8)
        return prior, VARIANTS[k.order].quantize(k.x_type, r.x, r.k, prior)

    def one(r) -> str | None:
        prior, want = claimed(r)
        got = vd.quantize(k.symbol, r.x, r.k, prior)
        return None if np.array_equal(got, want) else _quantized_differently(k, r, got, want, prior)

    def example(r) -> dict:
        """The failing row as a reproducer needs it: x, and the bytes the claimed variant writes from poison."""
        _, want = claimed(r)
        first = ", ".join(f"{float(v)!r}" for v in np.asarray(r.x, np.float32)[:8])
        lines = [f"{k.name} ({k.label}, {vd.describe()}): `{k.symbol}(x, y, k = {r.k})` on row {r.name} (x[:8] = "
                 f"{first}, ...), y starting as 0x{POISON:02x} bytes: its bytes are not variant {k.order}'s."]
        return {"case": r.name, "k": int(r.k), "y_type": k.x_type, "variant": k.order, "poison": POISON,
                "x": np.ascontiguousarray(r.x, np.float32).tobytes().hex(), "expected": bytes(want).hex(),
                "lines": lines}
    return _run_until_first_problem(check, k, vd, emit, cases.quantizer_rows(k.x_type, seed), one, k.order,
                                    f"variant {k.order}: {VARIANTS[k.order].describe}"[:200], example)


def _run_until_first_problem(check: Check, k: VecDotKernel, vd: VecDot, emit, generated: list, one, matched: str,
                             contract: str, example=None) -> dict:
    """A check whose cases are run in order until the first that `one(case)` finds a problem with (its words, or
    None): the row, SKIPPED where nothing here runs the kernel, a fault's words as the problem; `example(case)`,
    if given, the row's counterexample of the failing case."""
    row = _opened(check, k, vd, emit, contract, len(generated))
    if row["verdict"] == "SKIPPED":
        return row
    start = time.perf_counter()
    try:
        for case in generated:
            emit({"event": "case", "check": check.id, "case": case.name})
            try:
                problem = one(case)
            except EXECUTOR_GAPS as e:
                return _executor_gap(row, k, vd, e, emit)
            except EmulatorError as e:
                problem = f"fault: {e}"
            row["executed"] += 1
            if problem:
                row["failed"] += 1
                row["cause"] = f"{problem} (case {case.name})"
                if example is not None:
                    row["counterexample"] = {**example(case), "cause": row["cause"]}
                break
            row["matched"][matched] = row["matched"].get(matched, 0) + 1
    finally:
        vd.close()
    return _closed(row, start, emit)


def _quantized_differently(k: VecDotKernel, r, got: np.ndarray, want: np.ndarray, prior: np.ndarray) -> str:
    from lowp.kernels.ggml.blocks import FORMATS
    from lowp.kernels.ggml.quantize import matching_variants
    size = FORMATS[k.x_type].dtype.itemsize
    block = int(np.flatnonzero(got != want)[0]) // size
    fields = [f for f in FORMATS[k.x_type].dtype.names
              if not np.array_equal(got[block * size:(block + 1) * size].view(FORMATS[k.x_type].dtype)[f],
                                    want[block * size:(block + 1) * size].view(FORMATS[k.x_type].dtype)[f])]
    matches = matching_variants(k.x_type, r.x, r.k, got, prior)
    reading = f"the bytes are variant {' and '.join(matches)}'s" if matches else "no named variant explains the bytes"
    return f"wrong value: {reading}: block {block} differs in {', '.join(fields)}"


def _pairs_problem(got: np.ndarray, s: np.ndarray, expected: np.ndarray) -> str | None:
    if not np.isnan(s[2]):
        return f"wrong value: nrc == 2 wrote s[2] = {float(s[2])!r}, between its two rows (bs = 3)"
    same = got.view(np.uint32) == expected.view(np.uint32)
    if same.all():
        return None
    if (got.T.view(np.uint32) == expected.view(np.uint32)).all():
        return "wrong value: nrc == 2 results transposed (s[i * bs + j] = x_i . y_j)"
    bad = [f"x{i}.y{j} = {float(got[i, j])!r} instead of {float(expected[i, j])!r}"
           for i in range(2) for j in range(2) if not same[i, j]]
    return "wrong value: nrc == 2: " + ", ".join(bad)


def _closed(row: dict, start: float, emit) -> dict:
    """A check's row after its cases: FAIL when one failed, else PASS, its seconds; emitted."""
    row["verdict"] = "FAIL" if row["failed"] else "PASS"
    row["seconds"] = round(time.perf_counter() - start, 3)
    emit(row)
    return row


def _opened(check: Check, k: VecDotKernel, vd: VecDot, emit, contract: str, planned: int) -> dict:
    """A check's row before its cases: SKIPPED (and emitted) where nothing here runs the kernel, else the plan
    event emitted and the executor named where it is not the CPU."""
    row = check_row(check, backend=vd.backend, target=k.arch, contract_claimed=contract, cases=planned)
    reason = vd.unavailable()
    if reason:
        row.update(verdict="SKIPPED", reason=f"{k.label}: {reason}")
        emit(row)
        return row
    if vd.backend != "native":
        row["emulator"] = vd.describe()
    emit({"event": "plan", "check": check.id, "cases": row["cases"]})
    return row


def _claimed(k: VecDotKernel) -> str:
    return "exact + " + (f"ordered:{k.order}" if k.order and k.order_claimed else "bounded")


def _cause(check: Check, out: Outcome, verdict: contracts.Judgement) -> str:
    if out.fault is not None:
        return f"fault: {out.describe()}"
    # "wrong value: <reading>: <detail>": a finding is its first two parts (the contract is the row's check), so
    # one bug that fails the exact and the bounded check is one finding
    explained = verdict.matched or "no simple reading explains it"
    return f"wrong value: {explained}" + (f": {verdict.detail}" if verdict.detail else "")


def counterexample(check: Check, k: VecDotKernel, vd: VecDot, case: cases.Case, out: Outcome,
                   verdict: contracts.Judgement) -> dict:
    """The shrunk case as the row keeps it: blocks as hex (what a reproducer feeds the kernel), decoded values,
    actual and expected, and the lines the report prints."""
    x_hex, y_hex = bytes(case.x.reshape(-1)).hex(), bytes(case.y.reshape(-1)).hex()
    nb = len(case.x)
    lines = [f"{k.name} ({k.label}, {vd.describe()}): `{k.symbol}(n = {case.n}, &s, 0, x, 0, y, 0, 1)` on "
             f"{nb} block(s) of {k.x_type} and {len(case.y)} of {k.y_type} (shrunk from case {case.name}).", "",
             "```", f"x = {_blocks_text(case.x)}", f"y = {_blocks_text(case.y)}"]
    lines += [f"actual   s = {out.describe()}",
              f"expected s = {verdict.expected!r} ({contracts._bits(verdict.expected)})  ({check.check})", "```"]
    return {"case": case.name, "shape": [1, 1, case.n], "nonzero": int(np.count_nonzero(case.y)),
            "seed": 0, "x_type": k.x_type, "y_type": k.y_type, "blocks": nb, "x": x_hex, "y": y_hex,
            "actual": None if out.fault is not None else float(out.s), "expected": verdict.expected,
            "matched": verdict.matched, "kind": "fault" if out.fault is not None else "value",
            "cause": _cause(check, out, verdict), "fault": None if out.fault is None else out.describe(),
            "lines": lines}


def _blocks_text(blocks: np.ndarray) -> str:
    rows = [bytes(b).hex() for b in np.asarray(blocks, np.uint8).reshape(len(blocks), -1)]
    return " | ".join(rows) if len(rows) <= 4 else " | ".join(rows[:4]) + f" | ... ({len(rows)} blocks)"
