"""lowp.emulator: build AArch64 C/assembly with zig and run it under Unicorn, bit-exact and bounds-checked.

    from lowp.emulator import build, Machine
    m = Machine(build("kernel.c"))
    r = m.call("gemm", A, B, C, M, N, K, count=True)     # r.arrays: copies of A, B, C after the call

See docs/emulator.md for the design (AAPCS64 mapping, guard pages, budget, I8MM gap-filling, lockstep).
"""
from .build import Binary, build, build_text, cache_dir
from .errors import (AlignmentFault, BudgetExceeded, BuildError, EmulationFailed, EmulatorError, LockstepMismatch,
                     OutOfBounds, Trap, UndefinedInstruction)
from .aapcs64 import disassemble
from .machine import DEFAULT_BUDGET, CallResult, Machine

__all__ = ["Binary", "build", "build_text", "cache_dir", "Machine", "CallResult", "DEFAULT_BUDGET", "disassemble",
           "EmulatorError", "AlignmentFault", "BuildError", "OutOfBounds", "BudgetExceeded", "UndefinedInstruction",
           "Trap", "LockstepMismatch", "EmulationFailed"]
