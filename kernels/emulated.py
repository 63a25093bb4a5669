"""The emulated executors: build a kernel for its target (lowp.emulator.targets: zig, or the host compiler for Bochs;
cached) and call it on the target's machine (Unicorn's Machine, qemu-user's QemuMachine, Bochs's BochsMachine) with
the same signature kinds as the native executor.
Faults (out-of-bounds access, runaway loops, undefined instructions) come back as lowp.emulator errors naming the
buffer, offset and instruction."""
from __future__ import annotations

from functools import cached_property

import numpy as np

from lowp.kernels import abi
from lowp.kernels.entry import Kernel, checked_workspace, workspace_symbol
from lowp.kernels.invocation import GEMM_BUFFERS, call_emulated, checked_align, outcome, poison, poison_rows

# Bytes of workspace per kernel are asked of the kernel itself (its <prefix>_workspace function), also emulated.

# A call's instruction budget from its size (EmulatedExecutor.work_budget). Real kernels run a few instructions a
# multiply-accumulate (a scalar one some 4-10, unpacking 4-bit weights included; SIMD ones fractions of one) and
# some thousands a call of set-up: 256 a MAC and 20 million a call leave two orders of magnitude to spare on both.
WORK_BUDGET_FLOOR = 20_000_000
WORK_BUDGET_PER_MAC = 256


def _round_up(x: int, tile: int) -> int:
    return -(-x // max(tile, 1)) * max(tile, 1)


class EmulatedExecutor:
    """A kernel's calls on its target's machine (Unicorn's by default: `target` is a lowp.emulator.targets Target
    of the kernel's architecture). machine_options: the machine's (Machine: budget, count, ...; QemuMachine:
    seconds, qemu, cpu, counts)."""
    default_backend = "unicorn"
    elsewhere = ""            # why the other targets cannot run it either (executors.executor())

    def __init__(self, kernel: Kernel, *, target=None, **machine_options):
        from lowp.emulator import targets
        self.kernel = kernel
        self.target = target or targets.find(kernel.target, self.default_backend)
        self.machine_options = machine_options
        self.last = None            # the CallResult of the last run: instruction counts, modeled I8MM ops
        self._workspace = {}        # (M, N, K) -> bytes of workspace the kernel asks for

    @property
    def backend(self) -> str:
        return self.target.backend

    def unavailable(self) -> str | None:
        k = self.kernel
        reason = self.target.cannot_run(k.features, k.vector_bits, **self._target_options) \
            or self.target.known_defect(k.features, k.vector_bits, **self._target_options)
        return reason and reason + self.elsewhere

    def describe(self) -> str:
        """What runs the kernel: 'Unicorn 2.1.4 (cpu model MAX)', 'qemu-aarch64 10.0.2 (/usr/bin/qemu-aarch64)
        -cpu max,sve-default-vector-length=64,...', 'Bochs (bochscpu-python 0.4.0), cpu model sapphire_rapids'
        (a report row's `emulator`)."""
        return self.target.describe(self.kernel.vector_bits, features=self.kernel.features, **self._target_options)

    @property
    def _target_options(self) -> dict:
        return {key: self.machine_options[key] for key in ("cpu", "qemu", "model") if key in self.machine_options}

    @cached_property
    def machine(self):
        k = self.kernel
        return self.target.machine(k.sources, flags=(*k.build_flags(), "-g"), depends=k.depends,
                                   vector_bits=k.vector_bits, features=k.features, **self.machine_options)

    def build(self) -> dict | None:
        """How the kernel was built: compiler and flags (lowp.emulator.buildcache.describe)."""
        from lowp.emulator.buildcache import describe
        return describe(self.machine.binary.path)

    def with_fresh_state(self) -> "EmulatedExecutor":
        """A new machine (a new qemu process): static data as loaded from the ELF, what a first call would see."""
        return type(self)(self.kernel, target=self.target, **self.machine_options)

    def workspace_bytes(self, M: int, N: int, K: int) -> int:
        """The kernel's own answer (its <prefix>_workspace function, run on the machine), asked once per shape:
        each call is a round trip to the emulator (the native executor caches its last shape likewise)."""
        shape = (M, N, K)
        if shape not in self._workspace:
            size = int(self.machine.call(workspace_symbol(self.kernel), M, N, K).ret) & (2 ** 64 - 1)   # a size_t
            self._workspace[shape] = checked_workspace(self.kernel, M, N, K, size)
        return self._workspace[shape]

    def run(self, A: np.ndarray, B: np.ndarray, *, seed: int = 0, work_seed: int | None = None,
            mnemonics: bool = False, budget: int | None = None, quant: dict | None = None,
            strides: dict | None = None, igemm: dict | None = None, align: dict | None = None) -> np.ndarray:
        """C and the workspace start as poison(seed), the registers as the seed chooses (Machine.call); the
        machine's static data persists from call to call, as a loaded library's does. quant, strides, igemm,
        align: as NativeExecutor.run."""
        k = self.kernel
        k.check_operands(A, B)
        M, K = A.shape
        N = B.shape[1]
        options = {"mnemonics": True} if mnemonics else {}
        options.update({"budget": budget} if budget else self.work_budget(M, N, K))
        if k.quantized:
            return self._run_quantized(A, B, quant, seed, work_seed, options, strides=strides, igemm=igemm,
                                       align=align)
        abi.reject_abi_options(k, strides, igemm)
        align = checked_align(k, align, GEMM_BUFFERS)
        if align:
            options["align"] = align
        size = self.workspace_bytes(M, N, K)
        work = poison(max(int(size), 1), np.uint8, seed + 1 if work_seed is None else work_seed)
        C = poison((M, N), np.int32, seed)
        self.last = self.machine.call(k.symbol, M, N, K, np.ascontiguousarray(A), np.ascontiguousarray(B), C, work,
                                      *k.params.values(), names=["M", "N", "K", "A", "B", "C", "work", *k.params],
                                      overread=k.overread, seed=seed, **options)
        return self.last["C"]

    def work_budget(self, M: int, N: int, K: int) -> dict:
        """The instruction budget of one call of an M x N x K case ({"budget": n}), where neither the caller nor
        the machine's options set one: WORK_BUDGET_FLOOR plus WORK_BUDGET_PER_MAC a multiply-accumulate of the case
        rounded up to whole tiles, at most the machine's default. A runaway loop then costs what a case of its size
        could need, not the default's 500 million instructions (some 7 s on Unicorn, per call it hits)."""
        from lowp.emulator import DEFAULT_BUDGET
        if {"budget", "seconds"} & set(self.machine_options):
            return {}
        tile = self.kernel.tile
        macs = _round_up(M, tile.mr) * _round_up(N, tile.nr) * _round_up(max(K, 1), tile.kr)
        return {"budget": min(DEFAULT_BUDGET, WORK_BUDGET_FLOOR + WORK_BUDGET_PER_MAC * macs)}

    @property
    def runs_invocations(self) -> bool:
        """Whether run_many takes a quantized kernel's cases with their parameters and ABI options (`options`):
        it runs them one by one, and the batch engine judges them together (batch.judged_together)."""
        return self.kernel.quantized

    def run_many(self, As: list, Bs: list, *, seeds: list[int], options: list[dict] | None = None,
                 rerun: bool = True) -> list:
        """run(A, B, seed=seed) for each case, in order, as one batch on this executor's machine: per case C, or
        the exception run() would have raised for it (a fault, an out-of-bounds access, a budget, canary damage,
        bad operands), never raised here; raised only when the machine cannot run at all (qemu missing). All
        cases have one (M, N, K). The machine is the one run() uses and its static data persists from case to
        case as from call to call, so the outcomes are those of the same run() calls in the same order.
        A `gemm` kernel's cases go to the machine as one batch (qemu-user: call_batch, pipelined requests laid
        out with numpy; Unicorn and Bochs: call_many, one layout, per case the memory refresh and the call). A
        quantized or XNNPACK-ABI kernel's calls stay per case (its adapter makes several ukernel calls per case,
        each seeing what the last one wrote): run(A, B, seed=seed, **options[i]) in a loop, `options` giving each
        case's quant, strides, igemm and align (without a quant, each case is run()'s ValueError); what the batch
        gains is judging its cases together. docs/batch-emulated.md says why.
        rerun: as the native run_many takes it; here every outcome is already its own case's, so nothing is rerun."""
        if not len(As) == len(Bs) == len(seeds):
            raise ValueError(f"run_many: {len(As)} A, {len(Bs)} B and {len(seeds)} seeds")
        options = list(options) if options is not None else [{}] * len(As)
        if len(options) != len(As):
            raise ValueError(f"run_many: {len(options)} options for {len(As)} cases")
        if not len(As):              # a list of cases, or the engine's stacked (cases, M, K) array
            return []
        shapes = {(np.shape(A)[0], np.shape(B)[1], np.shape(A)[1]) for A, B in zip(As, Bs)
                  if np.ndim(A) == 2 and np.ndim(B) == 2}         # the others: check_operands names them per case
        if len(shapes) > 1:
            raise ValueError(f"run_many: the cases of one batch have one (M, N, K), got {sorted(shapes)}")
        self._check_machine()
        if self.kernel.quantized:
            return [outcome(lambda: self.run(A, B, seed=seed, **o)) for A, B, seed, o in zip(As, Bs, seeds, options)]
        return self._run_gemm_many(As, Bs, seeds)

    def _check_machine(self) -> None:
        """An infrastructure failure (no qemu-aarch64 here) is the batch's, not its cases': raise it."""
        reason = self.target.unavailable()
        if reason:
            from lowp.emulator.errors import EmulatorError
            raise EmulatorError(f"{self.kernel.name}: {reason}")

    def _run_gemm_many(self, As, Bs, seeds) -> list:
        """run_many of a `gemm` kernel: the cases whose operands pass check_operands, as one batch."""
        k = self.kernel
        outcomes: list = [None] * len(As)
        positions = []
        for i, (A, B) in enumerate(zip(As, Bs)):
            try:
                k.check_operands(A, B)
            except Exception as e:          # noqa: BLE001 - run() raises it for this case alone
                outcomes[i] = e
                continue
            positions.append(i)
        if not positions:
            return outcomes
        M, K = As[positions[0]].shape
        N = Bs[positions[0]].shape[1]
        try:
            size = max(int(self.workspace_bytes(M, N, K)), 1)
        except Exception as e:              # noqa: BLE001 - every case's run() would raise it
            for i in positions:
                outcomes[i] = e
            return outcomes
        params = list(k.params.values())
        names = ["M", "N", "K", "A", "B", "C", "work", *k.params]
        chosen = [seeds[i] for i in positions]
        # C and the workspace start as each case's poison, as in run()
        Cs, works = poison_rows((M, N), np.int32, chosen), poison_rows(size, np.uint8, [s + 1 for s in chosen])
        if hasattr(self.machine, "call_batch"):         # qemu-user: the requests laid out for many cases at once
            first = positions[0]
            varying = {"A": np.stack([As[i] for i in positions]), "B": np.stack([Bs[i] for i in positions]),
                       "C": Cs, "work": works}
            template = (M, N, K, As[first], Bs[first], Cs[0], works[0], *params)
            results = self.machine.call_batch(k.symbol, template, names=names, seeds=chosen, varying=varying,
                                              overread=k.overread, **self.work_budget(M, N, K))
        else:
            calls = [(M, N, K, np.ascontiguousarray(As[i]), np.ascontiguousarray(Bs[i]), Cs[j], works[j], *params)
                     for j, i in enumerate(positions)]
            results = self.machine.call_many(k.symbol, calls, names=names, overread=k.overread, seeds=chosen,
                                             **self.work_budget(M, N, K))
        for i, r in zip(positions, results):
            if isinstance(r, BaseException):
                outcomes[i] = r
            else:
                outcomes[i] = r["C"]
                self.last = r
        return outcomes

    def _run_quantized(self, A, B, quant, seed, work_seed, options, align=None, **abi_options) -> np.ndarray:
        """A quantized signature: its adapter's calls, one machine.call each (the mnemonic counts add up), each
        buffer at its `align` offset."""
        from collections import Counter

        if quant is None:
            raise ValueError(f"{self.kernel.name}: a quantized kernel runs with the case's quantization parameters")
        inv = abi.invocation(self.kernel, A, B, quant, seed=seed, work_seed=work_seed,
                             workspace_bytes=self.workspace_bytes, **abi_options)
        results, out = call_emulated(inv, self.machine, overread=self.kernel.overread, seed=seed, options=options,
                                     align=checked_align(self.kernel, align, inv.buffers))
        self.last = results[-1]          # counts below add up every ukernel call of the GEMM
        if self.last.instructions is not None:
            self.last.instructions = sum(r.instructions or 0 for r in results)
        if options.get("mnemonics"):
            total = Counter()
            for r in results:
                total.update(r.mnemonics or {})
            self.last.mnemonics = dict(total.most_common())
        return inv.result(out)


class QemuExecutor(EmulatedExecutor):
    """The same calls under qemu-user (lowp.emulator.qemu.QemuMachine): one long-lived process per executor serves
    every call, so SVE, SME and FEAT_I8MM kernels run on qemu's own implementation (Unicorn 2.1.4 lacks them).
    Budgets are time (an instruction budget is converted); counts come from lowp's TCG plugin. The kernel's
    vector_bits choose qemu's SVE/SME vector length (the target's cpu)."""
    default_backend = "qemu"
