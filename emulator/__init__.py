"""lowp.emulator: build AArch64 C/assembly with zig and run it under Unicorn, bit-exact and bounds-checked (and x86
kernels on Bochs: lowp.emulator.x86.bochs).

    from lowp.emulator import build, Machine
    m = Machine(build("kernel.c"))
    r = m.call("gemm", A, B, C, M, N, K, count=True)     # r.arrays: copies of A, B, C after the call

See docs/emulator.md for the design (AAPCS64 mapping, guard pages, budget, I8MM gap-filling, lockstep).

The names below are imported when first used (PEP 562): a process that needs one module of the package (the Bochs
guest, a qemu proof backend) does not pay for Unicorn, numpy and the rest at startup.
"""
from lowp.emulator.build import Binary, build, build_text, cache_dir      # eager: the submodule `build` shares the function's name
from lowp.emulator.errors import (AlignmentFault, BudgetExceeded, BuildError, EmulationFailed, EmulatorError,
                                  ExecutorDisagrees, LockstepMismatch, OutOfBounds, Trap, UndefinedInstruction)


def _lazy(name: str):
    """The names below, imported when first asked for (written out, so lowp's import graph sees them)."""
    if name == "disassemble":
        from lowp.emulator.aarch64.aapcs64 import disassemble
        return disassemble
    from lowp.emulator import machine
    return getattr(machine, name)


_LAZY = ("disassemble", "Machine", "CallResult", "DEFAULT_BUDGET")

__all__ = ["Binary", "build", "build_text", "cache_dir", "Machine", "CallResult", "DEFAULT_BUDGET", "disassemble",
           "EmulatorError", "AlignmentFault", "BuildError", "OutOfBounds", "BudgetExceeded", "UndefinedInstruction",
           "Trap", "LockstepMismatch", "EmulationFailed", "ExecutorDisagrees"]


def __getattr__(name: str):
    if name in _LAZY:
        value = _lazy(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
