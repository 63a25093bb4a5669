"""The bit-vector backend of the instruction models (lowp.isa_models.symbolic.bitvec), against the numpy one.

Every registered instruction runs on SymArray lanes: once on constants (each lane a known value) and once on free
z3 variables whose result terms are then evaluated at the same registers; both must give numpy's dtype, shape and
lanes, and every lane's value must lie in the interval the backend proved for it. A new model is covered by
registering it. Models the backend does not cover are listed in NOT_COVERED with the reason (a listed model that
works, or an unlisted one that fails, fails the test). Then a few proofs with z3 on free lanes: where saturation
and wrap-around can and cannot happen.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import z3

from lowp.isa_models import arm, fixedpoint, float32, instructions, requant, x86
from lowp.isa_models.symbolic.bitvec import SymArray, SymBool, SymInt
from lowp.isa_models.lanes import S8, S16, S32, U8
from lowp.isa_models.verify.proof import extremes, random_batch
from lowp.isa_models.registry import Intrinsic

# (arch, mnemonic, extension) -> why the bit-vector backend does not run it. Empty: every registered instruction
# model runs on both backends. (The numpy-only models are not registered instructions: see test_numpy_only.)
NOT_COVERED: dict[tuple[str, str, str], str] = {}

SVE_VL, RVV_VLEN = 256, 128          # the scalable models at one vector length: enough lanes, few terms


def _key(inst):
    return (inst.arch, inst.mnemonic, inst.extension)


# The WebAssembly, 32-bit Arm and Hexagon models are numpy only: lowp prove runs x86-64 and AArch64 code, so no
# symbolic executor hands them bit-vector lanes (and the wasm floats and implementation-defined relaxed dots have no
# register draw here). test_wasm_models_refuse_symbolic_lanes checks the wasm ones say so.
NUMPY_ONLY_ARCHES = ("wasm32", "arm", "hexagon")
SYMBOLIC = [i for i in instructions() if i.arch not in NUMPY_ONLY_ARCHES]


def _fixed(intr):
    """The intrinsic at one register width (SVE at SVE_VL, RVV at RVV_VLEN)."""
    if getattr(intr, "vlen", 0) is None:
        return intr.at(RVV_VLEN)
    return intr.at_vl(SVE_VL) if intr.scalable else intr


def _one_param(intr, p):
    return Intrinsic(intr.name, intr.instruction, intr.width, (), "", (p,), p, None)


def _registers(intr, rng):
    """Two argument lists: one random register (extremes weighted in, proof.random_batch) and one of extremes."""
    rows = [[], []]
    for p in intr.params:
        if p.kind == "scalar":
            info = np.iinfo(p.dtype)
            for row, v in zip(rows, (rng.integers(int(info.min), int(info.max), endpoint=True, dtype=p.dtype),
                                     rng.choice(np.array(extremes(p.dtype), dtype=p.dtype)))):
                row.append(np.array(v, dtype=p.dtype))
        elif p.name == "vl":
            for row in rows:
                row.append(p.hi)                          # VLMAX
        elif p.name == "vxrm":
            for row, v in zip(rows, rng.integers(0, 4, size=2)):
                row.append(int(v))
        elif p.kind in ("vec", "tile"):
            rows[0].append(random_batch(_one_param(intr, p), 1, rng)[0][0])
            shape = (p.lanes, p.lanes) if p.kind == "tile" else (p.lanes,)
            ext = np.array(extremes(p.dtype), dtype=p.dtype)
            rows[1].append(ext[rng.integers(0, len(ext), size=shape)])
        else:                                             # predicates, masks, immediates
            for row in rows:
                got = random_batch(_one_param(intr, p), 1, rng)[0]
                row.append(got[0] if p.kind in ("pred", "ptrue") else int(got[0]) if p.kind == "mask" else got)
    return rows


_names = itertools.count()


def _free(x):
    """Free z3 lanes in x's shape and dtype, and the substitution that gives them x's values."""
    x = np.asarray(x)
    cells, subs = np.empty(x.shape, dtype=object), []
    for index, v in np.ndenumerate(x):
        if x.dtype == np.bool_:
            var = z3.Bool(f"p{next(_names)}")
            cells[index] = SymBool(var)
            subs.append((var, z3.BoolVal(bool(v))))
        else:
            n = x.dtype.itemsize * 8
            var = z3.BitVec(f"v{next(_names)}", n)
            cells[index] = SymInt.from_bits(var, x.dtype.kind == "i")
            subs.append((var, z3.BitVecVal(int(v) % (1 << n), n)))
    return SymArray(cells, x.dtype), subs


def _evaluate(s: SymArray, subs) -> np.ndarray:
    """The lanes of s at the substitution, each checked against its proven interval."""
    out = []
    for cell in s.data.reshape(-1):
        term = z3.simplify(z3.substitute(cell.term, *subs))
        if isinstance(cell, SymBool):
            out.append(z3.is_true(term))
            continue
        v = term.as_signed_long()
        assert cell.lo <= v <= cell.hi, f"lane value {v} outside its interval [{cell.lo}, {cell.hi}]"
        out.append(v)
    return np.array(out, dtype=object).reshape(s.shape).astype(s.dtype)


def _both(f, args):
    """f's result and vxsat (RVV fixed-point), or the result alone."""
    if hasattr(f, "with_vxsat"):
        return f.with_vxsat(*args)
    return f(*args), None


def _symbolic_kinds(p):
    return p.kind in ("vec", "tile", "pred", "scalar")


def _check_intrinsic(intr, rng):
    f = _fixed(intr)
    for args in _registers(f, rng):
        want, want_sat = _both(f, args)
        # Constant lanes: the backend folds them to the same values.
        consts = [SymArray.const(a) if _symbolic_kinds(p) and p.kind != "pred" else a for p, a in zip(f.params, args)]
        got, got_sat = _both(f, consts)
        assert isinstance(got, SymArray) and got.dtype == want.dtype and got.shape == want.shape, (f.name, got)
        assert np.array_equal(got.values(), want), f"{f.name}: constants give {got.values()}, numpy {want}"
        # Free lanes: the result terms, evaluated at the same registers.
        subs, free = [], []
        for p, a in zip(f.params, args):
            if _symbolic_kinds(p):
                lanes, s = _free(a)
                free.append(lanes)
                subs += s
            else:
                free.append(a)
        got, got_sat = _both(f, free)
        assert got.dtype == want.dtype and got.shape == want.shape, (f.name, got)
        values = _evaluate(got, subs)
        assert np.array_equal(values, want), f"{f.name}: symbolic lanes give {values}, numpy {want}"
        if want_sat is not None:
            sat = _evaluate(got_sat, subs) if isinstance(got_sat, SymArray) else np.asarray(got_sat)
            assert np.array_equal(sat, want_sat), f"{f.name}: vxsat {sat}, numpy {want_sat}"


AMX_SHAPE = (2, 8, 2)      # M, K (bytes per A row), N: small tiles, every operation of the model


def _check_amx(inst, rng):
    a_t, b_t = x86.AMX_TYPES[inst.mnemonic]
    m, k, n = AMX_SHAPE
    c = rng.integers(-2 ** 31, 2 ** 31, size=(m, n), dtype=np.int32)
    c[0, 0] = 2 ** 31 - 1                                     # wraps with any positive dot
    a = rng.integers(np.iinfo(a_t).min, np.iinfo(a_t).max, size=(m, k), endpoint=True, dtype=a_t)
    b = rng.integers(np.iinfo(b_t).min, np.iinfo(b_t).max, size=(k // 4, 4 * n), endpoint=True, dtype=b_t)
    want = inst.model(c, a, b)
    got = inst.model(SymArray.const(c), SymArray.const(a), SymArray.const(b))
    assert got.dtype == want.dtype and np.array_equal(got.values(), want)
    (fc, s1), (fa, s2), (fb, s3) = _free(c), _free(a), _free(b)
    got = inst.model(fc, fa, fb)
    assert got.dtype == want.dtype and np.array_equal(_evaluate(got, s1 + s2 + s3), want)


def _run(inst, seed):
    rng = np.random.default_rng(seed)
    if not inst.intrinsics:
        assert inst.mnemonic in x86.AMX_TYPES, f"{inst.mnemonic}: no intrinsic to build registers from"
        _check_amx(inst, rng)
    for intr in inst.intrinsics:
        _check_intrinsic(intr, rng)


@pytest.mark.parametrize("inst", SYMBOLIC, ids=lambda i: f"{i.arch}-{i.mnemonic}-{i.extension}")
def test_model_on_both_backends(inst):
    seed = sum(map(ord, inst.mnemonic + inst.extension))
    if _key(inst) in NOT_COVERED:
        with pytest.raises(NotImplementedError):
            _run(inst, seed)
        return
    _run(inst, seed)


def test_not_covered_names_registered_models():
    registered = {_key(i) for i in instructions()}
    assert set(NOT_COVERED) <= registered, set(NOT_COVERED) - registered


def test_wasm_models_refuse_symbolic_lanes():
    for inst in instructions("wasm32"):
        intr = inst.intrinsics[0]
        args = [SymArray.const(np.zeros(p.lanes, p.dtype)) for p in intr.params]
        with pytest.raises(NotImplementedError, match="numpy only"):
            inst.model(*args)


def test_numpy_only_models_refuse_symbolic_lanes():
    """The float32, fixed-point reference and output-stage models are numpy only: a clear NotImplementedError
    naming the model, never a wrong answer."""
    acc = SymArray.const(np.arange(4, dtype=np.int32).reshape(2, 2))
    calls = {"float32.f32": lambda: float32.f32(acc), "lrintf": lambda: float32.lrintf(acc),
             "cvtps2dq": lambda: float32.cvtps2dq(acc), "fcvtns": lambda: float32.fcvtns(acc),
             "fma_f32": lambda: float32.fma_f32(acc, acc, acc), "magic_bias": lambda: float32.magic_bias_bits(acc),
             "rne_int": lambda: float32.rne_int(acc), "fixedpoint (a)": lambda: fixedpoint.srdhm(acc, acc),
             "xnnpack-fp32-lrintf": lambda: requant.output_stage("xnnpack-fp32-lrintf")(acc, {}, "s8"),
             "output stage": lambda: requant.xnnpack_rndnu(acc, {}, "s8")}
    for name, call in calls.items():
        with pytest.raises(NotImplementedError, match="numpy only"):
            call()


# -- proofs on free lanes ------------------------------------------------------------------------------------------

def _bytes(n, dtype, lo=None, hi=None):
    """n free byte lanes of `dtype`, optionally narrowed to [lo, hi] (a claim's u7, s8, ... domain)."""
    terms = [z3.BitVec(f"x{next(_names)}", 8) for _ in range(n)]
    lanes = SymArray.of([SymInt.from_bits(t, np.dtype(dtype).kind == "i", lo, hi) for t in terms], dtype)
    return lanes, terms


def _prove(claim, *assumptions):
    s = z3.Solver()
    s.add(*assumptions, z3.Not(claim))
    return s.check() == z3.unsat


def _has_ite(term):
    return "(ite " in term.sexpr() or "(if " in term.sexpr()


def _exact_pairs(a, b, j, a_signed=False, b_signed=True, width=32):
    ext = lambda t, signed: (z3.SignExt if signed else z3.ZeroExt)(width - 8, t)  # noqa: E731
    return sum(ext(a[k], a_signed) * ext(b[k], b_signed) for k in (2 * j, 2 * j + 1))


def test_vpmaddubsw_u7_never_saturates():
    """u7 x s8: the intervals alone prove every pair sum fits int16; each lane is the exact pair sum."""
    a, at = _bytes(16, U8, 0, 127)
    b, bt = _bytes(16, S8)
    r = x86.vpmaddubsw(a, b)
    assert r.dtype == S16 and r.shape == (8,)
    domain = [z3.ULE(t, 127) for t in at]
    for j, lane in enumerate(r.data):
        assert -32768 <= lane.lo and lane.hi <= 32767 and not _has_ite(lane.term)
        assert _prove(lane.at(32) == _exact_pairs(at, bt, j), *domain)


def test_vpmaddubsw_u8_saturates():
    """Full u8 x s8: the saturation stays in the terms, and z3 finds an input where it bites: a=255, b=127."""
    a, at = _bytes(16, U8)
    b, bt = _bytes(16, S8)
    lane = x86.vpmaddubsw(a, b).data[0]
    assert _has_ite(lane.term) and (lane.lo, lane.hi) == (-32768, 32767)
    exact = _exact_pairs(at, bt, 0)
    s = z3.Solver()
    s.add(lane.at(32) != exact)
    assert s.check() == z3.sat
    m = s.model()
    found = sum(m.eval(at[k]).as_long() * m.eval(bt[k]).as_signed_long() for k in (0, 1))
    assert not -32768 <= found <= 32767                      # only an out-of-range pair sum differs
    corner = [(at[0], 255), (at[1], 255), (bt[0], 127), (bt[1], 127)]
    assert z3.simplify(z3.substitute(lane.term, *[(t, z3.BitVecVal(v, 8)) for t, v in corner])).as_signed_long() \
        == 32767                                             # 64770 saturated (seed 002)


def test_sdot_is_the_exact_sum():
    """SDOT on free s8 lanes with a zero accumulator: each s32 lane is exactly the four-product sum (no wrap);
    with a free accumulator it is that sum plus the accumulator mod 2^32."""
    a, at = _bytes(16, S8)
    b, bt = _bytes(16, S8)

    def exact(j, width=20):          # |sum| <= 4 * 2^14 < 2^19: 20 bits hold it, as integers
        return sum(z3.SignExt(width - 8, at[4 * j + i]) * z3.SignExt(width - 8, bt[4 * j + i]) for i in range(4))

    zero = SymArray.const(np.zeros(4, np.int32))
    r = arm.sdot(zero, a, b)
    assert r.dtype == S32
    for j, lane in enumerate(r.data):
        assert (lane.lo, lane.hi) == (-4 * 128 * 127, 4 * 128 * 128) and not _has_ite(lane.term)
        assert _prove(lane.at(20) == exact(j))
    acc_terms = [z3.BitVec(f"acc{next(_names)}", 32) for _ in range(4)]
    acc = SymArray.of([SymInt.from_bits(t, True) for t in acc_terms], S32)
    lane = arm.sdot(acc, a, b).data[1]
    assert (lane.lo, lane.hi) == (-2 ** 31, 2 ** 31 - 1)     # the accumulate may leave int32: it wraps
    assert _prove(lane.bits(32) == acc_terms[1] + z3.SignExt(12, exact(1)))


def test_int16_chain_wraps_where_the_interval_does_not_fit():
    """SMLAL into s16 lanes: one s8 x s8 product fits, so the first step is exact; the second can reach 32768,
    so the backend keeps numpy's wrap, and z3 finds where the chain differs from the exact sum (all -128)."""
    a1, a1t = _bytes(8, S8)
    b1, b1t = _bytes(8, S8)
    a2, a2t = _bytes(8, S8)
    b2, b2t = _bytes(8, S8)
    zero = SymArray.const(np.zeros(8, np.int16))
    step1 = arm.smlal(zero, a1, b1)
    exact1 = z3.SignExt(8, a1t[0]) * z3.SignExt(8, b1t[0])
    assert step1.dtype == S16 and _prove(step1.data[0].at(16) == exact1)
    step2 = arm.smlal(step1, a2, b2).data[0]
    assert (step2.lo, step2.hi) == (-32768, 32767)           # numpy's int16 range: the exact sum did not fit
    exact2 = z3.SignExt(16, exact1) + z3.SignExt(24, a2t[0]) * z3.SignExt(24, b2t[0])
    s = z3.Solver()
    s.add(step2.at(32) != exact2)
    assert s.check() == z3.sat
    assert _prove(step2.at(16) == z3.Extract(15, 0, exact2))  # ... but always its low 16 bits
    worst = [(t, z3.BitVecVal(0x80, 8)) for t in (a1t[0], b1t[0], a2t[0], b2t[0])]
    assert z3.simplify(z3.substitute(step2.term, *worst)).as_signed_long() == -32768


def test_vpaddw_of_two_u7_products_wraps():
    """Two VPMADDUBSW results on u7 x s8 each fit int16; their VPADDW sum may not, and wraps as the CPU does."""
    a, _ = _bytes(16, U8, 0, 127)
    b, _ = _bytes(16, S8)
    p = x86.vpmaddubsw(a, b)
    total = x86.vpaddw(p, p).data[0]
    assert (total.lo, total.hi) == (-32768, 32767)
    assert x86.vpaddsw(p, p).data[0].hi == 32767


def test_vpshufb_symbolic_control():
    """A symbolic control byte picks among the 16 table bytes of its 128-bit lane, or gives 0 (bit 7)."""
    table = SymArray.const(np.arange(100, 116, dtype=np.uint8))
    ctl, ct = _bytes(16, U8)
    lane = x86.vpshufb(table, ctl).data[3]
    assert (lane.lo, lane.hi) == (0, 115)
    for v, want in ((5, 105), (0x8F, 0), (0x1F, 115)):
        assert z3.simplify(z3.substitute(lane.term, (ct[3], z3.BitVecVal(v, 8)))).as_signed_long() == want
