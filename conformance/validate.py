"""Configuration checks that need the conformance suite's own names: the contract a kernel claims, and the
kernels a run selects. Kernels cannot check their contract themselves (lowp.kernels does not import
lowp.conformance: data flows isa_models <- kernels <- conformance), so `lowp conformance` calls these after
loading, before anything runs. Problems raise lowp.kernels.KernelConfigError, like the kernel schema's."""
from __future__ import annotations

from lowp.kernels import KernelConfigError, Kernel
from lowp.kernels.features import did_you_mean
from lowp.kernels.registry import origin
from lowp.kernels.schema import Problem

from .contracts import CONTRACTS


def contract_problem(kernel: Kernel) -> Problem | None:
    """The Problem with the contract `kernel` claims, or None if lowp.conformance knows it."""
    if kernel.contract in CONTRACTS:
        return None
    names = did_you_mean(str(kernel.contract), CONTRACTS)
    hint = f"; did you mean {' or '.join(map(repr, names))}? Accepted: " if names else "; accepted: "
    return Problem(origin(kernel.name), kernel.name, "contract",
                   f"unknown contract {kernel.contract!r}{hint}{', '.join(CONTRACTS)}")


def validate_kernels(kernels) -> None:
    """KernelConfigError listing every kernel whose claimed contract lowp.conformance does not know."""
    problems = [p for p in map(contract_problem, kernels) if p is not None]
    if problems:
        raise KernelConfigError(problems)


def select_kernels(names, registered) -> list[Kernel]:
    """The registered kernels named in `names`, in that order; KernelConfigError (with did-you-mean) for every
    name that is not registered."""
    by_name = {k.name: k for k in registered}
    problems = []
    for name in names:
        if name not in by_name:
            close = did_you_mean(name, by_name)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            problems.append(Problem(None, name, None, f"no kernel of this name is registered; {hint}"
                                    f"registered: {', '.join(sorted(by_name))}"))
    if problems:
        raise KernelConfigError(problems)
    return [by_name[n] for n in names]


__all__ = ["contract_problem", "select_kernels", "validate_kernels"]
