"""RISC-V V 1.0 models: against a scalar reading of the spec (written apart from the vectorized models), against
qemu-riscv64 7.2 at VLEN 128 and 256 (exhaustive for the 8-bit forms, per vxrm, results and vxsat), and bad input
refused. The qemu tests skip, with the reason, where qemu-riscv64 is not installed."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowp.isa_models import intrinsic, intrinsics, rvv
from lowp.isa_models.verify import rvv_proof

RVV = intrinsics("riscv64")
VLENS = (128, 256)


# -- the scalar reading: Python ints, bit by bit, as the spec's table says ----------------------------------------

def bit(v, i):
    return (v >> i) & 1


def low(v, n):
    return v & ((1 << n) - 1)


def scalar_roundoff(v, d, mode):
    """(v >> d) + r, r from the 'vxrm encoding' table of RVV 1.0 section 3.8; Python's >> is arithmetic."""
    if d == 0:
        return v
    r = {"rnu": bit(v, d - 1),
         "rne": bit(v, d - 1) & int(low(v, d - 1) != 0 or bit(v, d) == 1),
         "rdn": 0,
         "rod": int(bit(v, d) == 0 and low(v, d) != 0)}[mode]
    return (v >> d) + r


def scalar_clip(v, lo, hi):
    return min(max(v, lo), hi), int(v < lo or v > hi)


def test_roundoff_matches_the_spec_table_for_all_16_bit_values_and_shifts():
    values = np.arange(-32768, 32768, dtype=np.int64)
    for mode in rvv.VXRM:
        for d in range(16):
            got = rvv.roundoff(values, np.full(values.shape, d), mode)
            expected = np.array([scalar_roundoff(int(v), d, mode) for v in values[::97]])
            assert np.array_equal(got[::97], expected), (mode, d)
            # and the definitions the table abbreviates: rdn truncates, rnu adds half an LSB
            if mode == "rdn":
                assert np.array_equal(got, values >> d)
            if mode == "rnu" and d:
                assert np.array_equal(got, (values + (1 << (d - 1))) >> d)


def test_rod_sets_the_lsb_when_bits_are_lost():
    v = np.array([0b1000, 0b1001, 0b1011, 0b1100], np.int64)
    assert rvv.roundoff(v, np.full(4, 2), "rod").tolist() == [2, 3, 3, 3]


ints = st.integers


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(np.int16, np.int8), (np.int32, np.int16), (np.int64, np.int32)]),
       st.data(), st.sampled_from(rvv.VXRM))
def test_vnclip_matches_the_scalar_reading(types, data, mode):
    wide, narrow = types
    wi, ni = np.iinfo(wide), np.iinfo(narrow)
    n = data.draw(ints(1, 8))
    vs2 = [data.draw(ints(int(wi.min), int(wi.max))) for _ in range(n)]
    vs1 = [data.draw(ints(0, int(np.iinfo(np.dtype(f"u{ni.bits // 8}")).max))) for _ in range(n)]
    got = rvv.vnclip_wv(np.array(vs2, wide), np.array(vs1, f"u{ni.bits // 8}"), vxrm=mode)
    expected = [scalar_clip(scalar_roundoff(v, s % (2 * ni.bits), mode), ni.min, ni.max) for v, s in zip(vs2, vs1)]
    assert got.result.tolist() == [e[0] for e in expected]
    assert bool(got.vxsat) == any(e[1] for e in expected)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.int8, np.int16, np.int32]), st.data(), st.sampled_from(rvv.VXRM))
def test_vsmul_matches_the_scalar_reading(t, data, mode):
    info = np.iinfo(t)
    n = data.draw(ints(1, 8))
    a = [data.draw(st.one_of(st.just(int(info.min)), ints(int(info.min), int(info.max)))) for _ in range(n)]
    b = [data.draw(st.one_of(st.just(int(info.min)), ints(int(info.min), int(info.max)))) for _ in range(n)]
    got = rvv.vsmul_vv(np.array(a, t), np.array(b, t), vxrm=mode)
    expected = [scalar_clip(scalar_roundoff(x * y, info.bits - 1, mode), info.min, info.max) for x, y in zip(a, b)]
    assert got.result.tolist() == [e[0] for e in expected]
    assert bool(got.vxsat) == any(e[1] for e in expected)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["vwmacc", "vwmaccu", "vwmaccsu", "vwmaccus"]), st.sampled_from([8, 16, 32]), st.data())
def test_widening_macc_matches_the_scalar_reading(stem, sew, data):
    signs = {"vwmacc": "ii", "vwmaccu": "uu", "vwmaccsu": "iu", "vwmaccus": "ui"}[stem]   # (x/vs1, vs2)
    xt, vt = (np.dtype(f"{s}{sew // 8}") for s in signs)
    dt = np.dtype(f"{'u' if stem == 'vwmaccu' else 'i'}{sew // 4}")
    n = data.draw(ints(1, 6))
    draw = lambda t: data.draw(ints(int(np.iinfo(t).min), int(np.iinfo(t).max)))   # noqa: E731
    vd, x, vs2 = [draw(dt) for _ in range(n)], [draw(xt) for _ in range(n)], [draw(vt) for _ in range(n)]
    bits = 2 * sew
    wrap = lambda v: (v % (1 << bits)) - ((1 << bits) if dt.kind == "i" and v % (1 << bits) >= 1 << (bits - 1) else 0)  # noqa: E731
    if stem != "vwmaccus":
        got = getattr(rvv, f"{stem}_vv")(np.array(vd, dt), np.array(x, xt), np.array(vs2, vt))
        assert got.tolist() == [wrap(d + a * b) for d, a, b in zip(vd, x, vs2)]
    got = getattr(rvv, f"{stem}_vx")(np.array(vd, dt), x[0], np.array(vs2, vt))
    assert got.tolist() == [wrap(d + x[0] * b) for d, b in zip(vd, vs2)]


# -- bad input -----------------------------------------------------------------------------------------------------

def test_bad_input_is_refused_with_the_reason():
    v16, v8 = np.zeros(16, np.int16), np.zeros(16, np.uint8)
    with pytest.raises(ValueError, match="vxrm: expected one of 'rnu', 'rne', 'rdn', 'rod'"):
        rvv.vnclip_wv(v16, v8, vxrm="rnd")
    with pytest.raises(ValueError, match="vxrm"):
        rvv.vsmul_vv(v8.view(np.int8), v8.view(np.int8), vxrm=0)          # the name, not the encoding
    with pytest.raises(TypeError):
        rvv.vnclip_wx(v16, 3)                                               # never a default rounding mode
    with pytest.raises(ValueError, match="expected elements of s16, s32, s64, got dtype uint16"):
        rvv.vnclip_wv(v16.view(np.uint16), v8, vxrm="rne")
    with pytest.raises(ValueError, match="never casts"):
        rvv.vwmacc_vv(np.zeros(16, np.int16), np.zeros(16, np.uint8), np.zeros(16, np.int8))
    with pytest.raises(ValueError, match="one vl applies"):
        rvv.vmacc_vv(np.zeros(8, np.int8), np.zeros(16, np.int8), np.zeros(16, np.int8))
    with pytest.raises(ValueError, match=r"s8 scalar must lie in \[-128, 127\]"):
        rvv.vwmacc_vx(np.zeros(8, np.int16), 200, np.zeros(8, np.int8))
    nclip = intrinsic("__riscv_vnclip_wx_i8m1")
    with pytest.raises(ValueError, match="vl=8 but VLMAX is 16 at VLEN=128"):
        nclip(np.zeros(16, np.int16), 3, 0, 8)
    with pytest.raises(ValueError, match="no i16m2 register group at any VLEN"):
        nclip(np.zeros(24, np.int16), 3, 0, 24)
    with pytest.raises(ValueError, match=r"'vxrm' must lie in \[0, 3\]"):
        nclip(np.zeros(16, np.int16), 3, 4, 16)
    with pytest.raises(ValueError, match="vlen: expected a power of two"):
        nclip.at(96)


def test_intrinsics_follow_the_v1_names_and_argument_orders():
    assert intrinsic("__riscv_vwmacc_vv_i16m1").signature == \
        "__riscv_vwmacc_vv_i16m1(vd:i16m1, vs1:i8mf2, vs2:i8mf2, vl:VLMAX) -> i16m1"
    assert intrinsic("__riscv_vwmaccus_vx_i32m2").signature == \
        "__riscv_vwmaccus_vx_i32m2(vd:i32m2, rs1:u16, vs2:i16m1, vl:VLMAX) -> i32m2"
    assert intrinsic("__riscv_vnclipu_wv_u8mf2").signature == \
        "__riscv_vnclipu_wv_u8mf2(vs2:u16m1, vs1:u8mf2, vxrm:imm[0..3], vl:VLMAX) -> u8mf2"
    assert "__riscv_vwmaccus_vv_i16m1" not in {i.name for i in RVV}          # vwmaccus has no .vv form
    # One intrinsic, any VLEN: the arrays say which.
    for vlen in VLENS:
        r, sat = intrinsic("__riscv_vsmul_vv_i8m1").with_vxsat(np.full(vlen // 8, -128, np.int8),
                                                                np.full(vlen // 8, -128, np.int8), 2, vlen // 8)
        assert r.tolist() == [127] * (vlen // 8) and sat


# -- against qemu-riscv64 --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def qemu():
    from lowp.emulator.rvv import RvvQemuBackend
    backend = RvvQemuBackend()
    reason = backend.unavailable(RVV[0])
    if reason:
        pytest.skip(reason)
    return backend


@pytest.mark.parametrize("vlen", VLENS)
@pytest.mark.parametrize("intr", RVV, ids=lambda i: i.name)
def test_model_matches_qemu(intr, vlen, qemu):
    verdict = rvv_proof.verify(intr, qemu, vlen, random_registers=256)
    assert verdict.status in ("exhaustive", "verified"), str(verdict.disagreement)
    eight_bit = all(p.dtype.itemsize == (2 if intr.mnemonic.startswith("vnclip") and p.name == "vs2" else 1)
                    for p in intr.params if p.kind == "vec" and p.name != "vd")
    assert (verdict.status == "exhaustive") == eight_bit
    if verdict.status == "exhaustive":   # every case, under every rounding mode the instruction reads
        cases = 4 * (2 ** 20 if intr.mnemonic.startswith("vnclip") else 2 ** 16 // (1 if intr.fixed_point else 4))
        assert verdict.lanes >= cases


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["__riscv_vnclip_wv_i16m1", "__riscv_vnclipu_wx_u32m1", "__riscv_vsmul_vx_i32m1",
                        "__riscv_vwmaccsu_vx_i32m1", "__riscv_vmacc_vv_u32m2"]),
       st.sampled_from(VLENS), st.integers(0, 3), st.integers(0, 2 ** 32))
def test_model_matches_qemu_on_hypothesis_registers(name, vlen, vxrm, seed):
    from lowp.emulator.rvv import RvvQemuBackend
    backend = RvvQemuBackend()
    if backend.unavailable(RVV[0]):
        pytest.skip(backend.unavailable(RVV[0]))
    view = intrinsic(name).at(vlen)
    args = rvv_proof.random_args(view, 8, np.random.default_rng(seed), vxrm if view.fixed_point else 0)
    expected, expected_sat = view.with_vxsat(*args)
    actual, actual_sat = backend.run_with_vxsat(view, args)
    assert np.array_equal(expected, actual) and np.array_equal(expected_sat, actual_sat)


def test_the_proof_sees_a_wrong_vxsat(qemu):
    """The comparison can fail: a backend that reports no saturation disagrees on vsmul's INT_MIN * INT_MIN."""
    class NoVxsat:
        name = "liar"

        def unavailable(self, intr):
            return None

        def run_with_vxsat(self, intr, args):
            r, s = qemu.run_with_vxsat(intr, args)
            return r, np.zeros_like(s)
    verdict = rvv_proof.verify(intrinsic("__riscv_vsmul_vv_i8m1"), NoVxsat(), 128)
    assert verdict.status == "FAILED" and "vxsat model=True qemu=False" in str(verdict.disagreement)


def test_qemu_missing_is_a_reason():
    from lowp.emulator.rvv import RvvQemuBackend
    backend = RvvQemuBackend(qemu=None)
    backend.qemu = None
    assert "qemu-riscv64 not installed" in backend.unavailable(RVV[0])
