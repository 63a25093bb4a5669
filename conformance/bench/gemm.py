"""GEMM speed side by side in one run (`lowp bench gemm`): numpy float32, the registry's x86 kernels this CPU runs
(8-bit and 4.6-bit) and FBGEMM through PyTorch's quantized linear, on seed 004's grid, with seed 004's metric:

    t = mean over (H, W, D) of T(H, W, D) / (H W D),   C = A (H x D) x B (D x W),

H in {72, 120, 240, 360}, W in {24, 48, 72, 96}, D in {128, 256, 384, 512}; T is the time of one call as a user
makes it (a registered kernel: `executor(kernel).run(A, B)`, packing included; FBGEMM:
`torch.ops.quantized.linear(x_q, packed_w, scale, zero_point)` on prepacked weights; numpy: `A @ B`). All are
single-threaded. Contenders are timed round-robin within each shape (each round times every contender once, the
median round is kept), so drifting load on a shared machine hits them alike. Ratios measured side by side are
what to read; absolute times on a shared machine are noisy.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from lowp.conformance.run.processes import single_thread_blas

GRID = dict(H=(72, 120, 240, 360), W=(24, 48, 72, 96), D=(128, 256, 384, 512))
QUICK_GRID = dict(H=(72, 360), W=(24, 96), D=(128, 512))
BIG = (512, 512, 512)
# seed 004, Table 1, x86 (AMD Ryzen 9 5950X), ns per multiplication
ARTICLE_NS = {"float": 0.04355, "8-bit": 0.02963, "4.6-bit": 0.02327}
LIKE_FOR_LIKE = {"q46_avx2": "q8_avx2", "q46_avx512bw": "q8_avx512bw"}


@dataclass
class Contender:
    name: str
    group: str                                  # 'float', '8-bit', '4.6-bit', 'fbgemm'
    setup: Callable | None                      # setup(H, W, D, rng) -> zero-argument call
    skipped: str = ""                           # why it cannot run here
    times: dict = field(default_factory=dict)   # (H, W, D) -> seconds per call


def shapes(quick: bool = False) -> list[tuple[int, int, int]]:
    g = QUICK_GRID if quick else GRID
    return list(itertools.product(g["H"], g["W"], g["D"]))


def _numpy_float():
    def setup(H, W, D, rng):
        a = rng.standard_normal((H, D), dtype=np.float32)
        b = rng.standard_normal((D, W), dtype=np.float32)
        return lambda: a @ b
    return Contender("numpy float32", "float", setup)


def _fbgemm():
    try:
        import torch
    except ImportError as e:
        return Contender("fbgemm (torch)", "fbgemm", None, skipped=f"PyTorch is not installed ({e})")
    import warnings
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return Contender("fbgemm (torch)", "fbgemm", None,
                         skipped=f"this PyTorch has no fbgemm engine ({torch.backends.quantized.supported_engines})")
    torch.backends.quantized.engine = "fbgemm"
    torch.set_num_threads(1)

    def setup(H, W, D, rng):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = torch.from_numpy(rng.random((H, D), dtype=np.float32))
            w = torch.from_numpy(rng.random((W, D), dtype=np.float32) - 0.5)
            wq = torch.quantize_per_tensor(w, 1 / 127, 0, torch.qint8)
            packed = torch.ops.quantized.linear_prepack(wq, None)
            xq = torch.quantize_per_tensor(x, 1 / 255, 0, torch.quint8)
        linear = torch.ops.quantized.linear
        return lambda: linear(xq, packed, 0.05, 128)
    return Contender(f"fbgemm (torch {torch.__version__})", "fbgemm", setup)


def _kernel(k):
    from lowp.kernels.cases import random_operands
    from lowp.kernels.executors import NativeExecutor, executor
    ex = NativeExecutor(k, guard=False) if k.target == "x86-64" else executor(k)   # timing: no guard pages
    group = "4.6-bit" if k.name.startswith("q46") else "8-bit"
    reason = ex.unavailable()
    if reason:
        return Contender(k.name, group, None, skipped=reason)

    def setup(H, W, D, rng):
        A, B = random_operands(k, H, W, D, rng, domain=True)
        run = ex.run
        return lambda: run(A, B)
    return Contender(k.name, group, setup)


def contenders(names: list[str] | None = None, torch: bool = True) -> list[Contender]:
    """numpy float32, the registry's x86-64 kernels (or those named), and FBGEMM if PyTorch is installed."""
    from lowp.kernels.registry import kernels
    out = [_numpy_float()]
    out += [_kernel(k) for k in kernels("x86-64") if names is None or k.name in names]
    if torch:
        out.append(_fbgemm())
    return out


def _time(call, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - start) / number


def measure_shape(runners: list[tuple[Contender, Callable]], shape, rounds: int, budget: float) -> None:
    """Round-robin: each round times every contender over `number` calls (about `budget` seconds)."""
    numbers = []
    for _, call in runners:
        call()                                   # warm: caches, lazy builds, page faults
        once = _time(call, 1)
        numbers.append(max(1, min(1000, int(budget / max(once, 1e-7)))))
    samples = [[] for _ in runners]
    for _ in range(rounds):
        for i, (_, call) in enumerate(runners):
            samples[i].append(_time(call, numbers[i]))
    for (c, _), s in zip(runners, samples):
        c.times[shape] = float(np.median(s))


def gemm_benchmark(quick: bool = False, names: list[str] | None = None, rounds: int | None = None,
                   budget: float | None = None, seed: int = 0, torch: bool = True, big: bool = True,
                   progress: Callable | None = None) -> dict:
    """Time every contender on the grid (and 512 x 512 x 512); returns the contenders and the notes."""
    notes = [single_thread_blas()]
    rounds = rounds or (5 if quick else 7)
    budget = budget or (0.002 if quick else 0.003)
    cs = contenders(names, torch)
    live = [c for c in cs if c.setup is not None]
    rng = np.random.default_rng(seed)
    todo = shapes(quick) + ([BIG] if big else [])
    for n, shape in enumerate(todo):
        if progress:
            progress(n, len(todo), shape)
        measure_shape([(c, c.setup(*shape, rng)) for c in live], shape, rounds, budget)
    return {"contenders": cs, "grid": shapes(quick), "big": BIG if big else None, "notes": notes,
            "rounds": rounds, "budget": budget}


def ns_per_mac(c: Contender, grid) -> float | None:
    if not all(s in c.times for s in grid):
        return None
    return float(np.mean([c.times[s] / (s[0] * s[1] * s[2]) for s in grid])) * 1e9


def summarize(result: dict) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """Rows (one per contender) and ratios (what, value, how it compares with the article or the target)."""
    cs, grid, big = result["contenders"], result["grid"], result["big"]
    by = {c.name: c for c in cs}
    rows = []
    for c in cs:
        ns = ns_per_mac(c, grid)
        rows.append({"contender": c.name, "group": c.group,
                     "ns/MAC (grid mean)": ns,
                     "512^3 us": c.times[big] * 1e6 if big and big in c.times else None,
                     "512^3 GMAC/s": big[0] * big[1] * big[2] / c.times[big] / 1e9 if big and big in c.times else None,
                     "note": c.skipped})
    ns = {r["contender"]: r["ns/MAC (grid mean)"] for r in rows if r["ns/MAC (grid mean)"] is not None}

    def best(group):
        cands = [(v, n) for n, v in ns.items() if by[n].group == group]
        return min(cands) if cands else (None, None)

    ratios = []
    flt = next((n for n in ns if by[n].group == "float"), None)
    b8, b8n = best("8-bit")
    b46, b46n = best("4.6-bit")
    article_8 = ARTICLE_NS["8-bit"] / ARTICLE_NS["4.6-bit"]
    for q46, q8 in LIKE_FOR_LIKE.items():
        if q46 in ns and q8 in ns:
            r = ns[q8] / ns[q46]
            ratios.append((f"4.6-bit over like-for-like 8-bit: {q46} vs {q8}", f"{r:.2f}x",
                           f"article 1.27x; target >= 1.3x: {'met' if r >= 1.3 else 'NOT met'}"))
    if b46 and b8:
        ratios.append((f"best 4.6-bit over best 8-bit: {b46n} vs {b8n}", f"{b8 / b46:.2f}x",
                       f"article {article_8:.2f}x (its 8-bit had no VNNI)"))
    if b46 and flt:
        ratios.append((f"best 4.6-bit over float: {b46n} vs {flt}", f"{ns[flt] / b46:.2f}x",
                       f"article {ARTICLE_NS['float'] / ARTICLE_NS['4.6-bit']:.2f}x"))
    fb = next((c for c in cs if c.group == "fbgemm"), None)
    if fb is not None and fb.name in ns and b8:
        r = ns[fb.name] / b8
        ratios.append((f"best 8-bit over FBGEMM on the grid: {b8n}", f"{r:.2f}x",
                       f"target >= 1.0x: {'met' if r >= 1.0 else 'NOT met'}"))
    if fb is not None and big and big in fb.times:
        for c in cs:
            if "vnni" in c.name and big in c.times:
                r = fb.times[big] / c.times[big]
                ratios.append((f"{c.name} over FBGEMM at 512^3", f"{r:.2f}x",
                               f"target >= 0.8x: {'met' if r >= 0.8 else 'NOT met'}"))
    elif fb is not None and fb.skipped:
        ratios.append(("FBGEMM comparisons", "skipped", fb.skipped))
    return rows, ratios


def per_call_overhead(name: str, rounds: int = 5, number: int = 2000, shape=(8, 8, 8)) -> dict:
    """What one call of a registered native kernel costs beyond the kernel, side by side on one shape: the bare C
    call through cffi, `run` unguarded (the benchmark's path) and `run` guarded (the conformance path: fresh
    mappings with guard pages, poisoned C and workspace, the signal-catching trampoline, canary checks)."""
    from lowp.kernels.cases import random_operands
    from lowp.kernels.executors import NativeExecutor
    from lowp.kernels.registry import kernel
    k = kernel(name)
    plain, guarded = NativeExecutor(k, guard=False), NativeExecutor(k)
    m, n, d = shape
    A, B = random_operands(k, m, n, d, np.random.default_rng(0), domain=True)
    plain.run(A, B)
    guarded.run(A, B)
    ffi, fn, _ = plain._entry
    C = np.zeros((m, n), np.int32)
    args = (m, n, d, ffi.from_buffer(A), ffi.from_buffer(B), ffi.from_buffer("int32_t[]", C),
            plain._reused_workspace(plain.workspace_bytes(m, n, d)), *k.params.values())
    times = {"bare_call_us": lambda: fn(*args), "run_us": lambda: plain.run(A, B),
             "guarded_run_us": lambda: guarded.run(A, B)}
    best = {key: min(_time(call, number) for _ in range(rounds)) * 1e6 for key, call in times.items()}
    return {"kernel": name, "shape": shape, **best}
