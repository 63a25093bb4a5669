"""The batched path (issue 26): many cases of one shape through one executor call, their expected results computed
for the whole batch at once, Python touched per case only where a case is not clean.

A check's per-case path (checks.Recorder, _judge, diagnose, shrink) costs Python per case: guard set-up, one cffi
call, the numpy model, variant matching. Here a batch of cases of one (M, N, K) goes to the executor's
`run_many(As, Bs, seeds=...)` when it has one (natively: one call into the guard library runs them all,
kernels/guard.c lowp_call_batch), else to `run` case by case; the readings the check accepts are computed for the
whole batch (`readings`: exact and pair-saturating accumulations as batched matrix products, any other model or
variant case by case); and each case's C is compared with them. A batch whose every case returned a C the check
accepts is clean: each case's verdict is that reading's name, as the per-case judge would give it. A batch with
one case that differs, faults or raises is discarded whole (`screen` says so), and the caller runs its cases
through today's per-case path, which judges, diagnoses and shrinks them unchanged: a kernel that corrupts the
batch (writes its inputs, keeps state between calls, damages a canary) gets the per-case verdict and
counterexample. docs/batch.md says why it is built so.

The plain `gemm` signature (int32 C, no quantization parameters, no ABI options) is batched everywhere, its draws
included (`batchable`). A quantized kernel (a requantizing or float-output one, an XNNPACK ukernel) is batched where
its executor runs invocations in batches (`batches_invocations`), its generated cases only: each case keeps its
parameters and ABI options; natively the executor runs consecutive cases of one invocation layout in one call, an
emulated one runs them one by one; the batch's first reading is judged for all its cases at once
(`judged_together`), the rest by the per-case judge.
"""
from __future__ import annotations

import functools
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from lowp.emulator.errors import BudgetExceeded

# LOWP_BATCH=0 turns the batched path off: every case goes through the per-case path (the draws too, one by one),
# which is what the batched path must agree with (tests/test_batch.py).
ENABLED = os.environ.get("LOWP_BATCH", "1") != "0"

# A batch holds at most this many operand and result elements (its temporaries are a few times more), and at most
# MAX_CASES cases: big enough that one native call amortises Python's, small enough that a failing batch's per-case
# rerun stays short.
BATCH_ELEMENTS = 1 << 21
MAX_CASES = 1024


def batchable(kern) -> bool:
    """Whether `kern`'s cases can go through the batched path: the plain gemm signature (int32 C, no parameters
    per case, no ABI options)."""
    return kern.signature == "gemm" and not kern.quantized


def batches_invocations(kern, ex) -> bool:
    """Whether `kern`'s generated cases go through the batched path as invocations (parameters and ABI options per
    case): a quantized kernel on an executor whose run_many takes them (natively with the guard; every emulated
    executor)."""
    return kern.quantized and bool(getattr(ex, "runs_invocations", False))


def cases_per_batch(m: int, n: int, k: int) -> int:
    return int(max(1, min(MAX_CASES, BATCH_ELEMENTS // (m * k + k * n + m * n))))


# -- running a batch -----------------------------------------------------------------------------------------------
def run_many(ex, As, Bs, seeds, regenerate=None, options=None) -> list:
    """Per case, C or the exception `ex.run` raised: the executor's run_many where it has one, else run per case.
    As and Bs: the cases' operands, as a list of 2-d arrays or one 3-d array (a batch is passed so: a sequence of
    its cases that costs no copy). A batch whose evidence cannot be pinned on one case comes back as BatchUnpinned
    for every case (not rerun here: the engine reruns it in the state it started from, Tracked.restart). regenerate: for a
    Tracked executor, how to make the batch's (As, Bs) again when it is replayed (instead of keeping them). options:
    each case's keyword arguments of run (a quantized kernel's quant, strides, igemm, align), for an executor that
    runs invocations in batches (batches_invocations); elsewhere run per case."""
    from lowp.kernels.executors import outcome
    if isinstance(ex, Tracked):
        return ex.run_many(As, Bs, seeds=seeds, regenerate=regenerate, options=options)
    many = getattr(ex, "run_many", None)
    if many is not None and (options is None or getattr(ex, "runs_invocations", False)):
        return many(As, Bs, seeds=seeds, rerun=False, **({} if options is None else {"options": options}))
    options = options or [{}] * len(As)
    return [outcome(lambda: ex.run(A, B, seed=seed, **o)) for A, B, seed, o in zip(As, Bs, seeds, options)]


class Tracked:
    """An executor that remembers the calls it has run in a check, in order, so that a fresh copy of the kernel
    can be brought to the state they left (`restart`). A batch runs calls the per-case path would not have run at
    that point: the cases after a drawn batch's first failure (the per-case path stops there), and a batch whose
    evidence cannot be pinned on one case (rerun case by case). For a kernel that keeps state between calls those
    calls are earlier calls, so the engine restarts on a fresh copy that has run exactly the per-case path's calls
    (replayed in batches: execution only, no judging) and goes on there: the verdict and the counterexample are
    the per-case path's. Everything but run and run_many goes to the executor. The calls are kept until
    `forget()` (the search's calls, after the last batch, need no replay); a drawn batch is kept as the way to draw
    it again, not as its operands."""

    def __init__(self, ex):
        self.ex, self._calls, self._recording = ex, [], True

    def __getattr__(self, name):
        return getattr(self.ex, name)

    def run(self, A, B, **options):
        self._note(lambda ex: ex.run(A, B, **options))
        return self.ex.run(A, B, **options)

    def run_many(self, As, Bs, *, seeds, regenerate=None, options=None) -> list:
        if regenerate is None:
            self._note(lambda ex: run_many(ex, As, Bs, seeds, options=options))
        else:                   # the operands are not kept: a check draws millions of cases
            self._note(lambda ex: run_many(ex, *regenerate(), seeds, options=options))
        return run_many(self.ex, As, Bs, seeds, options=options)

    def _note(self, replay: Callable) -> None:
        if self._recording:
            self._calls.append(replay)

    def restart(self, keep: int | None = None, then: Callable | None = None) -> None:
        """Go on with a fresh copy of the kernel that has run the calls so far (the first `keep` of them), then
        `then(executor)` (the calls that replace the rest)."""
        from lowp.kernels.executors import outcome
        calls = self._calls[:keep] if keep is not None else self._calls
        fresh = self.ex.with_fresh_state()
        for replay in calls:
            outcome(lambda: replay(fresh))       # a faulting call faults again; what it returns is not wanted
        self.ex, self._calls = fresh, calls
        if then is not None:
            self._note(then)
            then(fresh)

    def forget(self) -> None:
        """Stop remembering calls: no batch follows."""
        self._calls, self._recording = [], False

    def __len__(self) -> int:
        return len(self._calls)


def unpinned(outcomes) -> bool:
    from lowp.kernels.executors import BatchUnpinned
    return any(isinstance(o, BatchUnpinned) for o in outcomes)


@dataclass
class Screen:
    """A batch's screening: the matched reading of every case if the batch was clean (`reading[i]` indexes
    `names`), else None, with `outcomes`, each case's C or exception as run() gives it (the per-case path's outcome:
    the engine judges them case by case; BatchUnpinned where the batch could not be pinned on one case: it is
    rerun); hung: a case overran its budget (a runaway loop: no more batches are worth it)."""
    reading: np.ndarray | None
    names: tuple[str, ...] = ()
    outcomes: Sequence | None = None
    hung: bool = False
    verdicts: list | None = None    # a quantized batch that is not clean: each case's (ok, matched) as judged

    @property
    def matched(self) -> list[str] | None:
        """Per case, the name of the reading it matched (None: the batch was not clean)."""
        return None if self.reading is None else [self.names[i] for i in self.reading]

    def counts(self) -> dict[str, int]:
        """How many cases matched each reading (of a clean batch), without a name per case."""
        return {self.names[i]: int(n) for i, n in enumerate(np.bincount(self.reading, minlength=len(self.names)))
                if n}


def screen(check, kern, ex, A3: np.ndarray, B3: np.ndarray, seeds, regenerate=None, options=None) -> Screen:
    """Run a batch (A3 (n, M, K), B3 (n, K, N), all of one shape) and compare every case's C with the readings the
    check accepts: clean when each case equals one of them; not clean when any case differs from every one,
    faulted or raised. Not clean without running anything where the batched path is off (ENABLED). options: a
    quantized kernel's cases' run options (run_many), each case judged by the per-case judge."""
    if not ENABLED:
        return Screen(None)
    results = run_many(ex, A3, B3, [int(s) for s in seeds], regenerate, options)
    if kern.quantized:
        return _judged_per_case(check, kern, A3, B3, options, results)
    C3 = _stacked(results)
    if C3 is None:
        return Screen(None, outcomes=results, hung=_hung(results))
    if C3.shape != (len(A3), A3.shape[1], B3.shape[2]) or C3.dtype != np.int32:
        return Screen(None, outcomes=results)
    reading = np.full(len(A3), -1)
    names = []
    for index, (name, expected) in enumerate(readings(check, kern, A3, B3)):
        names.append(name)
        same = (C3 == expected).reshape(len(A3), -1).all(axis=1) & (reading < 0)
        reading[same] = index
        if (reading >= 0).all():
            return Screen(reading, tuple(names))
    return Screen(None, outcomes=results)


def _stacked(results: Sequence) -> np.ndarray | None:
    """The batch's C as one (n, M, N) array, or None if a case did not return C. A native executor's clean batch
    is one array already (executors.CleanBatch)."""
    stacked = getattr(results, "stacked", None)
    if stacked is not None:
        return stacked
    if not all(isinstance(C, np.ndarray) for C in results):
        return None
    return np.stack(results)


def _judged_per_case(check, kern, A3, B3, options, results) -> Screen:
    """A quantized kernel's batch, each case judged as the per-case path judges it (quantized.judge: the same
    reading's name), clean when every case passed. The cases whose C is the batch's first reading, computed for
    all of them at once (judged_together), have that reading's name without a judge of their own. A batch with a
    failing case comes back with every case's verdict (Screen.verdicts), which the per-case path takes instead of
    judging the case again."""
    from lowp.conformance.search import quantized
    if not all(isinstance(C, np.ndarray) for C in results):
        return Screen(None, outcomes=results, hung=_hung(results))
    quants = [o["quant"] for o in options]
    together = judged_together(check.check, kern, A3, B3, quants, results) or [None] * len(results)
    verdicts = []
    for A, B, q, C, name in zip(A3, B3, quants, results, together):
        verdicts.append((True, name) if name is not None else quantized.judge(check.check, kern, A, B, q, C)[:2])
    if not all(ok for ok, _ in verdicts):      # the per-case path takes each case's verdict as it is
        return Screen(None, outcomes=results, verdicts=verdicts)
    matched = [name for _, name in verdicts]
    names = tuple(dict.fromkeys(matched))
    return Screen(np.array([names.index(n) for n in matched]), names)


def judged_together(check_name: str, kern, A3, B3, quants, results) -> list[str | None] | None:
    """Per case of a quantized kernel's batch (A3, B3 and the results of one shape, each case with its own
    parameters), the name the per-case judge gives where C is the first reading it tries, computed for every case
    at once: the behaviour model's accumulation and stage ('behaviour model'), or the claimed contract's first
    accepted accumulation through its output contract's first accepted stage (that stage's name); None where C is
    not that (the per-case judge then tries the rest). The accumulation is its batched form where it has one
    (checked on the first case, as `readings` checks it), else case by case. None for the whole batch where it
    cannot be computed at once: a stage that is not vectorised over cases (isa_models.requant.BATCHED_STAGES), a
    stage that reads the rows' sums, a blockwise contract, parameters of unequal shapes, or a stage
    undefined on some case (the per-case judge meets that case itself)."""
    from lowp.isa_models.requant import BATCHED_STAGES, OUTPUT_STAGES
    from lowp.kernels.models.quant import ModelParts

    from lowp.conformance.search import quantized
    if len(results) < 2 or quantized.with_rows(kern, A3[0], quants[0]) is not quants[0]:
        return None
    if check_name == "model":
        model = kern.model
        if not isinstance(model, ModelParts):
            return None
        accumulate = functools.partial(model.accumulate, **kern.params) if kern.params else model.accumulate
        stage, out_type, name, equal = model.output, model.c_type, "behaviour model", _same_bytes
    else:
        out = quantized.output_contract(check_name)
        if quantized.blockwise(out):
            return None
        accumulate = quantized.accumulation_contract(kern.contract).accepted[0].compute
        stage, out_type, name, equal = out.accepted[0], kern.c_type, out.accepted[0], _equal_or_nan
    q = stacked_params(quants)
    if stage not in BATCHED_STAGES or q is None:
        return None
    try:
        expected = OUTPUT_STAGES[stage].compute(zero_point_corrected3(_batched(accumulate, A3, B3), A3, B3, q), q,
                                                out_type)
    except (ArithmeticError, ValueError):
        return None
    C3 = np.stack(results)
    if C3.shape != expected.shape or C3.dtype != expected.dtype:
        return None
    return [name if same else None for same in equal(C3, expected)]


def stacked_params(quants) -> dict | None:
    """The cases' parameter dicts as one isa_models.requant.Batch (each value with a leading case axis), or None
    where their keys or shapes differ."""
    from lowp.isa_models.requant import Batch
    keys = quants[0].keys()
    if any(q.keys() != keys for q in quants):
        return None
    try:
        return Batch({key: np.stack([np.asarray(q[key]) for q in quants]) for key in keys})
    except ValueError:          # shapes differ between cases
        return None


def zero_point_corrected3(raw3, A3, B3, q) -> np.ndarray:
    """kernels.models.quant.zero_point_corrected for every case of a batch at once (q: a Batch): raw - a_zp *
    colsum(B) - b_zp * rowsum(A) + K * a_zp * b_zp, wrapped to int32."""
    n, _, K = A3.shape
    a_zp = np.asarray(q.get("a_zero_point", np.zeros(n, np.int64)), np.int64).reshape(n, -1, 1)  # a case's or a row's
    b_zp = np.asarray(q.get("b_zero_point", np.zeros(n, np.int64)), np.int64).reshape(n, 1, 1)
    colsum = B3.astype(np.int64).sum(axis=1)[:, None, :]
    rowsum = A3.astype(np.int64).sum(axis=2)[:, :, None]
    return _wrap32(raw3.astype(np.int64) - a_zp * colsum - b_zp * rowsum + K * a_zp * b_zp)


def _same_bytes(C3, E3) -> np.ndarray:
    """Per case, quantized.same: bit for bit (a float's -0.0 and NaN payloads included)."""
    n = len(C3)
    return (np.ascontiguousarray(C3).reshape(n, -1).view(np.uint8) ==
            np.ascontiguousarray(E3).reshape(n, -1).view(np.uint8)).all(axis=1)


def _equal_or_nan(C3, E3) -> np.ndarray:
    """Per case, OutputContract.judge's comparison: equal values, NaN equal to NaN for a float output."""
    equal = C3 == E3
    if C3.dtype.kind == "f":
        equal |= np.isnan(C3) & np.isnan(E3)
    return equal.reshape(len(C3), -1).all(axis=1)


def _hung(results) -> bool:
    return any(isinstance(r, BudgetExceeded) for r in results)


# -- the readings a check accepts, for a whole batch ---------------------------------------------------------------
def readings(check, kern, A3: np.ndarray, B3: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(name, C3) of each result the check accepts, in the order the per-case judge tries them: the behaviour model
    ("behaviour model"), or the contract's accepted variants. Each batched reading is checked against its per-case
    function on the batch's first case (a wrong entry of BATCHED would pass wrong kernels)."""
    from lowp.conformance.contracts.int32 import contract
    if check.check == "model":
        fn = functools.partial(kern.model, **kern.params) if kern.params else kern.model
        return [("behaviour model", _batched(fn, A3, B3))]
    return [(v.name, _batched(v.compute, A3, B3)) for v in contract(check.check).accepted]


def _batched(fn: Callable, A3, B3) -> np.ndarray:
    fast = batched_form(fn)
    if fast is None:
        return np.stack([fn(A, B) for A, B in zip(A3, B3)]).astype(np.int32)
    out = fast(A3, B3)
    if not np.array_equal(out[0], fn(A3[0], B3[0])):
        raise AssertionError(f"lowp bug: the batched form of {fn!r} disagrees with it on {A3[0].shape}x{B3[0].shape}")
    return out


def _wrap32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.int64).astype(np.uint32).view(np.int32) if x.dtype != np.int32 else x


def exact3(A3, B3) -> np.ndarray:
    """sum_k A*B per case, int32 wrap-around, as a batched matrix product: in float32 (BLAS) where every partial sum
    is an integer below 2^24, float64 below 2^53, else int64 (wrapping is then exact too)."""
    bound = _magnitude(A3) * _magnitude(B3) * A3.shape[2]
    if bound < 1 << 24:
        return (A3.astype(np.float32) @ B3.astype(np.float32)).astype(np.int32)
    if bound < 1 << 53:
        return _wrap32((A3.astype(np.float64) @ B3.astype(np.float64)).astype(np.int64))
    return _wrap32(A3.astype(np.int64) @ B3.astype(np.int64))


def _magnitude(X) -> int:
    info = np.iinfo(X.dtype)
    return max(abs(int(info.min)), abs(int(info.max)))


def pair_saturating3(A3, B3) -> np.ndarray:
    """contracts.pair_saturating per case: each pair (k, k+1), k even, summed and saturated to int16 (VPMADDUBSW),
    the pairs summed exactly, int32 wrap-around. u8 x s8 (VPMADDUBSW's own types, and `lowp fuzz`'s hot path) goes
    to a compiled loop (batch_readings.c) where the host can build it; anything else to numpy."""
    compiled = _compiled_readings()
    if compiled is not None and A3.dtype == np.uint8 and B3.dtype == np.int8:
        ffi, lib = compiled
        A3, B3 = np.ascontiguousarray(A3), np.ascontiguousarray(B3)
        (n, M, K), N = A3.shape, B3.shape[2]
        C3 = np.empty((n, M, N), np.int32)
        lib.lowp_pair_saturating_u8s8(n, M, N, K, ffi.from_buffer("uint8_t[]", A3), ffi.from_buffer("int8_t[]", B3),
                                      ffi.from_buffer("int32_t[]", C3))
        return C3
    return pair_saturating3_numpy(A3, B3)


@functools.cache
def _compiled_readings():
    """(ffi, library) of batch_readings.c, built once into the build cache; None where the host cannot build C
    (numpy computes the same readings, slower)."""
    import cffi

    from lowp.emulator.native_build import NativeUnavailable, build_shared_object
    ffi = cffi.FFI()
    ffi.cdef("void lowp_pair_saturating_u8s8(int64_t cases, int64_t M, int64_t N, int64_t K, const uint8_t *A, "
             "const int8_t *B, int32_t *C);")
    try:
        path = build_shared_object(Path(__file__).with_name("batch_readings.c").read_text(), "lowp-batch-readings",
                                   ("-O3",))
    except (NativeUnavailable, OSError):
        return None
    return ffi, ffi.dlopen(str(path))


def pair_saturating3_numpy(A3, B3) -> np.ndarray:
    """pair_saturating3 in numpy, for any integer types. The products are int16 where they fit (u8 x s8 does), and
    the pair sums are laid out with the longer of their pair axis and their M x N plane innermost, where numpy's
    loops are fast."""
    n, M, K = A3.shape
    if K % 2:
        A3 = np.concatenate([A3, np.zeros((n, M, 1), A3.dtype)], axis=2)
        B3 = np.concatenate([B3, np.zeros((n, 1, B3.shape[2]), B3.dtype)], axis=1)
    # int32 pair sums, as the per-case contract computes them (contracts.int32._pair_sums)
    wide = np.int16 if _magnitude(A3) * _magnitude(B3) < 1 << 15 else np.int32
    pairs_count, plane = A3.shape[2] // 2, M * B3.shape[2]
    if pairs_count > plane:     # deep: (n, M, N, P)
        a, b = A3.astype(wide)[:, :, None, :], np.ascontiguousarray(B3.transpose(0, 2, 1)).astype(wide)[:, None]
        pairs, axis = np.add(a[..., 0::2] * b[..., 0::2], a[..., 1::2] * b[..., 1::2], dtype=np.int32), 3
    else:                       # (n, P, M, N)
        a, b = A3.astype(wide).transpose(0, 2, 1)[..., None], B3.astype(wide)[:, :, None, :]
        pairs, axis = np.add(a[:, 0::2] * b[:, 0::2], a[:, 1::2] * b[:, 1::2], dtype=np.int32), 1
    np.clip(pairs, -32768, 32767, out=pairs)
    # |a pair| <= 2^15, so the sum of fewer than 2^16 pairs is exact in int32
    return _wrap32(pairs.sum(axis=axis, dtype=np.int32 if pairs_count < 1 << 16 else np.int64))


def shifted_pair_saturating3(A3, B3) -> np.ndarray:
    """contracts.shifted_pair_saturating: A + 128 as u8, pair-saturating, minus 128 * colsum(B)."""
    shifted = pair_saturating3((A3.astype(np.int16) + 128).astype(np.uint8), B3).astype(np.int64)
    return _wrap32(shifted - 128 * B3.astype(np.int64).sum(axis=1)[:, None, :])


def batched_form(fn: Callable):
    """The batched equivalent of a per-case model or variant function, or None (then it runs case by case)."""
    from lowp.kernels import models

    from lowp.conformance.contracts import int32 as contracts
    base, keywords = (fn.func, fn.keywords) if isinstance(fn, functools.partial) else (fn, {})
    if base in (contracts.exact, models.exact_gemm) and not any(keywords.values()):
        return exact3
    if base is contracts.pair_saturating:
        return pair_saturating3
    if base is contracts.shifted_pair_saturating:
        return shifted_pair_saturating3
    if base is models.dot4_gemm and set(keywords) <= {"width", "dot", "signed_a"}:
        if keywords.get("dot") == "vpdpbusd":     # VPDPBUSD from zero: exact four-product sums, VPADDD wraps
            return exact3
        if keywords.get("dot") == "maddubs":      # VPMADDUBSW pairs (k even) then VPMADDWD by ones: exact
            return shifted_pair_saturating3 if keywords.get("signed_a") else pair_saturating3
    return BATCHED.get(base)


# Batched forms registered by other modules (an emulated target's models): per-case function -> batched function.
BATCHED: dict[Callable, Callable] = {}


# -- drawing cases as the search draws them ------------------------------------------------------------------------
@dataclass
class Shapes:
    """The search's distribution of shapes (cases.problems): m, n, k up to the tile-derived maxima, and a quarter
    of the time 1-2 rows and columns at one of the ladder's deep depths."""
    max_m: int
    max_n: int
    max_k: int
    deep: list[int]

    @classmethod
    def of(cls, kern, domain: str) -> "Shapes":
        from lowp.conformance.search.cases import DEEP_K, ladder_ks
        t = kern.tile
        max_k = max(4 * t.kr + 3, t.spill + 3 if t.spill else 0, 40)
        return cls(2 * t.mr + 1, 2 * t.nr + 1, max_k,
                   [k for k in ladder_ks(kern, domain) if max_k < k <= DEEP_K])

    def draw(self, rng) -> tuple[int, int, int]:
        if self.deep and rng.integers(0, 4) == 0:
            return int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.choice(self.deep))
        return int(rng.integers(1, self.max_m + 1)), int(rng.integers(1, self.max_n + 1)), \
            int(rng.integers(1, self.max_k + 1))


def elements(rng, lo: int, hi: int, shape, dtype) -> np.ndarray:
    """The search's elements (cases.problems): half of them one of the range's ends (0 where it is in range, lo,
    hi), half uniform over [lo, hi]. Where the range has at most 2^8 values, each element is one lookup of a random
    16-bit number in a table of that distribution (`_table`): a few nanoseconds an element, where rng.integers
    with bounds costs a rejection test per element."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape))
    if hi - lo < 256:
        return _table(lo, hi, dtype.str).take(_random16(rng, size).astype(np.intp)).reshape(shape)
    x = rng.integers(lo, hi, size=shape, endpoint=True)
    ends = _ends(lo, hi)
    pick = rng.integers(0, 2 * len(ends), size=shape)
    return np.where(pick < len(ends), ends[pick % len(ends)], x).astype(dtype)


def _random16(rng, size: int) -> np.ndarray:
    """`size` random 16-bit numbers: the bit generator's raw 64-bit outputs, each cut in four (rng.bytes costs
    about five times as much, and the draws are a third of a fuzzing round's time)."""
    return rng.bit_generator.random_raw(-(-size // 4)).view(np.uint16)[:size]


def _ends(lo: int, hi: int) -> np.ndarray:
    """The search's ends of a range (cases.ends), as an array."""
    from lowp.conformance.search.cases import ends
    return np.array(ends(lo, hi), np.int64)


@functools.lru_cache(maxsize=None)
def _table(lo: int, hi: int, dtype: str) -> np.ndarray:
    """Element by random 16-bit number r: an end of the range (r odd: ends[(r >> 1) % len(ends)]) or a value
    uniform over [lo, hi] (r even: lo + (r >> 1) * span / 2^15, each value 2^15 / span times, to within one)."""
    r = np.arange(1 << 16, dtype=np.int64)
    ends = _ends(lo, hi)
    return np.where(r & 1, ends[(r >> 1) % len(ends)], lo + (((r >> 1) * (hi - lo + 1)) >> 15)).astype(dtype)


def sparse(rng, lo: int, hi: int, shape, dtype) -> np.ndarray:
    """A deep case's operands (cases.problems' sparse arrays): per case one fill value (an end of the range) and
    up to 8 elements drawn as `elements` draws them."""
    n, *inner = shape
    size = int(np.prod(inner))
    ends = _ends(lo, hi)
    x = np.repeat(ends[rng.integers(0, len(ends), n)][:, None], size, axis=1).astype(dtype)
    spots = rng.integers(0, 9, n)
    case = np.repeat(np.arange(n), spots)
    x[case, rng.integers(0, size, len(case))] = elements(rng, lo, hi, (len(case),), dtype)
    return x.reshape(shape)


def draw_batch(kern, domain: str, shapes: Shapes, rng) -> tuple[np.ndarray, np.ndarray]:
    """(A3, B3): a batch of cases of one shape drawn from the search's distribution."""
    from lowp.conformance.search.cases import ranges
    m, n, k = shapes.draw(rng)
    (alo, ahi), (blo, bhi) = ranges(kern, domain)
    count = cases_per_batch(m, n, k)
    fill = sparse if m * n * k > 4096 else elements
    return (fill(rng, alo, ahi, (count, m, k), kern.a_dtype), fill(rng, blo, bhi, (count, k, n), kern.b_dtype))


def draw_case(kern, domain: str, shapes: Shapes, rng) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """(A, B, parameters) of one case drawn from the search's distribution: a requantizing kernel's case, which
    carries parameters of its own and goes case by case (the search's draw of them, quantized.search_params; the
    `outside` probe's from its own draw)."""
    from lowp.conformance.search.cases import ranges
    from lowp.conformance.contracts.output import STYLES
    from lowp.conformance.search.quantized import ZP_STYLES, draw_params, search_params
    m, n, k = shapes.draw(rng)
    (alo, ahi), (blo, bhi) = ranges(kern, domain)
    fill = sparse if m * n * k > 4096 else elements
    A, B = fill(rng, alo, ahi, (1, m, k), kern.a_dtype)[0], fill(rng, blo, bhi, (1, k, n), kern.b_dtype)[0]
    seed, zp_seed = (int(x) for x in rng.integers(0, 2 ** 32, 2))
    if not kern.quantized:
        return A, B, None
    if domain == "outside":
        return A, B, draw_params(kern, A, B, seed, "typical", domain)
    return A, B, search_params(kern, m, n, str(rng.choice(STYLES)), seed, str(rng.choice(ZP_STYLES)), zp_seed)


def draw_rng(check_id: str, seed: int):
    """The draws' random source: the check and the round's seed (one run repeats; checks draw differently)."""
    return np.random.default_rng([zlib.crc32(check_id.encode()), seed])


def draw_seeds(batch: int, count: int) -> np.ndarray:
    """The poison seeds of batch `batch`'s cases: distinct across the batches of a check's draws."""
    return np.arange(count, dtype=np.int64) + (1 << 20) + batch * MAX_CASES
