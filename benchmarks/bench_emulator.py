"""Emulated instructions per second on an SDOT int8 GEMM (tests/aarch64/gemm_sdot.c, 64x64x256) under Unicorn:
without hooks, with Unicorn's own budget (count=, a C callback per instruction), with lowp's exact count (a Python
block hook), with per-mnemonic counts, and with lockstep (on a smaller GEMM: a Python model call per SDOT).

    pytest benchmarks/bench_emulator.py --benchmark-enable
    python benchmarks/bench_emulator.py          # the table emulator_benchmark() returns (about 10 s)
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "aarch64" / "gemm_sdot.c"
MODES = {
    "no hooks": dict(budget=None, count=False),
    "budget (count=)": dict(count=False),
    "exact count (block hook)": dict(count=True),
    "per-mnemonic counts": dict(mnemonics=True),
    "lockstep": dict(lockstep=True, count=False),
}


def _setup(m=64, n=64, k=256):
    from lowp.emulator import Machine, build
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    bt = rng.integers(-128, 128, (n, k), dtype=np.int8)
    machine = Machine(build(KERNEL))
    args = (a, bt, np.zeros((m, n), np.int32), m, n, k)
    instructions = machine.call("gemm_sdot", *args, count=True).instructions
    return machine, args, instructions


def _shape(mode):
    return (16, 16, 64) if mode == "lockstep" else (64, 64, 256)


def emulator_benchmark(repeats: int = 5) -> list[dict]:
    """One row per mode: instructions per call, median emu_start time and whole-call time (with mapping and
    copying the buffers), million instructions per second of emu_start, and the slowdown against no hooks."""
    rows, base = [], None
    for mode, options in MODES.items():
        machine, args, count = _setup(*_shape(mode))
        machine.call("gemm_sdot", *args, **options)            # translate once
        calls, runs = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            r = machine.call("gemm_sdot", *args, **options)
            calls.append(time.perf_counter() - t0)
            runs.append(r.seconds)
        run, call = float(np.median(runs)), float(np.median(calls))
        rate = count / run / 1e6
        base = base or rate
        rows.append({"mode": mode, "gemm": "x".join(map(str, _shape(mode))), "instructions": count,
                     "emu_start ms": round(run * 1e3, 3), "call ms": round(call * 1e3, 3),
                     "M instr/s": round(rate, 1), "slowdown": round(base / rate, 1)})
    return rows


@pytest.mark.parametrize("mode", list(MODES))
def test_emulated_gemm(benchmark, mode):
    machine, args, count = _setup(*_shape(mode))
    options = MODES[mode]
    r = benchmark(lambda: machine.call("gemm_sdot", *args, **options))
    benchmark.extra_info["instructions"] = count
    if benchmark.stats is not None:
        benchmark.extra_info["M instr/s"] = count / benchmark.stats.stats.median / 1e6
    assert r.arrays[2].shape == args[2].shape


if __name__ == "__main__":
    from tabulate import tabulate
    print(tabulate(emulator_benchmark(), headers="keys"))
