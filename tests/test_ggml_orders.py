"""The float orders of ggml's dot products (lowp.kernels.ggml.orders).

CI (no checkout): each order's structure, against things that could fail: on power-of-two scales every order gives
the exact value (exact.py's domain); on constructed cases two orders differ where their roundings must; and each
order equals a small C re-statement of it (lowp's own C, below), built with the host cc, on random scales.

With $LOWP_GGML_CHECKOUT (a ggml checkout, @d99724f measured): ggml's own vec_dots, built for x86 in GGML's flag
sets (x64: no flags, the _generic paths; haswell; skylakex), AArch64 and RISC-V under qemu, on blocks with random
normal fp16 scales, counted equal / differ against the order `order_for` names. `python tests/test_ggml_orders.py`
prints the table docs/ggml.md records.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from lowp.kernels.ggml.blocks import FORMATS
from lowp.kernels.ggml.dot import VEC_DOT_TYPE, exact_dot, formats_for
from lowp.kernels.ggml.orders import GENERIC, ORDERS, order_for

pytest.importorskip("gguf", reason="the iq formats' grids come from gguf without a ggml checkout")
F32 = np.float32
CHECKOUT = os.environ.get("LOWP_GGML_CHECKOUT")


# ---- drawing blocks with random (non-power-of-two) scales --------------------------------------------------------
def _normal_fp16(shape, rng, low=-8, high=2) -> np.ndarray:
    """Random normal fp16 values: a random 10-bit mantissa, exponent in [low, high], either sign."""
    mant = 1 + rng.integers(0, 1024, shape) / 1024
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return (sign * mant * np.exp2(rng.integers(low, high + 1, shape))).astype(np.float16)


def _scales(rec: np.ndarray, x_type: str, rng) -> None:
    for field in ("d", "m", "dmin"):
        if field in rec.dtype.names and rec.dtype[field].base == np.dtype("<u2"):
            rec[field] = _normal_fp16(rec[field].shape, rng).view(np.uint16)
    if x_type == "mxfp4":
        rec["e"] = rng.integers(118, 134, rec["e"].shape)
    if x_type == "iq1_m":               # its fp16 d lives in the top nibbles of the four scale words
        words = rec["scales"].copy().view("<u2").reshape(len(rec), 4)
        d = _normal_fp16(len(rec), rng).view(np.uint16)
        for w in range(4):
            words[:, w] = (words[:, w] & 0x0FFF) | (((d >> (4 * w)) & 0xF) << 12)
        rec["scales"] = words.view(np.uint8).reshape(rec["scales"].shape)


def _activations(y_type: str, nb: int, rng) -> np.ndarray:
    """q8 blocks: codes in [-127, 127] (ggml's precondition), random normal d, stored sums consistent."""
    fmt = formats_for(y_type)[y_type]
    rec = np.zeros(nb, fmt.dtype)
    rec["qs"] = rng.integers(-127, 128, rec["qs"].shape)
    if y_type == "q8_K":
        rec["d"] = (rng.uniform(2.0 ** -8, 4.0, nb) * np.where(rng.random(nb) < 0.5, -1, 1)).astype(np.float32)
        rec["bsums"] = rec["qs"].astype(np.int64).reshape(nb, -1, 16).sum(axis=2)
    else:
        d = _normal_fp16(nb, rng)
        rec["d"] = d.view(np.uint16)
        if y_type == "q8_1":
            rec["s"] = (d.astype(np.float32) * rec["qs"].astype(np.int64).sum(axis=1)).astype(np.float16).view(
                np.uint16)
    return rec.view(np.uint8).reshape(nb, -1)


def draw_random(x_type: str, blocks: int, rng):
    """(x bytes, y bytes, n): random x blocks with random normal scales, random activations."""
    xf, y_type = formats_for(x_type)[x_type], VEC_DOT_TYPE[x_type]
    n = blocks * xf.qk
    x = rng.integers(0, 256, (blocks, xf.dtype.itemsize), dtype=np.uint8)
    _scales(x.reshape(-1).view(xf.dtype), x_type, rng)
    return x, _activations(y_type, n // FORMATS[y_type].qk, rng), n


def same_bits(a, b) -> bool:
    a, b = F32(a), F32(b)
    return a.view(np.uint32) == b.view(np.uint32) or (np.isnan(a) and np.isnan(b))


# ---- ggml's own kernels (a checkout), measured --------------------------------------------------------------------
STUB = r"""
#include <stddef.h>
#include <stdint.h>
float ggml_table_f32_f16[1 << 16];
float ggml_table_f32_e8m0_half[1 << 8];
float ggml_table_f32_ue4m3[1 << 8];
void lowp_ggml_set_tables(const float *f16, const float *e8m0, const float *ue4m3) {
    for (int i = 0; i < (1 << 16); i++) ggml_table_f32_f16[i] = f16[i];
    for (int i = 0; i < 256; i++) { ggml_table_f32_e8m0_half[i] = e8m0[i]; ggml_table_f32_ue4m3[i] = ue4m3[i]; }
}
void ggml_abort(const char *file, int line, const char *fmt, ...) { (void)file; (void)line; (void)fmt; __builtin_trap(); }
float fabsf(float x) { return __builtin_fabsf(x); }
/* the guests have no libc: ldexpf by exact doublings and halvings (ggml_ue4m3_to_fp32 asks only for normal
   results); roundf only serves quantizers, never a vec_dot */
float roundf(float x) { (void)x; __builtin_trap(); }
float ldexpf(float x, int e) {
    for (; e > 0; e--) x *= 2.0f;
    for (; e < 0; e++) x *= 0.5f;
    return x;
}
#define TRAP(name) void name(void) { __builtin_trap(); }
TRAP(quantize_iq4_xs) TRAP(quantize_row_iq4_nl_ref) TRAP(quantize_row_mxfp4_ref) TRAP(quantize_row_nvfp4_ref)
TRAP(quantize_row_q1_0_ref) TRAP(quantize_row_q2_0_ref) TRAP(quantize_row_q2_K_ref) TRAP(quantize_row_q3_K_ref)
TRAP(quantize_row_q4_0_ref) TRAP(quantize_row_q4_1_ref) TRAP(quantize_row_q4_K_ref) TRAP(quantize_row_q5_0_ref)
TRAP(quantize_row_q5_1_ref) TRAP(quantize_row_q5_K_ref) TRAP(quantize_row_q6_K_ref) TRAP(quantize_row_q8_0_ref)
TRAP(quantize_row_q8_1_ref) TRAP(quantize_row_q8_K_ref) TRAP(quantize_row_tq1_0_ref) TRAP(quantize_row_tq2_0_ref)
"""
HASWELL = ("-msse4.2", "-mavx", "-mf16c", "-mfma", "-mavx2", "-mbmi2")
X86_VARIANTS = {   # ggml's src/CMakeLists.txt GGML_CPU_ALL_VARIANTS flag sets, and the features each gives
    "x64": ((), frozenset()),
    "haswell": (HASWELL, frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"})),
    "skylakex": ((*HASWELL, "-mavx512f", "-mavx512cd", "-mavx512vl", "-mavx512dq", "-mavx512bw"),
                 frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2", "avx512f", "avx512cd", "avx512vl",
                            "avx512dq", "avx512bw"})),
}
TYPES = sorted(VEC_DOT_TYPE)


def tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stub's tables as ggml fills them: fp16 -> fp32, E8M0 halved and UE4M3 halved as blocks.py decodes."""
    from lowp.kernels.ggml.blocks import _e8m0_half, _ue4m3_half
    f16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    codes = np.arange(256, dtype=np.uint8)
    return f16, _e8m0_half(codes).astype(np.float32), _ue4m3_half(codes).astype(np.float32)


def ggml_sources(checkout: Path, arch: str) -> list[Path]:
    cpu = checkout / "src" / "ggml-cpu"
    return [cpu / "quants.c", cpu / "arch" / arch / "quants.c"]


def ggml_flags(checkout: Path) -> tuple[str, ...]:
    return ("-O2", "-std=gnu11", *(f"-I{checkout / p}" for p in ("include", "src", "src/ggml-cpu")))


class X86Library:
    """ggml's x86 quants built natively with `flags` (the host cc), called through cffi."""

    def __init__(self, checkout: Path, flags, stub_dir: Path):
        import cffi
        from lowp.emulator.native_build import build_shared_library
        stub = stub_dir / "lowp_ggml_stub.c"
        stub.write_text(STUB)
        self.ffi = cffi.FFI()
        self.ffi.cdef("void lowp_ggml_set_tables(const float *, const float *, const float *);" + "".join(
            f"void ggml_vec_dot_{t}_{VEC_DOT_TYPE[t]}{g}(int, float *, size_t, const void *, size_t, const void *,"
            " size_t, int);" for t in TYPES for g in ("", "_generic")))
        path = build_shared_library([*ggml_sources(checkout, "x86"), stub], (*ggml_flags(checkout), *flags),
                                    stem="ggml-quants-orders")
        self.lib = self.ffi.dlopen(str(path))
        kept = tables()
        self.lib.lowp_ggml_set_tables(*(self.ffi.from_buffer("float[]", t) for t in kept))

    def vec_dot(self, x_type: str, x, y, n: int, generic: bool = False) -> F32:
        name = f"ggml_vec_dot_{x_type}_{VEC_DOT_TYPE[x_type]}"
        try:        # where x86 has no version, arch-fallback.h renames the _generic to the plain name
            fn = getattr(self.lib, name + ("_generic" if generic else ""))
        except AttributeError:
            fn = getattr(self.lib, name)
        out = self.ffi.new("float[1]")
        xb, yb = np.ascontiguousarray(x), np.ascontiguousarray(y)
        fn(n, out, 0, self.ffi.from_buffer(xb), 0, self.ffi.from_buffer(yb), 0, 1)
        return F32(out[0])


def count(call, x_type: str, order: str, cases: int, seed: int) -> tuple[int, int, list]:
    """(equal, total, first misses): `cases` random draws over block counts 1..9 against the named order."""
    rng = np.random.default_rng(seed)
    equal, misses = 0, []
    for i in range(cases):
        x, y, n = draw_random(x_type, 1 + i % 9, rng)
        got, want = call(x_type, x, y, n), ORDERS[order].value(x_type, x, y, n)
        if same_bits(got, want):
            equal += 1
        elif len(misses) < 3:
            misses.append((1 + i % 9, float(got), float(want), float(exact_dot(x_type, x, y, n))))
    return equal, cases, misses


AARCH64_VARIANTS = {    # ggml's armv8-a build (NEON, no dotprod: ggml_vdotq_s32's fallback) and a dotprod one
    "armv8-a": (("-march=armv8-a",), frozenset({"asimd"})),
    "armv8.2-a+dotprod": (("-march=armv8.2-a+dotprod",), frozenset({"asimd", "asimddp"})),
}
RISCV64_VARIANTS = {"rv64gcv-vl128": 128, "rv64gcv-vl256": 256}    # VLEN of qemu's -cpu
RISCV64_FLAGS = ("-march=rv64gcv",)


def zig_libc_includes(triple: str) -> tuple[str, ...]:
    """The musl headers zig ships (math.h, string.h, stdlib.h for ggml's includes; the guest has no libc)."""
    import ziglang
    base = Path(ziglang.__file__).parent / "lib" / "libc" / "include"
    return tuple(f for d in (f"{triple}-linux-musl", "generic-musl", "any-linux-any")
                 for f in ("-idirafter", str(base / d)))


class QemuLibrary:
    """ggml's quants for `arch` (arm, riscv) built with zig cc, run under qemu-user."""

    def __init__(self, checkout: Path, arch: str, flags, stub_dir: Path, cpu: str | None = None):
        from lowp.emulator.qemu import AARCH64, RISCV64, QemuMachine, build_for_qemu
        guest, triple = (AARCH64, "aarch64") if arch == "arm" else (RISCV64, "riscv64")
        stub = stub_dir / "lowp_ggml_stub.c"
        stub.write_text(STUB)
        binary = build_for_qemu(*ggml_sources(checkout, arch), stub, guest=guest,
                                flags=(*ggml_flags(checkout)[1:], *flags, *zig_libc_includes(triple)))
        self.machine = QemuMachine(binary, guest=guest, **({"cpu": cpu} if cpu else {}))
        self.machine.call("lowp_ggml_set_tables", *tables())
        self.restarts = self.machine.restarts

    def vec_dot(self, x_type: str, x, y, n: int, generic: bool = False) -> F32:
        name = f"ggml_vec_dot_{x_type}_{VEC_DOT_TYPE[x_type]}{'_generic' if generic else ''}"
        out = self.machine.call(name, n, np.zeros(1, np.float32), 0, np.ascontiguousarray(x).reshape(-1), 0,
                                np.ascontiguousarray(y).reshape(-1), 0, 1)
        assert self.machine.restarts == self.restarts, "qemu restarted: the tables are gone"
        return F32(out.arrays[0][0])
