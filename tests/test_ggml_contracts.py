"""ggml's contracts, cases and shim, without a checkout: the exact contract accepts the exact value and names a
dropped tail, the bound holds for a float sum and refuses a result outside it, the generated cases stay in their
domains with consistent activation sums, shrinking keeps a failure, and the shim's tables are ggml's conversions."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lowp.conformance.contracts import ggml as contracts
from lowp.conformance.search import ggml_cases as cases
from lowp.kernels.ggml.blocks import FORMATS
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, exact_dot, terms
from lowp.kernels.ggml.exact import draw, margin
from lowp.kernels.ggml.executor import shim_source, table_bits, trapped_functions

TYPES = ("q4_0", "q4_1", "q8_0", "iq4_nl", "q4_K", "q6_K", "mxfp4", "q1_0")


@pytest.mark.parametrize("x_type", TYPES)
def test_the_exact_contract_accepts_the_exact_value_and_names_a_dropped_tail(x_type):
    rng = np.random.default_rng(3)
    x, y, n = draw(x_type, 5, rng)
    value = np.float32(float(exact_dot(x_type, x, y, n)))
    assert contracts.exact(x_type, x, y, n, value).ok
    hx, hy, hn = contracts.head(x_type, x, y, 4)
    tail_dropped = np.float32(float(exact_dot(x_type, hx, hy, hn)))
    j = contracts.exact(x_type, x, y, n, tail_dropped)
    if tail_dropped != value:
        assert not j.ok and j.matched.startswith("the last 1 of 5 block(s) dropped") and "odd" in j.matched


def test_a_one_block_zero_is_an_odd_tail_dropped_and_nan_is_unwritten():
    rng = np.random.default_rng(4)
    x, y, n = draw("iq4_nl", 1, rng)
    assert exact_dot("iq4_nl", x, y, n) != 0
    assert "odd block count" in contracts.exact("iq4_nl", x, y, n, np.float32(0)).matched
    assert "never written" in contracts.exact("iq4_nl", x, y, n, np.float32(np.nan)).matched


@pytest.mark.parametrize("x_type", TYPES)
def test_the_bound_holds_for_a_float_sum_and_refuses_one_past_it(x_type):
    rng = np.random.default_rng(5)
    for case in cases.scaled_cases(x_type)[:6]:
        t = terms(x_type, case.x, case.y, case.n)
        s = np.float32(0)               # ggml's generic order, in float32: sumf += (sumi * dx) * dy
        for i, a, b in zip(t.sums, t.x_scale, t.y_scale):
            s = np.float32(s + np.float32(np.float32(np.float32(i) * a) * b))
        for o, v in zip(t.offsets, t.y_sums):
            s = np.float32(s + np.float32(o * np.float32(float(v))))
        j = contracts.bounded(x_type, case.x, case.y, case.n, s)
        assert j.ok, (case.name, j.detail)
        exact_value, limit = contracts.bound(x_type, case.x, case.y, case.n)
        outside = np.float32(float(exact_value + 4 * limit + Fraction(1, 1 << 10) * abs(exact_value)))
        if np.isfinite(outside) and abs(Fraction(float(outside)) - exact_value) > limit:
            assert not contracts.bounded(x_type, case.x, case.y, case.n, outside).ok
    assert rng is not None


@pytest.mark.parametrize("x_type", TYPES)
def test_generated_exact_cases_stay_on_the_exact_domain_with_consistent_sums(x_type):
    made = cases.exact_cases(x_type)
    assert [c.name for c in made[:len(cases.TAIL_COUNTS)]] == [f"blocks-{nb}" for nb in cases.TAIL_COUNTS]
    assert any(c.name.startswith("extreme-") for c in made)
    for c in made:
        assert margin(terms(x_type, c.x, c.y, c.n)) >= 1, c.name
        assert np.array_equal(cases.restamp(VEC_DOT_TYPE[x_type], c.y), c.y), c.name


def test_the_outside_probes_hold_a_minus_128_activation():
    for c in cases.outside_cases("q4_0"):
        qs = c.y.reshape(-1).view(FORMATS["q8_0"].dtype)["qs"]
        assert (qs == -128).any()


def test_shrinking_keeps_the_failure_and_drops_blocks():
    rng = np.random.default_rng(6)
    case = cases.Case("drawn", *draw("q4_0", 9, rng))

    def fails(c):        # "a kernel that drops the last block of an odd count"
        dropped = exact_dot("q4_0", *contracts.head("q4_0", c.x, c.y, len(c.x) - 1)) if len(c.x) > 1 else 0
        return len(c.x) % 2 == 1 and dropped != exact_dot("q4_0", c.x, c.y, c.n)
    assert fails(case)
    small = cases.shrink(fails, "q4_0", case)
    assert fails(small) and len(small.x) == 1


def test_the_shim_tables_are_ggmls_conversions_and_every_quants_function_traps(tmp_path):
    bits = table_bits()
    f16 = bits["ggml_table_f32_f16"].view(np.float32)
    assert f16[0x3C00] == 1.0 and f16[0x0001] == np.float32(2.0 ** -24) and f16[0x7BFF] == 65504.0
    e8m0 = bits["ggml_table_f32_e8m0_half"].view(np.float32)
    assert e8m0[127] == 0.5 and e8m0[0] == np.float32(2.0 ** -128) and e8m0[1] == np.float32(2.0 ** -127)
    header = tmp_path / "ggml-quants.h"
    header.write_text("GGML_API void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);\n"
                      "GGML_API size_t quantize_q4_0(const float * src, void * dst, int64_t nrows);\n")
    assert trapped_functions(header) == ["quantize_q4_0", "quantize_row_q4_0_ref"]
    text = shim_source(header, libc=False)
    assert 'asm__("ggml_table_f32_f16")' in text and "void quantize_q4_0(void)" in text and "roundf" in text
