"""The AArch64 executor: builds a kernel with lowp.emulator (zig, cached) and calls it under Unicorn with the
same signature kinds as the native executor. Faults (out-of-bounds access, runaway loops, undefined
instructions) come back as lowp.emulator errors naming the buffer, offset and instruction."""
from __future__ import annotations

from functools import cached_property, lru_cache

import numpy as np

from .registry import Kernel, workspace_symbol

# Bytes of workspace per kernel are asked of the kernel itself (its <prefix>_workspace function), also emulated.


class EmulatedExecutor:
    backend = "unicorn"

    def __init__(self, kernel: Kernel, **machine_options):
        self.kernel = kernel
        self.machine_options = machine_options
        self.last = None            # the CallResult of the last run: instruction counts, modeled I8MM ops

    def unavailable(self) -> str | None:
        try:
            import lowp.emulator  # noqa: F401
        except ImportError as e:   # pragma: no cover - unicorn is a dependency
            return f"the emulator cannot load: {e}"
        from .features import host_features
        missing = [f for f in self.kernel.features if f not in host_features("aarch64")]
        return f"Unicorn 2.1.4 (cpu model MAX) lacks {', '.join(missing)}" if missing else None

    @cached_property
    def machine(self):
        from lowp.emulator import Machine, build
        binary = build(*self.kernel.sources, flags=(*self.kernel.build_flags(), "-g"), depends=self.kernel.depends)
        return Machine(binary, **self.machine_options)

    def with_fresh_state(self) -> "EmulatedExecutor":
        """A new Machine: static data as loaded from the ELF, what a first call would see."""
        return EmulatedExecutor(self.kernel, **self.machine_options)

    def run(self, A: np.ndarray, B: np.ndarray, *, seed: int = 0, work_seed: int | None = None,
            mnemonics: bool = False, budget: int | None = None, quant: dict | None = None) -> np.ndarray:
        """C and the workspace start as poison(seed), the registers as the seed chooses (Machine.call); the
        machine's static data persists from call to call, as a loaded library's does."""
        from .executors import poison
        k = self.kernel
        k.check_operands(A, B)
        M, K = A.shape
        N = B.shape[1]
        options = {"mnemonics": True} if mnemonics else {}
        if budget:
            options["budget"] = budget
        if k.quantized:
            return self._run_quantized(A, B, quant, seed, work_seed, options)
        size = self.machine.call(workspace_symbol(k), M, N, K).ret
        work = poison(max(int(size), 1), np.uint8, seed + 1 if work_seed is None else work_seed)
        C = poison((M, N), np.int32, seed)
        self.last = self.machine.call(k.symbol, M, N, K, np.ascontiguousarray(A), np.ascontiguousarray(B), C, work,
                                      *k.params.values(), names=["M", "N", "K", "A", "B", "C", "work", *k.params],
                                      overread=k.overread, seed=seed, **options)
        return self.last["C"]

    def _run_quantized(self, A, B, quant, seed, work_seed, options) -> np.ndarray:
        """A quantized signature: its adapter's calls, one machine.call each (the mnemonic counts add up)."""
        from collections import Counter

        from . import abi
        from .invocation import call_emulated
        if quant is None:
            raise ValueError(f"{self.kernel.name}: a quantized kernel runs with the case's quantization parameters")
        inv = abi.invocation(self.kernel, A, B, quant, seed=seed, work_seed=work_seed,
                             workspace_bytes=lambda M, N, K: self.machine.call(workspace_symbol(self.kernel), M, N,
                                                                               K).ret)
        results, out = call_emulated(inv, self.machine, overread=self.kernel.overread, seed=seed, options=options)
        self.last = results[-1]          # counts below add up every ukernel call of the GEMM
        if self.last.instructions is not None:
            self.last.instructions = sum(r.instructions or 0 for r in results)
        if options.get("mnemonics"):
            total = Counter()
            for r in results:
                total.update(r.mnemonics or {})
            self.last.mnemonics = dict(total.most_common())
        C = inv.buffers[inv.output]
        return out[inv.output].view(C.dtype).reshape(C.shape).copy()


class QemuExecutor(EmulatedExecutor):
    """The same calls under qemu-aarch64 -cpu max (lowp.emulator.qemu.QemuMachine): one long-lived process per
    executor serves every call, so SVE, SME and FEAT_I8MM kernels run on qemu's own implementation (Unicorn 2.1.4
    lacks them). Budgets are time (an instruction budget is converted); counts come from lowp's TCG plugin.
    machine_options: QemuMachine's (seconds, qemu, cpu, counts)."""
    backend = "qemu"

    def __init__(self, kernel: Kernel, **machine_options):
        from lowp.emulator.qemu import AARCH64
        guest = machine_options.setdefault("guest", AARCH64)
        if kernel.vector_bits and "cpu" not in machine_options:    # SVE/SME vector length; RISC-V: VLEN
            machine_options["cpu"] = guest.vector_length_cpu(kernel.vector_bits)
        super().__init__(kernel, **machine_options)

    def unavailable(self) -> str | None:
        from lowp.emulator.qemu import cpu_features
        guest = self.machine_options["guest"]
        reason = guest.unavailable()
        if reason:
            return reason
        cpu = self.machine_options.get("cpu") or guest.cpu
        missing = [f for f in self.kernel.features
                   if f not in cpu_features(cpu, self.machine_options.get("qemu"), guest)]
        if missing:
            return f"{guest.qemu} -cpu {cpu} lacks {', '.join(missing)}"
        return self._known_defect()

    def _known_defect(self) -> str | None:
        """A qemu that executes the kernel's feature wrongly cannot judge it: its verdict would be qemu's bug.
        SME: qemu 7.2's 32-bit SMOPA (issue #2083), probed with the fix's own test vector."""
        if "sme" not in self.kernel.features:
            return None
        from lowp.emulator.sve import QEMU_2083
        right = _outer_products_right(self.kernel.vector_bits or 512, self.machine_options.get("qemu"))
        return None if right else "a kernel with SME outer products: " + QEMU_2083

    @cached_property
    def machine(self):
        from lowp.emulator.qemu import QemuMachine, build_for_qemu
        binary = build_for_qemu(*self.kernel.sources, flags=(*self.kernel.build_flags(), "-g"),
                                depends=self.kernel.depends, guest=self.machine_options["guest"])
        return QemuMachine(binary, **self.machine_options)

    def with_fresh_state(self) -> "QemuExecutor":
        """A new process: static data as loaded from the ELF, what a first call would see."""
        return QemuExecutor(self.kernel, **self.machine_options)


@lru_cache(maxsize=None)
def _outer_products_right(vector_bits: int, qemu: str | None) -> bool:
    """Whether this qemu computes SMOPA right, once per process (each probe starts qemu on the wrappers' ELF)."""
    from lowp.emulator.sve import ScalableQemuBackend
    return ScalableQemuBackend(vector_bits, qemu=qemu).outer_products_right
