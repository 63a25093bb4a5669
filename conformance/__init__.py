"""lowp.conformance: the library contracts, the cases, the runner, the reports and the pytest plugin.

From Python (or a kernel author's own pytest suite):

    from lowp.conformance import check
    check("u8s8s32_avx2", "exact", domain="full")   # raises ConformanceFailure with the minimal counterexample
"""
from __future__ import annotations

from .checks import Check, run_check
from .contracts import CONTRACTS, Contract, contract


class ConformanceFailure(AssertionError):
    """A kernel broke a check; the message carries the minimal counterexample. `.row` has the details."""

    def __init__(self, message: str, row: dict):
        super().__init__(message)
        self.row = row


def check(kernel, contract_name: str | None = None, *, domain: str = "claimed", examples: int = 100,
          seed: int = 0, grid: bool = False) -> dict:
    """Judge one kernel (a registered name or a Kernel) against its behaviour model ('model') or a contract
    (default: the one it claims) on its claimed domain or the full type range, in this process. Returns the
    report row (verdict SKIPPED, with the reason, where the kernel cannot run here); raises ConformanceFailure,
    an AssertionError carrying the minimal counterexample, if the check fails."""
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
    name = contract_name or kernel_obj.contract
    claimed = name in ("model", kernel_obj.contract) and (domain == "claimed" or name == "model")
    row = run_check(Check(kernel_obj.name, name, domain, claimed), lambda event: None, examples=examples,
                    seed=seed, grid=grid)
    if row["verdict"] == "FAIL":
        from .report import markdown
        raise ConformanceFailure(markdown([row]).split("\n## ", 1)[-1], row)
    return row


__all__ = ["CONTRACTS", "Check", "ConformanceFailure", "Contract", "check", "contract", "run_check"]
