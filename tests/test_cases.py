"""Issue 13's seat of the user: generated cases named for why they exist (tile edges as XNNPACK's tests name them,
the depth ladder, the all-ends value classes), replayable from their ids; `--case` to run some of them, `--shapes`
to add the user's own; the example database that makes a second run replay earlier counterexamples first; the
settings profiles. Expected names follow from the tile, the ranges and the depths the test computes itself."""
from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lowp.cli import main
from lowp.conformance.search.cases import (END_CLASSES, LADDER_NAMES, SEED_GRID, VALUE_CLASSES, Case, cases_for,
                                    coded_elements, ends, operands, overflow_depths, problems, ranges,
                                    read_shapes)
from lowp.conformance.run.checks import (Check, Recorder, _drawn_search, _without_local_constants, replay,
                                         run_check, search)
from lowp.conformance.run.example_database import ExampleStore
from lowp.kernels import Domain, Tile, executor, kernel, kernels

HERE = Path(__file__).parent / "cases"
TILE_NAME = re.compile(r"(?:m_(lt|gt)_mr_)?(?:n_(lt|gt)_nr_)?k_(lt|eq|gt|div)_(kr|spill|2spill)")


def _relation(x: int, r: int) -> str:
    return "lt" if x < r else "eq" if x == r else "gt"


# ---- names -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [k.name for k in kernels()])
def test_tile_edge_names_say_how_the_shape_stands_to_the_tile(name):
    """Every tile-edge name of every registered kernel is true of its shape: an m or n part where that dimension is
    not a full tile (lt or gt as it is), none where it is; the k part by kr, or by the spill depth next to it."""
    k = kernel(name)
    t = k.tile
    seen, cases = 0, cases_for(k, "model", "full", shapes=[(t.mr, t.nr, t.kr)])
    assert len({c.id for c in cases}) == len(cases)         # unique within a check, a user shape beside an edge
    for case in cases:
        match = TILE_NAME.fullmatch(case.name)
        if not match:
            continue
        seen += 1
        m_rel, n_rel, k_rel, k_ref = match.groups()
        assert m_rel == (None if case.m == t.mr else _relation(case.m, t.mr)), case.id
        assert n_rel == (None if case.n == t.nr else _relation(case.n, t.nr)), case.id
        if k_ref == "spill":
            assert t.spill and abs(case.k - t.spill) <= 1 and k_rel == _relation(case.k, t.spill), case.id
        elif k_ref == "2spill":
            assert t.spill and case.k == 2 * t.spill + 3, case.id
        elif k_rel == "div":
            assert t.kr > 1 and case.k % t.kr == 0 and case.k > t.kr, case.id
        else:
            assert k_rel == _relation(case.k, t.kr) and not (t.kr > 1 and case.k > t.kr and case.k % t.kr == 0)
    assert seen >= 5 * len(VALUE_CLASSES)


def test_xnnpack_style_names_of_a_tile_with_a_spill():
    k = dataclasses.replace(kernel("u8s8s32_avx2"), tile=Tile(mr=4, nr=8, kr=4, spill=20))
    names = {(c.m, c.n, c.k): c.name for c in cases_for(k, "exact", "full", grid=False) if c.values == "uniform"}
    assert names[(4, 8, 4)] == "k_eq_kr" and names[(4, 8, 3)] == "k_lt_kr" and names[(4, 8, 8)] == "k_div_kr"
    assert names[(4, 8, 13)] == "k_gt_kr"          # 3 * kr + 1
    assert [names[(4, 8, s)] for s in (19, 20, 21, 43)] == ["k_lt_spill", "k_eq_spill", "k_gt_spill", "k_gt_2spill"]
    assert names[(1, 9, 1)] == "m_lt_mr_n_gt_nr_k_lt_kr" and names[(9, 8, 1)] == "m_gt_mr_k_lt_kr"
    assert names[(9, 8, 19)] == "m_gt_mr_k_lt_spill"        # 4 * kr + 3 is next to the spill depth here
    assert names[(4, 1, 1)] == "n_lt_nr_k_lt_kr"


def test_ladder_names_say_which_accumulator_overflows():
    """|a|, |b| <= 11: an int16 lane first overflows at 32767 // 121 + 1; the cases there, either side of it and on
    a full tile carry depth_int16_wrap (with _minus1, _plus1), every element at an end of its range."""
    k = dataclasses.replace(kernel("u8s8s32_avx2"), domain=Domain((0, 11), (-11, 11)))
    depths = overflow_depths(*ranges(k, "claimed"))
    lane = depths["int16 lane"]
    assert lane == 32767 // 121 + 1
    cases = cases_for(k, "exact", "claimed", grid=False)
    by_name = {}
    for c in cases:
        by_name.setdefault(c.name, []).append(c)
    for step, kk in (("_minus1", lane - 1), ("", lane), ("_plus1", lane + 1)):
        named = by_name["depth_int16_wrap" + step]
        assert {c.k for c in named} == {kk} and {c.values for c in named} == set(END_CLASSES)
    assert {(c.m, c.n) for c in by_name["depth_int16_wrap"]} == {(1, 1), (k.tile.mr, k.tile.nr)}
    for what, depth in depths.items():      # each overflow depth is named by the first of LADDER_NAMES there
        first = next(LADDER_NAMES[w] for w in LADDER_NAMES if depths.get(w) == depth)
        assert {c.k for c in by_name[first] if (c.m, c.n) == (1, 1)} == {depth}, what


def test_coinciding_depths_take_the_first_ladder_name():
    """u8 x s8 on the full range: a product fits int16 but a pair sum does not; an int16 lane and a pair sum both
    overflow at depth 2, which is named for the pair (LADDER_NAMES' order)."""
    k = kernel("u8s8s32_avx2")
    depths = overflow_depths(*ranges(k, "full"))
    assert depths["int16 lane"] == depths["int16 pair sum"] == 2
    at2 = {c.name for c in cases_for(k, "exact", "full") if (c.m, c.n, c.k) == (1, 1, 2)}
    assert at2 == {"depth_pair_saturate"}


def test_blocking_and_vector_names_carry_their_depth():
    k = kernel("u8s8s32_avx2")
    for c in cases_for(k, "exact", "full"):
        match = re.fullmatch(r"k_(block|vector)_(\d+)(_minus1|_plus1)?", c.name)
        if match:
            base = int(match.group(2))
            assert c.k == base + {None: 0, "_minus1": -1, "_plus1": 1}[match.group(3)], c.id


def test_all_ends_value_classes_put_every_element_at_its_end():
    k = kernel("u8s8s32_avx2")
    (alo, ahi), (blo, bhi) = ranges(k, "claimed")
    for values in END_CLASSES:
        A, B = operands(Case(k.name, "exact", "claimed", "depth_pair_saturate", 2, 3, 4, values, 9), k)
        _, a_end, _, b_end = values.split("_")
        assert np.all(A == (alo if a_end == "min" else ahi)) and np.all(B == (blo if b_end == "min" else bhi))


# ---- the search's elements ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo,hi", [(-128, 127), (0, 255), (-127, 127), (-8, 7), (0, 15), (1, 7), (-7, -1),
                                   (-32768, 32767)])
def test_a_code_is_an_end_or_each_value_once_simplest_first(lo, hi):
    size = hi - lo + 1
    low, high = coded_elements(np.arange(size), lo, hi), coded_elements(np.arange(size, 2 * size), lo, hi)
    assert set(low.tolist()) == set(ends(lo, hi)) and low[0] == ends(lo, hi)[0]
    assert sorted(high.tolist()) == list(range(lo, hi + 1))         # the upper half: every value, once
    target = 0 if lo <= 0 <= hi else min(lo, hi, key=abs)
    distance = np.abs(high - target)
    assert high[0] == target and np.all(np.diff(distance) >= 0)     # a smaller code is never a farther value


def test_the_searchs_arrays_weight_the_ends_in_and_keep_the_dtype_and_shape():
    from hypothesis import HealthCheck, given, settings
    k = kernel("u8s8s32_avx2")
    (alo, ahi), (blo, bhi) = ranges(k, "claimed")
    fills, seen = [], []

    @settings(max_examples=150, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(problems(k, "claimed"))
    def draw(problem):
        A, B = problem
        assert A.dtype == k.a_dtype and B.dtype == k.b_dtype and A.shape[1] == B.shape[0]
        assert alo <= A.min() and A.max() <= ahi and blo <= B.min() and B.max() <= bhi
        if B.size >= 16:
            values, counts = np.unique(B, return_counts=True)
            fills.append(values[counts.argmax()])      # the fill: most of the array
            seen.append(values)
    with _without_local_constants():          # the draws depend on the seed alone, not on the modules loaded
        draw()
    share = np.isin(fills, ends(blo, bhi)).mean()
    assert 0.25 < share < 0.95, share           # an end as the fill often (always, deep), not always
    assert len(np.unique(np.concatenate(seen))) > 32        # and values across the range (an end-only draw has 3)


# ---- ids ---------------------------------------------------------------------------------------------------------
def test_ids_are_unique_and_replay_the_same_case():
    k = kernel("u8s8s32_avx2")
    cases = cases_for(k, "exact", "full", shapes=[(5, 6, 7)])
    assert len({c.id for c in cases}) == len(cases)
    assert {c.name for c in cases} >= {"grid", "shape_file", "k_eq_kr", "depth_pair_saturate"}
    for c in cases[::17]:
        again = Case.from_id(c.id)
        assert again == c and c.id.split(":")[3] == c.name
        for x, y in zip(operands(c, k), operands(again, k)):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("text", ["nonsense", "u8s8s32_avx2:exact:full:4x16x4:uniform:3",       # no name (old form)
                                  "u8s8s32_avx2:exact:full::4x16x4:uniform:3",
                                  "u8s8s32_avx2:exact:full:k_eq_kr:0x16x4:uniform:3",
                                  "u8s8s32_avx2:exact:full:k_eq_kr:4x16:uniform:3"])
def test_a_malformed_id_is_refused_with_the_expected_form(text):
    with pytest.raises(ValueError, match=r"not a case id: .*kernel:check:domain:name:MxNxK:values:seed"):
        Case.from_id(text)


def test_replay_of_a_generated_case_id(capsys):
    """`lowp conformance replay ID` regenerates a named case from its id: VPMADDUBSW's pair sum of two 255 * -128
    saturates (the exact contract fails on the full range), and a tile edge of the claimed domain passes."""
    k = kernel("u8s8s32_avx2")
    reason = executor(k).unavailable()
    if reason:
        pytest.skip(reason)
    saturating = next(c for c in cases_for(k, "exact", "full") if c.name == "depth_pair_saturate"
                      and c.values == "a_max_b_min" and (c.m, c.n) == (1, 1))
    edge = next(c for c in cases_for(k, "exact", "claimed") if c.name == "k_eq_kr")
    assert replay(saturating.id)["verdict"] == "FAIL" and replay(edge.id)["verdict"] == "PASS"
    assert main(["conformance", "--kernel", k.name, "replay", saturating.id]) == 1
    assert f"{saturating.id}: FAIL" in capsys.readouterr().out


# ---- --case and --shapes -----------------------------------------------------------------------------------------
def test_only_keeps_the_cases_a_glob_matches_by_name_or_id():
    k = kernel("u8s8s32_avx2")
    every = cases_for(k, "exact", "full")
    spill_free = cases_for(k, "exact", "full", only=["depth_*"])
    assert spill_free and all(c.name.startswith("depth_") for c in spill_free)
    assert len(spill_free) == sum(c.name.startswith("depth_") for c in every)
    ones = cases_for(k, "exact", "full", only=["*:1x1x*", "k_eq_kr"])
    assert {c.name for c in ones if (c.m, c.n) != (1, 1)} == {"k_eq_kr"}
    assert cases_for(k, "exact", "full", only=[every[3].id]) == [every[3]]


def test_rotation_keeps_one_value_class_a_tile_edge_and_every_other_case():
    """cases_for(rotate=True) (the quick profile's not-claimed probes): each tile edge and grid shape in one value
    class, the next shape in the next (every class still meets the edges), the very case the full set has there;
    the depth ladder, the user's shapes and the rest whole."""
    k = kernel("u8s8s32_avx2")
    every = cases_for(k, "exact", "full", shapes=[(3, 5, 7)])
    rotated = cases_for(k, "exact", "full", shapes=[(3, 5, 7)], rotate=True)
    assert set(rotated) < set(every) and [c for c in every if c in set(rotated)] == rotated
    edges = [c for c in every if c.seed < 50000]        # the tile edges' seeds (the ladder's start at 50,000)
    kept = [c for c in rotated if c.seed < 50000]
    shapes = list(dict.fromkeys((c.name, c.m, c.n, c.k) for c in edges))
    assert [(c.name, c.m, c.n, c.k) for c in kept] == shapes             # each edge once, in order
    assert [c.values for c in kept] == [VALUE_CLASSES[i % len(VALUE_CLASSES)] for i in range(len(shapes))]
    assert [c for c in every if c not in edges] == [c for c in rotated if c not in kept]   # the rest whole
    assert len(rotated) < len(every) - 2 * len(shapes)


def test_the_quick_profile_rotates_only_the_checks_that_claim_nothing(rare):
    """run_check(probe_rotation=True) rotates a not-claimed probe's tile edges; a claimed check keeps all of them,
    and so does a probe whose cases --case names."""
    k = rare["tc_right"]
    rows = {}
    for claimed in (True, False):
        check = Check(k.name, "exact", "claimed", claimed)
        rows[claimed] = [run_check(check, lambda e: None, examples=0, grid=False, probe_rotation=rotation)["cases"]
                         for rotation in (False, True)]
    assert rows[True][0] == rows[True][1] == rows[False][0] > rows[False][1]
    assert rows[False][1] == len(cases_for(k, "exact", "claimed", grid=False, rotate=True))
    asked = run_check(Check(k.name, "exact", "claimed", False), lambda e: None, examples=0, grid=False,
                      only=("k_eq_kr",), probe_rotation=True)
    assert asked["cases"] == len(cases_for(k, "exact", "claimed", grid=False, only=("k_eq_kr",))) == 4


def test_shapes_file_lines(tmp_path):
    f = tmp_path / "prod.txt"
    f.write_text("# production shapes\n64x128x4096\n\n  3 x 5 x 7   # odd\n64x128x4096\n1X1X1\n")
    assert read_shapes(f) == [(64, 128, 4096), (3, 5, 7), (1, 1, 1)]
    for bad, line in (("4x4\n", 1), ("# ok\n4x4x0\n", 2), ("2x2x2\nabc\n", 2), ("2x2x2 3\n", 1)):
        f.write_text(bad)
        with pytest.raises(ValueError, match=rf"{re.escape(str(f))}:{line}: .* is not a shape"):
            read_shapes(f)
    with pytest.raises(ValueError, match="cannot read"):
        read_shapes(tmp_path / "missing.txt")


def test_user_shapes_run_in_every_value_class_and_replay_from_their_ids():
    k = kernel("u8s8s32_avx2")
    mine = [c for c in cases_for(k, "exact", "claimed", shapes=[(3, 5, 7), (64, 2, 300)]) if c.name == "shape_file"]
    assert [(c.m, c.n, c.k) for c in mine] == [(3, 5, 7)] * 4 + [(64, 2, 300)] * 4
    assert [c.values for c in mine] == list(VALUE_CLASSES) * 2
    A, B = operands(Case.from_id(mine[5].id), k)
    assert A.shape == (64, 300) and B.shape == (300, 2)


def _fail(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


def test_cli_usage_errors_name_the_pattern_or_the_line(tmp_path, capsys):
    err = _fail(["conformance", "--kernel", "u8s8s32_avx2", "--case", "k_eq_spil*", "--out", str(tmp_path)], capsys)
    assert "--case 'k_eq_spil*' matches no generated case" in err and "k_gt_kr" in err
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("8x8x8\n8x8\n")
    err = _fail(["conformance", "--kernel", "u8s8s32_avx2", "--shapes", str(shapes), "--out", str(tmp_path)], capsys)
    assert f"{shapes}:2: '8x8' is not a shape" in err
    err = _fail(["conformance", "--kernel", "u8s8s32_avx2", "--examples", "-1", "--out", str(tmp_path)], capsys)
    assert "--examples must be 0 or more, not -1" in err
    # The quick profile drops the seed grid: no case is named grid then, unless --grid puts it back.
    err = _fail(["conformance", "list", "--kernel", "u8s8s32_avx2", "--profile", "quick", "--case", "grid"], capsys)
    assert "--case 'grid' matches no generated case" in err
    assert main(["conformance", "list", "--kernel", "u8s8s32_avx2", "--profile", "quick", "--grid",
                 "--case", "grid"]) == 0
    listed = [Case.from_id(i) for i in capsys.readouterr().out.split()]
    assert listed and {c.name for c in listed} == {"grid"} and {(c.m, c.n, c.k) for c in listed} == set(SEED_GRID[:2])


# ---- the example database ----------------------------------------------------------------------------------------
class Counting(Recorder):
    """A Recorder that notes the number of the first call whose C is not the exact product."""

    def __init__(self, ex):
        super().__init__(ex)
        self.calls, self.first_wrong = 0, None

    def run(self, call, work_seed=None):
        out = super().run(call, work_seed)
        self.calls += 1
        exact = call.A.astype(np.int64) @ call.B.astype(np.int64)
        if self.first_wrong is None and not np.array_equal(out.C, exact):
            self.first_wrong = self.calls
        return out


def test_a_second_search_replays_the_first_ones_counterexample_first(rare, tmp_path):
    """tc_rare is wrong only where K % 11 == 10 and M >= 2: the search draws tens of examples before one; with the
    same database the next search's first call is that counterexample, and no new search runs."""
    k = rare["tc_rare"]
    check = Check(k.name, "exact", "claimed", True)
    first = Counting(executor(k))
    found, tried, replayed = search(check, k, first, 150, 0, str(tmp_path / "db"))
    assert found is not None and first.first_wrong > 5 and replayed == 0, first.first_wrong
    assert found.call.case == f"{check.id}:search:0"
    again = Counting(executor(k))
    found2, tried2, replayed2 = search(check, k, again, 150, 0, str(tmp_path / "db"))
    assert found2 is not None and again.first_wrong == 1 and tried2 == again.calls == replayed2 == 1
    assert found2.call.case == f"{check.id}:replay"
    assert np.array_equal(found2.call.A, found.call.A) and np.array_equal(found2.call.B, found.call.B)
    without = Counting(executor(k))
    search(check, k, without, 150, 0, None)      # no database: the same search as the first
    assert without.first_wrong == first.first_wrong


def test_the_drawn_search_finds_keeps_and_replays_first_as_the_hypothesis_search_does(rare, tmp_path):
    """The quick profile's search draws its examples (run/checks.py _drawn_search): tc_rare's bug (K % 11 == 10,
    M >= 2) is found within 150 draws, kept in the database and replayed first by the next search, as hypothesis's
    search does; without the database the same draws run again (one seed, one run); the fixed twin passes all 150."""
    k = rare["tc_rare"]
    check = Check(k.name, "exact", "claimed", True)
    first, row = Counting(executor(k)), {"matched": {}}
    found, tried, replayed = _drawn_search(check, k, first, row, 150, 0, str(tmp_path / "db"), lambda e: None)
    assert found is not None and replayed == 0 and 1 < tried <= 150 and found.call.case == f"{check.id}:search:0"
    A, B = found.call.A, found.call.B
    assert A.shape[1] % 11 == 10 and A.shape[0] >= 2
    assert not np.array_equal(found.outcome.C, A.astype(np.int64) @ B.astype(np.int64))
    assert row["matched"].get("none") == 1 and sum(row["matched"].values()) == tried     # the draws count
    again = Counting(executor(k))
    found2, tried2, replayed2 = _drawn_search(check, k, again, {"matched": {}}, 150, 0, str(tmp_path / "db"),
                                              lambda e: None)
    assert (tried2, replayed2, again.calls, again.first_wrong) == (1, 1, 1, 1)
    assert found2.call.case == f"{check.id}:replay" and np.array_equal(found2.call.A, A)
    without = Counting(executor(k))
    found3, tried3, _ = _drawn_search(check, k, without, {"matched": {}}, 150, 0, None, lambda e: None)
    assert tried3 == tried and np.array_equal(found3.call.A, A) and np.array_equal(found3.call.B, B)
    fixed = rare["tc_right"]
    right = Check(fixed.name, "exact", "claimed", True)
    assert _drawn_search(right, fixed, Recorder(executor(fixed)), {"matched": {}}, 150, 0, None,
                         lambda e: None)[:2] == (None, 150)


def test_a_check_with_the_drawn_search_counts_its_draws_and_shrinks_what_they_find(rare):
    """run_check(drawn_search=True): the row's searched is the draws run (all of them on a passing kernel), each
    executed and counted in results matched; a failure the draws find is shrunk to tc_rare's minimal case (K = 10,
    M = 2, N = 1: the bug adds one to C[0][0] whatever the values)."""
    right, wrong = rare["tc_right"], rare["tc_rare"]
    row = run_check(Check(right.name, "exact", "claimed", True), lambda e: None, examples=40, grid=False,
                    drawn_search=True)
    assert row["verdict"] == "PASS" and row["searched"] == 40 and row["executed"] == row["cases"]
    assert sum(row["matched"].values()) == row["executed"]
    row = run_check(Check(wrong.name, "exact", "claimed", True), lambda e: None, examples=150, grid=False,
                    only=("k_eq_kr",), drawn_search=True)
    assert row["verdict"] == "FAIL" and 0 < row["searched"] <= 150, row
    cx = row["counterexample"]
    assert cx["case"].startswith(f"{wrong.name}:exact:claimed:search:0") and cx["shape"][2] == 10, cx


def test_a_passing_kernel_keeps_the_stored_counterexample(rare, tmp_path):
    """A fixed kernel (or a machine where the bug does not show) replays the counterexample, passes, and keeps it:
    it is a regression case, and it may fail on another machine sharing the database."""
    k, fixed = rare["tc_rare"], rare["tc_right"]
    check = Check(k.name, "exact", "claimed", True)
    db = str(tmp_path / "db")
    assert search(check, k, Recorder(executor(k)), 150, 0, db)[0] is not None
    store = ExampleStore(db, check, fixed)
    assert len(store.replays()) == 1
    found, tried, replayed = search(check, fixed, Recorder(executor(fixed)), 20, 0, db)
    assert found is None and replayed == 1 and tried > 1
    assert len(store.replays()) == 1
    assert search(check, k, Recorder(executor(k)), 150, 0, db)[2] == 1     # the broken one fails on it again


def test_the_store_replays_nothing_outside_the_checks_domain(rare, tmp_path):
    k = rare["tc_rare"]
    check = Check(k.name, "exact", "claimed", True)
    store = ExampleStore(str(tmp_path / "db"), check, k)
    store.save(np.full((2, 3), 200, np.uint8), np.ones((3, 2), np.int8))
    assert len(store.replays()) == 1
    narrower = dataclasses.replace(k, domain=Domain((0, 127), (-128, 127)))
    assert ExampleStore(str(tmp_path / "db"), check, narrower).replays() == []   # another key: another domain
    (tmp_path / "db2").mkdir()
    other = ExampleStore(str(tmp_path / "db2"), check, narrower)
    other.db.save(other.key, json.dumps({"shape": [2, 2, 3], "A": [[200] * 3] * 2, "B": [[1, 1]] * 3,
                                         "quant": None}).encode())
    other.db.save(other.key, b"not json")
    assert other.replays() == [] and list(other.db.fetch(other.key)) == []     # dropped


def _rows(out: Path) -> dict:
    rows = {}
    for line in (out / "journal.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "row":
            rows[event["id"]] = event
    return rows


def test_cli_keeps_the_database_where_told(rare, tmp_path, monkeypatch):
    """`--case` alone runs no search (the rows say so: searched None); with --examples the search runs and keeps its
    counterexample in the default database ($LOWP_DATABASE here), and the next run, in another report folder,
    replays it on its first example; --database names another one, --no-database keeps none."""
    base = [sys.executable, "-m", "lowp", "conformance", "--kernels", str(HERE / "rare.toml"), "--kernel", "tc_rare",
            "--case", "k_eq_kr", "--jobs", "1"]
    default = tmp_path / "shared"
    monkeypatch.setenv("LOWP_DATABASE", str(default))

    def run(out, *extra):
        p = subprocess.run(base + ["--out", str(tmp_path / out), *extra], capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
        assert p.returncode in (0, 1), p.stdout + p.stderr
        return _rows(tmp_path / out)
    rows = run("rep")
    assert {r["searched"] for r in rows.values()} == {None} and not default.exists()
    assert all(r["executed"] == r["cases"] == len(VALUE_CLASSES) for r in rows.values())   # 2x2x1 (the tile)
    # 300: hypothesis tries some 25-30 distinct depths in 150 examples, so 1 seed in 4 misses K % 11 == 10 there
    first = run("rep", "--examples", "300")
    assert default.is_dir()
    assert all(r["verdict"] == "FAIL" and r["searched"] > 5 and "replayed" not in r for r in first.values()), first
    second = run("rep2", "--examples", "300")
    assert all(r["searched"] == r["replayed"] == 1 and r["verdict"] == "FAIL" for r in second.values()), second
    assert all(r["counterexample"]["case"].endswith(":replay") for r in second.values())
    other = run("rep3", "--examples", "300", "--database", str(tmp_path / "other"))
    assert all(r["searched"] > 5 for r in other.values()) and (tmp_path / "other").is_dir()
    monkeypatch.setenv("LOWP_DATABASE", str(tmp_path / "none"))
    run("rep4", "--examples", "20", "--no-database")
    assert not (tmp_path / "none").exists()

def test_the_search_draws_the_same_whatever_modules_are_loaded(rare, tmp_path, monkeypatch):
    """hypothesis also draws integer literals of the 'local' modules loaded in the process; lowp's search must not:
    `lowp conformance`, the plugin and a Ray node load different modules, and one seed must search alike in all."""
    k = rare["tc_rare"]
    check = Check(k.name, "exact", "claimed", True)

    def drawn():
        calls = []

        class Noting(Recorder):
            def run(self, call, work_seed=None):
                calls.append((call.A.tobytes(), call.B.tobytes()))
                return super().run(call, work_seed)
        search(check, k, Noting(executor(k)), 60, 5, None)
        return calls
    before = drawn()
    (tmp_path / "lots_of_literals.py").write_text(
        "VALUES = [" + ", ".join(str(v) for v in range(-128, 256, 3)) + ", 3, 10, 11, 21, 32, 769]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    importlib.import_module("lots_of_literals")
    assert drawn() == before
