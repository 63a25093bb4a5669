"""The 4.6-bit kernels of seed 004 and their like-for-like 8-bit baselines (kernels/x86/gemm_q46.h): the (Nx, Nw)
table, the int16-safe flush interval (safe is exact, one step more overflows), kernel == behaviour model on every
edge shape for several pairs and flush intervals, on in-domain, extreme and out-of-domain inputs, exactness on
each pair's domain; the PSHUFB packing of the model; and the GEMM benchmark's plumbing."""
import dataclasses
import threading

import numpy as np
import pytest

from tests.conftest import runner

from lowp.isa_models import intrinsic, x86
from lowp.kernels import executor, kernel, kernels
from lowp.kernels.cases import edge_shapes, random_operands
from lowp.kernels.models import _pad, exact_gemm
from lowp.kernels.models.q46 import (article_pairs, code_pairs, for_pair, pack_b, pair_table, safe_flush,
                                     safe_steps)

Q46 = [k for k in kernels("x86-64") if k.name.startswith("q46_")]
Q8 = [k for k in kernels("x86-64") if k.name.startswith("q8_")]
PAIRS = [(255, 3), (127, 5), (23, 23), (29, 19), (5, 127), (3, 255)]


def first_diff(got, want):
    return np.argwhere(got != want)[0].tolist()


# ---- the scheme as data ----------------------------------------------------------------------------------------

def test_pair_table_has_the_articles_21_pairs_and_the_codes_19_plus_2_baselines():
    rows = pair_table()
    sym = [r for r in rows if not r["source"].startswith("baseline")]
    assert len(sym) == 21 and len(rows) == 23
    assert {(r["nx"], r["nw"]) for r in sym} == set(article_pairs())
    assert set(code_pairs()) <= set(article_pairs()) and len(set(code_pairs())) == 19
    assert {(r["nx"], r["nw"]) for r in sym if r["source"] == "article"} == {(255, 3), (3, 255)}
    for r in sym:
        assert r["max_product"] == (r["nx"] // 2) * (r["nw"] // 2) <= 127
        assert r["shifted_product"] == 2 * r["max_product"]
        assert r["flush_256"] == 4 * (32767 // (4 * r["max_product"]))
    # (127, 5) -> 126 and 260; (31, 17) -> 120 and 273; (23, 23) -> 121 and 270
    # (docs/research/q46-bins.md#derived-depth-bounds)
    by = {(r["nx"], r["nw"]): r for r in rows}
    assert (by[127, 5]["max_product"], by[127, 5]["int16_depth"]) == (126, 260)
    assert (by[31, 17]["int16_depth"], by[23, 23]["int16_depth"]) == (273, 270)
    assert by[255, 3]["int16_depth"] == 258 == 32767 // 127                # seed 004's 258
    assert by[255, 3]["shifted_depth"] == 129 and by[255, 3]["flush_256"] == 256 and by[255, 3]["flush_512"] == 512
    assert by[16, 16]["int16_depth"] == 145                                   # seed 004's 4-bit depth


def test_registered_entries_claim_the_widest_pair():
    for k in Q46:
        assert k.domain.a == (-127, 127) and k.domain.b == (-1, 1)
        assert k.params == {"shift": 127, "flush": safe_flush(255, 3, k.tile.kr)} and k.tile.spill == k.params["flush"]


@pytest.mark.parametrize("bad", [dict(nx=24, nw=5), dict(nx=127, nw=7), dict(nx=257, nw=1)])
def test_for_pair_refuses_pairs_outside_the_scheme(bad):
    with pytest.raises(ValueError):
        for_pair(kernel("q46_avx2"), **bad)


def test_for_pair_validates_the_flush_interval():
    k = kernel("q46_avx2")
    assert for_pair(k, 23, 23).params == {"shift": 11, "flush": 4 * safe_steps(23, 23)}
    assert for_pair(k, 23, 23, flush=128).params["flush"] == 128
    with pytest.raises(ValueError, match="overflow int16"):
        for_pair(k, 23, 23, flush=safe_flush(23, 23, 4) + 4)
    with pytest.raises(ValueError, match="multiple of 4"):
        for_pair(k, 23, 23, flush=130)
    assert for_pair(kernel("q46_avx512bw"), 255, 3, flush=512).params["flush"] == 512


# ---- the model's packing composes PSHUFB ------------------------------------------------------------------------

@pytest.mark.parametrize("kg,es", [(2, 2), (4, 1), (4, 2), (8, 1)])
def test_pack_b_built_with_pshufb_is_the_documented_layout(kg, es):
    B = np.random.default_rng(kg).integers(-128, 127, (13, 11), endpoint=True).astype(np.int8)
    Kp, Np = -(-13 // kg) * kg, 16
    direct = _pad(B, Kp, Np).reshape(Kp // kg, kg, Np // 8, 8).transpose(0, 2, 3, 1).reshape(Kp // kg, Np // 8, 8 * kg)
    got = pack_b(B, kg, es)
    assert np.array_equal(got.view(np.int8) if es == 1 else got, direct if es == 1 else direct.astype(np.int16))


def test_pshufb_model_scalar_reading():
    """SDM PSHUFB: bit 7 of the control zeroes the byte, else bits 3:0 index the same 128-bit lane."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 255, (4, 64), endpoint=True).astype(np.uint8)
    b = rng.integers(0, 255, (4, 64), endpoint=True).astype(np.uint8)
    want = np.array([[0 if b[r, i] & 0x80 else a[r, (i // 16) * 16 + (b[r, i] & 15)] for i in range(64)]
                     for r in range(4)], np.uint8)
    assert np.array_equal(x86.vpshufb(a, b), want)
    assert np.array_equal(intrinsic("_mm256_shuffle_epi8")(a[:, :32], b[:, :32]), want[:, :32])
    mmx = intrinsic("_mm_shuffle_pi8")(a[:, :8], b[:, :8])
    assert np.array_equal(mmx, [[0 if b[r, i] & 0x80 else a[r, b[r, i] & 7] for i in range(8)] for r in range(4)])
    with pytest.raises(ValueError, match="lowp never casts"):
        x86.vpshufb(a.view(np.int8), b)


# ---- real kernels against their models -------------------------------------------------------------------------

@pytest.mark.native
@pytest.mark.parametrize("k", Q46, ids=lambda k: k.name)
@pytest.mark.parametrize("pair", [(23, 23), (3, 255)], ids=lambda p: f"{p[0]}x{p[1]}")
def test_q46_equals_model_on_edge_shapes_for_other_pairs(k, pair):
    """Edge shapes (k around the pair's flush interval), in-domain, extreme and full-range s8 inputs."""
    kp = for_pair(k, *pair)
    ex = runner(kp)
    rng = np.random.default_rng(sum(pair))
    for m, n, depth in edge_shapes(kp):
        for domain, extremes in ((True, 0.3), (False, 0.0), (False, 0.5)):
            A, B = random_operands(kp, m, n, depth, rng, domain=domain, extremes=extremes)
            got, want = ex.run(A, B), kp.predict(A, B)
            assert np.array_equal(got, want), f"{kp.name} {m}x{n}x{depth} domain={domain}: {first_diff(got, want)}"
            if domain:
                assert np.array_equal(got, exact_gemm(A, B)), f"{kp.name} {m}x{n}x{depth} not exact in domain"


@pytest.mark.native
@pytest.mark.parametrize("k", Q46, ids=lambda k: k.name)
def test_q46_is_exact_on_every_pairs_domain(k):
    ex0 = runner(k)
    rng = np.random.default_rng(11)
    for nx, nw in article_pairs():
        kp = for_pair(k, nx, nw)
        ex = executor(kp)
        depth = 2 * kp.params["flush"] + 5
        A, B = random_operands(kp, 9, 11, depth, rng, domain=True, extremes=0.5)
        got = ex.run(A, B)
        assert np.array_equal(got, exact_gemm(A, B)), f"{kp.name}: {first_diff(got, exact_gemm(A, B))}"
        assert np.array_equal(got, kp.predict(A, B))
    assert ex0 is not None


@pytest.mark.native
@pytest.mark.parametrize("k", Q46, ids=lambda k: k.name)
@pytest.mark.parametrize("pair", [(255, 3), (127, 5), (23, 23), (3, 255)], ids=lambda p: f"{p[0]}x{p[1]}")
def test_safe_flush_is_tight(k, pair):
    """At the derived bound the worst in-domain input is exact; one step more and it overflows int16 (VPADDW wraps),
    which the model predicts bit for bit."""
    safe = for_pair(k, *pair)
    flush = safe.params["flush"]
    unsafe = dataclasses.replace(safe, params={**safe.params, "flush": flush + k.tile.kr})
    nx, nw = pair
    for sign in (1, -1):
        A = np.full((8, flush + k.tile.kr), nx // 2, np.int8)        # u = 2 xmax everywhere
        B = np.full((flush + k.tile.kr, 8), sign * (nw // 2), np.int8)
        assert np.array_equal(runner(safe).run(A, B), exact_gemm(A, B))
        got, want = runner(unsafe).run(A, B), unsafe.predict(A, B)
        assert np.array_equal(got, want)
        assert not np.array_equal(got, exact_gemm(A, B)), "one step past the bound should overflow int16"


@pytest.mark.native
@pytest.mark.parametrize("k", Q46, ids=lambda k: k.name)
@pytest.mark.parametrize("flush", [0, 1, 4, 12, 100, 1 << 40], ids=lambda f: f"flush{f}")
def test_q46_raw_flush_and_shift_parameters_match_the_model(k, flush):
    """Any int64 parameters, validated or not: flush below KG means one step per block, non-multiples truncate,
    shifts outside 0..127 wrap the u8 activations; the model follows the C."""
    rng = np.random.default_rng(flush % 997)
    for shift in (0, 127, 200, -3):
        kp = dataclasses.replace(k, params={"shift": shift, "flush": flush})
        A, B = random_operands(kp, 9, 9, 301, rng, domain=False, extremes=0.4)
        got, want = runner(kp).run(A, B), kp.predict(A, B)
        assert np.array_equal(got, want), f"shift={shift} flush={flush}: {first_diff(got, want)}"


@pytest.mark.native
@pytest.mark.parametrize("k", Q46, ids=lambda k: k.name)
def test_q46_out_of_domain_saturates_and_wraps_as_modelled(k):
    """a = 127 with shift 127 gives u = 254; with w = 127 a pair sum is 64516: VPMADDUBSW saturates it to 32767.
    a = -128 wraps to u = 255."""
    ex = runner(k)
    A = np.full((8, 16), 127, np.int8)
    A[1] = -128
    B = np.full((16, 8), 127, np.int8)
    got, want = ex.run(A, B), k.predict(A, B)
    assert np.array_equal(got, want) and not np.array_equal(got, exact_gemm(A, B))


@pytest.mark.native
@pytest.mark.parametrize("k", Q8, ids=lambda k: k.name)
def test_q8_baselines_are_exact_on_full_range_s8(k):
    ex = runner(k)
    rng = np.random.default_rng(5)
    for m, n, depth in [(8, 8, 1), (9, 17, 513), (1, 3, 7), (17, 8, 1024)]:
        A, B = random_operands(k, m, n, depth, rng, domain=False, extremes=0.5)
        got = ex.run(A, B)
        assert np.array_equal(got, exact_gemm(A, B)) and np.array_equal(got, k.predict(A, B))
    A = np.full((8, 64), -128, np.int8)                      # every product +16384: exact, no pair corner
    B = np.full((64, 8), -128, np.int8)
    assert (ex.run(A, B) == 64 * 16384).all()


@pytest.mark.native
def test_reused_workspace_gives_the_same_results_across_shapes_and_threads():
    k = kernel("q46_avx2")
    ex = runner(k)
    rng = np.random.default_rng(9)
    cases = [random_operands(k, m, n, d, rng, domain=False, extremes=0.3) for m, n, d in
             [(40, 33, 700), (3, 5, 9), (40, 33, 700), (17, 64, 260)]]
    want = [k.predict(A, B) for A, B in cases]
    assert all(np.array_equal(ex.run(A, B), w) for (A, B), w in zip(cases, want))
    errors = []

    def worker():
        for _ in range(20):
            for (A, B), w in zip(cases, want):
                if not np.array_equal(ex.run(A, B), w):
                    errors.append(A.shape)
    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---- the benchmark's plumbing (speed itself is `lowp bench gemm`, not a test) -----------------------------------

def test_gemm_benchmark_runs_and_reports_the_article_ratios():
    from lowp.conformance.bench.gemm import gemm_benchmark, summarize
    result = gemm_benchmark(quick=True, names=["q46_avx2", "q8_avx2"], rounds=1, budget=1e-5, torch=False,
                            big=False)
    rows, ratios = summarize(result)
    names = [r["contender"] for r in rows]
    assert names[0] == "numpy float32" and {"q46_avx2", "q8_avx2"} <= set(names)
    live = [r for r in rows if not r["note"]]
    assert all(r["ns/MAC (grid mean)"] > 0 for r in live)
    if len(live) == 3:
        assert any("like-for-like" in what for what, _, _ in ratios)


def test_cli_parses_the_gemm_suite():
    from lowp.cli import build_parser
    args = build_parser().parse_args(["bench"])
    assert args.suite == "gemm"
    args = build_parser().parse_args(["bench", "gemm", "--quick", "--no-torch", "--kernel", "q46_avx2"])
    assert args.quick and args.no_torch and args.kernel == ["q46_avx2"]
