"""Known-variant families (conformance/diagnosis/variants.py). Every family's bug is written here a second time as plain
Python integer loops, the way a kernel does it one element at a time, independently of the numpy models; C from
that reading, on hypothesis-drawn inputs and on the inputs that make the bug visible, must be named by identify()
with the right parameter. The exact product is named by nothing, and identify() stays bounded on big inputs."""
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lowp.conformance.contracts import int32 as contracts
from lowp.conformance.diagnosis import variants
from lowp.conformance.diagnosis.variants import identify, matches

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RANGES = {"u8": (0, 255), "s8": (-128, 127)}
DTYPE = {"u8": np.uint8, "s8": np.int8}


# ----------------------------------------------------------------------------------- integer arithmetic, by hand

def wrap(x, bits=32, signed=True):
    x &= (1 << bits) - 1
    return x - (1 << bits) if signed and x >= 1 << (bits - 1) else x


def sat16(x):
    return max(-32768, min(32767, x))


def reinterpret(x, to_type):
    """The same byte read as the other 8-bit type."""
    return wrap(x, 8, signed=to_type == "s8")


def other(t):
    return "u8" if t == "s8" else "s8"


def lists(A, B):
    return [[int(x) for x in row] for row in A], [[int(x) for x in row] for row in B]


def gemm(A, B, element):
    """C[i][j] = element(a_row, b_col), wrapped to int32."""
    A, B = lists(A, B)
    cols = [[B[k][j] for k in range(len(B))] for j in range(len(B[0]))]
    return np.array([[wrap(element(a, b)) for b in cols] for a in A], np.int64)


def dot(a, b, ks=None):
    return sum(a[k] * b[k] for k in (range(len(a)) if ks is None else ks))


def exact(A, B):
    return gemm(A, B, dot)


# ------------------------------------------------------------------------------- each bug, one element at a time

def lanes_flush(A, B, N, signed=True):
    def element(a, b):
        total = lane = 0
        for k in range(len(a)):
            lane = wrap(lane + a[k] * b[k], 16, signed)
            if (k + 1) % N == 0:
                total, lane = total + lane, 0
        return total + lane
    return gemm(A, B, element)


def pair(a, b, k, end):
    return a[k] * b[k] + (a[k + 1] * b[k + 1] if k + 1 < end else 0)


def acc16(A, B, brow):
    def element(a, b):
        s32 = s16 = 0
        for k in range(0, len(a), 2):
            s16 = sat16(s16 + sat16(pair(a, b, k, len(a))))
            if (k + 2) % brow == 0:
                s32, s16 = s32 + s16, 0
        return s32 + s16
    return gemm(A, B, element)


def pair_saturating_blocks(A, B, starts):
    def element(a, b):
        bounds = list(starts) + [len(a)]
        return sum(sat16(pair(a, b, k, e)) for s, e in zip(bounds, bounds[1:]) for k in range(s, e, 2))
    return gemm(A, B, element)


def saturating_products(A, B):
    def element(a, b):
        acc = 0
        for k in range(len(a)):
            acc = sat16(acc + sat16(a[k] * b[k]))
        return acc
    return gemm(A, B, element)


def saturating_pairs(A, B):
    def element(a, b):
        acc = 0
        for k in range(0, len(a), 2):
            acc = sat16(acc + sat16(pair(a, b, k, len(a))))
        return acc
    return gemm(A, B, element)


def read_as_other(A, B, a_type, b_type, which):
    fa = (lambda x: reinterpret(x, other(a_type))) if "A" in which else (lambda x: x)
    fb = (lambda x: reinterpret(x, other(b_type))) if "B" in which else (lambda x: x)
    return gemm(A, B, lambda a, b: sum(fa(x) * fb(y) for x, y in zip(a, b)))


def layout(A, B, flags, a_type, b_type):
    """The kernel indexing flat buffers: A[i*K + k], B[k*N + j], C[i*N + j] unless a flag says otherwise."""
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    a_buf, b_buf = [int(x) for x in A.ravel()], [int(x) for x in B.ravel()]
    if "swapped" in flags:
        a_buf, b_buf = [reinterpret(x, a_type) for x in b_buf], [reinterpret(x, b_type) for x in a_buf]
    a = (lambda i, k: a_buf[k * M + i]) if "A" in flags else (lambda i, k: a_buf[i * K + k])
    b = (lambda k, j: b_buf[j * K + k]) if "B" in flags else (lambda k, j: b_buf[k * N + j])
    c_buf = [0] * (M * N)
    for i in range(M):
        for j in range(N):
            at = j * M + i if "C" in flags else i * N + j
            c_buf[at] = wrap(sum(a(i, k) * b(k, j) for k in range(K)))
    return np.array(c_buf, np.int64).reshape(M, N)


def shifted_s8s8(A, B, compensation_sign):
    """s8*s8 as (a + 128) * b with compensation_sign * 128 * colsum(B) added (-1 is right)."""
    return gemm(A, B, lambda a, b: sum((x + 128) * y for x, y in zip(a, b)) + compensation_sign * 128 * sum(b))


def shifted_b_no_compensation(A, B):
    """B shifted by +128 (a u8 path for s8 B) and the -128*rowsum(A) term forgotten."""
    return gemm(A, B, lambda a, b: sum(x * (y + 128) for x, y in zip(a, b)))


def colsum_in_int16(A, B):
    """(a + 128) * b minus 128 * the column sum of B accumulated in an int16 register."""
    def element(a, b):
        colsum = 0
        for y in b:
            colsum = wrap(colsum + y, 16)
        return sum((x + 128) * y for x, y in zip(a, b)) - 128 * colsum
    return gemm(A, B, element)


def dropped(A, B, end, r):
    K = A.shape[1]
    ks = range(0, K - r) if end == "last" else range(r, K)
    return gemm(A, B, lambda a, b: dot(a, b, ks))


def overwriting_blocks(A, B, N):
    def element(a, b):
        for k0 in range(0, len(a), N):
            c = dot(a, b, range(k0, min(k0 + N, len(a))))     # stored, not added
        return c
    return gemm(A, B, element)


def restarting_blocks(A, B, N, operand):
    """Every K block of N reads `operand` from its k = 0 again (its block offset left out)."""
    def element(a, b):
        total = 0
        for s in range(0, len(a), N):
            for t in range(min(N, len(a) - s)):
                total += a[s + t] * b[t] if operand == "B" else a[t] * b[s + t]
        return total
    return gemm(A, B, element)


def k_lanes(A, B, L, N, signed=True):
    """A vector of L 16-bit lanes along k: lane l adds the products of k = l, l + L, ... within a block of N k,
    wrapping; after each block the lanes are widened and added."""
    def element(a, b):
        total = 0
        for s in range(0, len(a), N):
            lanes = [0] * L
            for k in range(s, min(s + N, len(a))):
                lanes[(k - s) % L] = wrap(lanes[(k - s) % L] + a[k] * b[k], 16, signed)
            total += sum(lanes)
        return total
    return gemm(A, B, element)


def value_read_as(A, B, operand, v, w):
    def element(a, b):
        if operand == "A":
            a = [w if x == v else x for x in a]
        else:
            b = [w if y == v else y for y in b]
        return dot(a, b)
    return gemm(A, B, element)


# ------------------------------------------------------------------------------------------------- the checking

def check_named(C, A, B, family, param, a_type, b_type, poison=None):
    """identify() names `family` with `param` among its parameters, or nothing when C is the exact product."""
    found = matches(C, A, B, a_type=a_type, b_type=b_type, poison=poison)
    if np.array_equal(C, exact(A, B)):
        assert found == []
    else:
        assert any(m.family.name == family and m.includes(param) for m in found), \
            f"{family}({param}) not among {[m.name for m in found]}"
    return found


@st.composite
def operands(draw, types=("u8", "s8"), max_mn=3, min_k=1, max_k=40):
    a_type, b_type = draw(st.sampled_from(types)), draw(st.sampled_from(types))
    M, N = draw(st.integers(1, max_mn)), draw(st.integers(1, max_mn))
    K = draw(st.integers(min_k, max_k))
    (alo, ahi), (blo, bhi) = RANGES[a_type], RANGES[b_type]
    # Values near the ends of the range are what makes narrow accumulators overflow: draw them often.
    a = st.one_of(st.integers(alo, ahi), st.sampled_from([alo, ahi, alo + 1, ahi - 1]))
    b = st.one_of(st.integers(blo, bhi), st.sampled_from([blo, bhi, blo + 1, bhi - 1]))
    A = np.array(draw(st.lists(st.lists(a, min_size=K, max_size=K), min_size=M, max_size=M)), DTYPE[a_type])
    B = np.array(draw(st.lists(st.lists(b, min_size=N, max_size=N), min_size=K, max_size=K)), DTYPE[b_type])
    return A, B, a_type, b_type


def full(shape, value, t):
    return np.full(shape, value, DTYPE[t])


# --------------------------------------------------------------------------------------------- 16-bit lane flush

@SETTINGS
@given(operands(types=("s8",), max_k=60), st.data())
def test_int16_lanes_flush_named_with_its_interval(ops, data):
    A, B, a_type, b_type = ops
    N = data.draw(st.integers(1, A.shape[1] + 3))
    check_named(lanes_flush(A, B, N), A, B, "int16-lanes-flush", N, a_type, b_type)


@pytest.mark.parametrize("K", [271, 300, 301, 450, 599, 600])
def test_int16_lanes_flush_300_on_products_of_121(K):
    # a = b = 11: every product is 121, so a lane wraps from depth 271 (271 * 121 > 32767).
    A, B = full((1, K), 11, "s8"), full((K, 2), 11, "s8")
    check_named(lanes_flush(A, B, 300), A, B, "int16-lanes-flush", 300, "s8", "s8")


def test_int16_lanes_flush_reports_the_honest_range():
    # K = 300: one block of any N >= 271 wraps once, shorter blocks pair up into the same single wrap only when
    # the first block already wraps; the input cannot tell N = 300 from N = 1000: "N >= 271".
    A, B = full((1, 300), 11, "s8"), full((300, 1), 11, "s8")
    assert identify(lanes_flush(A, B, 300), A, B, a_type="s8", b_type="s8") == ["int16-lanes-flush(N>=271)"]
    # K = 600: both blocks wrap once for every N in [271, 329] (600 - N >= 271); N >= 600 wraps once in all. Two
    # lanes along k over the whole depth hold 300 products each and wrap once each: the same C.
    A, B = full((1, 600), 11, "s8"), full((600, 1), 11, "s8")
    assert identify(lanes_flush(A, B, 300), A, B, a_type="s8", b_type="s8") == \
        ["int16-lanes-flush(N in [271, 329])", "int16-k-lanes(L=2, N>=600)"]


@SETTINGS
@given(operands(types=("u8",), max_k=60), st.data())
def test_uint16_lanes_flush_named_with_its_interval(ops, data):
    A, B, a_type, b_type = ops
    N = data.draw(st.integers(1, A.shape[1] + 3))
    check_named(lanes_flush(A, B, N, signed=False), A, B, "uint16-lanes-flush", N, a_type, b_type)


@SETTINGS
@given(operands(max_k=70), st.integers(1, 80), st.booleans())
def test_batched_lanes_model_is_the_contracts_one(ops, N, signed):
    A, B, _, _ = ops
    assert np.array_equal(variants.lanes_wrapping(A, B, N, signed), contracts.int16_lanes_wrapping(N, signed)(A, B))


@pytest.mark.parametrize("K", [292, 300, 450, 600])
def test_uint16_lanes_flush_300_on_4_bit_maxima(K):
    # u4 operands at 15: products 225, a u16 lane wraps from depth 292 (the 4-bit kernel flushes every 144).
    A, B = full((2, K), 15, "u8"), full((K, 1), 15, "u8")
    check_named(lanes_flush(A, B, 300, signed=False), A, B, "uint16-lanes-flush", 300, "u8", "u8")


# ---------------------------------------------------------------------------------------------------- FBGEMM acc16

@SETTINGS
@given(operands(types=("u8",), max_k=50), st.data())
def test_acc16_named_with_its_brow(ops, data):
    A, B, _, _ = ops
    B = (B.astype(np.int16) - 128).astype(np.int8)           # u8 x s8, as VPMADDUBSW
    brow = 2 * data.draw(st.integers(2, A.shape[1] // 2 + 2))
    check_named(acc16(A, B, brow), A, B, "fbgemm-acc16", brow, "u8", "s8")


@pytest.mark.parametrize("brow", [128, 256, 130])
def test_acc16_brow_on_saturating_pairs(brow):
    # 255 * 127 twice saturates every pair; alternating signs in B let the int16 sum climb and fall.
    K = 600
    A = full((2, K), 255, "u8")
    B = np.array([[127 if (k // 40) % 3 else -128] for k in range(K)], np.int8)
    found = check_named(acc16(A, B, brow), A, B, "fbgemm-acc16", brow, "u8", "s8")
    assert any(m.name.startswith("fbgemm-acc16") for m in found)


# --------------------------------------------------------------------------------------------- pair saturation

def u8s8(ops):
    A, B, _, _ = ops
    return A, (B.astype(np.int16) - 128).astype(np.int8)


@SETTINGS
@given(operands(types=("u8",), min_k=2, max_k=40), st.data())
def test_pair_saturating_blocks_named(ops, data):
    A, B = u8s8(ops)
    K = A.shape[1]
    N = data.draw(st.integers(0, (K - 1) // 2)) * 2 + 1
    # One block (N >= K) is the plain pair-saturating member, parameter None.
    check_named(pair_saturating_blocks(A, B, range(0, K, N)), A, B, "pair-saturating", N if N < K else None,
                "u8", "s8")


@SETTINGS
@given(operands(types=("u8",), min_k=2, max_k=40))
def test_pairs_from_k1_and_plain_pairs_named(ops):
    A, B = u8s8(ops)
    check_named(pair_saturating_blocks(A, B, [0, 1]), A, B, "pair-saturating", "k=1", "u8", "s8")
    check_named(pair_saturating_blocks(A, B, [0]), A, B, "pair-saturating", None, "u8", "s8")


def test_pair_saturating_onednn_split_at_129():
    # oneDNN's igemm splits K = 257 at (K + 1) // 2 = 129: the second block pairs (129, 130), (131, 132), ...
    K = 257
    A = full((1, K), 255, "u8")
    B = np.array([[127 if k % 5 else -128, 127] for k in range(K)], np.int8)
    found = check_named(pair_saturating_blocks(A, B, [0, 129]), A, B, "pair-saturating", 129, "u8", "s8")
    assert any("K blocks of" in m.name for m in found)


@SETTINGS
@given(operands(types=("u8",), max_k=90), st.integers(1, 50))
def test_blockwise_acc16_is_the_contracts_model(ops, half):
    A, B = u8s8(ops)
    assert np.array_equal(variants.acc16_blocks(A, B, 2 * half), contracts.fbgemm_acc16(A, B, 2 * half))


@SETTINGS
@given(st.lists(st.integers(-40000, 40000), max_size=70))
def test_saturating_sum_is_the_running_clip(terms):
    s = 0
    for t in terms:
        s = sat16(s + t)
    assert variants.saturating_sum(np.array([terms], np.int64).reshape(1, -1))[0] == s


@SETTINGS
@given(operands(types=("u8",), min_k=1, max_k=60), st.data())
def test_row_wise_pair_blocks_are_the_contracts_model(ops, data):
    A, B = u8s8(ops)
    K = A.shape[1]
    starts = [0] + sorted(data.draw(st.sets(st.integers(1, K - 1), max_size=6))) if K > 1 else [0]
    assert np.array_equal(variants.pair_saturating_blocks(A, B, starts),
                          contracts.pair_saturating_k_blocks(A, B, starts))


@pytest.mark.parametrize("K", [4, 5, 8, 9])
def test_pairs_from_k1_on_saturating_pairs(K):
    A, B = full((1, K), 255, "u8"), full((K, 1), 127, "s8")
    found = check_named(pair_saturating_blocks(A, B, [0, 1]), A, B, "pair-saturating", "k=1", "u8", "s8")
    assert "pair-saturating(pairs from k=1)" in [m.name for m in found]


# ---------------------------------------------------------------------------------------- int16 saturation only

@SETTINGS
@given(operands(types=("s8",), max_k=30))
def test_saturating_int16_products_named(ops):
    A, B, a_type, b_type = ops
    check_named(saturating_products(A, B), A, B, "int16-saturating", "products", a_type, b_type)


@SETTINGS
@given(operands(types=("u8",), max_k=30))
def test_saturating_int16_pairs_named(ops):
    A, B = u8s8(ops)
    check_named(saturating_pairs(A, B), A, B, "int16-saturating", "pairs", "u8", "s8")


def test_saturating_int16_on_extremes():
    A, B = full((1, 3), -128, "s8"), full((3, 1), -128, "s8")            # 3 * 16384 > 32767
    check_named(saturating_products(A, B), A, B, "int16-saturating", "products", "s8", "s8")
    A, B = full((1, 4), 255, "u8"), full((4, 1), 127, "s8")
    check_named(saturating_pairs(A, B), A, B, "int16-saturating", "pairs", "u8", "s8")


# ---------------------------------------------------------------------------------------------------- signedness

@SETTINGS
@given(operands(), st.sampled_from([("A",), ("B",), ("A", "B")]))
def test_signedness_named(ops, which):
    A, B, a_type, b_type = ops
    # An operand with no value at or past 128 reads the same either way: reading it wrong changes nothing, and
    # the mistake is named by the operands it does change (test_a_mistake_that_changes_nothing_is_not_added).
    changed = tuple(x for x, M in (("A", A), ("B", B)) if x in which and (M.astype(np.int64) & 0x80).any()) or which
    found = check_named(read_as_other(A, B, a_type, b_type, which), A, B, "signedness", changed, a_type, b_type)
    for m in found:
        if m.family.name == "signedness" and m.includes(changed):
            assert all(f"{x} read as {other(t)}" in m.name for x, t in (("A", a_type), ("B", b_type)) if x in changed)


def test_signedness_of_an_operand_it_does_not_change_is_not_named():
    """The case hypothesis found: A = 1 reads the same as u8 and s8, so A and B both read wrong is B alone."""
    A, B = np.array([[1]], np.uint8), np.array([[128]], np.uint8)
    check_named(read_as_other(A, B, "u8", "u8", ("A", "B")), A, B, "signedness", ("B",), "u8", "u8")


def test_a_mistake_that_changes_nothing_is_not_added():
    # B has no negative values, so reading it as u8 changes nothing: "A read as s8" alone, not also with B.
    A = np.array([[200, 17, 131], [255, 128, 3]], np.uint8)
    B = np.array([[3, 7], [12, 5], [1, 100]], np.int8)
    names = identify(read_as_other(A, B, "u8", "s8", ("A",)), A, B, a_type="u8", b_type="s8")
    assert "A read as s8" in names and not any("B read as u8" in n for n in names)


def test_u8_kernel_that_sign_extends_a():
    A = np.array([[200, 17, 131], [255, 128, 3]], np.uint8)
    B = np.array([[3, -7], [12, 5], [-1, 100]], np.int8)
    assert identify(read_as_other(A, B, "u8", "s8", ("A",)), A, B, a_type="u8", b_type="s8") == ["A read as s8"]


# ------------------------------------------------------------------------------------------------------- layouts

LAYOUTS = [("A",), ("B",), ("C",), ("A", "B"), ("B", "C"), ("swapped",), ("swapped", "C")]


@SETTINGS
@given(operands(max_mn=4, max_k=6), st.sampled_from(LAYOUTS))
def test_layouts_named(ops, flags):
    A, B, a_type, b_type = ops
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    useful = {"swapped": M == N, "A": M > 1 and K > 1, "B": K > 1 and N > 1, "C": M > 1 and N > 1}
    assume(all(useful[f] for f in flags))
    C = layout(A, B, flags, a_type, b_type)
    # On degenerate operands two layouts give the same C (A = [[0, 0], [0, 1]], B = [[0, 0], [1, 0]]: A and B read
    # column-major is B read column-major alone): identify() then names one of them, the test cannot ask for which.
    others = [o for o in LAYOUTS if o != flags and all(useful[f] for f in o)]
    assume(not any(np.array_equal(layout(A, B, other, a_type, b_type), C) for other in others))
    check_named(C, A, B, "layout", flags, a_type, b_type)


def test_b_read_column_major_named():
    rng = np.random.default_rng(5)
    A, B = rng.integers(0, 256, (3, 7)).astype(np.uint8), rng.integers(-128, 128, (7, 5)).astype(np.int8)
    assert "B read column-major" in identify(layout(A, B, ("B",), "u8", "s8"), A, B, a_type="u8", b_type="s8")


# --------------------------------------------------------------------------------------------------- permutations

def distinct_columns(A, B):
    E = exact(A, B)
    return len({tuple(E[:, j]) for j in range(E.shape[1])}) == E.shape[1]


@SETTINGS
@given(operands(max_mn=5, max_k=8), st.data())
def test_permuted_columns_named(ops, data):
    A, B, a_type, b_type = ops
    N = B.shape[1]
    assume(N > 1 and distinct_columns(A, B))
    p = tuple(data.draw(st.permutations(range(N))))
    assume(p != tuple(range(N)))
    C = gemm(A, B[:, list(p)], dot)            # the kernel stores column p(j) of the product at j
    check_named(C, A, B, "permuted", ("columns", p), a_type, b_type)


@SETTINGS
@given(operands(max_mn=5, max_k=8), st.data())
def test_permuted_rows_named(ops, data):
    A, B, a_type, b_type = ops
    M = A.shape[0]
    assume(M > 1 and distinct_columns(B.T, A.T))
    p = tuple(data.draw(st.permutations(range(M))))
    assume(p != tuple(range(M)))
    check_named(gemm(A[list(p)], B, dot), A, B, "permuted", ("rows", p), a_type, b_type)


def test_columns_8_and_9_swapped_by_name():
    rng = np.random.default_rng(3)
    A, B = rng.integers(-128, 128, (4, 9)).astype(np.int8), rng.integers(-128, 128, (9, 16)).astype(np.int8)
    order = list(range(16))
    order[8], order[9] = 9, 8
    assert identify(gemm(A, B[:, order], dot), A, B, a_type="s8", b_type="s8") == ["columns 8 and 9 swapped"]


def test_a_column_written_twice_by_name():
    rng = np.random.default_rng(4)
    A, B = rng.integers(-128, 128, (3, 5)).astype(np.int8), rng.integers(-128, 128, (5, 4)).astype(np.int8)
    assert identify(gemm(A, B[:, [0, 1, 1, 3]], dot), A, B, a_type="s8", b_type="s8") == \
        ["column 2 holds column 1's values"]


# --------------------------------------------------------------------------------------------------- compensation

@SETTINGS
@given(operands(types=("s8",), max_k=20), st.sampled_from([(1, 256), (0, 128), (-2, -128)]))
def test_compensation_sign_named(ops, case):
    A, B, a_type, b_type = ops
    sign, c = case                             # +1: flipped, 0: missing, -2: applied twice
    check_named(shifted_s8s8(A, B, sign), A, B, "compensation", ("colsum(B)", c), a_type, b_type)


def test_compensation_flipped_on_extremes():
    A, B = full((2, 5), -128, "s8"), full((5, 3), 127, "s8")
    names = identify(shifted_s8s8(A, B, +1), A, B, a_type="s8", b_type="s8")
    assert "compensation off by +256*colsum(B) (the -128*colsum(B) compensation's sign flipped)" in names
    # With every a = -128 the flipped sign is indistinguishable from A read as u8 (128 * colsum instead of
    # -128 * colsum): both readings are named.
    assert "A read as u8" in names


@SETTINGS
@given(operands(types=("s8",), max_k=20))
def test_rowsum_compensation_missing_named(ops):
    A, B, a_type, b_type = ops
    check_named(shifted_b_no_compensation(A, B), A, B, "compensation", ("rowsum(A)", 128), a_type, b_type)


@SETTINGS
@given(operands(types=("u8",), max_mn=4, max_k=12), st.integers(-20, 20), st.integers(-20, 20))
def test_zero_points_with_wrong_signs_named(ops, za, zb):
    # sum (a - za)(b - zb) where the kernel should have computed sum a*b: off by -za*colsum - zb*rowsum + K*za*zb.
    # Only an input with two different column sums and two different row sums tells the three terms apart.
    A, B, a_type, b_type = ops
    K = A.shape[1]
    assume(len(set(B.astype(int).sum(axis=0))) > 1 and len(set(A.astype(int).sum(axis=1))) > 1)
    assume((za, zb) != (0, 0))
    C = gemm(A, B, lambda a, b: sum((x - za) * (y - zb) for x, y in zip(a, b)))
    expected = ("rowsum(A)", -zb) if za == 0 else ("colsum(B)", -za) if zb == 0 else ("affine", -za, -zb, K * za * zb)
    check_named(C, A, B, "compensation", expected, a_type, b_type)


def test_a_wrong_1x1_result_is_no_compensation_with_an_arbitrary_coefficient():
    # Any wrong 1x1 C is some c times colsum(B) for some c: only the known compensations (256, 128, -128) may be
    # named on such an input.
    A, B = np.array([[3, 4]], np.uint8), np.array([[5], [6]], np.uint8)     # colsum 11, exact 39
    assert identify(np.array([[39 + 11 * 7]]), A, B, a_type="u8", b_type="u8") == []
    assert identify(np.array([[39 + 11 * 128]]), A, B, a_type="u8", b_type="u8") == \
        ["compensation off by +128*colsum(B) (the -128*colsum(B) compensation missing)"]


# ------------------------------------------------------------------------------------------------ int16 sums

@SETTINGS
@given(operands(types=("s8",), max_mn=2, min_k=250, max_k=300))
def test_colsum_in_int16_named(ops):
    A, B, a_type, b_type = ops
    check_named(colsum_in_int16(A, B), A, B, "int16-sums", ("colsum(B)", 128), a_type, b_type)


@pytest.mark.parametrize("K,b", [(257, -128), (259, 127), (400, 127)])
def test_colsum_in_int16_from_the_wrapping_depth(K, b):
    A = np.array([[(7 * k) % 256 - 128 for k in range(K)]], np.int8)
    B = full((K, 2), b, "s8")
    found = check_named(colsum_in_int16(A, B), A, B, "int16-sums", ("colsum(B)", 128), "s8", "s8")
    assert found


def test_colsum_in_int16_exact_below_the_wrapping_depth():
    A, B = full((1, 256), 5, "s8"), full((256, 1), -128, "s8")      # colsum -32768 still fits
    assert identify(colsum_in_int16(A, B), A, B, a_type="s8", b_type="s8") == []


# ------------------------------------------------------------------------------------------------- dropped k

@SETTINGS
@given(operands(max_k=60), st.sampled_from(["last", "first"]), st.integers(1, 60))
def test_dropped_k_named(ops, end, r):
    A, B, a_type, b_type = ops
    assume(r <= A.shape[1])
    check_named(dropped(A, B, end, r), A, B, "dropped-k", (end, r), a_type, b_type)


@pytest.mark.parametrize("K", [31, 63, 255])
def test_a_lost_31_k_tail_named(K):
    # A K tail of 31 whose count is kept in 4 bits (16 pairs stored as 0): the last 31 k never computed.
    rng = np.random.default_rng(K)
    A, B = rng.integers(0, 256, (4, K)).astype(np.uint8), rng.integers(-128, 128, (K, 8)).astype(np.int8)
    assert "last 31 k values dropped" in identify(dropped(A, B, "last", 31), A, B, a_type="u8", b_type="s8")


def test_dropped_k_on_a_single_product_names_the_range():
    # One product at k = 30 of K = 31 and C = 0: dropping any last r >= 1 explains it, and so does dropping all 31.
    A, B = np.zeros((1, 31), np.uint8), np.zeros((31, 1), np.int8)
    A[0, 30], B[30, 0] = 52, -58
    names = identify(np.zeros((1, 1), np.int64), A, B, a_type="u8", b_type="s8")
    assert "last r k values dropped (r in [1, 31])" in names and "first 31 k values dropped" in names


@SETTINGS
@given(operands(max_mn=2, min_k=2, max_k=80), st.data())
def test_overwriting_blocks_named(ops, data):
    A, B, a_type, b_type = ops
    N = data.draw(st.integers(1, A.shape[1] - 1))
    check_named(overwriting_blocks(A, B, N), A, B, "k-blocks-overwrite", N, a_type, b_type)


@pytest.mark.parametrize("K", [1025, 1100, 2048])
def test_overwriting_blocks_of_1024(K):
    rng = np.random.default_rng(K)
    A, B = rng.integers(0, 256, (1, K)).astype(np.uint8), rng.integers(-128, 128, (K, 1)).astype(np.int8)
    check_named(overwriting_blocks(A, B, 1024), A, B, "k-blocks-overwrite", 1024, "u8", "s8")


@SETTINGS
@given(operands(max_mn=2, min_k=2, max_k=70), st.sampled_from(["A", "B"]), st.data())
def test_restarting_blocks_named(ops, operand, data):
    A, B, a_type, b_type = ops
    K = A.shape[1]
    N = data.draw(st.one_of(st.integers(1, min(K - 1, 64)), st.sampled_from([16, 32, 48, 64])).filter(lambda n: n < K))
    check_named(restarting_blocks(A, B, N, operand), A, B, f"k-blocks-restart-{operand}", N, a_type, b_type)


@pytest.mark.parametrize("K", [1025, 1100])
def test_k_blocks_of_1024_restarting_b(K):
    rng = np.random.default_rng(K)
    A, B = rng.integers(-128, 128, (2, K)).astype(np.int8), rng.integers(-128, 128, (K, 3)).astype(np.int8)
    names = identify(restarting_blocks(A, B, 1024, "B"), A, B, a_type="s8", b_type="s8")
    assert names == ["K blocks of N=1024 restart B (each block reads B from k = 0)"]


# ------------------------------------------------------------------------------------------- int16 lanes along k

@SETTINGS
@given(operands(types=("u8",), max_mn=2, min_k=2, max_k=70), st.sampled_from([(8, 16), (4, 8), (2, 4), (8, 32),
                                                                             (16, 32)]))
def test_k_lanes_named(ops, shape):
    A, B = u8s8(ops)
    L, N = shape
    check_named(k_lanes(A, B, L, N), A, B, "int16-k-lanes", (L, N), "u8", "s8")


def test_products_of_k_and_k_plus_8_sharing_a_lane():
    # 255 * 127 at k = 0 and k = 8: 64770 wraps to -766 in the lane both products share.
    A = np.array([[255, 0, 0, 0, 0, 0, 0, 0, 255]], np.uint8)
    B = np.array([[127], [0], [0], [0], [0], [0], [0], [0], [127]], np.int8)
    assert k_lanes(A, B, 8, 16)[0, 0] == -766
    names = identify(k_lanes(A, B, 8, 16), A, B, a_type="u8", b_type="s8")
    assert "int16-k-lanes(L=8, N>=9): k and k + 8 share a lane" in names      # K = 9: one block, any N >= 9
    # K = 32, two blocks whose shared lanes hold 255 * (127 + 12) = 35445 each, -30091 once wrapped: -60182 with
    # blocks of 16, but 70890 wrapped once (5354) were all four products in one lane.
    A, B = np.zeros((1, 32), np.uint8), np.zeros((32, 1), np.int8)
    A[0, [0, 8, 16, 24]], B[[0, 8, 16, 24], 0] = 255, [127, 12, 127, 12]
    assert k_lanes(A, B, 8, 16)[0, 0] == -60182 and k_lanes(A, B, 8, 32)[0, 0] == 5354
    names = identify(k_lanes(A, B, 8, 16), A, B, a_type="u8", b_type="s8")
    assert "int16-k-lanes(L=8, N=16): k and k + 8 share a lane" in names


# --------------------------------------------------------------------------------------------- one value misread

def bit_slips(v):
    """What a byte v becomes through the mistakes kernels make: zeroed, negated, top bit or carry lost or gained,
    halved, doubled, pinned at an end of the s8 or u8 range (the values named even on a 1x1 counterexample)."""
    return [w for w in (0, -v, v - 128, v + 128, v - 256, v + 256, v // 2, 2 * v, -128, 127, 255, -127)
            if -128 <= w <= 255 and w != v]


@SETTINGS
@given(operands(max_mn=4, max_k=20), st.sampled_from(["A", "B"]), st.data())
def test_value_read_as_named(ops, operand, data):
    A, B, a_type, b_type = ops
    X = A if operand == "A" else B
    v = int(data.draw(st.sampled_from(sorted(set(X.ravel().tolist())))))
    w = data.draw(st.sampled_from(bit_slips(v)))
    check_named(value_read_as(A, B, operand, v, w), A, B, "value-read-as", (operand, v, w), a_type, b_type)


def test_any_misread_value_named_where_the_data_determine_it():
    rng = np.random.default_rng(12)
    A, B = rng.integers(0, 256, (4, 30)).astype(np.uint8), rng.integers(-128, 128, (30, 8)).astype(np.int8)
    v = int(A[0, 3])
    assert 77 not in bit_slips(v)
    assert not np.array_equal(value_read_as(A[:1], B[:, :1], "A", v, 77), exact(A[:1], B[:, :1]))
    check_named(value_read_as(A, B, "A", v, 77), A, B, "value-read-as", ("A", v, 77), "u8", "s8")
    # On a 1x1 C one equation fits some v read as some w for almost any error: only bit-level slips are named.
    A1, B1 = A[:1], B[:, :1]
    C1 = value_read_as(A1, B1, "A", v, 77)
    assert not any(m.family.name == "value-read-as" and m.includes(("A", v, 77))
                   for m in matches(C1, A1, B1, a_type="u8", b_type="s8"))


def test_a_255_read_as_127_named():
    rng = np.random.default_rng(9)
    A, B = rng.integers(200, 256, (4, 40)).astype(np.uint8), rng.integers(-128, 128, (40, 8)).astype(np.int8)
    assert identify(value_read_as(A, B, "A", 255, 127), A, B, a_type="u8", b_type="s8") == ["a = 255 read as 127"]


# ---------------------------------------------------------------------------------------------------- poison

@SETTINGS
@given(operands(max_k=10), st.integers(0, 2 ** 32 - 1))
def test_accumulating_into_poisoned_c_named(ops, seed):
    A, B, a_type, b_type = ops
    poison = np.random.default_rng(seed).integers(-2 ** 31, 2 ** 31, (A.shape[0], B.shape[1])).astype(np.int32)
    assume(poison.any())
    E = exact(A, B)
    C = np.array([[wrap(int(poison[i, j]) + int(E[i, j])) for j in range(E.shape[1])] for i in range(E.shape[0])])
    found = matches(C, A, B, a_type=a_type, b_type=b_type, poison=poison)
    assert any(m.family.name == "poison" and m.name.startswith("C += A*B") for m in found)


@SETTINGS
@given(operands(max_mn=4, max_k=10), st.data())
def test_unwritten_elements_named(ops, data):
    A, B, a_type, b_type = ops
    M, N = A.shape[0], B.shape[1]
    poison = np.full((M, N), 0x5A5A5A5A, np.int32)
    skipped = sorted(data.draw(st.sets(st.tuples(st.integers(0, M - 1), st.integers(0, N - 1)), min_size=1)))
    C = exact(A, B)
    assume(all(C[i, j] != poison[i, j] for i, j in skipped))
    for i, j in skipped:
        C[i, j] = poison[i, j]
    names = identify(C, A, B, a_type=a_type, b_type=b_type, poison=poison)
    first = list(skipped[0])
    assert f"{len(skipped)} of {M * N} elements of C never written (still poison), the first at {first}" in names


# ---------------------------------------------------------------------------------------- nothing, and bounded

@SETTINGS
@given(operands(max_mn=4, max_k=60))
def test_exact_results_are_named_by_no_family(ops):
    A, B, a_type, b_type = ops
    C = exact(A, B)
    poison = np.full(C.shape, 7, np.int32)
    assert identify(C, A, B, a_type=a_type, b_type=b_type, poison=poison) == []


def test_unexplained_results_are_named_by_no_family():
    rng = np.random.default_rng(11)
    A, B = rng.integers(-128, 128, (5, 40)).astype(np.int8), rng.integers(-128, 128, (40, 6)).astype(np.int8)
    C = exact(A, B)
    C[2, 3] += 1                                   # one element off by one, nothing else
    C[4, 0] -= 77
    assert identify(C, A, B, a_type="s8", b_type="s8") == []


def test_identify_is_bounded_on_a_big_input():
    rng = np.random.default_rng(2)
    A, B = rng.integers(-128, 128, (24, 4096)).astype(np.int8), rng.integers(-128, 128, (4096, 8)).astype(np.int8)
    C = (exact(A, B) + rng.integers(-3, 4, (24, 8))).astype(np.int64)     # junk: no family's screen settles it
    start = time.monotonic()
    names = identify(C, A, B, a_type="s8", b_type="s8", budget=1.0)
    assert isinstance(names, list) and time.monotonic() - start < 30
    start = time.monotonic()
    assert identify(C, A, B, a_type="s8", b_type="s8", budget=0.0) == []    # nothing searched after the deadline
    assert time.monotonic() - start < 30


def test_every_family_has_a_docstring_and_a_name():
    for family in variants.FAMILIES:
        assert family.description and family.name != "family"
