"""`lowp bounds`: the seeds' figures, and tightness: at the proven depth the behaviour model is exact on the
worst-case input, one step beyond it is not."""
from pathlib import Path

import numpy as np
import pytest

from lowp.conformance.search import bounds
from lowp.conformance.contracts.int32 import exact, pair_saturating
from lowp.kernels import kernel
from lowp.kernels.models.arm import mlal_flush_gemm


def depth(a, b, acc):
    return bounds.safe_depth(bounds.parse_range(a), bounds.parse_range(b),
                             [bounds.Stage("sum", bounds.DEPTH, acc, "wrap")])[0]


def test_the_seeds_figures():
    assert depth("u8", "u8", "s32") == 33025          # seed 001/000: u8*u8 into int32
    assert depth("u4", "u4", "s16") == 145            # seed 004: 4-bit into int16
    assert depth("-127:127", "-1:1", "s16") == 258    # seed 004: 4.6-bit products (|p| <= 127) into int16
    assert depth("u7", "u5", "u16") == 16             # seed 000: L7R5 into uint16


def test_vpmaddubsw_advice_of_seed002():
    k = kernel("u8s8s32_avx2")
    stages, params = bounds.kernel_pipeline(k)
    full = bounds.operand_ranges(k, (0, 255), (-128, 127))
    assert bounds.safe_depth(*full, stages, params)[1].startswith("VPMADDUBSW pair sum")
    hints = bounds.advice(k, stages, params)
    assert hints[0].startswith("A in u7: safe") and hints[1].startswith("B in s7: safe")
    # s8s8 on the u8s8 path: s7 for A is not enough (seed 002's warning); s7 for B is.
    s8s8 = kernel("s8s8s32_avx2")
    hints = bounds.advice(s8s8, *bounds.kernel_pipeline(s8s8))
    assert hints[0].startswith("A in s7: still saturates") and hints[1].startswith("B in s7: safe")


@pytest.mark.parametrize("a_hi,b", [(255, 127), (127, 127), (255, 64), (255, -128), (127, -128)])
def test_pair_stage_bound_is_tight_against_the_contract(a_hi, b):
    A = np.full((1, 2), a_hi, np.uint8)
    B = np.full((2, 1), b, np.int8)
    safe = bounds.safe_depth((0, a_hi), (min(b, 0), max(b, 0)), bounds.PIPELINES["maddubs"])[1] is None
    assert safe == np.array_equal(pair_saturating(A, B), exact(A, B))


@pytest.mark.parametrize("lane,hi", [(np.uint8, 15), (np.int8, 11), (np.int8, -127)])
def test_lane_capacity_is_tight_against_the_behaviour_model(lane, hi):
    into = "u16" if lane == np.uint8 else "s16"
    cap = bounds.capacity(bounds.product_range((min(hi, 0), max(hi, 0)), (min(hi, 0), max(hi, 0))), into)
    for flush, exact_expected in ((cap - cap % 2, True), (cap + 2 - cap % 2, False)):
        A = np.full((1, flush), hi, lane)
        B = np.full((flush, 1), hi, lane)
        assert np.array_equal(mlal_flush_gemm(A, B, flush=flush), exact(A, B)) == exact_expected, (flush, cap)


def test_every_builtin_kernel_declares_a_pipeline_and_is_safe_on_its_claimed_domain():
    """The kernels lowp's own Python registers (kernels/builtin*.py), known by where they were registered: a test
    earlier in the same process (an xdist worker's) may have loaded TOML kernels whose sources sit in the kernels
    folder too."""
    from lowp.kernels import kernels
    from lowp.kernels.registry import origin
    builtin = [k for k in kernels() if (origin(k.name) or Path()).parent == bounds_kernels_dir()
               and (origin(k.name) or Path()).suffix == ".py"]
    assert len(builtin) >= 25
    assert builtin and all(k.pipeline in bounds.PIPELINES for k in builtin)
    for k in builtin:
        if k.contract != "exact":
            continue
        stages, params = bounds.kernel_pipeline(k)
        d, first = bounds.safe_depth(*bounds.operand_ranges(k), stages, params)
        assert first is None and d >= 4096, (k.name, d, first)


def test_ranges_parse_and_refuse_nonsense():
    assert bounds.parse_range("s7") == (-64, 63) and bounds.parse_range("u4") == (0, 15)
    with pytest.raises(ValueError):
        bounds.parse_range("x9")
    with pytest.raises(ValueError):
        bounds.parse_range("5:1")


def bounds_kernels_dir():
    from lowp.kernels.registry import KERNELS_DIR
    return KERNELS_DIR


def test_a_toml_kernel_declares_its_own_pipeline_and_shift(tmp_path):
    """The entry holds the pipeline (named, or its own stages) and the activation shift: lowp bounds needs nothing
    keyed by the kernel's name. Stages from TOML prove the same depth as the named pipeline they spell out."""
    from lowp.kernels import KernelConfigError, load_toml
    from lowp.kernels.registry import KERNELS_DIR
    src = KERNELS_DIR / "x86" / "u8s8s32.c"
    entry = f"""
[[kernel]]
name = "{{name}}"
target = "x86-64"
features = ["avx2"]
source = "{src}"
symbol = "lowp_s8s8s32_avx2_gemm"
signature = "gemm"
a_type = "s8"
b_type = "s8"
packing = "dot4"
tile = {{{{mr = 4, nr = 16, kr = 4}}}}
contract = "exact"
domain = {{{{a = [-128, 127], b = [-64, 63]}}}}
model = "lowp.kernels.models:exact_gemm"
{{extra}}
"""
    stages = ('pipeline = [{what = "pair", terms = 2, into = "s16", overflow = "saturate"}, '
              '{what = "rest", terms = "depth", into = "s32", overflow = "wrap"}]')
    (tmp_path / "k.toml").write_text(entry.format(name="bt_named", extra='pipeline = "maddubs"\na_shift = 128')
                                     + entry.format(name="bt_stages", extra=stages + "\na_shift = 128"))
    named, spelled = load_toml(tmp_path / "k.toml")
    results = [bounds.safe_depth(*bounds.operand_ranges(k), *bounds.kernel_pipeline(k)) for k in (named, spelled)]
    assert results[0] == results[1] and results[0][1] is None
    assert bounds.operand_ranges(named)[0] == (0, 255)
    (tmp_path / "bad.toml").write_text(entry.format(name="bt_bad", extra='a_shift = "shift"'))
    with pytest.raises(KernelConfigError, match="a_shift: 'shift' is not one of the kernel's params"):
        load_toml(tmp_path / "bad.toml")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.int64])
def test_exact_products_are_the_integer_products_on_either_side_of_the_float64_bound(dtype):
    """lanes.exact_products takes float64 (BLAS) only where every partial sum is an integer below 2^53: it equals
    the products summed as Python integers for every operand type, at depths on both sides of that bound, and at
    the bound itself (2^26-magnitude int64 operands: one product of 2^52 goes through float64, two do not); the
    shapes are past BLAS_PRODUCTS, where the float64 path is taken at all."""
    from lowp.isa_models.lanes import BLAS_PRODUCTS, exact_products
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    info = np.iinfo(dtype)
    lo, hi = (-2 ** 26, 2 ** 26) if dtype == np.int64 else (int(info.min), int(info.max))
    for M, K, N in ((64, 1, 64), (64, 2, 64), (64, 3, 64), (16, 64, 16), (8, 1000, 8)):
        assert M * K * N >= BLAS_PRODUCTS
        A = rng.integers(lo, hi, (M, K), endpoint=True).astype(dtype)
        B = rng.integers(lo, hi, (K, N), endpoint=True).astype(dtype)
        A[:, :1], B[:1] = hi, hi                   # the largest products the types hold
        got = exact_products(A, B)
        want = A.astype(object) @ B.astype(object)      # Python integers: exact at any size
        assert got.dtype == np.int64
        assert ((got.astype(object) - want) % 2 ** 64 == 0).all()
