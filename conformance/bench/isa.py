"""Throughput of the models beside the native instructions, on the same batch of registers (`lowp bench isa`).
Ratios measured side by side in one run are what to read; absolute rates on a shared machine are noisy."""
from __future__ import annotations

import time

import numpy as np

from lowp.isa_models.verify.proof import random_batch


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(intr, backend, registers: int = 1 << 14, repeat: int = 5, seed: int = 0) -> dict:
    """Model and backend over the same `registers` random registers; lanes are result lanes."""
    args = random_batch(intr, registers, np.random.default_rng(seed))
    lanes = registers * intr.result.lanes
    model_s = best_time(lambda: intr(*args), repeat)
    row = {"intrinsic": intr.name, "registers": registers, "lanes": lanes, "model_lanes_per_s": lanes / model_s,
           "native_lanes_per_s": None, "native_over_model": None}
    if backend is not None and backend.unavailable(intr) is None:
        native_s = best_time(lambda: backend.run(intr, args), repeat)
        row["native_lanes_per_s"] = lanes / native_s
        row["native_over_model"] = model_s / native_s
    return row
