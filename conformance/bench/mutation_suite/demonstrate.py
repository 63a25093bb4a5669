"""Show every bug of the mutation suite (mutants.toml) on a crafted input inside the kernel's claimed domain, and
every control computing the right thing: one line per kernel, `name  cause  shape  what happened`.

    python conformance/bench/mutation_suite/demonstrate.py [NAME ...]

Value bugs: run() differs from the exact product (and, unless the bug is the claim itself, from the kernel's own
model). Out-of-bounds bugs: run() raises OutOfBounds naming the buffer. poison-C, poison-work and unwritten: C
differs, and where C keeps what it arrived with, the difference is the poison. state: the second call of a shape
returns the product with the first call's B. hang: the call overruns a small budget. path: the required mnemonic
is absent (native code) or never executed (emulator) while the values are right. Exits 1 if any bug fails to show
(or a control is wrong), so it doubles as a check of the suite itself.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np

from lowp.emulator.errors import BudgetExceeded, OutOfBounds
from lowp.kernels import executor, load_toml
from lowp.kernels.emulated import EmulatedExecutor
from lowp.kernels.executors import NativeExecutor, poison
from lowp.kernels.models import exact_gemm

HERE = Path(__file__).resolve().parent


def matrix(rows, dtype):
    return np.array(rows, dtype=dtype)


def filled(shape, value, dtype, at=None):
    """A matrix of zeros with `value` at the positions `at` (all positions if None)."""
    x = np.full(shape, value if at is None else 0, dtype=dtype)
    for index in at or ():
        x[index] = value
    return x


def shape_of(A, B):
    return f"{A.shape[0]}x{B.shape[1]}x{A.shape[1]}"


def first_difference(C, expected) -> str:
    i, j = (int(v) for v in np.argwhere(C != expected)[0])
    return f"C[{i},{j}] = {int(C[i, j])}, exact {int(expected[i, j])}"


# ---- the kinds of demonstration -------------------------------------------------------------------------------------
def wrong_value(k, A, B, *, claim_only=False, right_before=None):
    """run() differs from the exact product; claim_only: the model (what the code is meant to do) agrees with the
    kernel, the claim is what is wrong. right_before: a smaller input on which the kernel is still right."""
    C = executor(k).run(A, B)
    expected = exact_gemm(A, B)
    assert not np.array_equal(C, expected), "no difference"
    model_agrees = np.array_equal(C, k.predict(A, B))
    assert model_agrees == claim_only, f"model agrees: {model_agrees}"
    note = "; its model agrees (the claim is the bug)" if claim_only else ""
    if right_before is not None:
        A0, B0 = right_before
        assert np.array_equal(executor(k).run(A0, B0), exact_gemm(A0, B0))
        note += f"; right at {shape_of(A0, B0)}" if A0.shape != A.shape else f"; right with A = {A0.ravel()[:4]}"
    return f"{first_difference(C, expected)}{note}"


def keeps_poison(k, A, B, *, added: bool):
    """C differs from the product; added: C - exact is the poison C arrived with (C += A B), else some element
    still is the poison (never written)."""
    C = executor(k).run(A, B, seed=0)
    expected, arrived = exact_gemm(A, B), poison(C.shape, np.int32, 0)
    assert not np.array_equal(C, expected)
    if added:
        assert np.array_equal((C.astype(np.int64) - expected) % 2**32, arrived.astype(np.int64) % 2**32)
        return f"{first_difference(C, expected)}: C - exact is the poison C arrived with"
    stale = (C == arrived) & (C != expected)
    assert stale.any()
    return f"{first_difference(C, expected)}: {int(stale.sum())} element(s) still hold the poison C arrived with"


def reads_poisoned_work(k, A, B):
    """C differs from the product, and by a different amount for a differently poisoned workspace."""
    ex = executor(k)
    C0, C1 = ex.run(A, B, seed=0), ex.run(A, B, seed=5)
    expected = exact_gemm(A, B)
    assert not np.array_equal(C0, expected) and not np.array_equal(C0, C1)
    return f"{first_difference(C0, expected)}; another poison gives C[0,0] = {int(C1[0, 0])}"


def out_of_bounds(k, A, B, buffer):
    try:
        executor(k).run(A, B)
    except OutOfBounds as e:
        assert e.buffer == buffer, f"OutOfBounds on {e.buffer}, expected {buffer}"
        return f"OutOfBounds {e.access} {buffer} at byte offset {e.offset} of {e.nbytes}"
    raise AssertionError("no out-of-bounds access seen")


def stale_state(k, A, B1, B2):
    ex = executor(k)
    first = ex.run(A, B1)
    second = ex.run(A, B2)
    assert np.array_equal(first, exact_gemm(A, B1))
    assert np.array_equal(second, exact_gemm(A, B1)) and not np.array_equal(second, exact_gemm(A, B2))
    fresh = ex.with_fresh_state().run(A, B2)
    assert np.array_equal(fresh, exact_gemm(A, B2))
    return "2nd call (same shape, new B) returns A times the 1st call's B; a fresh executor is right"


def hangs(k, A, B):
    ex = NativeExecutor(k, budget=1.0) if k.target == "x86-64" else EmulatedExecutor(k, budget=20_000_000)
    try:
        ex.run(A, B)
    except BudgetExceeded:
        budget = "1 s" if k.target == "x86-64" else "20M instructions"
        return f"BudgetExceeded: still running after {budget}"
    raise AssertionError("the call returned")


def missing_path(k, A, B):
    """The values are right and the required instruction is not in the code (native) or not executed (emulator)."""
    ex = executor(k)
    if k.target == "x86-64":
        C = ex.run(A, B)
        from lowp.kernels.disasm import native_instructions
        seen, how = native_instructions(ex.library_path, k.symbol), "present"
    else:
        C = ex.run(A, B, mnemonics=True)
        seen, how = ex.last.mnemonics, "executed"
    assert np.array_equal(C, exact_gemm(A, B))
    missing = [m for m in k.requires if not seen.get(m)]
    assert missing == list(k.requires), f"{missing} vs {k.requires}"
    top = ", ".join(m for m, _ in sorted(seen.items(), key=lambda kv: -kv[1])[:4])
    return f"values exact; requires {', '.join(k.requires)}, none {how} (most {how}: {top})"


def control(k, A, B):
    C = executor(k).run(A, B)
    assert np.array_equal(C, k.predict(A, B)) and np.array_equal(C, exact_gemm(A, B))
    return "equal to its model and the exact product"


# ---- one crafted input per kernel -------------------------------------------------------------------------------------
U8, S8 = np.uint8, np.int8


def random_in_domain(k, m, n, depth, seed=7):
    rng = np.random.default_rng(seed)
    return (rng.integers(*k.domain.a, (m, depth), endpoint=True).astype(k.a_dtype),
            rng.integers(*k.domain.b, (depth, n), endpoint=True).astype(k.b_dtype))


def ones(m, n, depth, a=U8, b=S8):
    return np.ones((m, depth), a), np.ones((depth, n), b)


def demonstrations():
    """name -> (function of the kernel giving the line, A, B): the crafted inputs."""
    pair = (lambda a, b, dt_a, dt_b: (filled((1, 9), a, dt_a, [(0, 0), (0, 8)]), filled((9, 1), b, dt_b, [(0, 0), (8, 0)])))
    kblock = (np.ones((1, 1025), S8), filled((1025, 1), 1, S8, [(1024, 0)]))
    rng = np.random.default_rng(3)
    B1, B2 = rng.integers(-128, 128, (5, 3)).astype(S8), rng.integers(-128, 128, (5, 3)).astype(S8)
    A_state = rng.integers(0, 256, (2, 5)).astype(U8)
    return {
        "mut_x86_maddubs_full_u8": (lambda k, A, B: wrong_value(k, A, B, claim_only=True),
                                    matrix([[255, 255]], U8), matrix([[127], [127]], S8)),
        "mut_x86_maddubs_m_tail": (lambda k, A, B: keeps_poison(k, A, B, added=False), *ones(5, 8, 4)),
        "mut_x86_maddubs_n_tail_swap": (wrong_value, matrix([[1]], U8), matrix([[0, 1, 2]], S8)),
        "mut_x86_maddubs_tail31": (lambda k, A, B: wrong_value(k, A, B, right_before=ones(1, 1, 30)), *ones(1, 1, 31)),
        "mut_x86_maddubs_block_overread": (lambda k, A, B: out_of_bounds(k, A, B, "A"), *ones(1, 1, 31)),
        "mut_x86_split_a255": (lambda k, A, B: wrong_value(k, A, B, right_before=(matrix([[254]], U8), B)),
                               matrix([[255]], U8), matrix([[1]], S8)),
        "mut_x86_dot_claims_vnni": (missing_path, None, None),
        "mut_x86_sign_trick_s8": (wrong_value, matrix([[-1]], S8), matrix([[-128]], S8)),
        "mut_x86_vnni_comp_plus": (wrong_value, matrix([[0]], S8), matrix([[1]], S8)),
        "mut_x86_vnni_colsum16": (lambda k, A, B: wrong_value(k, A, B, right_before=(A[:, :256], B[:256])),
                                  np.zeros((1, 257), S8), np.full((257, 1), -128, S8)),
        "mut_x86_vnni_colsum_uninit": (reads_poisoned_work, matrix([[0]], S8), matrix([[0]], S8)),
        "mut_x86_vnni_kblock_store": (lambda k, A, B: wrong_value(k, A, B, right_before=ones(1, 1, 1024)),
                                      *ones(1, 1, 1025)),
        "mut_x86_vnni_c_accumulate": (lambda k, A, B: keeps_poison(k, A, B, added=True), *ones(1, 1, 1)),
        "mut_x86_vnni_stale_b": (lambda k, A, B: stale_state(k, A, B, B2), A_state, B1),
        "mut_x86_scalar_a_signed": (wrong_value, matrix([[200]], U8), matrix([[1]], S8)),
        "mut_x86_scalar_b_overread": (lambda k, A, B: out_of_bounds(k, A, B, "B"), *ones(1, 1, 1)),
        "mut_x86_scalar_c_past": (lambda k, A, B: out_of_bounds(k, A, B, "C"), *ones(1, 1, 1)),
        "mut_x86_scalar_c_before": (lambda k, A, B: out_of_bounds(k, A, B, "C"), *ones(1, 1, 1)),
        "mut_x86_scalar_work_short": (lambda k, A, B: out_of_bounds(k, A, B, "work"), *ones(1, 1, 1)),
        "mut_x86_scalar_hang": (hangs, *ones(1, 1, 1)),
        "mut_arm_smlal_flush300": (
            lambda k, A, B: wrong_value(k, A, B, claim_only=True, right_before=(A[:, :270], B[:270])),
            np.full((1, 271), 11, S8), np.full((271, 1), 11, S8)),
        "mut_arm_smlal_widen_lane": (wrong_value, filled((5, 1), 1, S8, [(4, 0)]), matrix([[1]], S8)),
        "mut_arm_smlal_acc_uninit": (reads_poisoned_work, matrix([[0]], S8), matrix([[0]], S8)),
        "mut_arm_sdot_static_b": (lambda k, A, B: stale_state(k, A, B, B2), A_state.view(S8), B1),
        "mut_arm_sdot_m_tail_store": (lambda k, A, B: out_of_bounds(k, A, B, "C"), *ones(1, 1, 1, S8)),
        "mut_arm_sdot_a_overread": (lambda k, A, B: out_of_bounds(k, A, B, "A"), *ones(1, 1, 1, S8)),
        "mut_arm_sdot_b_overread": (lambda k, A, B: out_of_bounds(k, A, B, "B"), *ones(1, 1, 1, S8)),
        "mut_arm_sdot_kblock_b": (lambda k, A, B: wrong_value(k, A, B, right_before=(A[:, :1024], B[:1024])), *kblock),
        "mut_arm_sdot_hang": (hangs, *ones(1, 1, 1, S8)),
        "mut_arm_sdot_n_tail_unwritten": (lambda k, A, B: keeps_poison(k, A, B, added=False), *ones(1, 1, 1, S8)),
        "mut_arm_sdot_path": (missing_path, None, None),
        "mut_arm_widen_a_signed": (wrong_value, matrix([[200]], U8), matrix([[1]], S8)),
        "mut_arm_widen_pair16": (wrong_value, *pair(255, 127, U8, S8)),
        "mut_arm_widen_c_accumulate": (lambda k, A, B: keeps_poison(k, A, B, added=True), *ones(1, 1, 1)),
        "mut_arm_widen_work_short": (lambda k, A, B: out_of_bounds(k, A, B, "work"), *ones(1, 1, 1)),
        "mut_arm_pair_full_s8": (lambda k, A, B: wrong_value(k, A, B, claim_only=True), *pair(-128, -128, S8, S8)),
    }


def main(names) -> int:
    kernels = {k.name: k for k in load_toml(HERE / "mutants.toml")}
    expected = tomllib.loads((HERE / "expected.toml").read_text())
    demos = demonstrations()
    assert set(expected) == set(kernels), "expected.toml and mutants.toml list different kernels"
    failures = 0
    for name, k in kernels.items():
        if names and name not in names:
            continue
        kind, cause = expected[name]["kind"], expected[name].get("cause", "-")
        if kind == "control":
            fn, A, B = control, None, None
        else:
            fn, A, B = demos[name]
        if A is None:      # a random input in the domain (control, path), or one the demonstration makes itself
            A, B = random_in_domain(k, 9, 17, 70)
        assert k.domain.contains(A, B), f"{name}: the crafted input leaves the claimed domain"
        try:
            line = fn(k, A, B)
        except AssertionError as e:
            failures += 1
            line = f"NOT SHOWN: {e}"
        print(f"{name:32s} {cause:12s} {shape_of(A, B):>9s}  {line}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
