"""`lowp bench prove`: issue 25's targets, measured. Each headline kernel proved at its target shape (4x8x64, or its
tile at K = 64), against the target time, and the largest K it proves within a budget (K doubled from 64 until a
proof takes longer than the budget or stops being PROVED)."""
from __future__ import annotations

import time

TARGETS = [("u8s8s32_avx512vnni", (4, 8, 64), 10.0), ("s8s8s32_avx512vnni", (4, 8, 64), 10.0),
           ("u8s8s32_avx2", (4, 8, 64), 30.0), ("s8s8s32_avx2", (4, 8, 64), 30.0),
           ("sdot_s8_neon", (4, 8, 64), 10.0), ("smmla_s8_neon", (4, 4, 64), 10.0),
           ("gemmlowp_s8_neon", (4, 4, 64), 30.0),
           # requantizing XNNPACK-ABI kernels (kernels/quantized/x86.toml): the accumulator, then the output stage swept
           ("qs8_qc8w_gemm_4x8c8_fp32_avx2", (4, 8, 64), 60.0),
           ("qs8_qc8w_gemm_4x16c4_fp32_avx512vnni", (4, 16, 64), 120.0)]


def _kernel(name: str):
    """A registered kernel; lowp's requantizing x86 kernels are registered from their TOML on first use."""
    from pathlib import Path

    from lowp import kernels as package
    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS, kernel
    if name not in _KERNELS:
        quantized = Path(package.__file__).parent / "quantized" / "x86.toml"
        if any(f'name = "{name}"' in line for line in quantized.read_text().splitlines()):
            load_toml(quantized)
    return kernel(name)


def prove_targets(kernels=None, budget: float = 300.0, largest: bool = True) -> list[dict]:
    from lowp.conformance.prove import PROVED, prove
    rows = []
    for name, shape, target in TARGETS:
        if kernels and name not in kernels:
            continue
        k = _kernel(name)
        proof = prove(k, shape, lemma_cache=False)
        row = {"kernel": name, "shape": "x".join(map(str, shape)), "verdict": proof.verdict,
               "seconds": round(proof.seconds, 2), "target s": target,
               "within": proof.verdict == PROVED and proof.seconds <= target,
               "solver s": round(proof.solver_seconds, 3), "instructions": proof.steps}
        if largest and proof.verdict == PROVED:
            row["largest K in budget"], row["its seconds"] = largest_k(k, shape, budget)
        if proof.verdict != PROVED:
            row["detail"] = proof.summary()
        rows.append(row)
    return rows


def largest_k(k, shape, budget: float) -> tuple[int, float]:
    """The largest K (doubling from the shape's) proved within `budget` seconds, and that proof's time; the
    doubling stops early once a proof took more than a quarter of the budget (the next would not fit)."""
    from lowp.conformance.prove import PROVED, prove
    M, N, K = shape
    best, seconds = 0, 0.0
    while True:
        start = time.perf_counter()
        proof = prove(k, (M, N, K), lemma_cache=False, timeout=budget)
        spent = time.perf_counter() - start
        if proof.verdict != PROVED or spent > budget:
            return best, seconds
        best, seconds = K, round(spent, 2)
        if spent > budget / 4:
            return best, seconds
        K *= 2
