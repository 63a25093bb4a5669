"""`lowp bench fuzz`: cases checked per second on one core, for a native and an emulated kernel:
the per-case path (what `lowp fuzz` paid per case before the batched path: a guarded call, the model, the judge),
the batched path (conformance/run/batch.py), and, for the native kernel, a plain C harness built here with the system
cc and run in the same run on the same kernel and the same case distribution: M <= 9, N <= 17, K <= 64 or 512,
A and B uniform over the kernel's claimed domain, C poisoned before each call, every element compared with a naive
C loop. The ratio batched / C harness is the figure (the target: at least a third).

`end_to_end` measures `lowp fuzz` itself on the native kernel, as a user runs it (one job, the default draws and
search, every round's process, journal and report), beside the C harness measured right after it: issue 36's
figure, lowp fuzz end to end / C harness (the target: at least a half)."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NATIVE, EMULATED = "u8s8s32_avx2", "sdot_s8_neon"
MAX_M, MAX_N, DEPTHS = 9, 17, (64, 512)
EMULATED_BATCH = 64         # an emulated batch takes long enough already: the time limit is checked between batches


@dataclass
class Distribution:
    """The benchmark's cases: uniform shapes up to (MAX_M, MAX_N, max_k), elements uniform over the claimed domain."""
    max_k: int

    def batch(self, kern, rng, count: int) -> tuple[np.ndarray, np.ndarray]:
        m, n, k = (int(rng.integers(1, x + 1)) for x in (MAX_M, MAX_N, self.max_k))
        (alo, ahi), (blo, bhi) = kern.domain.a, kern.domain.b
        return (rng.integers(alo, ahi, (count, m, k), endpoint=True).astype(kern.a_dtype),
                rng.integers(blo, bhi, (count, k, n), endpoint=True).astype(kern.b_dtype))


def per_case(kern, ex, dist: Distribution, seconds: float) -> float:
    """Cases per second of the per-case path: checks.Recorder.run and the judge, one case at a time."""
    from lowp.conformance.run.checks import Call, Check, Recorder, _judge
    check, rec, rng = Check(kern.name, kern.contract, "claimed", True), Recorder(ex), np.random.default_rng(1)
    done, stop, start = 0, time.perf_counter() + seconds, time.perf_counter()
    while time.perf_counter() < stop:
        A3, B3 = dist.batch(kern, rng, 16)
        for A, B in zip(A3, B3):
            call = Call(A, B, done)
            if not _judge(check, kern, call, rec.run(call))[0]:
                raise AssertionError(f"{kern.name} failed its claimed contract in the benchmark")
            done += 1
    return done / (time.perf_counter() - start)


def batched(kern, ex, dist: Distribution, seconds: float) -> float:
    """Cases per second of the batched path: batches drawn, run (run_many) and screened (conformance/run/batch.py)."""
    from lowp.conformance.run import batch
    from lowp.conformance.run.checks import Check
    check, rng = Check(kern.name, kern.contract, "claimed", True), np.random.default_rng(2)
    done, number, stop, start = 0, 0, time.perf_counter() + seconds, time.perf_counter()
    while time.perf_counter() < stop:
        A3, B3 = dist.batch(kern, rng, batch.cases_per_batch(MAX_M, MAX_N, dist.max_k) if ex.backend == "native"
                            else EMULATED_BATCH)
        if batch.screen(check, kern, ex, A3, B3, batch.draw_seeds(number, len(A3))).reading is None:
            raise AssertionError(f"{kern.name} failed its claimed contract in the benchmark")
        done, number = done + len(A3), number + 1
    return done / (time.perf_counter() - start)


HARNESS = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void entry_fn(int64_t, int64_t, int64_t, const void *, const void *, int32_t *, void *);
typedef size_t workspace_fn(int64_t, int64_t, int64_t);
static uint64_t state = 0x9E3779B97F4A7C15u;
static uint64_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return state; }
static int64_t uniform(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    entry_fn *fn = (entry_fn *)dlsym(lib, argv[2]);
    workspace_fn *ws = (workspace_fn *)dlsym(lib, argv[3]);
    if (!fn || !ws) { fprintf(stderr, "no %s or %s\n", argv[2], argv[3]); return 2; }
    int64_t max_k = atoll(argv[4]), alo = atoll(argv[5]), ahi = atoll(argv[6]), blo = atoll(argv[7]),
            bhi = atoll(argv[8]);
    double seconds = atof(argv[9]);
    int a_signed = alo < 0, b_signed = blo < 0;
    uint8_t *A = malloc(MAX_M * max_k), *B = malloc(max_k * MAX_N);
    int32_t *C = malloc(MAX_M * MAX_N * 4);
    void *work = malloc(ws(MAX_M, MAX_N, max_k) + 64);
    long cases = 0, wrong = 0;
    double start = now(), stop = start + seconds;
    while ((cases & 255) || now() < stop) {
        int64_t M = uniform(1, MAX_M), N = uniform(1, MAX_N), K = uniform(1, max_k);
        for (int64_t i = 0; i < M * K; ++i) A[i] = (uint8_t)uniform(alo, ahi);
        for (int64_t i = 0; i < K * N; ++i) B[i] = (uint8_t)uniform(blo, bhi);
        for (int64_t i = 0; i < M * N; ++i) C[i] = (int32_t)next();          /* poison */
        fn(M, N, K, A, B, C, work);
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                uint32_t s = 0;
                for (int64_t k = 0; k < K; ++k) {
                    int32_t a = a_signed ? (int8_t)A[i * K + k] : A[i * K + k];
                    int32_t b = b_signed ? (int8_t)B[k * N + j] : B[k * N + j];
                    s += (uint32_t)(a * b);
                }
                wrong += C[i * N + j] != (int32_t)s;
            }
        ++cases;
    }
    printf("%ld %ld %.6f\n", cases, wrong, now() - start);
    return 0;
}
"""


def c_harness(kern, dist: Distribution, seconds: float) -> float:
    """Cases per second of the plain C harness on the kernel's own shared library (built here with the system cc)."""
    from lowp.kernels.executors import native_library
    from lowp.kernels.registry import workspace_symbol
    library = native_library(kern)
    with tempfile.TemporaryDirectory(prefix="lowp-bench-fuzz-") as tmp:
        source, binary = Path(tmp) / "harness.c", Path(tmp) / "harness"
        source.write_text(f"#define MAX_M {MAX_M}\n#define MAX_N {MAX_N}\n" + HARNESS)
        subprocess.run(["cc", "-O2", "-o", str(binary), str(source), "-ldl"], check=True, capture_output=True)
        (alo, ahi), (blo, bhi) = kern.domain.a, kern.domain.b
        done = subprocess.run([str(binary), str(library), kern.symbol, workspace_symbol(kern), str(dist.max_k),
                               str(alo), str(ahi), str(blo), str(bhi), str(seconds)],
                              check=True, capture_output=True, text=True)
    cases, wrong, spent = done.stdout.split()
    if int(wrong):
        raise AssertionError(f"the C harness found {wrong} wrong elements of {kern.name}")
    return int(cases) / float(spent)


def _warm(kern, ex, dist: Distribution) -> None:
    """One call first: the build, the library's loading and an emulator's start are not what is measured."""
    A3, B3 = dist.batch(kern, np.random.default_rng(0), 1)
    ex.run(A3[0], B3[0])


def fuzz_benchmark(native: str = NATIVE, emulated: str = EMULATED, seconds: float = 3.0) -> list[dict]:
    """One row per kernel and depth bound: per-case, batched and (native) C harness cases per second, and ratios."""
    from lowp.kernels import executor, kernel
    rows = []
    # the emulated kernel on each AArch64 executor: Unicorn (the default) and qemu-user (issue 26's figure)
    runs = [(native, None, DEPTHS)] + [(emulated, backend, DEPTHS[:1]) for backend in ("unicorn", "qemu")]
    for name, backend, depths in runs:
        if not name:
            continue
        kern = kernel(name)
        try:
            ex = executor(kern, backend) if backend else executor(kern)
            reason = ex.unavailable()
        except Exception as e:  # noqa: BLE001 - a backend this machine lacks is a row saying so
            ex, reason = None, str(e)
        for max_k in depths:
            row = {"kernel": name, "backend": ex.backend if ex else backend,
                   "shapes": f"M<={MAX_M} N<={MAX_N} K<={max_k}"}
            if reason:
                rows.append({**row, "note": f"skipped: {reason}"})
                continue
            dist = Distribution(max_k)
            _warm(kern, ex, dist)
            row["per-case/s"] = per_case(kern, ex, dist, seconds)
            row["batched/s"] = batched(kern, ex, dist, seconds)
            row["batched/per-case"] = row["batched/s"] / row["per-case/s"]
            if ex.backend == "native":
                row["C harness/s"] = c_harness(kern, dist, seconds)
                row["batched/C harness"] = row["batched/s"] / row["C harness/s"]
            else:
                row["note"] = "no C harness: the kernel is not native here"
            rows.append(row)
    return rows


# `lowp fuzz`'s budget for the end-to-end figure, in figures' seconds: long enough for a few rounds of both claimed
# checks (a round of a check takes some 4 s at the default draws), so that the round the budget cuts counts little.
END_TO_END_BUDGET = 10


def end_to_end(native: str = NATIVE, seconds: float = 3.0, kernel_files=()) -> dict:
    """`lowp fuzz --kernel NATIVE --jobs 1` for END_TO_END_BUDGET * seconds, in a process of its own, then the C
    harness for `seconds` on the kernel (K <= 64): the campaign's cases executed (generated, drawn and searched) per
    second of its run (fuzz.json), and its ratio to the C harness's."""
    from lowp.kernels import executor, kernel
    kern = kernel(native)
    row = {"kernel": native, "command": f"lowp fuzz --kernel {native} --jobs 1 --budget {END_TO_END_BUDGET * seconds:g}s"}
    reason = executor(kern).unavailable()
    if reason:
        return {**row, "note": f"skipped: {reason}"}
    campaign = fuzz_campaign(native, END_TO_END_BUDGET * seconds, kernel_files)
    summary = campaign["summary"]
    row["end-to-end/s"] = summary["executed"] / campaign["seconds"]
    row["C harness/s"] = c_harness(kern, Distribution(DEPTHS[0]), seconds)
    row["end-to-end/C harness"] = row["end-to-end/s"] / row["C harness/s"]
    row["note"] = (f"{summary['executed']:,} cases in {campaign['seconds']:.1f} s, {summary['rounds']} round(s); "
                   f"C harness at M<={MAX_M} N<={MAX_N} K<={DEPTHS[0]}")
    return row


def fuzz_campaign(name: str, budget: float, kernel_files=()) -> dict:
    """fuzz.json of a `lowp fuzz --kernel NAME --jobs 1 --budget BUDGET` campaign run here (a counterexample is the
    benchmark's failure: it measures a kernel that keeps its claims)."""
    files = [arg for path in kernel_files for arg in ("--kernels", str(path))]
    with tempfile.TemporaryDirectory(prefix="lowp-bench-fuzz-") as tmp:
        out = Path(tmp) / "fuzz"
        done = subprocess.run([sys.executable, "-m", "lowp", "fuzz", "--kernel", name, "--jobs", "1", "--budget",
                               f"{budget:g}s", "--out", str(out), *files], capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"lowp fuzz --kernel {name} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return json.loads((out / "fuzz.json").read_text())
