"""`lowp bench emulator`: the per-call cost of the two AArch64 executors side by side in one run, on the registry's
SDOT GEMM (kernels/aarch64/sdot_s8.c, kernel sdot_s8_neon): Unicorn (lowp.emulator.Machine, as the executor runs it:
a 500 M instruction budget, Unicorn's count= callback), Unicorn without hooks (no budget: the floor), and qemu-user
(lowp.emulator.qemu.QemuMachine: one long-lived qemu-aarch64 -cpu max process, a time budget, the counting plugin
loaded). Two sizes: 64x64x256 (issue 12's target: qemu within 3x Unicorn's per-call cost) and 1x1x1 (the fixed
overhead of a call: placing the buffers, the round trip, the canaries).

`lowp bench emulator --hooks` (hook_modes()) is the other table: what Unicorn's hooks cost on the same kernel, million
instructions per second without hooks, with the budget, with lowp's exact count, with per-mnemonic counts and in
lockstep (a Python model call per SDOT, on a smaller GEMM).

Two levels: `call`, one Machine.call / QemuMachine.call of the GEMM with its four buffers (the per-call overhead
plus the kernel's run), and `run`, the executor's run(A, B) as a conformance check makes it (the workspace query,
the poison, the call). Contenders are timed round-robin (each round times every contender once, the median round
is kept), so drifting load on a shared machine hits them alike; read the ratios.
"""
from __future__ import annotations

import time

import numpy as np

SHAPES = ((64, 64, 256), (1, 1, 1))
KERNEL = "sdot_s8_neon"
ROUNDS = 7             # emulator_benchmark: rounds, the median kept
HOOK_REPEATS = 5       # hook_modes: calls per mode, the median kept


def _contenders(k):
    from lowp.kernels.emulated import EmulatedExecutor, QemuExecutor
    out = {"unicorn": EmulatedExecutor(k), "unicorn (no hooks)": EmulatedExecutor(k, budget=None)}
    q = QemuExecutor(k)
    reason = q.unavailable()
    if reason is None:
        out["qemu"] = q
    return out, reason


def _call(ex, A, B, seed):
    """One Machine call of the GEMM with the executor's buffers (what run() makes, without the workspace query)."""
    k = ex.kernel
    args = gemm_args(ex, A, B)
    names = ["M", "N", "K", "A", "B", "C", "work"]
    return lambda: ex.machine.call(k.symbol, *args, names=names, overread=k.overread, seed=seed)


def emulator_benchmark(rounds: int = ROUNDS, kernel: str = KERNEL) -> list[dict]:
    """One row per (shape, level): milliseconds per call of each contender (median round), qemu / Unicorn, the
    kernel's instructions per call and each contender's million instructions per second."""
    from lowp.kernels import kernel as get
    k = get(kernel)
    contenders, reason = _contenders(k)
    rng = np.random.default_rng(0)
    rows = []
    for M, N, K in SHAPES:
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        instructions = contenders["unicorn"].machine.call(k.symbol, *gemm_args(contenders["unicorn"], A, B),
                                                          count=True).instructions
        repeat = 20 if M * N * K > 1000 else 200
        for level in ("call", "run"):
            work = {name: (_call(ex, A, B, 1) if level == "call" else (lambda ex=ex: ex.run(A, B, seed=1)))
                    for name, ex in contenders.items()}
            for fn in work.values():           # translate, map, start the process: not timed
                fn()
            times = {name: [] for name in work}
            for _ in range(rounds):
                for name, fn in work.items():
                    t0 = time.perf_counter()
                    for _ in range(repeat):
                        fn()
                    times[name].append((time.perf_counter() - t0) / repeat)
            med = {name: float(np.median(t)) for name, t in times.items()}
            row = {"gemm": f"{M}x{N}x{K}", "level": level, "instructions": instructions}
            for name, s in med.items():
                row[f"{name} ms"] = round(s * 1e3, 4)
            if "qemu" in med:
                row["qemu / unicorn"] = round(med["qemu"] / med["unicorn"], 2)
            for name, s in med.items():
                row[f"{name} M instr/s"] = round(instructions / s / 1e6, 1)
            rows.append(row)
    if reason:
        rows.append({"gemm": "", "level": f"qemu not measured: {reason}"})
    for ex in contenders.values():
        close = getattr(ex.machine, "close", None)
        if close:
            close()
    return rows


def gemm_args(ex, A, B) -> tuple:
    """The kernel's arguments for C = A B on the executor's machine: M, N, K, A, B, a zero C and the workspace it
    asks for."""
    from lowp.kernels.registry import workspace_symbol
    M, K = A.shape
    N = B.shape[1]
    size = ex.machine.call(workspace_symbol(ex.kernel), M, N, K).ret
    return M, N, K, A, B, np.zeros((M, N), np.int32), np.zeros(max(size, 1), np.uint8)


# Unicorn's hooks, cheapest first: Machine.call options. The budget is the executor's default (count=, a C callback
# per instruction); lowp's exact count is a Python block hook; lockstep calls the Python model of every SDOT.
HOOK_MODES = {
    "no hooks": dict(budget=None, count=False),
    "budget (count=)": dict(count=False),
    "exact count (block hook)": dict(count=True),
    "per-mnemonic counts": dict(mnemonics=True),
    "lockstep": dict(lockstep=True, count=False),
}


def hook_shape(mode: str) -> tuple[int, int, int]:
    """(M, N, K): lockstep is about a thousand times slower, so it runs a smaller GEMM."""
    return (16, 16, 64) if mode == "lockstep" else (64, 64, 256)


def hook_setup(mode: str, kernel: str = KERNEL):
    """(call, instructions, product): one zero-argument Machine.call of the kernel's GEMM in that hook mode under
    Unicorn (not yet translated), the instructions it executes and the exact product its C (arrays[2]) must hold."""
    from lowp.kernels import kernel as get
    from lowp.kernels.emulated import EmulatedExecutor
    ex = EmulatedExecutor(get(kernel))
    M, N, K = hook_shape(mode)
    rng = np.random.default_rng(0)
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)
    args = gemm_args(ex, A, B)
    k = ex.kernel
    instructions = ex.machine.call(k.symbol, *args, overread=k.overread, count=True).instructions
    options = HOOK_MODES[mode]
    return ((lambda: ex.machine.call(k.symbol, *args, overread=k.overread, **options)), instructions,
            A.astype(np.int32) @ B.astype(np.int32))


def hook_modes(repeats: int = HOOK_REPEATS, kernel: str = KERNEL) -> list[dict]:
    """One row per hook mode: instructions per call, median emu_start time and whole-call time (with mapping and
    copying the buffers), million instructions per second of emu_start, and the slowdown against no hooks."""
    rows, base = [], None
    for mode in HOOK_MODES:
        call, count, product = hook_setup(mode, kernel)
        if not np.array_equal(call().arrays[2], product):        # translate once, and check what is timed
            raise AssertionError(f"{kernel} under Unicorn ({mode}) does not compute A B")
        calls, runs = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = call()
            calls.append(time.perf_counter() - t0)
            runs.append(r.seconds)
        run, whole = float(np.median(runs)), float(np.median(calls))
        rate = count / run / 1e6
        base = base or rate
        rows.append({"mode": mode, "gemm": "x".join(map(str, hook_shape(mode))), "instructions": count,
                     "emu_start ms": round(run * 1e3, 3), "call ms": round(whole * 1e3, 3),
                     "M instr/s": round(rate, 1), "slowdown": round(base / rate, 1)})
    return rows


# -- x86 on Bochs ------------------------------------------------------------------------------------------------
# `lowp bench emulator --x86`: what a call costs on Bochs beside the same shape on this CPU. The AVX2 kernel runs
# on both (any x86-64 host has AVX2 here); the AVX-512 VNNI kernel, the one an AVX2-only host judges on Bochs,
# natively too where the CPU has it.
X86_CONTENDERS = (("u8s8s32_avx2", "native"), ("u8s8s32_avx2", "bochs"), ("u8s8s32_avx512vnni", "native"),
                  ("u8s8s32_avx512vnni", "bochs"))


def x86_benchmark(rounds: int = ROUNDS) -> list[dict]:
    """One row per shape: milliseconds per executor run (guard pages, poison, the call, as a check makes it) of
    each contender that can run here, round-robin, the median round kept; and the ratio of the VNNI kernel on
    Bochs to the AVX2 kernel natively, the issue's measure."""
    from lowp.kernels import executor, kernel as get
    contenders, skipped = {}, []
    for name, backend in X86_CONTENDERS:
        ex = executor(get(name), backend)
        reason = ex.unavailable()
        if reason:
            skipped.append(f"{name} on {backend}: {reason}")
        else:
            contenders[f"{name} {backend}"] = ex
    rng = np.random.default_rng(0)
    rows = []
    for M, N, K in SHAPES:
        A = rng.integers(0, 256, (M, K)).astype(np.uint8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        repeat = 20 if M * N * K > 1000 else 200
        for ex in contenders.values():        # build, load, start the guest: not timed
            ex.run(A, B, seed=1)
        times = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, ex in contenders.items():
                t0 = time.perf_counter()
                for _ in range(repeat):
                    ex.run(A, B, seed=1)
                times[name].append((time.perf_counter() - t0) / repeat)
        row = {"gemm": f"{M}x{N}x{K}"}
        med = {name: float(np.median(t)) for name, t in times.items()}
        row.update({f"{name} ms": round(s * 1e3, 4) for name, s in med.items()})
        if "u8s8s32_avx512vnni bochs" in med and "u8s8s32_avx2 native" in med:
            row["vnni bochs / avx2 native"] = round(med["u8s8s32_avx512vnni bochs"] / med["u8s8s32_avx2 native"], 2)
        if "u8s8s32_avx2 bochs" in med:
            row["avx2 bochs / avx2 native"] = round(med["u8s8s32_avx2 bochs"] / med["u8s8s32_avx2 native"], 2)
        rows.append(row)
    rows += [{"gemm": "", "not measured": s} for s in skipped]
    return rows
