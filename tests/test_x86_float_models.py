"""The float models of the fp32 requantization (VCVTDQ2PS, VCVTPS2DQ, VCVTTPS2DQ, VMULPS, VADDPS, VSUBPS, VMINPS)
against the host CPU's own instructions, bit for bit: special values (signed zeros, infinities, NaNs, denormals,
ties, the int32 limits), a stride through every bit pattern, and random operands. A NaN result is checked to be a
NaN (its payload is the host's, which numpy computes with; lowp prove never meets one: docs/prove.md)."""
from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from lowp.isa_models import x86

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="needs an x86-64 host")


@pytest.fixture(scope="module")
def cpu():
    cffi = pytest.importorskip("cffi")
    from lowp.emulator.x86.native import NativeUnavailable, build_shared_library
    try:
        path = build_shared_library([HERE / "x86" / "float_sse.c"], ("-O2", "-msse2"), "float-sse")
    except NativeUnavailable as e:
        pytest.skip(str(e))
    ffi = cffi.FFI()
    ffi.cdef("\n".join([f"void lowp_{n}(const void *, void *, size_t);" for n in ("cvtdq2ps", "cvtps2dq", "cvttps2dq")]
                       + [f"void lowp_{n}(const void *, const void *, void *, size_t);"
                          for n in ("mulps", "addps", "subps", "minps")]))
    lib = ffi.dlopen(str(path))

    def run(name, *arrays, out_dtype):
        out = np.zeros(arrays[0].size, out_dtype)
        getattr(lib, f"lowp_{name}")(*[ffi.from_buffer(a) for a in arrays], ffi.from_buffer(out), out.size)
        return out
    return run


def _specials() -> np.ndarray:
    """Bit patterns where float semantics have corners."""
    f = np.float32
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5,
              2.0 ** 31, -(2.0 ** 31), np.nextafter(f(2.0 ** 31), f(0)), np.nextafter(f(-(2.0 ** 31)), f(0)),
              2.0 ** 24, 2.0 ** 24 + 2, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -3.4028235e38]
    bits = np.array(values, np.float32).view(np.uint32)
    extra = np.array([0x7FC00001, 0xFFC00000, 0x7F800001, 0x00000001, 0x807FFFFF], np.uint32)   # NaN payloads, denormals
    return np.concatenate([bits, extra])


def _patterns(rng) -> np.ndarray:
    stride = np.arange(0, 1 << 32, 1021, dtype=np.uint64).astype(np.uint32)       # every float class and exponent
    near = (np.array([2.0 ** 31, -(2.0 ** 31), 0.5, -0.5], np.float32).view(np.uint32)[:, None].astype(np.int64)
            + np.arange(-64, 65)).reshape(-1).astype(np.uint32)
    n = _specials()
    out = np.concatenate([n, stride, near, rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)])
    return out[:out.size - out.size % 4]


def _same_floats(got: np.ndarray, want: np.ndarray) -> None:
    g, w = got.view(np.uint32), np.asarray(want, np.float32).view(np.uint32)
    nan = np.isnan(got)
    assert (nan == np.isnan(np.asarray(want, np.float32))).all()
    bad = np.flatnonzero((g != w) & ~nan)
    assert not bad.size, f"{bad.size} lanes differ, first at {bad[0]}: host {g[bad[0]]:#x}, model {w[bad[0]]:#x}"


def test_cvtdq2ps_rounds_as_the_cpu(cpu):
    a = _patterns(np.random.default_rng(1)).view(np.int32)
    _same_floats(cpu("cvtdq2ps", a, out_dtype=np.float32), x86.vcvtdq2ps(a.reshape(-1, 4)).reshape(-1))


@pytest.mark.parametrize("name, model", [("cvtps2dq", x86.vcvtps2dq), ("cvttps2dq", x86.vcvttps2dq)])
def test_float_to_int32_as_the_cpu(cpu, name, model):
    a = _patterns(np.random.default_rng(2)).view(np.float32)
    got = cpu(name, a, out_dtype=np.int32)
    want = model(a.reshape(-1, 4)).reshape(-1)
    bad = np.flatnonzero(got != want)
    assert not bad.size, f"{name}: {a[bad[0]]!r} gives {got[bad[0]]} on the CPU, {want[bad[0]]} in the model"


@pytest.mark.parametrize("name, model", [("mulps", x86.vmulps), ("addps", x86.vaddps), ("subps", x86.vsubps),
                                         ("minps", x86.vminps)])
def test_float_arithmetic_as_the_cpu(cpu, name, model):
    rng = np.random.default_rng(3)
    a = _patterns(rng)
    b = np.concatenate([np.roll(a, 7)[:a.size // 2], rng.permutation(a)[a.size // 2:]])
    # the requantization's own operands: int32 accumulators times a small scale
    acc = rng.integers(-(1 << 24), 1 << 24, 1 << 14).astype(np.float32)
    scale = np.float32(2.0) ** rng.uniform(-20, 0, 1 << 14).astype(np.float32)
    a = np.concatenate([a.view(np.float32), acc])
    b = np.concatenate([b.view(np.float32), scale])
    n = a.size - a.size % 4
    a, b = a[:n], b[:n]
    got = cpu(name, a, b, out_dtype=np.float32)
    want = model(a.reshape(-1, 4), b.reshape(-1, 4)).reshape(-1)
    if name == "minps":         # a move of one operand's bits: NaNs included, bit for bit
        assert (got.view(np.uint32) == want.view(np.uint32)).all()
    else:
        _same_floats(got, want)
