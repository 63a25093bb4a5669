"""`lowp bench emulator`: the per-call cost of the two AArch64 executors side by side in one run, on the registry's
SDOT GEMM (kernels/aarch64/sdot_s8.c, kernel sdot_s8_neon): Unicorn (lowp.emulator.Machine, as the executor runs it:
a 500 M instruction budget, Unicorn's count= callback), Unicorn without hooks (no budget: the floor), and qemu-user
(lowp.emulator.qemu.QemuMachine: one long-lived qemu-aarch64 -cpu max process, a time budget, the counting plugin
loaded). Two sizes: 64x64x256 (issue 12's target: qemu within 3x Unicorn's per-call cost) and 1x1x1 (the fixed
overhead of a call: placing the buffers, the round trip, the canaries).

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
    from lowp.kernels.registry import workspace_symbol
    k = ex.kernel
    M, K = A.shape
    N = B.shape[1]
    size = ex.machine.call(workspace_symbol(k), M, N, K).ret
    C, work = np.zeros((M, N), np.int32), np.zeros(max(size, 1), np.uint8)
    args = (M, N, K, A, B, C, work)
    names = ["M", "N", "K", "A", "B", "C", "work"]
    return lambda: ex.machine.call(k.symbol, *args, names=names, overread=k.overread, seed=seed)


def emulator_benchmark(rounds: int = 7, kernel: str = KERNEL) -> list[dict]:
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
        instructions = contenders["unicorn"].machine.call(k.symbol, *_call_args(contenders["unicorn"], A, B),
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


def _call_args(ex, A, B):
    from lowp.kernels.registry import workspace_symbol
    M, K = A.shape
    N = B.shape[1]
    size = ex.machine.call(workspace_symbol(ex.kernel), M, N, K).ret
    return M, N, K, A, B, np.zeros((M, N), np.int32), np.zeros(max(size, 1), np.uint8)
