"""Conformance cases: shapes from each kernel's tiles (as XNNPACK's tester) and from the seeds' grids, values
from four classes, every case named for why it exists and reproducible from its id; the depth ladder derived from
the checked domain (the depths at which an int16 lane, a uint16 lane, a saturating int16 pair sum, an int16 column
sum and an int32 accumulator would overflow, the depths where common blockings switch, the vector-width edges),
with every element at one end of its range; the user's own shapes (`--shapes FILE`); and the hypothesis strategy
that searches for, and shrinks, counterexamples.

Case names (the fourth field of a case id; docs/verdicts.md#case-names lists them):
- tile edges, as XNNPACK's GEMM tests name them (lowp.kernels.cases.edge_name): `k_lt_kr`, `k_eq_kr`, `k_gt_kr`,
  `k_div_kr`, `k_lt_spill`, `k_eq_spill`, `k_gt_spill`, `k_gt_2spill`, led by `m_lt_mr`/`m_gt_mr` and
  `n_lt_nr`/`n_gt_nr` where m or n is not a full tile (`m_gt_mr_n_lt_nr_k_lt_kr`);
- the depth ladder: `depth_int16_wrap`, `depth_uint16_wrap`, `depth_pair_saturate`, `depth_colsum_int16_wrap`,
  `depth_rowsum_int16_wrap`, `depth_int32_wrap` at the depth where that accumulator overflows, with `_minus1` and
  `_plus1` a step either side; `k_block_256` .. `k_block_4096` and `k_vector_16` .. `k_vector_128` (also `_minus1`,
  `_plus1`) where blockings switch and vectors end; `int16_pair_index` (value classes PAIR_CLASSES) where two
  products can leave int16: which k a kernel pairs in an int16 lane shows in where the wraps fall;
- `grid`: the seeds' grid shapes; `shape_file`: a shape of the user's `--shapes` file;
- XNNPACK ukernels only (signature xnnpack-gemm or xnnpack-igemm), as XNNPACK's test generator names them
  (tools/generate-gemm-test.py @75db3c0), each with its ABI options (`abi_options`): `strided_a` (GEMM),
  `strided_cm` and their `_subtile` forms (m < mr or n < nr), `strided_cn` and `strided_cn_subtile` (in the
  not-claimed `outside` probe only: XNNPACK no longer promises a cn_stride beyond nr columns); IGEMM: `small_kernel`,
  `small_kernel_subtile`, `a_offset`, `zero_index_0` .. `zero_index_<mr-1>`; the alignment cases (`align`
  options: docs/alignment.md) `align_element` (every buffer at its element size from a 64-byte boundary),
  `align_64` (every buffer 64-byte aligned) and `align_drawn` (offsets drawn from the case's seed, each a multiple
  of its element size); and the parameters the tester pins
  or never draws (lowp.conformance.search.quantized.case_pins): `qmin`, `qmax` (`min`, `max` for a float output),
  `no_zero_point` (qu8), `zero_points_min`, `zero_points_max`, `scale_max`;
- a requantizing kernel's output-stage edges (conformance/search/stage_edges.py): `stage_int32`, `stage_magic_bias`,
  `stage_pre_shift`, `stage_int16`, `stage_zero_point_add_high`, `stage_zero_point_add_low`, `stage_8bit`,
  `stage_clamp`, those its stage has: parameters and biases solved so that the intermediate sits at its saturation
  or wrap edge, one step past it and one inside.
The value class (the sixth field) is one of VALUE_CLASSES, for the ladder's all-ends cases one of END_CLASSES (or
PAIR_CLASSES for its int16_pair_index cases):
`a_min_b_max` is every element of A at the low end of its range and every element of B at the high end."""
from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from lowp.kernels.cases import edge_cases, edge_name
from lowp.kernels.registry import XNNPACK_SIGNATURES

from lowp.conformance.search.names import (  # noqa: F401 - the case vocabulary, public here as before
    A_OFFSET, ALIGN_64, ALIGN_DRAWN, ALIGN_ELEMENT, ALIGN_NAMES, END_CLASSES, PAIR_CLASSES, SMALL_KERNEL,
    STRIDED_NAMES, SUBTILE, VALUE_CLASSES, ZERO_INDEX, abi_name, zero_row)
from lowp.conformance.search.quantized import pinned_names, quant_strategy

# Depths where common GEMM blockings switch (K blocks of 256 .. 4096) and where vectors of 16 .. 128 bytes end.
BLOCKING_KS = (256, 384, 512, 768, 1024, 4096)
VECTOR_KS = (16, 32, 64, 128)
# The deepest ladder case: past int32 overflow for u8 x s8 products (65794), cheap natively and in Unicorn at 1x1.
MAX_LADDER_K = 1 << 17
FULL_TILE_MACS = 1 << 21      # deeper ladder steps run at 1x1 only
DEEP_K = 8192                 # deeper ladder steps: only the two sign extremes, at the overflow depth itself
SEED_GRID = [(h, w, d) for h, w, d in ((72, 24, 128), (120, 48, 256), (240, 72, 384), (360, 96, 512))]
# The ladder's case names, by what overflows (overflow_depths' keys); where two overflow at one depth, the case
# carries the first name of this order.
LADDER_NAMES = {"int16 pair sum": "depth_pair_saturate", "int16 lane": "depth_int16_wrap",
                "uint16 lane": "depth_uint16_wrap", "int16 column sums of B": "depth_colsum_int16_wrap",
                "int16 row sums of A": "depth_rowsum_int16_wrap", "int32 accumulator": "depth_int32_wrap"}
GRID_NAME, SHAPE_FILE_NAME = "grid", "shape_file"
# int16_pair_index depths: a 16-k block that is whole only if kc is rounded up to 8 (9) or to 4 (13), and two
# whole blocks and one k more (33)
PAIR_NAME, PAIR_KS = "int16_pair_index", (9, 13, 33)


@dataclass(frozen=True)
class Case:
    kernel: str
    check: str            # 'model' or a contract name
    domain: str           # 'claimed' or 'full'
    name: str             # why the case exists: 'k_gt_spill', 'depth_int16_wrap', 'grid', ... (module docstring)
    m: int
    n: int
    k: int
    values: str           # one of VALUE_CLASSES or END_CLASSES
    seed: int

    @property
    def id(self) -> str:
        return (f"{self.kernel}:{self.check}:{self.domain}:{self.name}:{self.m}x{self.n}x{self.k}:{self.values}:"
                f"{self.seed}")

    @classmethod
    def from_id(cls, text: str) -> "Case":
        """The case an id names; the operands follow from it (and the registered kernel) alone."""
        try:
            kernel, check, domain, name, shape, values, seed = text.split(":")
            m, n, k = (int(x) for x in shape.split("x"))
            if min(m, n, k) < 1 or not name:
                raise ValueError
            return cls(kernel, check, domain, name, m, n, k, values, int(seed))
        except ValueError:
            raise ValueError(f"not a case id: {text!r} (expected kernel:check:domain:name:MxNxK:values:seed, "
                             f"e.g. my_kernel:exact:claimed:k_gt_kr:4x8x9:uniform:12)") from None

    def matches(self, patterns) -> bool:
        """Whether a `--case` glob matches the case's name or its whole id."""
        return any(fnmatchcase(self.name, p) or fnmatchcase(self.id, p) for p in patterns)

    def asdict(self) -> dict:
        return asdict(self)


def ranges(kernel, domain: str) -> tuple[tuple[int, int], tuple[int, int]]:
    if domain == "claimed":
        return kernel.domain.a, kernel.domain.b
    return kernel.operand_ranges


def _values(rng, cls: str, lo_hi: tuple[int, int], shape, dtype, role: str):
    lo, hi = lo_hi
    if cls == "uniform":
        x = rng.integers(lo, hi, size=shape, endpoint=True)
    elif cls == "extremes":
        x = rng.integers(lo, hi, size=shape, endpoint=True)
        pick = rng.random(shape) < 0.5
        x[pick] = rng.choice([lo, hi, 0 if lo <= 0 <= hi else lo], size=int(pick.sum()))
    elif cls == "realistic":
        # Quantized normal values: activations skewed (post-ReLU, zero point at lo), weights centred.
        span = hi - lo
        if role == "A":
            x = lo + np.abs(rng.normal(0, span / 6, size=shape))
        else:
            x = (lo + hi) / 2 + rng.normal(0, span / 8, size=shape)
        x = np.clip(np.rint(x), lo, hi)
    elif cls in END_CLASSES:
        x = np.full(shape, lo if cls.split("_")[1 if role == "A" else 3] == "min" else hi)
    elif cls in PAIR_CLASSES:
        x = _pair_pattern(cls, lo_hi, shape, role)
    elif cls == "adversarial":
        # Drive every pair sum and accumulator to its limit: A at its largest magnitude, B at the matching sign.
        big_a = hi if abs(hi) >= abs(lo) else lo
        x = np.full(shape, big_a) if role == "A" else np.where(rng.random(shape) < 0.85, hi, lo)
    else:
        known = VALUE_CLASSES + END_CLASSES + PAIR_CLASSES
        raise ValueError(f"unknown value class {cls!r}; known: {', '.join(known)}")
    return np.asarray(x, dtype=np.int64).astype(dtype)


def _pair_pattern(cls: str, lo_hi: tuple[int, int], shape, role: str) -> np.ndarray:
    """A PAIR_CLASSES operand: the end of the range of the larger magnitude (-128 of int8, 255 of uint8: the products
    furthest from zero) on every k with k mod 2d < d, zero elsewhere (k: A's columns, B's rows)."""
    lo, hi = lo_hi
    d = int(cls.split("_")[1])
    end = lo if abs(lo) >= abs(hi) else hi
    axis = 1 if role == "A" else 0
    on = np.arange(shape[axis]) % (2 * d) < d
    return np.where(np.expand_dims(on, 1 - axis), end, 0) * np.ones(shape, np.int64)


def operands(case: Case, kernel) -> tuple[np.ndarray, np.ndarray]:
    """The case's A and B, regenerated from its id."""
    rng = np.random.default_rng(case.seed)
    ra, rb = ranges(kernel, case.domain)
    return (_values(rng, case.values, ra, (case.m, case.k), kernel.a_dtype, "A"),
            _values(rng, case.values, rb, (case.k, case.n), kernel.b_dtype, "B"))


def overflow_depths(a: tuple[int, int], b: tuple[int, int]) -> dict[str, int]:
    """The first depth at which a sum of products (or of one operand's values) drawn from these ranges, every term
    at its extreme, leaves each accumulator type a kernel might keep it in (lowp bounds' arithmetic:
    conformance/search/bounds.py). A kernel exact on the domain survives them all; one with a narrower accumulator than it
    admits fails at the first it cannot hold."""
    from lowp.conformance.search.bounds import capacity, product_range
    p = product_range(a, b)
    out = {"int16 lane": capacity(p, "s16") + 1, "int32 accumulator": capacity(p, "s32") + 1}
    if p[0] >= 0:
        out["uint16 lane"] = capacity(p, "u16") + 1
    if capacity(p, "s16") < 2:
        out["int16 pair sum"] = 2
    for name, r in (("int16 column sums of B", b), ("int16 row sums of A", a)):
        if r != (0, 0):
            out[name] = capacity(r, "s16") + 1
    return {what: k for what, k in out.items() if 1 <= k <= MAX_LADDER_K}


def ladder_ks(kernel, domain: str) -> list[int]:
    """Every depth the ladder visits: each overflow depth and its neighbours, the blocking switches +-1, the
    vector-width edges +-1, whatever tile the kernel declares."""
    ks = set()
    for k in overflow_depths(*ranges(kernel, domain)).values():
        ks |= {k - 1, k, k + 1}
    for k in BLOCKING_KS + VECTOR_KS:
        ks |= {k - 1, k, k + 1}
    return sorted(k for k in ks if 1 <= k <= MAX_LADDER_K)


def _ladder(kernel, domain: str) -> list[tuple[str, tuple[int, int, int], str]]:
    """(name, shape, value class) of the ladder: all-ends operands at each overflow depth and its neighbours (1x1,
    and a full tile at the depth itself), at the blocking and vector-width edges uniform values on a full tile and
    extreme values at 1x1, and 2*mr - 1 by 2*nr - 1 remainders."""
    mr, nr = kernel.tile.mr, kernel.tile.nr
    a, b = ranges(kernel, domain)
    out = []
    for k, name in _overflow_names(overflow_depths(a, b)):
        if k > DEEP_K:    # past the deep limit: only the two sign extremes, at 1x1 and the depth itself
            out += [(name, (1, 1, k), cls) for cls in _sign_extremes(a, b)]
            continue
        for kk, step in ((k - 1, "_minus1"), (k, ""), (k + 1, "_plus1")):
            out += [(name + step, (1, 1, kk), cls) for cls in END_CLASSES if kk >= 1]
        if mr * nr * k <= FULL_TILE_MACS:
            out += [(name, (mr, nr, k), cls) for cls in END_CLASSES]
    if "int16 pair sum" in overflow_depths(a, b) and a[0] <= 0 <= a[1] and b[0] <= 0 <= b[1]:
        # two products can leave int16: which k a kernel pairs shows in where the wraps fall (PAIR_CLASSES)
        shapes = [(1, 1, k) for k in PAIR_KS] + [(mr, nr, PAIR_KS[-1])]
        out += [(PAIR_NAME, shape, cls) for shape in shapes for cls in PAIR_CLASSES]
    for prefix, bases in (("k_block_", BLOCKING_KS), ("k_vector_", VECTOR_KS)):
        for base in bases:
            for k, step in ((base - 1, "_minus1"), (base, ""), (base + 1, "_plus1")):
                out += [(f"{prefix}{base}{step}", (mr, nr, k), "uniform"),
                        (f"{prefix}{base}{step}", (1, 1, k), "extremes")]
    for k in (1, 2 * kernel.tile.kr - 1, 17):
        shape = (2 * mr - 1, 2 * nr - 1, k)
        out.append((edge_name(kernel, *shape), shape, "uniform"))
    return out


def _overflow_names(depths: dict[str, int]) -> list[tuple[int, str]]:
    """(depth, case name) of each distinct overflow depth, shallowest first, named by LADDER_NAMES' first
    overflow there."""
    names = {}
    for what in sorted(depths, key=list(LADDER_NAMES).index):
        names.setdefault(depths[what], LADDER_NAMES[what])
    return sorted(names.items())


def _sign_extremes(a, b) -> list[str]:
    """The END_CLASSES whose products are the largest positive and the most negative."""
    def end(r, which):
        return r[0] if which == "min" else r[1]
    prods = {cls: end(a, cls.split("_")[1]) * end(b, cls.split("_")[3]) for cls in END_CLASSES}
    return sorted({max(prods, key=prods.get), min(prods, key=prods.get)})


def ends(lo: int, hi: int) -> list[int]:
    """The ends of a range the search weights in: 0 (where it is in range), lo, hi; hypothesis shrinks towards the
    first."""
    return ([0] if lo <= 0 <= hi else []) + [lo, hi]


def coded_elements(codes: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The search's elements of [lo, hi] from codes in [0, 2 * (hi - lo + 1)): the lower half is the range's ends
    (ends(), in turn), the upper half every value of the range, nearest the shrink target first (0, 1, -1, 2, -2,
    ..., then the longer side's rest outwards; the target is 0, or the end nearest it). Half the elements are thus
    an end, half uniform, as one_of(sampled_from(ends), integers(lo, hi)) draws them, from one choice, and a
    smaller code is a simpler value: hypothesis's shrinking of the code shrinks the element."""
    codes = np.asarray(codes, np.int64)
    size = hi - lo + 1
    e = np.array(ends(lo, hi), np.int64)
    target = 0 if lo <= 0 <= hi else (lo if lo > 0 else hi)
    short = min(hi - target, target - lo)
    j = codes - size
    m = (j + 1) // 2
    paired = np.where(j % 2 == 1, target + m, target - m)
    rest = j - short
    outward = target + rest if hi - target > target - lo else target - rest
    value = np.where(j <= 2 * short, paired, outward)
    return np.where(codes < size, e[codes % len(e)], value)


def _filled(dtype, shape, lo: int, hi: int, fill: int, spots: list[int]) -> np.ndarray:
    """An array of `shape` from the search's choices: every element the fill code's, then each spot (a position
    and an element code in one integer: position * codes + code) written over it in turn."""
    codes = 2 * (hi - lo + 1)
    x = np.full(int(np.prod(shape)), fill, np.int64)
    if spots:
        at, code = np.divmod(np.asarray(spots, np.int64), codes)
        x[at] = code
    return coded_elements(x, lo, hi).astype(dtype).reshape(shape)


# ---- XNNPACK's own cases: the ABI's strides and indirection buffer, and the parameters its tester pins -----------
# What tools/generate-gemm-test.py @75db3c0 generates beside the tile edges, with lowp's shapes: a few where
# XNNPACK loops (every m < mr and n < nr, every k of a range), so each name costs tens of calls, not hundreds. A
# case's ABI options follow from its name, shape and kernel alone (`abi_options`): its id reproduces them.
SMALL_KERNEL_TAPS = 3           # the tester's ks(3) of small_kernel, a_offset and zero
XNNPACK_VALUES = "uniform"      # values spread over the range (a read of poison shows); one class: the options matter


def next_prime(n: int) -> int:
    """The smallest prime above n: XNNPACK's NextPrime (test/next_prime.cc @75db3c0), which the tester's strides and
    a_offset come from, so a stride is no multiple of a vector, a tile or a cache line."""
    p = n + 1
    while p < 2 or any(p % d == 0 for d in range(2, int(p ** 0.5) + 1)):
        p += 1
    return p


def k_block(kernel) -> int:
    """XNNPACK's k-block for lowp's purposes: kr * sr, the depth one packed block of a column holds."""
    return kernel.tile.kr * int((kernel.xnnpack or {}).get("sr", 1))


def _subtiles(kernel) -> list[tuple[int, int]]:
    """(m, n) within the tile but not all of it: m in 1, mr - 1, mr and n in 1, nr - 1, nr (XNNPACK's `_subtile`
    tests loop over every m <= mr and n <= nr; these are its ends)."""
    mr, nr = kernel.tile.mr, kernel.tile.nr
    ms, ns = sorted({1, max(1, mr - 1), mr}), sorted({1, max(1, nr - 1), nr})
    return [(m, n) for m in ms for n in ns if (m, n) != (mr, nr)]


def _abi_shapes(kernel, domain: str) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, shape) of the ABI cases of an XNNPACK ukernel: strides (an IGEMM takes no a_stride: its rows come
    through the indirection buffer) and, for an IGEMM, taps, a_offset and the zero buffer. strided_cn only in the
    not-claimed `outside` probe: XNNPACK stopped testing cn_stride (commit fa9add0cfd, 2024-12-04, "the first step
    towards removing this parameter entirely") and its operators pass nr * sizeof(C) only, so kernels written
    since may ignore it (the amd64 assembly ones at 75db3c0 never load it): a cn_stride beyond nr columns is
    outside the ABI's documented domain, where a failure shows a limit and fails nothing."""
    mr, nr, kb = kernel.tile.mr, kernel.tile.nr, k_block(kernel)
    igemm = kernel.signature == "xnnpack-igemm"
    tails = [(m, n, 2 * kb + 1) for m, n in _subtiles(kernel)]
    out = []
    for name in STRIDED_NAMES:
        if (igemm and name == "strided_a") or (name == "strided_cn" and domain != "outside"):
            continue
        if name == "strided_cn":        # cn only places a second block of nr columns: n > nr
            main, sub = [(mr, 2 * nr, kb), (mr, 2 * nr + 1, 2 * kb + 1)], [(m, n + nr, k) for m, n, k in tails]
        else:
            main, sub = [(mr, nr, kb), (mr, nr, 2 * kb + 1), (mr, 2 * nr + 1, 3 * kb + 1)], tails
        out += [(name, s) for s in main] + [(name + SUBTILE, s) for s in sub]
    if igemm:
        taps = SMALL_KERNEL_TAPS
        depths = [taps * kc for kc in sorted({1, kb, 2 * kb + 1})]       # kc per tap, as the tester's loop_k
        out += [(SMALL_KERNEL, (mr, nr, k)) for k in depths] + [(SMALL_KERNEL, (mr, 2 * nr + 1, taps * (kb + 1)))]
        out += [(SMALL_KERNEL + SUBTILE, (m, n, taps * (2 * kb + 1))) for m, n in _subtiles(kernel)]
        out += [(A_OFFSET, (mr, nr, k)) for k in depths]
        out += [(f"{ZERO_INDEX}{i}", (mr, nr, k)) for i in range(mr) for k in depths]
    return out


def _param_shapes(kernel, domain: str) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, shape) of the cases whose name fixes quantization parameters (quantized.case_pins): a full tile at
    the k-block, as the tester's qmin/qmax, and a tile and a half with a k remainder. Not for the `outside`
    probe, which draws its own parameters past the domain's edge."""
    if domain == "outside" or not kernel.quantized:
        return []
    mr, nr, kb = kernel.tile.mr, kernel.tile.nr, k_block(kernel)
    return [(name, s) for name in pinned_names(kernel) for s in ((mr, nr, kb), (2 * mr + 1, 2 * nr + 1, 2 * kb + 1))]


def _align_shapes(kernel, domain: str) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, shape) of the alignment cases: each at a full tile with a k remainder (A's rows then start at every
    offset a caller's rows can have) and at a tile and a half, so one kernel costs five calls' worth, not every
    case times every alignment (docs/alignment.md says why that is enough). Not for the `outside` probe, which is
    about parameters past the domain's edge."""
    if domain == "outside":
        return []
    mr, nr, kb = kernel.tile.mr, kernel.tile.nr, k_block(kernel)
    taps = SMALL_KERNEL_TAPS if kernel.signature == "xnnpack-igemm" else 1
    tile, wide = (mr, nr, taps * (2 * kb + 1)), (mr + 1, 2 * nr + 1, taps * (kb + 1))
    return [(ALIGN_ELEMENT, tile), (ALIGN_ELEMENT, wide), (ALIGN_64, tile), (ALIGN_DRAWN, tile), (ALIGN_DRAWN, wide)]


def xnnpack_cases(kernel, domain: str) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, shape) of the cases an XNNPACK ukernel gets beside the tile edges and the ladder; none for other
    kernels (lowp's driver ABI has no strides, taps or offsets)."""
    if kernel.signature not in XNNPACK_SIGNATURES:
        return []
    # the alignment cases last: the cases before them keep the seeds (their place here) they always had
    return _abi_shapes(kernel, domain) + _param_shapes(kernel, domain) + _align_shapes(kernel, domain)


def alignment_of(name: str, kernel, seed: int | None) -> dict[str, int] | None:
    """The `align` option ({buffer: offset from a 64-byte boundary}) of an alignment case, from its name, its
    kernel's ABI (lowp.kernels.abi.caller_alignment: each buffer's offsets are the multiples of its element size a
    caller may give) and, for `align_drawn`, its seed; None for another name, or a drawn case without its seed.
    A buffer the ABI gives 64 bytes or more (the packed weights on x86-64 and Hexagon, mostly) is left where the
    executor puts it (its end at the guard page: its length is a multiple of its alignment): an offset from a
    64-byte boundary cannot say 128."""
    from lowp.kernels.abi import caller_alignment
    from lowp.emulator.placement import ALIGNMENT
    units = {buffer: unit for buffer, unit in caller_alignment(kernel).items() if unit < ALIGNMENT}
    if name == ALIGN_ELEMENT:
        return dict(units)
    if name == ALIGN_64:
        return {buffer: 0 for buffer in units}
    if name == ALIGN_DRAWN and seed is not None:
        rng = np.random.default_rng([int(seed) & (2 ** 63 - 1), 0xA11C])
        return {buffer: unit * int(rng.integers(0, ALIGNMENT // unit)) for buffer, unit in units.items()}
    return None


STAGE_EDGE_VALUES = "uniform"


def stage_edge_cases(kernel, domain: str) -> list[tuple[str, tuple[int, int, int]]]:
    """(name, shape) of a requantizing kernel's output-stage edge cases (search/stage_edges.py): one row (each
    column's bias puts its x at an edge), at least EDGE_COLUMNS columns, one k-block deep; two calls each
    intermediate at most, a handful a stage."""
    from lowp.conformance.search.stage_edges import EDGE_COLUMNS, edge_names
    shape = (1, max(kernel.tile.nr, EDGE_COLUMNS), k_block(kernel))
    return [(name, shape) for name in edge_names(kernel, domain)]


def with_zero_row(case: Case, A: np.ndarray, zero_point) -> np.ndarray:
    """A with a `zero_index_<i>` case's row i at the input zero point, so that every tap of it is padding and the
    indirection buffer points it at the zero buffer (lowp.kernels.xnnpack.Indirection, zero='auto'): the GEMM is
    the same whether the kernel reads the zero buffer or A. Other cases' A unchanged."""
    row = zero_row(case.name)
    if row is None or row >= A.shape[0]:
        return A
    A = A.copy()
    A[row] = np.asarray(zero_point).reshape(-1)[0]
    return A


def abi_options(case: Case, kernel) -> dict:
    """The ABI options a case passes to the executor ({"strides": {...}, "igemm": {...}}, lowp.kernels.xnnpack's
    Strides and Indirection), from its name, shape and kernel alone; {} for a kernel that is no XNNPACK ukernel.
    ValueError for an id whose depth cannot be split into its taps."""
    options = options_at(case.name, case.m, case.n, case.k, kernel, seed=case.seed)
    if options is None:
        raise ValueError(f"case {case.id}: K={case.k} is not {SMALL_KERNEL_TAPS} taps of equal depth, as a "
                         f"{case.name} case needs")
    return options


def options_at(name: str, m: int, n: int, k: int, kernel, seed: int | None = None) -> dict | None:
    """The ABI options of a case named `name` at the shape m x n x k: what `abi_options` gives, and what a shrunk
    case keeps (the same strides, taps and a_offset, computed for the smaller shape as the name says, so shrinking
    never drops the option that made a case fail); None where the shape cannot carry them (a depth that is not
    3 taps). Sizes in bytes, as XNNPACK passes them (its tester's strides are in elements):
    - strided_a: a_stride = NextPrime(K + 1) elements of A (the tester's NextPrime(k_block + 1) at K = k_block);
    - strided_cm: cm_stride = NextPrime(max(N, nr) + 1) elements of C (the tester's NextPrime(nr + 1) at N <= nr);
    - strided_cn: cn_stride = NextPrime(nr + 1) elements of C (older generators' strided_cn, removed in fa9add0cfd;
      this snapshot passes nr * sizeof(C) always);
    - an IGEMM: ks = 3 taps for small_kernel, a_offset and zero_index_<i>, and a_offset = NextPrime(mr * k_block *
      3 + 1) elements for a_offset and zero_index_<i> (the tester's), 0 for every other case (the tester's
      default), so a kernel that mishandles a_offset fails the cases named for it. The search keeps the executor's
      default a_offset (64);
    - align_element, align_64, align_drawn: the buffers' alignment (`alignment_of`; `seed`: the case's, which
      align_drawn's offsets are drawn from: without it, None)."""
    if kernel.signature not in XNNPACK_SIGNATURES:
        return {}
    a_item, c_item, nr = np.dtype(kernel.a_dtype).itemsize, np.dtype(kernel.c_dtype).itemsize, kernel.tile.nr
    base = name.removesuffix(SUBTILE)
    strides = {"strided_a": {"a": next_prime(k + 1) * a_item},
               "strided_cm": {"cm": next_prime(max(n, nr) + 1) * c_item},
               "strided_cn": {"cn": next_prime(nr + 1) * c_item}}.get(base)
    out = {"strides": strides} if strides else {}
    if base in ALIGN_NAMES:
        align = alignment_of(base, kernel, seed)
        if align is None:
            return None
        out["align"] = align
    if kernel.signature == "xnnpack-igemm":
        taps = _taps(base, k, kernel)
        if taps is None:
            return None
        out["igemm"] = taps
    return out


def _taps(base: str, k: int, kernel) -> dict | None:
    """An IGEMM case's igemm options (lowp.kernels.xnnpack.Indirection.of), by its name; None: K is not 3 taps."""
    offset = next_prime(kernel.tile.mr * k_block(kernel) * SMALL_KERNEL_TAPS + 1) * np.dtype(kernel.a_dtype).itemsize
    if base == SMALL_KERNEL:
        taps = {"ks": SMALL_KERNEL_TAPS, "a_offset": 0}
    elif base == A_OFFSET:
        taps = {"ks": SMALL_KERNEL_TAPS, "a_offset": offset}
    elif zero_row(base) is not None:
        taps = {"ks": SMALL_KERNEL_TAPS, "a_offset": offset, "zero": "auto"}
    else:
        return {"a_offset": 0}          # the taps the executor chooses (the largest of 3, 2, 1 dividing K)
    return taps if k % SMALL_KERNEL_TAPS == 0 else None


def cases_for(kernel, check: str, domain: str, *, grid: bool = True, seed: int = 0, shapes=(),
              only=(), rotate: bool = False) -> list[Case]:
    """The generated cases of one check: the tile edges (and the seed grid's shapes, with `grid`) in every value
    class, the depth ladder, the user's `shapes` ((m, n, k) of `--shapes`) in every value class, and an XNNPACK
    ukernel's strides, taps and pinned parameters (`xnnpack_cases`); `only`: the
    `--case` globs, of which one must match a case's name or id for it to be kept; rotate: each tile edge (and
    grid shape) in one value class, the next shape in the next (`probe_rotation`: the quick profile's not-claimed
    probes), the case the full set has there. Every case's seed follows from `seed` and its place here, and its id
    carries it: a case replays from its id alone."""
    named = edge_cases(kernel) + ([(GRID_NAME, s) for s in SEED_GRID[:2]] if grid else [])
    out = []
    for i, (name, (m, n, k)) in enumerate(named):
        for j, values in enumerate(VALUE_CLASSES):
            if not rotate or j == i % len(VALUE_CLASSES):
                out.append(Case(kernel.name, check, domain, name, m, n, k, values, seed * 100003 + i * 7 + j))
    for i, (name, (m, n, k), values) in enumerate(_ladder(kernel, domain)):
        out.append(Case(kernel.name, check, domain, name, m, n, k, values, seed * 100003 + 50000 + i))
    for i, (m, n, k) in enumerate(shapes):
        for j, values in enumerate(VALUE_CLASSES):
            out.append(Case(kernel.name, check, domain, SHAPE_FILE_NAME, m, n, k, values,
                            seed * 100003 + 70000 + i * 7 + j))
    for i, (name, (m, n, k)) in enumerate(xnnpack_cases(kernel, domain)):
        out.append(Case(kernel.name, check, domain, name, m, n, k, XNNPACK_VALUES, seed * 100003 + 80000 + i))
    for i, (name, (m, n, k)) in enumerate(stage_edge_cases(kernel, domain)):
        out.append(Case(kernel.name, check, domain, name, m, n, k, STAGE_EDGE_VALUES, seed * 100003 + 90000 + i))
    return [c for c in out if c.matches(only)] if only else out


SHAPE_LINE = re.compile(r"\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)\s*", re.IGNORECASE)


def read_shapes(path) -> list[tuple[int, int, int]]:
    """The (m, n, k) of a `--shapes` file: one MxNxK a line (`64x128x4096`), blank lines and `#` comments allowed;
    a bad line is a ValueError naming the file and the line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ValueError(f"--shapes {path}: cannot read it ({e.strerror or e})") from None
    out = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0]
        if not text.strip():
            continue
        match = SHAPE_LINE.fullmatch(text)
        shape = tuple(int(x) for x in match.groups()) if match else ()
        if not shape or min(shape) < 1:
            raise ValueError(f"{path}:{number}: {line.strip()!r} is not a shape: expected MxNxK with M, N, K >= 1 "
                             f"(e.g. 64x128x4096)")
        if shape not in out:
            out.append(shape)
    return out


def case_names(cases) -> list[str]:
    """The distinct names of `cases`, in order of first appearance."""
    return list(dict.fromkeys(c.name for c in cases))


def problems(kernel, domain: str, max_m: int | None = None, max_n: int | None = None, max_k: int | None = None):
    """Hypothesis strategy of (A, B) for the search: small shapes around the tiles, elements from the domain
    with its ends weighted in. Hypothesis shrinks shapes and elements towards the smallest and towards zero,
    so a counterexample comes out with the fewest rows, columns, depth and nonzero elements."""
    (alo, ahi), (blo, bhi) = ranges(kernel, domain)
    max_m = max_m or 2 * kernel.tile.mr + 1
    max_n = max_n or 2 * kernel.tile.nr + 1
    max_k = max_k or max(4 * kernel.tile.kr + 3, kernel.tile.spill + 3 if kernel.tile.spill else 0, 40)
    # The search reaches the ladder's depths too (small shapes there: a deep case costs m * n * k).
    deep = [k for k in ladder_ks(kernel, domain) if max_k < k <= DEEP_K]

    @functools.lru_cache(maxsize=None)      # one strategy a shape: building them per example is hypothesis's cost
    def array(dtype, shape, lo, hi, sparse):
        # A fill and a few spots over it, as hypothesis.extra.numpy.arrays draws an array (sparse over a fill), at
        # a fraction of its choices: a spot's position and element are one integer, an element is one code
        # (coded_elements). Hypothesis's engine costs some 35 us a choice, which was most of a search's time. A
        # list averages 5 spots where arrays averages max(10, sqrt(size)): sparser arrays (docs/ci.md); dense
        # random operands are the generated cases' value classes.
        # Deep operands: the fill one of the ends and at most 8 spots, as an adversary that drives every product
        # to its extreme would choose them.
        size, codes = int(np.prod(shape)), 2 * (hi - lo + 1)
        fill = st.integers(0, len(ends(lo, hi)) - 1) if sparse else st.integers(0, codes - 1)
        spots = st.lists(st.integers(0, size * codes - 1), max_size=8 if sparse else size)
        return st.tuples(fill, spots).map(lambda fs: _filled(dtype, shape, lo, hi, *fs))

    quick, which = st.integers(0, 3), st.integers(0, 2 ** 32 - 1)
    small, deep_ks = st.integers(1, 2), st.sampled_from(deep or [1])
    ms, ns, ks = st.integers(1, max_m), st.integers(1, max_n), st.integers(1, max_k)
    params = None
    if kernel.quantized and domain != "outside":
        params = quant_strategy(kernel, domain)

    @st.composite
    def build(draw):
        if deep and draw(quick) == 0:
            m, n, k = draw(small), draw(small), draw(deep_ks)
        else:
            m, n, k = draw(ms), draw(ns), draw(ks)
        sparse = m * n * k > 4096
        A = draw(array(np.dtype(kernel.a_dtype), (m, k), alo, ahi, sparse))
        B = draw(array(np.dtype(kernel.b_dtype), (k, n), blo, bhi, sparse))
        if not kernel.quantized:
            return A, B
        if domain == "outside":     # beyond the documented domain: drawn by the contract, from a seed
            from lowp.conformance.search.quantized import draw_params
            return A, B, draw_params(kernel, A, B, draw(which), "typical", domain)
        return A, B, params(draw, m, n)
    return build()
