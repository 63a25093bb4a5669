"""What can go wrong when lowp runs an AArch64 kernel, as exceptions that carry the evidence.

Every error stops the emulated call, never the Python process, and is a subclass of EmulatorError. An error
raised by Machine.call carries `.result`: the CallResult at the moment of the stop (buffers as the kernel left
them, instructions counted so far), so a caller can still inspect what was written.
"""
from __future__ import annotations


class EmulatorError(Exception):
    """Base class of everything lowp.emulator raises about a kernel or a build."""
    result = None     # the CallResult at the stop, when the error comes from Machine.call


class BuildError(EmulatorError):
    """The cross compiler rejected a source (its diagnostics are the message); `.source` is the file whose
    compile failed (None when the link failed or it is not known)."""

    def __init__(self, message="", *, source=None):
        super().__init__(message)
        self.source = source

    def __reduce__(self):                  # picklable with its source
        return _build_error, (str(self), self.source)


def _build_error(message, source):
    return BuildError(message, source=source)


class OutOfBounds(EmulatorError):
    """A load or store touched memory outside every buffer (a guard page, or the slack below a buffer).

    buffer: the buffer's name; offset: the byte offset of the faulting address from the buffer's start
    (offset >= nbytes is past the end, offset < 0 before the start); past_end: offset - nbytes (or None);
    access: 'read', 'write' or 'fetch'; pc and instruction: the faulting instruction (None if only found after
    the call, as for a write into the slack below a buffer)."""

    def __init__(self, message, *, buffer=None, offset=None, nbytes=None, access=None, address=None, size=None,
                 pc=None, instruction=None, itemsize=1):
        super().__init__(message)
        self.buffer, self.offset, self.nbytes, self.access = buffer, offset, nbytes, access
        self.address, self.size, self.pc, self.instruction, self.itemsize = address, size, pc, instruction, itemsize

    @property
    def past_end(self):
        return None if self.offset is None or self.nbytes is None or self.offset < self.nbytes \
            else self.offset - self.nbytes


def describe_out_of_bounds(access, size, offset, name, nbytes, dtype, shape, where, start=None, allowed=0) -> str:
    """The one wording of an out-of-bounds access, for both executors: the buffer, the byte offset of the first
    byte outside it, how far the access reaches past the end (or before the start), the access and the instruction
    that made it. start: the offset the access began at, when it began inside the buffer; allowed: the bytes of
    over-read the kernel declares for this buffer."""
    itemsize = dtype.itemsize
    if offset >= nbytes:
        reach = offset - nbytes + 1 if start is None or not size else start + size - nbytes
        rel = f"reaches {reach} byte{'s' * (reach != 1)} past its end" + (
            f", beyond the {allowed} bytes of over-read the kernel declares" if allowed else "")
    else:
        rel = f"{-offset} bytes before its start"
    elem = f" (element {offset // itemsize})" if itemsize > 1 and offset % itemsize == 0 else ""
    of = f" of {size} byte{'s' * (size != 1)}" if size else ""
    began = f", an access that began at offset {start}" if start is not None and start != offset else ""
    return (f"out-of-bounds {access}{of} at byte offset {offset}{elem} of buffer {name!r} ({nbytes} bytes, "
            f"{dtype}{list(shape)}){began}: {rel}; {where}")


class AlignmentFault(EmulatorError):
    """An instruction that needs an aligned address (MOVDQA, VMOVAPS, ...) got an unaligned one: the CPU raises a
    general-protection fault. lowp places every buffer so that it ends at a page boundary, so a buffer starts at
    whatever alignment its size gives: a kernel may not assume more than its API promises."""

    def __init__(self, message, *, buffer=None, offset=None, address=None, pc=None, instruction=None):
        super().__init__(message)
        self.buffer, self.offset, self.address, self.pc, self.instruction = buffer, offset, address, pc, instruction


class BudgetExceeded(EmulatorError):
    """The kernel ran more instructions than its budget (a runaway loop)."""

    def __init__(self, message, *, budget, pc=None, instruction=None):
        super().__init__(message)
        self.budget, self.pc, self.instruction = budget, pc, instruction


class BatchStopped(RuntimeError):
    """A batch did not run this call: an earlier call of the batch overran its budget (a runaway loop; each call
    after it would cost the budget again). Not an EmulatorError: it is no outcome of the call's own."""


def stopped_after(outcomes: list, n: int) -> list:
    """`outcomes`, whose last overran its budget, filled up to n with BatchStopped: a runaway loop stops a batch, as
    it stops a check (each call after it would cost the budget again). Every executor's batch ends so."""
    hang = len(outcomes) - 1
    return outcomes + [BatchStopped(f"not run: call {hang} of the batch overran its budget ({outcomes[hang]})")] * \
        (n - len(outcomes))


class UndefinedInstruction(EmulatorError):
    """Unicorn raised an exception on an instruction it does not implement and lowp does not model."""

    def __init__(self, message, *, pc, encoding, instruction=None):
        super().__init__(message)
        self.pc, self.encoding, self.instruction = pc, encoding, instruction


class EmulatorLacksInstruction(UndefinedInstruction):
    """The emulator does not implement an instruction it decodes (not a ud2): the executor's gap, not the
    kernel's fault; a check says no executor here runs the kernel instead of failing it."""


class Trap(EmulatorError):
    """The kernel executed BRK (e.g. __builtin_trap), SVC or HVC: there is no OS or debugger to take it."""

    def __init__(self, message, *, pc, kind, instruction=None):
        super().__init__(message)
        self.pc, self.kind, self.instruction = pc, kind, instruction


class LockstepMismatch(EmulatorError):
    """Lockstep mode: Unicorn's result register disagrees with lowp's model of the same instruction."""

    def __init__(self, message, *, pc, instruction, inputs, unicorn, model):
        super().__init__(message)
        self.pc, self.instruction, self.inputs, self.unicorn, self.model = pc, instruction, inputs, unicorn, model


class EmulationFailed(EmulatorError):
    """Unicorn stopped with an error lowp has no better name for (the Unicorn error is the message)."""


class ExecutorDisagrees(EmulationFailed):
    """The emulator faulted at an address the faulting instruction's own operand does not name: an executor problem
    (lowp's or the emulator's), reported as such instead of as the kernel's out-of-bounds access."""


def guest_death(proc, cause: str, stderr=None, wait: float = 2.0) -> str:
    """How a guest process (qemu-user, the Bochs guest) ended, for the error of the call it was serving: '(exit
    status 1): <the end of its stderr>', '(killed by SIGKILL)', '(still running)'. cause 'ended': its output ended,
    the exit status follows at once (waited for up to `wait` s); otherwise it is read if there is one."""
    import signal
    import subprocess
    code = None
    if proc is not None:
        try:
            code = proc.wait(timeout=wait) if cause == "ended" else proc.poll()
        except subprocess.TimeoutExpired:
            pass
    how = f"exit status {code}" if code is not None and code >= 0 else \
        f"killed by {signal.Signals(-code).name}" if code is not None else "still running"
    tail = ""
    if stderr is not None:
        stderr.seek(0)
        tail = stderr.read().decode(errors="replace").strip()[-500:]
    return f"({how})" + (f": {tail}" if tail else "")
