"""lowp.conformance: the library contracts, the cases, the runner, the reports and the pytest plugin.

From Python (or a kernel author's own pytest suite):

    from lowp.conformance import check
    check("u8s8s32_avx2", "exact", domain="full")   # raises ConformanceFailure with the minimal counterexample
"""
from __future__ import annotations

from lowp.conformance.run.checks import Check, run_check
from lowp.conformance.contracts.int32 import CONTRACTS, Contract, contract


class ConformanceFailure(AssertionError):
    """A kernel broke a check; the message carries the minimal counterexample. `.row` has the details."""

    def __init__(self, message: str, row: dict):
        super().__init__(message)
        self.row = row


def check_for(kernel, contract_name: str | None = None, domain: str = "claimed") -> Check:
    """The Check that judges `kernel` (a registered name, or a Kernel, registered here if it is new) against its
    behaviour model ('model') or a contract (default: the one it claims) on `domain`; claimed when the kernel
    claims it (its model anywhere, its own contract on its claimed domain)."""
    from lowp.kernels import Kernel, kernel as get_kernel, register
    from lowp.kernels.registry import _KERNELS
    if isinstance(kernel, Kernel):
        if kernel.name not in _KERNELS:
            register(kernel)
        elif _KERNELS[kernel.name] is not kernel:
            raise ValueError(f"another kernel named {kernel.name!r} is registered")
        kernel_obj = kernel
    else:
        kernel_obj = get_kernel(kernel)
    own = kernel_obj.output if kernel_obj.quantized else kernel_obj.contract   # a requantizing kernel claims its
    name = contract_name or own                                                # output-stage contract
    claimed = name in ("model", own) and (domain == "claimed" or name == "model")
    return Check(kernel_obj.name, name, domain, claimed)


def raise_for_verdict(row: dict) -> dict:
    """Return the row of a check that passed or was skipped; raise ConformanceFailure (with the row) for one that
    failed (the message: the minimal counterexample, as the report shows it) or crashed, hung or never ran (the
    message: the reason, the case it was running and the traceback, if any)."""
    if row["verdict"] == "FAIL":
        from lowp.conformance.report import failure_lines
        text = "\n".join(failure_lines(row, None)).removeprefix("## ").strip()   # no journal: the repro line
        raise ConformanceFailure(text or f"{row['id']}: FAIL", row)
    if row["verdict"] in ("CRASH", "NOT RUN"):
        message = f"{row['id']}: {row['verdict']} ({row['reason']}) after {row.get('executed', 0)} cases executed"
        if row.get("traceback"):
            message += "\n\n" + row["traceback"].strip()
        raise ConformanceFailure(message, row)
    return row


def check(kernel, contract_name: str | None = None, *, domain: str = "claimed", examples: int = 100,
          seed: int = 0, grid: bool = False) -> dict:
    """Judge one kernel (a registered name or a Kernel) against its behaviour model ('model') or a contract
    (default: the one it claims) on its claimed domain or the full type range, in this process (the pytest plugin
    runs the same check in a child process instead). Returns the report row (verdict SKIPPED, with the reason,
    where the kernel cannot run here); raises ConformanceFailure, an AssertionError carrying the minimal
    counterexample, if the check fails."""
    row = run_check(check_for(kernel, contract_name, domain), lambda event: None, examples=examples, seed=seed,
                    grid=grid)
    return raise_for_verdict(row)


__all__ = ["CONTRACTS", "Check", "ConformanceFailure", "Contract", "check", "check_for", "contract",
           "raise_for_verdict", "run_check"]
