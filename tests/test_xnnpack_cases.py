"""Issue 23 part 3: XNNPACK's cases in `lowp conformance`, named as its test generator names them
(tools/generate-gemm-test.py @75db3c0): strided A and C with poisoned gaps, subtiles, an IGEMM's taps, a_offset
and zero buffer, the clamps and zero points its tester pins, and the ends it never draws. Every case's ABI options
follow from its id; the planted ABI bugs of tests/xnnpack/kernels.toml fail exactly the cases named for them, with
a counterexample that keeps its options through shrinking and replays from the journal, the case id and the repro
line. Expected values are computed here from the tile, not read from lowp."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import runner

from lowp.conformance.search import quantized
from lowp.conformance.search.cases import ALIGN_NAMES, Case, abi_name, abi_options, cases_for, next_prime
from lowp.conformance.run.checks import Call, Check, case_call, replay, run_check, shrunk_options
from lowp.conformance.search.problem import decode, encode
from lowp.kernels import KernelConfigError, load_toml
from lowp.kernels.registry import kernel as registered

TOML = Path(__file__).resolve().parent / "xnnpack" / "kernels.toml"
GEMM, IGEMM = "xnn_qs8_qc8w_gemm_2x4_scalar", "xnn_qs8_qc8w_igemm_2x4_scalar"
QU8, QD8_IGEMM, QDU8 = ("xnn_qu8_gemm_2x4_rndnu16_scalar", "xnn_qd8_f32_qc8w_igemm_2x4_scalar",
                        "xnn_qdu8_f32_qc8w_gemm_1x16c4_avx512vnni")
STRIDED = ("strided_a", "strided_cm", "strided_cn")


@pytest.fixture(scope="module")
def ks():
    try:
        return {k.name: k for k in load_toml(TOML)}
    except KernelConfigError as e:
        if "already registered" not in str(e):
            raise
        import tomllib
        return {entry["name"]: registered(entry["name"]) for entry in tomllib.loads(TOML.read_text())["kernel"]}


def _new(kern, domain="claimed"):
    """The cases a kernel gets beside the tile edges, the ladder and the grid."""
    return [c for c in cases_for(kern, kern.output, domain, grid=False)
            if abi_name(c.name) or c.name in quantized.PIN_NAMES]


def _primes_above(n):
    return next(p for p in range(n + 1, 2 * n + 3) if all(p % d for d in range(2, p)))


# ---- names and options -----------------------------------------------------------------------------------------------
def test_next_prime_is_xnnpacks():
    """XNNPACK's NextPrime (test/next_prime.cc): the smallest prime above n, 2 for 0 and 1."""
    assert [next_prime(n) for n in (0, 1, 2, 3, 7, 8, 13, 7919)] == [2, 2, 3, 5, 11, 11, 17, 7927]
    assert all(next_prime(n) == _primes_above(n) for n in range(2, 200))


def test_gemm_cases_and_their_strides_follow_from_the_tile(ks):
    """A 2x4 (kr 1) GEMM: strided_a with a_stride = NextPrime(K + 1) bytes, strided_cm with cm_stride =
    NextPrime(max(N, nr) + 1) bytes, strided_cn (the outside probe's) with cn_stride = NextPrime(nr + 1) bytes over
    two or more blocks; subtiles within the tile; every id parses back to its case and its options."""
    k = ks[GEMM]
    claimed = _new(k)
    names = {c.name for c in claimed}
    assert names == {*STRIDED[:2], *(f"{s}_subtile" for s in STRIDED[:2]), "qmin", "qmax", "zero_points_min",
                     "zero_points_max", "scale_max", *ALIGN_NAMES}
    cases = claimed + [c for c in _new(k, "outside") if c.name.startswith("strided_cn")]
    for case in cases:
        assert Case.from_id(case.id) == case and case.values == "uniform"
        options = abi_options(Case.from_id(case.id), k)
        assert options == abi_options(case, k)
        base = case.name.removesuffix("_subtile")
        if base in ALIGN_NAMES:         # only the buffers' alignment (tests/test_alignment.py)
            assert set(options) == {"align"}, case.id
            continue
        expect = {"strided_a": {"a": next_prime(case.k + 1)}, "strided_cm": {"cm": next_prime(max(case.n, 4) + 1)},
                  "strided_cn": {"cn": next_prime(5)}}.get(base)
        assert options == ({"strides": expect} if expect else {}), case.id
        if case.name.endswith("_subtile"):
            assert case.m <= 2 and (case.n % 4 or case.m < 2) and (case.n <= 4 or base == "strided_cn"), case.id
        if base == "strided_cn":
            assert case.n > 4, case.id              # a cn_stride places the second block of nr columns
    assert {(c.m, c.n, c.k) for c in cases if c.name == "strided_a"} == {(2, 4, 1), (2, 4, 3), (2, 9, 4)}


def test_float_output_strides_are_bytes_of_c(ks):
    """qdu8 1x16c4 (k-block 4, f32 C): cm_stride and cn_stride count 4-byte elements; its subtiles keep m = 1."""
    k = ks[QDU8]
    cases = _new(k)
    cm = next(c for c in cases if c.name == "strided_cm" and c.n == 16)
    assert abi_options(cm, k) == {"strides": {"cm": 19 * 4}}
    cn = next(c for c in _new(k, "outside") if c.name == "strided_cn")
    assert abi_options(cn, k) == {"strides": {"cn": 19 * 4}}
    assert {c.m for c in cases if c.name.endswith("_subtile")} == {1}
    assert {(c.m, c.n, c.k) for c in cases if c.name == "strided_a"} == {(1, 16, 4), (1, 16, 9), (1, 33, 13)}
    assert {c.name for c in cases} >= {"min", "max", "zero_points_min", "zero_points_max"}
    assert not {"qmin", "qmax", "scale_max", "no_zero_point"} & {c.name for c in cases}


def test_igemm_cases_take_taps_a_offset_and_the_zero_buffer(ks):
    """An IGEMM: no strided_a (its rows come through the indirection buffer); small_kernel with ks = 3;
    a_offset and zero_index_<i> with the tester's a_offset = NextPrime(mr * k_block * 3 + 1) = 11; every other
    case a_offset 0 (the tester's default), so only the cases named for it exercise it; zero_index_<i>'s row i
    is the input zero point, so every tap of it points at the zero buffer."""
    k = ks[IGEMM]
    cases = _new(k)
    names = {c.name for c in cases}
    assert "strided_a" not in names and {"small_kernel", "small_kernel_subtile", "a_offset", "zero_index_0",
                                         "zero_index_1"} <= names and "zero_index_2" not in names
    for case in cases:
        igemm = abi_options(case, k)["igemm"]
        if case.name in ("small_kernel", "small_kernel_subtile", "a_offset") or case.name.startswith("zero_index"):
            assert case.k % 3 == 0 and igemm["ks"] == 3, case.id
        assert igemm["a_offset"] == (11 if case.name == "a_offset" or case.name.startswith("zero_index") else 0)
        if case.name.startswith("zero_index"):
            row = int(case.name.rsplit("_", 1)[1])
            call = case_call(case, k)
            zp = call.quant["a_zero_point"]
            assert igemm["zero"] == "auto" and (call.A[row] == zp).all() and not (call.A[1 - row] == zp).all()
            assert case_call(Case.from_id(case.id), k).A.tobytes() == call.A.tobytes()
    with pytest.raises(ValueError, match="K=4 is not 3 taps"):
        abi_options(Case.from_id(f"{IGEMM}:xnnpack-fp32:claimed:a_offset:2x4x4:uniform:1"), k)


def test_other_kernels_get_no_xnnpack_cases():
    from lowp.kernels import kernel
    k = kernel("u8s8s32_avx2")
    assert not [c for c in cases_for(k, "exact", "full", grid=False) if abi_name(c.name)]
    assert abi_options(Case("u8s8s32_avx2", "exact", "full", "strided_a", 2, 4, 1, "uniform", 0), k) == {}


def test_shrinking_recomputes_the_options_for_the_smaller_shape(ks):
    """A shrunk strided case stays strided (a_stride from its new K); an IGEMM depth that is not 3 taps cannot
    carry a_offset's options (the shrink does not try it); a call without options keeps none."""
    g, i = ks[GEMM], ks[IGEMM]
    A, B = np.zeros((2, 9), np.int8), np.zeros((9, 4), np.int8)
    call = Call(A, B, 1, f"{GEMM}:xnnpack-fp32:claimed:strided_a:2x4x9:uniform:1", options={"strides": {"a": 11}})
    assert shrunk_options(call, g, A[:1, :5], B[:5]) == {"strides": {"a": 7}}
    ig = Call(A, B, 1, f"{IGEMM}:xnnpack-fp32:claimed:a_offset:2x4x9:uniform:1",
              options={"igemm": {"ks": 3, "a_offset": 11}})
    assert shrunk_options(ig, i, A[:, :6], B[:6]) == {"igemm": {"ks": 3, "a_offset": 11}}
    assert shrunk_options(ig, i, A[:, :5], B[:5]) is None
    assert shrunk_options(Call(A, B, 1, "search"), g, A[:1], B) == {}


def test_problem_ids_carry_the_options():
    options = {"strides": {"a": 17, "cm": 13}, "igemm": {"ks": 3, "a_offset": -5, "zero": [(1, 0), (2, 1)]}}
    text = encode("k", "model", "full", [[1, 2]], [[3], [4]], 9, {"x": {"dtype": "<i4", "value": 1}}, options)
    assert ":abi=a=17,cm=13,ks=3,a_offset=-5,zero=1.0/2.1:q=" in text
    spec = decode(text)
    assert spec["options"] == options and spec["quant"] == {"x": {"dtype": "<i4", "value": 1}}
    assert decode(encode("k", "model", "full", [[1]], [[1]], 0))["options"] is None
    with pytest.raises(ValueError, match="'rows=3' is not KEY=VALUE"):
        decode("k:model:full:1x1x1:A=1:B=1:seed=0:abi=rows=3")


# ---- the parameters the names fix -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [GEMM, IGEMM, QU8, QD8_IGEMM, QDU8, "xnn_qs8_qc4w_gemm_2x4_scalar"])
def test_named_parameters_are_in_the_documented_domain_and_bite(ks, name):
    """Every new case's parameters are inside the output contract's documented domain (the claimed check draws
    nothing else). qmin / qmax: output_min / output_max at the tester's 128 on a uint8 scale, and the clamp clamps
    outputs in every case, a fifth or more of them on the whole (the outputs span the type); min / max (float
    output): 0.0; zero_points_*: every zero point the ABI takes at its type's end; scale_max: the largest scale
    below 256; the rest of the named cases with the clamp open."""
    k = ks[name]
    lo, hi = (-np.inf, np.inf) if k.c_type == "f32" else (int(np.iinfo(k.c_dtype).min), int(np.iinfo(k.c_dtype).max))
    clamped = {}
    for case in _new(k):
        call = case_call(case, k)
        q = call.quant
        assert quantized.domain_problems(k, q, case.m, case.n) == [], case.id
        out = quantized.expected(k.output, k, call.A, call.B, q)
        mn, mx = q["output_min"], q["output_max"]
        if case.name in ("qmin", "qmax", "min", "max"):
            edge = mn if case.name.endswith("min") else mx
            assert edge == {"f32": 0, "s8": 0, "u8": 128}[k.c_type], (case.id, mn, mx)
            assert (mx, mn)[case.name.endswith("max")] == (hi, lo)[case.name.endswith("max")]
            clamped.setdefault(case.name, []).append(float(np.mean(out == edge)))
            continue
        assert (mn, mx) == (lo, hi), case.id            # open: what the case is about shows in C
        end = {"zero_points_min": 0, "zero_points_max": 1}.get(case.name)
        if end is not None:
            assert (np.asarray(q["a_zero_point"]) == (np.iinfo(k.a_dtype).min, np.iinfo(k.a_dtype).max)[end]).all()
            if k.xnnpack["datatype"] == "qu8":
                assert q["b_zero_point"] == (0, 255)[end]
            if k.c_type != "f32":
                assert q["output_zero_point"] == (lo, hi)[end]
        if case.name == "no_zero_point":
            assert q["a_zero_point"] == q["b_zero_point"] == 0
        if case.name == "scale_max":
            assert (q["scale"] == np.nextafter(np.float32(256), np.float32(0))).all()
    assert set(clamped) == ({"min", "max"} if k.c_type == "f32" else {"qmin", "qmax"})
    assert all(min(shares) > 0 and np.mean(shares) >= 0.2 for shares in clamped.values()), clamped


def test_the_outside_probe_gets_no_named_parameters_and_the_cn_strides(ks):
    """The not-claimed probe draws parameters past the domain's edge itself: no qmin, scale_max, ... there; the
    ABI cases stay (their options do not depend on the parameters), and it alone has strided_cn: XNNPACK stopped
    testing cn_stride (fa9add0cfd) and its newer assembly kernels ignore it, so a cn_stride beyond nr columns is
    outside what the ABI promises."""
    names = {c.name for c in _new(ks[GEMM], "outside")}
    assert names == {*STRIDED, *(f"{s}_subtile" for s in STRIDED)}


@pytest.mark.native
def test_a_cn_stride_is_judged_in_the_outside_probe_only(ks):
    """The correct kernel passes its strided_cn cases; the one writing row 1 of C at c0 + nc fails them there, in a
    check that is not claimed."""
    for name, ok in ((GEMM, True), ("xnn_qs8_qc8w_gemm_2x4_scalar_bug_c_stride", False)):
        runner(ks[name])
        row = run_check(Check(name, "xnnpack-fp32", "outside", False), lambda e: None, examples=0, grid=False,
                        only=["strided_cn*"])
        assert row["executed"] == 7 and (row["failed"] == 0) == ok and not row["claimed"], row["cause"]


# ---- through the conformance suite ------------------------------------------------------------------------------
BUGS = [("xnn_qs8_qc8w_gemm_2x4_scalar_bug_a_stride", "strided_a", {"strided_a", "strided_a_subtile"},
         "wrong only through the XNNPACK ABI: the stride of A's rows, a_stride="),
        ("xnn_qs8_qc8w_gemm_2x4_scalar_bug_c_stride", "strided_cm", {"strided_cm", "strided_cm_subtile"},
         "OutOfBounds: out-of-bounds write into a gap of buffer 'C'"),
        ("xnn_qs8_qc8w_igemm_2x4_scalar_no_a_offset", "a_offset", {"a_offset", "zero_index_0", "zero_index_1"},
         "wrong only through the XNNPACK ABI: a_offset=11 (with a_offset 0")]


@pytest.mark.native
@pytest.mark.parametrize("name, case_name, failing, cause", BUGS, ids=[b[1] for b in BUGS])
def test_planted_abi_bugs_fail_the_cases_named_for_them_and_replay(ks, name, case_name, failing, cause):
    """The generated cases alone (no search) fail each planted bug in the cases named for its part of the ABI and
    in no other; the counterexample is shrunk from the case named for it, keeps the option (recomputed for its
    shape) and replays the same failure from the journal, from the case id and from the report's repro line."""
    from lowp.conformance.report import commands
    runner(ks[name])
    events = []
    row = run_check(Check(name, "xnnpack-fp32", "claimed", True), events.append, examples=0, grid=False)
    assert row["verdict"] == "FAIL" and row["cause"].startswith(cause), row["cause"]
    failed = {e["case"].split(":")[3] for e in events if e.get("event") == "case" and not e["ok"]}
    assert failed == failing
    cx = row["counterexample"]
    found = Case.from_id(cx["case"])
    assert found.name == case_name
    m, n, k = cx["shape"]
    assert cx["options"] == abi_options(Case(found.kernel, found.check, found.domain, found.name, m, n, k,
                                             found.values, found.seed), ks[name])
    assert cx["options"] and m * n * k < found.m * found.n * found.k
    for again in (replay(row["id"], {row["id"]: row}), replay(cx["case"])):
        assert again["verdict"] == "FAIL" and again["cause"].startswith(cause), again["cause"]
    repro = next(line for line in commands(row, cx, None) if line.startswith("repro: `lowp conformance replay"))
    problem = repro.split("'")[1]
    assert ":abi=" in problem
    again = replay(problem)
    assert again["verdict"] == "FAIL" and again["cause"] == row["cause"]


@pytest.mark.native
def test_the_correct_kernels_pass_every_new_case(ks):
    """The same kernels without the planted bugs pass all their generated cases, the new ones included."""
    for name in (GEMM, IGEMM):
        runner(ks[name])
        events = []
        row = run_check(Check(name, "xnnpack-fp32", "claimed", True), events.append, examples=0, grid=False)
        ran = {e["case"].split(":")[3] for e in events if e.get("event") == "case"}
        assert row["verdict"] == "PASS" and row["failed"] == 0, row["cause"]
        assert {"strided_cm", "strided_cm_subtile", "qmin", "scale_max"} <= ran and "strided_cn" not in ran
        assert ("a_offset" in ran) == (name == IGEMM) and ("strided_a" in ran) == (name == GEMM)
