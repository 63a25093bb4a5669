"""A kernel's runs shared by its checks: a check whose generated cases are the calls an earlier check of the kernel
ran judges that check's outcomes instead of running them again (issue 36; docs/batch.md, "Shared runs").

A kernel's checks run one after another in one process, each on a fresh copy of the kernel (pool.jobs_of). Its
behaviour-model check and its claimed contract's check make the same calls, in the same order, wherever the claimed
domain has the full range (all but a few hundred of XNNPACK's 3,365 kernels), and the not-claimed `full` probe
makes them again where it does not: the same operands, parameters, ABI options and poison seeds
(checks.shared_case_call). A kernel returns the same C for the same calls from the same fresh state, so the later
check's cases are judged on the first's outcomes: on an emulator, where a call costs most of a case, that is most
of the later check.

The first check's generated cases (and draws) are logged: each case's call, its digest and its outcome (C, or the
fault an emulator raised). A later check on a fresh copy takes the logged outcome of each call while its calls are
the log's, in order, from the first. At its first call that differs (or past the log) its copy first runs the
calls it took (their outcomes unused), so it is in the state they leave, and runs on from there: a kernel that
keeps state between calls meets every call in the per-case order, as without sharing. So it does where the check
found a failure among the shared cases: its search and diagnosis run on a copy in that state. A check whose shared
cases all passed starts its search on the fresh copy instead (a kernel that keeps no state: the same). A check
that finds a kernel's outcomes depend on earlier calls (or on nothing repeatable) ends the sharing for the
kernel's later checks. Nothing is shared where a check does not start on a fresh copy, nor after a runaway loop, a
batch that could not be pinned on one case (the engine reruns it) or an error that is not an outcome.
"""
from __future__ import annotations

import os

import numpy as np

from lowp.emulator.errors import BatchStopped, BudgetExceeded, EmulatorError

# LOWP_SHARED_RUNS=0 turns sharing off: every check runs every call itself (what sharing must agree with:
# tests/test_shared_runs.py).
ENABLED = os.environ.get("LOWP_SHARED_RUNS", "1") != "0"
# The log keeps its calls' operands (the check's own arrays, not copies) and outcomes for the kernel's later checks:
# a few MB for an XNNPACK kernel's ~400 cases, its deepest ladder case (K = 2^17) the most. Past this bound it stops.
MAX_BYTES = 256 << 20


class Log:
    """A kernel's first check's runs: per case, in order, its call, the call's digest and its outcome."""

    def __init__(self, kernel, context):
        self.kernel, self.context = kernel, context
        self.keys: list[bytes] = []
        self.calls: list[tuple] = []        # (A, B, run's keyword arguments): the operands are the check's own
        self.outcomes: list = []
        self.bytes, self.recording = 0, True

    def add(self, keys, calls, outcomes) -> None:
        for key, call, out in zip(keys, calls, outcomes):
            if isinstance(out, (BatchStopped, BudgetExceeded)) or not isinstance(out, (np.ndarray, EmulatorError)):
                self.close()        # a runaway loop, an unpinned batch, an error that is not the kernel's outcome
                return
            out = out.copy() if isinstance(out, np.ndarray) else out
            self.keys.append(key)
            self.calls.append(call)
            self.outcomes.append(out)
            operands = sum(getattr(x, "nbytes", 0) for x in call[:2])
            self.bytes += (out.nbytes if isinstance(out, np.ndarray) else 0) + operands
        if self.bytes > MAX_BYTES:
            self.close()

    def close(self) -> None:
        self.recording = False


_LOG: Log | None = None


def layer(kern, ex, fresh: bool):
    """`ex` as a check of `kern` runs it: where the check starts on a fresh copy, the first check of the kernel in
    this process logs its runs (Logging) and a later one takes them (Reusing); else `ex` itself. stop() the layer
    when the check's generated cases and draws are done."""
    global _LOG
    if not (fresh and ENABLED):
        return ex
    context = _context(ex)
    if _LOG is not None and _LOG.kernel is kern and _LOG.context == context and not _LOG.recording:
        return Reusing(ex, _LOG)
    _LOG = Log(kern, context)
    return Logging(ex, _LOG)


def forget() -> None:
    """Share nothing more of the logged kernel: a check found that its outcomes depend on more than the calls (on
    earlier calls, or on nothing repeatable)."""
    global _LOG
    _LOG = None


def _context(ex) -> tuple:
    """What besides the calls decides an outcome: the executor's kind, its time budget and its machine's options."""
    return (type(ex).__name__, getattr(ex, "budget", None), repr(sorted(getattr(ex, "machine_options", {}).items())))


def call_key(A, B, options: dict) -> bytes:
    """A digest of one call: operands (shape, type, bytes) and run's keyword arguments given (the poison seeds, a
    quantized kernel's parameters, an XNNPACK ukernel's strides, IGEMM layout and alignment)."""
    from lowp.conformance.search.quantized import contents_key
    return contents_key(A, B, {name: value for name, value in options.items() if value is not None})


def many_call_keys(As, Bs, seeds, options) -> list[bytes]:
    """call_key of each of run_many's calls (a batch of draws, with no options but the seeds: in one pass)."""
    if options is None and all(isinstance(x, np.ndarray) and x.dtype != object for x in (As, Bs)):
        from lowp.conformance.search.quantized import seeded_contents_keys
        return seeded_contents_keys(As, Bs, seeds)
    return [call_key(*call) for call in _many_calls(As, Bs, seeds, options)]


def _many_calls(As, Bs, seeds, options) -> list[tuple]:
    """run_many's cases as run's calls: (A, B, keyword arguments)."""
    options = options or [{}] * len(As)
    return [(A, B, {"seed": int(s), **o}) for A, B, s, o in zip(As, Bs, seeds, options)]


class Layer:
    """Everything but run and run_many goes to the executor (a fresh copy made from it is a plain one); run_many
    exists where the executor has it (batch.run_many asks)."""

    def __init__(self, ex, log: Log):
        self.ex, self.log = ex, log

    def __getattr__(self, name):
        if name == "run_many" and hasattr(self.ex, "run_many"):
            return self._run_many
        return getattr(self.ex, name)

    def serves(self, A, B, **options) -> bool:
        """Would run() take the log's outcome for this call (and so run nothing)?"""
        return False

    def serves_many(self, As, Bs, seeds, options) -> bool:
        """Would a run_many of these calls (or their runs one by one) take the log's outcomes?"""
        return False


class Logging(Layer):
    """The first check's executor: every run's digest and outcome go to the log until stop()."""

    def run(self, A, B, **options):
        if not self.log.recording:
            return self.ex.run(A, B, **options)
        key = call_key(A, B, options)
        try:
            C = self.ex.run(A, B, **options)
        except EmulatorError as e:
            self.log.add([key], [(A, B, options)], [e])
            raise
        except BaseException:
            self.log.close()
            raise
        self.log.add([key], [(A, B, options)], [C])
        return C

    def _run_many(self, As, Bs, *, seeds, **kwargs):
        results = self.ex.run_many(As, Bs, seeds=seeds, **kwargs)
        if self.log.recording:
            options = kwargs.get("options")
            self.log.add(many_call_keys(As, Bs, seeds, options), _many_calls(As, Bs, seeds, options), list(results))
        return results

    def stop(self, failed: bool = False) -> int:
        self.log.close()
        return 0


class Reusing(Layer):
    """A later check's executor: each call the log's next one takes its logged outcome; at the first that is not,
    the kernel runs the calls taken, then this one and every one after."""

    def __init__(self, ex, log: Log):
        super().__init__(ex, log)
        self.at, self.following, self.shared = 0, True, 0

    def _next_in_log(self, keys: list[bytes]) -> bool:
        """Are these calls the log's next ones, in order?"""
        return self.log.keys[self.at:self.at + len(keys)] == keys

    def _take(self, keys: list[bytes]) -> list | None:
        if self.following and self._next_in_log(keys):
            self.at += len(keys)
            self.shared += len(keys)
            return [out.copy() if isinstance(out, np.ndarray) else out for out in
                    self.log.outcomes[self.at - len(keys):self.at]]
        self._catch_up()
        return None

    def _catch_up(self) -> None:
        """Bring the copy to the state the calls taken leave: run them (what they return is known already)."""
        from lowp.kernels.executors import outcome
        if self.following:
            self.following = False
            for A, B, options in self.log.calls[:self.at]:
                outcome(lambda: self.ex.run(A, B, **options))

    def serves(self, A, B, **options) -> bool:
        return self.following and self._next_in_log([call_key(A, B, options)])

    def serves_many(self, As, Bs, seeds, options) -> bool:
        return self.following and self._next_in_log(many_call_keys(As, Bs, seeds, options))

    def run(self, A, B, **options):
        taken = self._take([call_key(A, B, options)]) if self.following else None
        if taken is None:
            return self.ex.run(A, B, **options)
        if isinstance(taken[0], Exception):
            raise taken[0]
        return taken[0]

    def _run_many(self, As, Bs, *, seeds, **kwargs):
        taken = None
        if self.following:
            taken = self._take(many_call_keys(As, Bs, seeds, kwargs.get("options")))
        return self.ex.run_many(As, Bs, seeds=seeds, **kwargs) if taken is None else taken

    def stop(self, failed: bool = False) -> int:
        """Take no more outcomes: the check's generated cases and draws are done. failed: one of them failed, and
        its diagnosis (and the search) must run in the state the calls leave: the copy runs the calls it took. The
        number of cases that took an outcome."""
        if failed:
            self._catch_up()
        self.following = False
        return self.shared
