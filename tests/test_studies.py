"""The studies (`lowp study`) run on their small configuration, and their numbers have the properties the seeds
claim, where the seeds are right. Bounds are the seeds' own claims with room for sampling noise, not values
copied from a study's output."""
from __future__ import annotations

import json

import numpy as np
import pytest

from lowp.conformance import studies
from lowp.conformance.studies import seed000, seed002, seed004


@pytest.fixture(scope="module")
def s000():
    return seed000.compute(small=True, seed=3)


def test_seed000_nearest_bias_grows_linearly_on_skewed_inputs(s000):
    sk = s000["fits"]["skewed"]
    assert 0.85 <= sk["nearest_bias_exponent"] <= 1.15            # "grows linearly with the depth"
    bias = np.abs(s000["sweeps"]["skewed"]["nearest"]["bias"])
    assert np.all(np.diff(bias) > 0)


def test_seed000_probabilistic_error_grows_with_the_square_root(s000):
    for kind in ("skewed", "uniform"):
        for mode in ("addmod", "xorshift"):
            assert 0.35 <= s000["fits"][kind][f"{mode}_rms_exponent"] <= 0.7, (kind, mode)
        # unbiased: the mean error is a small part of the RMS error at every depth
        assert s000["fits"][kind]["addmod_bias_over_rms"] < 0.35      # nearest on skewed data: ~0.9


def test_seed000_probabilistic_variance_is_about_twice_nearest(s000):
    assert 1.5 <= s000["fits"]["skewed"]["crossing"]["variance_ratio"] <= 2.6


def test_seed000_crossing_exists_on_skewed_not_on_uniform(s000):
    sk, un = s000["fits"]["skewed"]["crossing"], s000["fits"]["uniform"]["crossing"]
    depths = s000["depths"]
    assert sk["measured"] is not None and depths[0] < sk["measured"] < depths[-1]
    assert 0.3 < sk["predicted"] / sk["measured"] < 3             # the seed's model explains the crossing
    assert un["predicted"] > 10 * sk["predicted"]                 # bias is a property of skewed data
    assert un["measured"] is None or un["measured"] > sk["measured"]


def test_seed000_requantization_is_exact_for_8_bits_and_outputs_are_judged():
    # the study's model path: 8-bit "requantization" reproduces the exact accumulator
    rng = np.random.default_rng(0)
    a, b, lo, ro = seed000.draw("skewed", 5, 40, 6, rng)
    from lowp.conformance.contracts import less_than_8bit as l8
    from lowp.conformance.contracts.gemmlowp import gemmlowp_accumulator
    off = np.full((5, 40), 127), np.full((40, 6), 127)
    assert np.array_equal(l8.less_than_8bit_accumulator(a, b, lo, ro, 8, 8, *off), gemmlowp_accumulator(a, b, lo, ro))
    rows = seed000.output_accuracy("skewed", 16, 64, 16, 0)
    assert [r["mode"] for r in rows] == list(seed000.MODES)
    for r in rows:
        assert r["passes"] == (not r["violates"]) and 32 <= np.median([r["med_val"]]) <= 224


@pytest.fixture(scope="module")
def s002():
    return seed002.compute(small=True, seed=5)


def test_seed002_uniform_saturates_realistic_almost_never(s002):
    rows = {r["dist"]: r for r in s002["rows"]}
    assert rows["uniform"]["pair_saturation_rate"] > 0.01
    assert rows["uniform"]["outputs_affected"] > 0.5
    for dist in ("relu/gauss", "relu/laplace"):
        assert rows[dist]["pair_saturation_rate"] < 1e-4, dist
        assert rows[dist]["rel_avx2"] < 2 * rows[dist]["rel_exact"]
    # {255,255}.{127,127}-style pairs are the only way out of int16: every saturated pair is beyond 32767
    assert rows["uniform"]["pair_sum_max"] > 32767


def test_seed002_reduce_range_never_saturates_but_costs_resolution(s002):
    for r in s002["rows"]:
        assert r["u7_equals_exact"] and r["u7_saturated_pairs"] == 0
        if r["dist"] != "uniform":
            assert r["rel_u7"] >= r["rel_exact"] * 0.99


def test_seed002_acc16_outlier_split_trades_saturation_for_sparse_work(s002):
    for r in s002["rows"]:
        a = r["acc16"]
        dens = [x["outlier_density"] for x in a]
        assert dens == sorted(dens) and dens[0] == 0           # fewer non-outlier bits, more outliers
        assert a[-1]["outputs_affected"] <= a[0]["outputs_affected"]
    rg = next(r for r in s002["rows"] if r["dist"] == "relu/gauss")["acc16"]
    assert rg[0]["outputs_affected"] > 0.01                    # seed 003: "frequent saturation"


def test_seed002_real_kernels_agree_with_the_contracts(s002):
    for r in s002["rows"]:
        for key in ("real_u8s8s32_avx2", "real_u8s8s32_avx512vnni", "real_s8s8s32_avx2"):
            assert r[key] is not False, (r["dist"], key)        # True, or the reason it could not run here
        assert all(a["real_acc16_avx2"] is not False for a in r["acc16"])


def test_seed004_levels_and_pairs():
    n = seed004.compute(small=True, seed=2, run_bench=False)
    assert n["ratio_16_23_span"] == pytest.approx(22 / 15, rel=0.03)    # the article's 1.468
    assert 1.2 < n["ratio_16_23_best"] < n["ratio_16_23_span"]
    assert n["ratio_16_23_max"] > n["ratio_16_23_span"]                # zero-point 4-bit wastes a level
    art = [r for r in n["pair_table"] if r["source"] != "baseline (code)"]
    assert len(art) == 21 and min(r["int16_depth"] for r in art) == 258
    assert all(4.5 < r["bits"] < 4.8 for r in art)
    g = {(p["nx"], p["nw"]): p["rel"] for p in n["pair_gemm"]}
    assert g[(23, 23)] < g[(16, 16)] < g[(255, 3)]
    errs = [e["rmse_best"] for e in n["level_errors"]]
    assert errs == sorted(errs, reverse=True)                          # more levels, less error


def test_run_writes_page_json_and_says_when_plots_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(studies, "pyplot", lambda: None)
    r = studies.run("seed004", tmp_path, small=True, run_bench=False)
    assert r.figures == [] and "matplotlib" in r.plots_skipped
    text = r.page.read_text()
    assert "Figures skipped" in text and "not drawn" in text and "(23, 23)" in text
    assert json.loads(r.data.read_text())["study"] == "seed004"


def test_cli_study_with_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from lowp.cli import main
    assert main(["study", "seed002", "--small", "--no-real", "--out", str(tmp_path)]) == 0
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["seed002-acc16-outliers.png", "seed002-pair-sums.png"]
    page = (tmp_path / "seed002.md").read_text()
    assert all(f"({p})" in page for p in pngs)
    with pytest.raises(SystemExit):
        main(["study", "seed999"])
