"""gemmlowp's requantizing less-than-8-bit GEMM (2015-08 to 2017-02; seed 000), bit for bit where it is
deterministic, and its accuracy contract where it is not.

At packing, each uint8 operand is requantized to `bits` bits: dst = (src * (2^bits - 1) + offset) // 255, the
offset coming from a rounding mode (Nearest: 127; ProbabilisticXorshift; ProbabilisticAddmod). Which offset an
element gets depends on the order packing visits it, so probabilistic modes are reproducible only for one fixed
packing configuration (`pack_order` emulates the scalar traversal); their contract is the statistical one of
gemmlowp's tests (`less_than_8bit_bounds`, `check_less_than_8bit_accuracy`). The kernel is exact; unpacking
rescales with RoundingMultiplyByConstantFraction.
Citations: gemmlowp @bc3491e (last commit with the feature) unless noted; docs/research/less-than-8-bit.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowp.conformance.contracts.fixedpoint import ints, narrow32, out32

ROUNDING_MODE_SIZE_THRESHOLD = 384      # public/bit_depth.h L62-109 (and kProbabilisticRoundingThreshold @62ddc7e)
MINIMUM_WIDTH_FOR_REQUANTIZATION = 100  # internal/common.h L195-197 (added in 5b7be1c)
NEAREST_OFFSET = 127
ROUNDING_MODES = ("exact", "nearest", "xorshift", "addmod")


# ---------------------------------------------------------------------------------------------------------------
# Requantization

def _bits(bits):
    if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 8:
        raise ValueError(f"bits={bits!r}: gemmlowp's BitDepth<kBits> needs 1 <= kBits <= 8 (public/bit_depth.h L25-29)")
    return int(bits)


def requantize(src, bits: int, rounding_offset) -> np.ndarray:
    """Requantize(): dst = (uint16(src) * (2^bits - 1) + rounding_offset) // 255 for bits < 8, src for bits = 8.
    rounding_offset in [0, 254] broadcasts against src (127 = Nearest; a generator's sequence otherwise).
    With 127 this is exact round-to-nearest (255 is odd: no ties). gemmlowp internal/pack.h @bc3491e L258-277."""
    bits = _bits(bits)
    s = ints(src, "src", 0, 255)
    if bits == 8:
        return s.astype(np.uint8)
    off = ints(rounding_offset, "rounding_offset", 0, 254)
    return ((s * ((1 << bits) - 1) + off) // 255).astype(np.uint8)


def div255_neon(y) -> np.ndarray:
    """The NEON packing path's division by 255: (y + 1 + (y >> 8)) >> 8 in uint16, exact for 0 <= y <= 65534.
    gemmlowp internal/pack_neon.h @bc3491e L115-156."""
    y = ints(y, "y", 0, 65534)
    return ((y + 1 + (y >> 8)) >> 8).astype(np.uint16)


# ---------------------------------------------------------------------------------------------------------------
# Rounding-offset generators (internal/pack.h @bc3491e L191-256; pack_neon.h L26-113)

def nearest_offsets(n: int) -> np.ndarray:
    """ScalarRoundingOffsetGenerator<Nearest>: always 127. pack.h L200-206."""
    return np.full(n, NEAREST_OFFSET, np.uint8)


def xorshift_offsets(n: int, *, state: int = 128) -> np.ndarray:
    """ScalarRoundingOffsetGenerator<ProbabilisticXorshift>: state x starts at 128; get() returns uint8(x - 1),
    then x ^= x << 7; x ^= x >> 5; x ^= x << 3 (Xorshift8(7,5,3), all in uint8). Period 255 over [0, 254].
    pack.h L208-229 (the 2015 generator, @62ddc7e, is the same with the '- 1' in Requantize)."""
    out = np.empty(n, np.uint8)
    x = int(state) & 0xFF
    for i in range(n):
        out[i] = (x - 1) & 0xFF
        x ^= (x << 7) & 0xFF
        x ^= x >> 5
        x ^= (x << 3) & 0xFF
    return out


def addmod_offsets(n: int, *, state: int = 1) -> np.ndarray:
    """ScalarRoundingOffsetGenerator<ProbabilisticAddmod>: x starts at 1; get() does x = uint8(x + 97 + (x >=
    158)) and returns the new x, i.e. x = (x + 97) % 255. pack.h L231-256."""
    out = np.empty(n, np.uint8)
    x = int(state) & 0xFF
    for i in range(n):
        x = (x + 97 + (x >= 158)) & 0xFF
        out[i] = x
    return out


def neon_xorshift_offsets(n_vectors: int) -> np.ndarray:
    """NEONRoundingOffsetGenerator<ProbabilisticXorshift>, one 16-lane vector per get() (rows of the result):
    lane i starts at the i-th state of Xorshift8(7,7,1) from 128 (lane 0 = 128); get() returns x - 1, then
    advances every lane by Xorshift8(7,5,3). pack_neon.h @bc3491e L44-73."""
    lanes, s = [], 128
    for _ in range(16):
        lanes.append(s)
        s ^= (s << 7) & 0xFF
        s ^= s >> 7
        s ^= (s << 1) & 0xFF
    x = np.array(lanes, np.int64)
    out = np.empty((n_vectors, 16), np.uint8)
    for i in range(n_vectors):
        out[i] = (x - 1) & 0xFF
        x ^= (x << 7) & 0xFF
        x ^= x >> 5
        x ^= (x << 3) & 0xFF
    return out


def neon_addmod_offsets(n_vectors: int) -> np.ndarray:
    """NEONRoundingOffsetGenerator<ProbabilisticAddmod>: lanes start at 128, then s += 97 + (s >= 158) (128, 225,
    67, 164, ...); get() first advances every lane by 16 steps, x += 22 + (x >= 233) (16*97 mod 255 = 22), then
    returns x. pack_neon.h @bc3491e L76-107."""
    lanes, s = [], 128
    for _ in range(16):
        lanes.append(s)
        s = (s + 97 + (s >= 158)) & 0xFF
    x = np.array(lanes, np.int64)
    out = np.empty((n_vectors, 16), np.uint8)
    for i in range(n_vectors):
        x = (x + 22 + (x >= 233)) & 0xFF
        out[i] = x
    return out


def offsets(mode: str, n: int) -> np.ndarray:
    """The first n offsets of the scalar generator of `mode` ('nearest', 'xorshift', 'addmod')."""
    if mode == "nearest":
        return nearest_offsets(n)
    if mode == "xorshift":
        return xorshift_offsets(n)
    if mode == "addmod":
        return addmod_offsets(n)
    raise ValueError(f"mode={mode!r}: expected 'nearest', 'xorshift' or 'addmod'")


# ---------------------------------------------------------------------------------------------------------------
# Which rounding mode, which bit depth

def choose_rounding_mode(depth: int, bits: int, *, design: str = "2017", large: str = "addmod") -> str:
    """The rounding mode a packed side gets. design='2017' (RoundingStrategy, bc3491e internal/pack.h L505-565 and
    public/bit_depth.h L62-109): 'exact' for 8 bits, else 'nearest' if depth < 384, else the large-size mode
    (DefaultRoundingStrategyForLessThan8Bit: 'addmod'; 'xorshift' is the other). design='2015' (ChooseRoundingMode,
    @62ddc7e internal/bit_depth_util.h, common.h L195): 'nearest' if 8 bits or depth < 384, else 'xorshift'
    (for 8 bits, Requantize returns src whatever the mode). depth is the GEMM depth: packing covers it whole."""
    bits = _bits(bits)
    if design == "2015":
        return "nearest" if bits == 8 or depth < ROUNDING_MODE_SIZE_THRESHOLD else "xorshift"
    if design != "2017":
        raise ValueError(f"design={design!r}: expected '2017' or '2015'")
    if large not in ("addmod", "xorshift", "nearest"):
        raise ValueError(f"large={large!r}")
    if bits == 8:
        return "exact"
    return "nearest" if depth < ROUNDING_MODE_SIZE_THRESHOLD else large


def is_requantization_worth_it(rows: int, cols: int) -> bool:
    """IsRequantizationWorthIt: 2*rows*cols >= (rows + cols) * 100. gemmlowp public/gemmlowp.h L28-33."""
    return 2 * rows * cols >= (rows + cols) * MINIMUM_WIDTH_FOR_REQUANTIZATION


def effective_bit_depths(rows: int, cols: int, lhs_bits: int, rhs_bits: int) -> tuple[int, int]:
    """The bit depths the public Gemm / EightBitIntGemm really use: a GEMM for which requantization is not worth
    it silently runs DefaultL8R8BitDepthParams (exact). SingleThreadGemm called directly never bypasses.
    gemmlowp public/gemmlowp.h L63-90 (docs/research/less-than-8-bit.md#settings)."""
    return (lhs_bits, rhs_bits) if is_requantization_worth_it(rows, cols) else (8, 8)


# ---------------------------------------------------------------------------------------------------------------
# Packing order: which offset each element gets

def pack_order(width: int, depth: int, *, cell_width: int, cells: int, cell_depth: int, l1_width: int,
               l1_depth: int, register_size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The order in which gemmlowp's scalar packing (PackSideBlockImpl::PackL2 of one L2 block) consumes
    rounding offsets, as (w, d) index arrays; -1 marks zero padding, which consumes an offset too (and packs 0).
    Loops: depth in l1_depth steps, width in l1_width steps (PackL2); width in kernel-width runs (PackL1); depth
    in 16-deep register blocks, the last one zero-padded (PackRun, MakeCompleteSrc); then per block:
    cell_start_depth, cell_start_width, w, d (Pack). A side's width is the LHS rows or the RHS columns.
    gemmlowp internal/pack.h @bc3491e L347-374, L386-480
    (docs/research/less-than-8-bit.md#requantize-and-the-offset-generators)."""
    kw = cell_width * cells
    if register_size % cell_depth:
        raise ValueError("cell_depth must divide the register size (16)")
    ws, ds = [], []
    cw = np.repeat(np.arange(cell_width), cell_depth)
    cd = np.tile(np.arange(cell_depth), cell_width)
    for d1 in range(0, depth, l1_depth):
        d1s = min(l1_depth, depth - d1)
        for w1 in range(0, width, l1_width):
            w1s = min(l1_width, width - w1)
            for w in range(0, w1s, kw):
                run_w = min(kw, w1s - w)
                for d in range(0, d1s, register_size):
                    block_d = min(register_size, d1s - d)
                    for csd in range(0, register_size, cell_depth):
                        for csw in range(0, kw, cell_width):
                            lw, ld = csw + cw, csd + cd
                            inside = (lw < run_w) & (ld < block_d)
                            ws.append(np.where(inside, w1 + w + lw, -1))
                            ds.append(np.where(inside, d1 + d + ld, -1))
    return np.concatenate(ws), np.concatenate(ds)


def pack_side_offsets(width: int, depth: int, mode: str, *, l2_width: int | None = None, **format_and_blocks):
    """The rounding offset each element of a (width x depth) side gets from the scalar generator of `mode`,
    restarting the generator at every L2 block of l2_width (PackSideBlockImpl owns it, one per PackLhs/PackRhs
    call; single_thread_gemm.h packs the full depth). format_and_blocks go to pack_order."""
    out = np.full((width, depth), -1, np.int64)
    step = l2_width or width
    for w2 in range(0, width, step):
        w2s = min(step, width - w2)
        w_idx, d_idx = pack_order(w2s, depth, **format_and_blocks)
        seq = offsets(mode, w_idx.size)
        keep = w_idx >= 0
        out[w2 + w_idx[keep], d_idx[keep]] = seq[keep]
    return out.astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# Unpacking

def rmbcf_constants(numerator: int, denominator: int) -> tuple[int, int, int]:
    """(int_quotient, remaining_numerator, scaled_remaining_numerator) of RoundingMultiplyByConstantFraction:
    q = (num + den/2) / den (uint32), rem = num - q*den, srn = trunc(rem * 2^31 / den).
    gemmlowp internal/unpack.h @bc3491e L58-88."""
    q = (numerator + denominator // 2) // denominator
    rem = numerator - q * denominator
    p = rem * (1 << 31)
    srn = abs(p) // denominator * (1 if p >= 0 else -1)      # C++ '/' truncates toward zero
    return q, rem, srn


def rounding_multiply_by_constant_fraction(x, numerator: int, denominator: int, *, ties: str = "away",
                                           overflow=None) -> np.ndarray:
    """RoundingMultiplyByConstantFraction<num, den>(x) = x*q + round(x*srn / 2^31), int32. The scalar (and SSE)
    path rounds the remainder term half away from zero (ties='away'); NEON's vqrdmulhq_n_s32 rounds it half up
    (ties='up'). x*q + rp is a plain int32 expression (overflow=). num == den returns x.
    gemmlowp internal/unpack.h @bc3491e L58-88; unpack_neon.h L27-49
    (docs/research/less-than-8-bit.md#unpack-roundingmultiplybyconstantfraction)."""
    x = ints(x, "x")
    if numerator == denominator:
        return out32(x)
    q, _, srn = rmbcf_constants(numerator, denominator)
    p = x * srn
    if ties == "away":
        nudge = np.where(p > 0, 1 << 30, -(1 << 30))
        v = p + nudge
        rp = np.where(v >= 0, v >> 31, -((-v) >> 31))               # trunc_div(v, 2^31)
    elif ties == "up":
        rp = (p + (1 << 30)) >> 31                                  # VQRDMULH (|srn| < 2^30: never saturates)
    else:
        raise ValueError(f"ties={ties!r}: expected 'away' (scalar/SSE) or 'up' (NEON)")
    xq = narrow32(x * q, overflow, "x * int_quotient overflows int32")
    return out32(narrow32(xq + rp, overflow, "x * q + remaining_product overflows int32"))


def unpack(raw_xx, lhs_sums, rhs_sums, lhs_offset, rhs_offset, depth: int, lhs_bits: int, rhs_bits: int, *,
           ties: str = "away", overflow=None) -> np.ndarray:
    """UnpackResultImplGeneric for requantized operands: term_xx = RMBCF<255*255, LhsMax*RhsMax>(raw_xx),
    term_x1 = RMBCF<255, LhsMax>(lhs_sums[r] * rhs_offset[c]), term_1x = RMBCF<255, RhsMax>(rhs_sums[c] *
    lhs_offset[r]), term_11 = lhs_offset[r] * rhs_offset[c] * depth, summed in int32. The sums are of the
    requantized values; the offsets stay on the 8-bit scale. gemmlowp internal/unpack.h @bc3491e L103-154."""
    raw_xx = ints(raw_xx, "raw_xx")
    lmax, rmax = (1 << _bits(lhs_bits)) - 1, (1 << _bits(rhs_bits)) - 1
    ls = ints(lhs_sums, "lhs_sums").reshape(-1, 1)
    rs = ints(rhs_sums, "rhs_sums").reshape(1, -1)
    lo = np.broadcast_to(ints(lhs_offset, "lhs_offset"), (ls.shape[0],)).reshape(-1, 1)
    ro = np.broadcast_to(ints(rhs_offset, "rhs_offset"), (rs.shape[1],)).reshape(1, -1)
    kw = {"ties": ties, "overflow": overflow}
    t_xx = rounding_multiply_by_constant_fraction(raw_xx, 255 * 255, lmax * rmax, **kw)
    t_x1 = rounding_multiply_by_constant_fraction(narrow32(ls * ro, overflow, "lhs_sums * rhs_offset"), 255, lmax, **kw)
    t_1x = rounding_multiply_by_constant_fraction(narrow32(rs * lo, overflow, "rhs_sums * lhs_offset"), 255, rmax, **kw)
    t_11 = narrow32(narrow32(lo * ro, overflow, "lhs_offset * rhs_offset") * depth, overflow, "... * depth")
    total = np.asarray(t_xx, np.int64) + np.asarray(t_x1, np.int64) + np.asarray(t_1x, np.int64) + t_11
    return out32(narrow32(total, overflow, "sum of the four terms overflows int32"))


def less_than_8bit_accumulator(lhs, rhs, lhs_offset, rhs_offset, lhs_bits: int, rhs_bits: int, lhs_rounding_offsets,
                               rhs_rounding_offsets, *, ties: str = "away", overflow=None) -> np.ndarray:
    """The int32 accumulator a requantizing gemmlowp GEMM hands its output pipeline: requantize lhs (rows x depth)
    and rhs (depth x cols) with the given per-element rounding offsets (127 for Nearest; pack_side_offsets for a
    packing configuration, transposed to the operand's shape for the RHS), exact kernel, then `unpack`."""
    lhs, rhs = ints(lhs, "lhs", 0, 255), ints(rhs, "rhs", 0, 255)
    lq = requantize(lhs, lhs_bits, lhs_rounding_offsets).astype(np.int64)
    rq = requantize(rhs, rhs_bits, rhs_rounding_offsets).astype(np.int64)
    raw_xx = lq @ rq                    # exact: < 2^15 per product, any realistic depth
    return unpack(raw_xx, lq.sum(axis=1), rq.sum(axis=0), lhs_offset, rhs_offset, lhs.shape[1], lhs_bits,
                  rhs_bits, ties=ties, overflow=overflow)


# ---------------------------------------------------------------------------------------------------------------
# The accuracy contract (test/test.cc @bc3491e)

@dataclass(frozen=True)
class ResultStats:
    count: int
    med_val: int
    mean_signed_diff: float
    med_signed_diff: int
    med_unsigned_diff: int
    max_unsigned_diff: int


@dataclass(frozen=True)
class ResultStatsBounds:
    max_unsigned_diff: int = 0
    med_unsigned_diff: int = 0
    med_signed_diff: int = 0
    mean_signed_diff: float = 0.0


def result_stats(actual, expected) -> ResultStats:
    """GetResultStats over uint8 outputs: signed diff int16(actual - expected); medians are element count/2 of the
    sorted values; mean_signed_diff = float(sum) / count, in float32. test/test.cc @bc3491e L274-312."""
    a, e = ints(actual, "actual", 0, 255).ravel(), ints(expected, "expected", 0, 255).ravel()
    if a.size != e.size or a.size == 0:
        raise ValueError("actual and expected need the same, non-zero number of entries")
    d = a - e
    mid = a.size // 2
    return ResultStats(count=int(a.size), med_val=int(np.sort(a)[mid]),
                       mean_signed_diff=float(np.float32(np.float32(d.sum()) / np.float32(a.size))),
                       med_signed_diff=int(np.sort(d)[mid]), med_unsigned_diff=int(np.sort(np.abs(d))[mid]),
                       max_unsigned_diff=int(np.abs(d).max()))


def less_than_8bit_bounds(rows: int, cols: int, med_val: int) -> ResultStatsBounds:
    """The bounds gemmlowp's test_gemm_impl applies whenever LhsBits < 8 or RhsBits < 8 (L7R5):
    adj = 1000 // (rows*cols); max |diff| <= max(med_val/2, adj); median |diff| <= max(med_val/8, adj);
    |median signed diff| <= max(2, adj); |mean signed diff| <= max(2, adj). Integer divisions as in C++.
    test/test.cc @bc3491e L425-444 (docs/research/less-than-8-bit.md#what-gemmlowps-tests-accept)."""
    adj = 1000 // (rows * cols)
    return ResultStatsBounds(max_unsigned_diff=max(med_val // 2, adj), med_unsigned_diff=max(med_val // 8, adj),
                             med_signed_diff=max(2, adj), mean_signed_diff=float(max(2, adj)))


def real_data_bounds(tolerance_median: int = 2, tolerance_max: int = 10) -> ResultStatsBounds:
    """TestWithRealData(A5B7, 2, 10): median |diff| <= 2, max |diff| <= 10, median signed diff 0, |mean signed
    diff| <= 0.2 (float32). test/test.cc @bc3491e L1150-1172, call at L1579."""
    return ResultStatsBounds(max_unsigned_diff=tolerance_max, med_unsigned_diff=tolerance_median,
                             med_signed_diff=0, mean_signed_diff=float(np.float32(0.2)))


EXACT_BOUNDS = ResultStatsBounds()   # the 8-bit contract: every statistic 0 (ResultStatsBounds defaults)


def check_result_stats_bounds(stats: ResultStats, bounds: ResultStatsBounds) -> bool:
    """CheckResultStatsBounds: max and median |diff|, |median signed diff|, |mean signed diff| within bounds.
    test/test.cc @bc3491e L327-333."""
    return (stats.max_unsigned_diff <= bounds.max_unsigned_diff and stats.med_unsigned_diff <= bounds.med_unsigned_diff
            and abs(stats.med_signed_diff) <= bounds.med_signed_diff
            and abs(stats.mean_signed_diff) <= bounds.mean_signed_diff)


def check_less_than_8bit_accuracy(actual, expected, *, lhs_bits: int = 7, rhs_bits: int = 5):
    """gemmlowp's verdict on a (rows x cols) uint8 result against the exact 8-bit reference: the L7R5 bounds when
    either side has fewer than 8 bits, exact equality otherwise. Returns (passed, stats, bounds)."""
    actual = np.asarray(actual)
    if actual.ndim != 2:
        raise ValueError("actual: expected a rows x cols matrix")
    stats = result_stats(actual, expected)
    if lhs_bits < 8 or rhs_bits < 8:
        bounds = less_than_8bit_bounds(actual.shape[0], actual.shape[1], stats.med_val)
    else:
        bounds = EXACT_BOUNDS
    return check_result_stats_bounds(stats, bounds), stats, bounds
