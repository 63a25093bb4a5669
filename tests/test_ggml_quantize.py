"""ggml's activation quantizers (kernels/ggml/quantize.py): the reference variant against gguf (llama.cpp's numpy
package), the rounding flavours apart on constructed ties and together where no tie and no multiplier difference
occurs, the q8_K sign and zero-block differences, the claimed variant per ggml build; and, with a ggml checkout
($LOWP_GGML_CHECKOUT), every build's quantize_row_q8_0/q8_1/q8_K measured against the claimed variant."""
from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from lowp.kernels.ggml.blocks import FORMATS
from lowp.kernels.ggml.quantize import VARIANTS, claimed_variant, generic_variant, matching_variants
from lowp.kernels.ggml.variants import VARIANTS as BUILDS

F32 = np.float32
QK = {"q8_0": 32, "q8_1": 32, "q8_K": 256}


def _codes(y_type: str, raw: np.ndarray) -> np.ndarray:
    return FORMATS[y_type].records(raw)["qs"].astype(np.int32)


def _quantize(name: str, y_type: str, x, prior=None) -> np.ndarray:
    x = np.asarray(x, F32)
    return VARIANTS[name].quantize(y_type, x, x.size, prior)


# ---- the reference against gguf -----------------------------------------------------------------------------
def test_the_reference_q8_0_is_gguf_bit_for_bit_on_random_rows_at_every_scale():
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize
    rng = np.random.default_rng(35)
    for scale in 10.0 ** np.arange(-30, 31, 3):
        x = (rng.standard_normal(32 * 64) * scale).astype(F32)
        x[::97] = np.round(x[::97])                   # some exact integers and halves too
        x[::89] = x[::89] * 0 + F32(np.round(scale * 2) / 2 + 0.5)
        with np.errstate(over="ignore"):         # gguf's d past fp16's range: inf, as ggml stores it
            want = quantize(x, gguf.GGMLQuantizationType.Q8_0).reshape(-1)
        assert np.array_equal(_quantize("ref", "q8_0", x), want), f"scale {scale}"


def test_gguf_rounds_ties_away_from_zero_like_the_reference_and_unlike_every_simd_path():
    gguf = pytest.importorskip("gguf")
    from gguf.quants import quantize
    x = np.array([127, 2.5, -2.5, 3.5, -0.5, 0.5, 126.5, -126.5] * 4, F32)       # amax 127: d = id = 1
    got = _codes("q8_0", quantize(x, gguf.GGMLQuantizationType.Q8_0).reshape(-1))[0, :8]
    assert got.tolist() == [127, 3, -3, 4, -1, 1, 127, -127]
    assert _codes("q8_0", _quantize("ref", "q8_0", x))[0, :8].tolist() == got.tolist()
    for name in ("x86-avx", "neon", "rvv"):
        assert _codes("q8_0", _quantize(name, "q8_0", x))[0, :8].tolist() == [127, 2, -2, 4, 0, 0, 126, -126]
    assert _codes("q8_0", _quantize("wasm-simd128", "q8_0", x))[0, :8].tolist() == [127, 2, -2, 3, 0, 0, 126, -126]



def test_wasm_truncates_where_every_other_path_rounds():
    x = np.array([127, 126.9, -126.9, 0.99, -0.99, 3.5] + [0] * 26, F32)          # d = id = 1
    assert _codes("q8_0", _quantize("wasm-simd128", "q8_0", x))[0, :6].tolist() == [127, 126, -126, 0, 0, 3]
    for name in ("ref", "x86-avx", "neon", "rvv"):
        assert _codes("q8_0", _quantize(name, "q8_0", x))[0, :5].tolist() == [127, 127, -127, 1, -1]


def _multiplier_split(rng) -> tuple[np.ndarray, int]:
    """A block whose amax gives 127/amax != 1/(amax/127) and an element that the two multipliers put on either
    side of a half, and that element's index."""
    while True:
        a = F32(rng.uniform(1, 1000))
        direct, recip = F32(127) / a, F32(1) / (a / F32(127))
        if direct == recip:
            continue
        for n in range(126):
            x = F32((n + 0.5) / float(recip))
            for _ in range(4):
                if np.rint(x * direct) != np.rint(x * recip) and x * direct % 1 != 0.5 and x * recip % 1 != 0.5:
                    block = np.zeros(32, F32)
                    block[0], block[7] = a, x
                    return block, 7
                x = np.nextafter(x, F32(np.inf))


def test_127_over_amax_and_1_over_amax_by_127_put_some_element_on_different_sides_of_a_half():
    rng = np.random.default_rng(1)
    for _ in range(5):
        x, j = _multiplier_split(rng)
        avx, neon = _codes("q8_0", _quantize("x86-avx", "q8_0", x))[0], _codes("q8_0", _quantize("neon", "q8_0", x))[0]
        assert abs(avx[j] - neon[j]) == 1 and np.array_equal(np.delete(avx, j), np.delete(neon, j))
        assert _codes("q8_0", _quantize("ref", "q8_0", x))[0, j] == neon[j]       # no tie: roundf agrees with NEON


def _no_tie_no_split(blocks: np.ndarray) -> bool:
    """Neither multiplier puts an element on a half, and both give the same scaled values."""
    amax = np.abs(blocks).max(axis=1)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        recip = np.where(amax / F32(127) != 0, F32(1) / (amax / F32(127)).astype(F32), F32(0)).astype(F32)
        direct = np.where(amax != 0, F32(127) / amax, F32(0)).astype(F32)
        v1, v2 = (blocks * recip[:, None]).astype(F32), (blocks * direct[:, None]).astype(F32)
    return bool(np.all(np.isfinite(v1)) and np.array_equal(v1, v2) and not np.any(np.abs(v1) % 1 == 0.5))


finite_rows = st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=32, max_size=96).map(
    lambda v: np.array(v[:len(v) // 32 * 32], F32))


@settings(max_examples=300)
@given(finite_rows)
def test_the_rounding_variants_agree_where_no_tie_and_no_multiplier_difference_occurs(x):
    assume(_no_tie_no_split(x.reshape(-1, 32)))
    for y_type in ("q8_0", "q8_1"):
        want = _quantize("ref", y_type, x)
        for name in ("ref-saturating", "ref-saturating-nan-max", "x86-avx", "neon", "rvv"):
            assert np.array_equal(_quantize(name, y_type, x), want), (name, y_type)


@settings(max_examples=200)
@given(finite_rows)
def test_q8_1_s_is_d_times_the_code_sum_wherever_the_multiplier_is_finite(x):
    for name in ("ref", "x86-avx", "neon", "rvv", "wasm-simd128"):
        r = FORMATS["q8_1"].records(_quantize(name, "q8_1", x))
        amax = np.abs(x.reshape(-1, 32)).max(axis=1)
        d = (amax / F32(127)).astype(F32)
        # the multiplier is finite in every flavour where the block is all zeros or d is normal: 127 / amax (x86) is
        # inf where amax is a tiny subnormal whose d rounds to 0 (CI drew x = [0, ..., 0, 2.1e-44]: s = -0 there)
        finite = (amax == 0) | (d >= F32(2.0 ** -126))
        with np.errstate(over="ignore"):         # d and s past fp16's range store inf
            want = (d * r["qs"].astype(np.int64).sum(axis=1).astype(F32)).astype(np.float16).view(np.uint16)
            want_d = d.astype(np.float16).view(np.uint16)
        assert np.array_equal(r["s"][finite], want[finite]), name
        assert np.array_equal(r["d"], want_d), name


def test_q8_K_takes_its_signed_max_three_ways_and_all_three_dequantize_alike():
    x = np.random.default_rng(2).standard_normal(256).astype(F32)
    x[[10, 200]] = [4, -4]                                # the largest |x| with both signs, + first
    bytes_of = {n: _quantize(n, "q8_K", x) for n in ("ref", "rvv", "wasm-simd128")}
    d = {n: FORMATS["q8_K"].records(b)["d"][0] for n, b in bytes_of.items()}
    assert d["ref"] == d["wasm-simd128"] == F32(1) / (F32(-127) / F32(4)) and d["rvv"] == -d["ref"]
    assert _codes("q8_K", bytes_of["ref"])[0, 10] == -127 and _codes("q8_K", bytes_of["rvv"])[0, 10] == 127
    values = {n: FORMATS["q8_K"].dequantize(b) for n, b in bytes_of.items()}
    assert np.array_equal(values["ref"], values["rvv"]) and np.array_equal(values["ref"], values["wasm-simd128"])
    x[[10, 200]] = [-4, 4]                                # - first: the reference now takes rvv's sign
    assert np.array_equal(_quantize("ref", "q8_K", x), _quantize("rvv", "q8_K", x))
    assert _codes("q8_K", _quantize("wasm-simd128", "q8_K", x))[0, 10] == 127


def test_ref_fma_rounds_the_exact_product_where_the_float32_product_lands_on_a_half():
    x = _near_half(256, np.random.default_rng(3))             # x[0] is the signed max
    iscale = F32(-127) / x[0]
    rounded, exact = (x * iscale).astype(F32), x.astype(np.float64) * float(iscale)
    halves = (np.abs(rounded) % 1 == 0.5) & (rounded != exact)
    assert halves.sum() >= 32
    ref, fma = (_codes("q8_K", _quantize(n, "q8_K", x))[0] for n in ("ref", "ref-fma"))
    assert np.array_equal(ref[halves], np.rint(rounded[halves]))            # the half, to even
    assert np.array_equal(fma[halves], np.rint(exact[halves]))              # the exact product, not a tie
    assert np.array_equal(ref[~halves], fma[~halves]) and np.any(ref != fma)

def test_a_zero_q8_K_block_keeps_its_old_bsums_in_the_reference_and_wasm_and_zeroes_them_in_rvv():
    x = np.concatenate([np.zeros(256), np.ones(256)]).astype(F32)
    prior = np.full(2 * FORMATS["q8_K"].dtype.itemsize, 0xA5, np.uint8)
    for name, kept in (("ref", True), ("wasm-simd128", True), ("rvv", False)):
        r = FORMATS["q8_K"].records(_quantize(name, "q8_K", x, prior))
        assert r["d"][0] == 0 and not r["qs"][0].any()
        assert np.all(r["bsums"][0].view(np.uint16) == 0xA5A5) == kept and (kept or not r["bsums"][0].any())
        assert np.all(r["bsums"][1] == -16 * 127)           # a written block: -127/1 per element


def test_an_overflowing_multiplier_is_converted_the_way_each_instruction_does():
    x = np.array([1e-40, -1e-40, 0.0, 2e-40] * 8, F32)   # amax subnormal: id = inf, 0 * inf = NaN
    want = {"ref": [0, 0, 0, 0], "ref-saturating": [-1, 0, 0, -1], "ref-saturating-nan-max": [-1, 0, -1, -1],
            "x86-avx": [-128, -128, -128, -128], "neon": [-1, 0, 0, -1], "rvv": [-1, 0, -1, -1],
            "wasm-simd128": [-1, 0, 0, -1]}
    for name, codes in want.items():
        r = FORMATS["q8_1"].records(_quantize(name, "q8_1", x))
        assert r["d"][0] == 0 and r["qs"][0, :4].tolist() == codes, name
        assert _codes("q8_0", _quantize(name, "q8_0", x))[0, :4].tolist() == codes, name


def test_matching_variants_names_every_variant_that_gives_the_bytes():
    x = np.array([127, 2.5] + [1] * 30, F32)
    assert matching_variants("q8_0", x, 32, _quantize("ref", "q8_0", x)) == [
        "ref", "ref-saturating", "ref-saturating-nan-max"]
    assert matching_variants("q8_0", x, 32, _quantize("neon", "q8_0", x)) == ["x86-avx", "neon", "rvv", "wasm-simd128"]
    assert matching_variants("q8_0", x, 32, np.zeros(34, np.uint8)) == []
    with pytest.raises(ValueError):
        VARIANTS["ref"].quantize("q8_0", np.full(32, np.nan, F32), 32)


@pytest.mark.parametrize("build", BUILDS, ids=lambda b: b.name)
def test_the_claimed_variant_follows_the_builds_flags(build):
    """x86 takes its SIMD quantizers under __AVX__ or __AVX2__ (quants.c L309), AArch64 always (NEON), RISC-V
    under __riscv_v, wasm under __wasm_simd128__; q8_K has a SIMD path only on RISC-V and wasm."""
    features = frozenset(build.features)
    flags = " ".join(build.flags)
    simd = {"x86-64": "-mavx" in flags, "aarch64": True, "riscv64": "gcv" in flags,
            "wasm32": "-msimd128" in flags}.get(build.arch)
    if simd is None:
        pytest.skip(f"{build.arch}: no lowp target")
    for y_type in ("q8_0", "q8_1", "q8_K"):
        name = claimed_variant(build.arch, features, y_type)
        assert name.startswith("ref") == (not simd or y_type == "q8_K" and build.arch in ("x86-64", "aarch64"))
        assert y_type in VARIANTS[name].y_types


# ---- measured on a ggml checkout (not in CI) ------------------------------------------------------------------
CHECKOUT = os.environ.get("LOWP_GGML_CHECKOUT")
needs_checkout = pytest.mark.skipif(not CHECKOUT, reason="LOWP_GGML_CHECKOUT is not set: the measurement builds "
                                    "a ggml checkout's quantizers (docs/ggml.md, 'Activation quantizers')")
FUNCTIONS = ("q8_0", "q8_1", "q8_K")
REFERENCES = ("quantize_row_q8_0_ref", "quantize_row_q8_1_ref", "quantize_row_q8_K_ref")
# ggml's release builds define NDEBUG: with asserts on, the reference q8_K aborts where iscale overflows
# (nearest_int's assert, ggml-quants.c L622), on the subnormal blocks measured here.
RELEASE = ("-DNDEBUG",)
POISON = 0xA5                                   # what y holds before a call: unwritten bytes show as 0xA5


def _function_text(text: str, head: str) -> str:
    """The C function (or static inline) that starts with `head`, to its closing brace at column 0."""
    start = text.index(head)
    return text[start:text.index("\n}\n", start) + 3]


def reference_source(checkout: Path) -> str:
    """ggml-quants.c's three q8 reference quantizers and nearest_int, cut from the checkout at run time (lowp keeps
    no copy), after that file's own includes: the executor's shim traps them, the measurement needs them."""
    text = (checkout / "src/ggml-quants.c").read_text()
    includes = [line for line in text.splitlines()[:40]
                if line.startswith("#include") and "omp.h" not in line or line.startswith("#define GGML_COMMON")]
    parts = [_function_text(text, "static inline int nearest_int("),
             *(_function_text(text, f"void {name}(") for name in REFERENCES)]
    return "\n".join(["/* cut from the checkout by tests/test_ggml_quantize.py */", *includes, *parts, ""])


class Quantizers:
    """One ggml build's quantize_row_q8_* with the references linked in (the executor's VecDot build, its shim
    minus the three reference traps, plus reference_source)."""

    def __init__(self, checkout: Path, build, vector_bits=None, backend=None, flags=()):
        from lowp.kernels.ggml.executor import GgmlBuild, VecDot
        src = checkout / "src"
        self.vd = VecDot(GgmlBuild(src / "ggml-cpu/arch" / _folder(build.arch) / "quants.c",
                                   src / "ggml-cpu/quants.c", (checkout / "include", src, src / "ggml-cpu"),
                                   src / "ggml-quants.h", build), vector_bits, budget=20.0, backend=backend)
        self.checkout, self.flags = checkout, (*RELEASE, *flags)

    def sources(self, libc: bool) -> list[Path]:
        from lowp.emulator import buildcache
        from lowp.emulator.native_build import cache_dir
        from lowp.kernels.ggml.executor import shim_source
        b = self.vd.build
        shim = shim_source(b.quants_header, libc)
        for name in REFERENCES:
            shim = shim.replace(f"void {name}(void) {{ __builtin_trap(); }}", "")
        files = [buildcache.source_file(text, cache_dir() / "src", stem)
                 for text, stem in ((shim, "ggml-quant-shim"), (reference_source(self.checkout), "ggml-quant-ref"))]
        return [b.arch_source, b.generic_source, *files]

    @cached_property
    def native(self):
        import cffi

        from lowp.emulator.native_build import build_shared_library
        b = self.vd.build
        path = Path(build_shared_library(self.sources(True), (*b.flags, *self.flags, "-g"),
                                         f"ggml-quant-{b.variant.name}"))
        self._handle = cffi.FFI().dlopen(str(path))        # loaded, for its address: the guard makes the call
        return path

    @cached_property
    def machine(self):
        v = self.vd
        return v.target.machine(tuple(self.sources(v.target.arch == "wasm32")), flags=(*v._guest_flags(), *self.flags),
                                vector_bits=v.vector_bits, features=v.build.variant.features)

    def call(self, y_type: str, x: np.ndarray, k: int, generic: bool = False) -> np.ndarray:
        """The bytes quantize_row_<y_type>(x, y, k) (or its _generic twin) leaves in a y of k / QK blocks poisoned
        with POISON."""
        symbol = f"quantize_row_{y_type}" + ("_generic" if generic else "")
        x = np.ascontiguousarray(x, F32)
        y = np.full(k // QK[y_type] * FORMATS[y_type].dtype.itemsize, POISON, np.uint8)
        if self.vd.backend != "native":
            timing = {"seconds": 20.0} if self.vd.backend in ("qemu", "bochs") else {}
            return np.asarray(self.machine.call(symbol, x, y, k, names=("x", "y", "k"), **timing)["y"], np.uint8)
        from lowp.kernels import guard
        address = guard.function_address(self.native, symbol)
        with guard.Arena() as arena:
            rx, ry = arena.place("x", x), arena.place("y", y)
            guard.call(address, [rx.base, ry.base, k], arena, budget=20.0, library=self.native)
            return ry.array.copy()


def _folder(arch: str) -> str:
    return {"x86-64": "x86", "aarch64": "arm", "riscv64": "riscv", "wasm32": "wasm"}[arch]


def _block(kind: str, qk: int, rng) -> np.ndarray:
    """One block of `kind`: the inputs that tell the variants apart, and ordinary ones."""
    e = float(2.0 ** rng.integers(-20, 21))
    if kind == "normal":
        return rng.standard_normal(qk) * 10.0 ** rng.uniform(-8, 8)
    if kind == "ties":                  # amax = 127 * 2^e: d = 2^e and id = 2^-e exactly, halves land on .5
        b = (rng.integers(-126, 127, qk) + rng.choice([0.0, 0.5], qk)) * e
        b[rng.integers(qk)] = rng.choice([-127.0, 127.0]) * e
        return b
    if kind == "signs":                 # the largest |x| with both signs (q8_K's tie), in a random order
        b = rng.standard_normal(qk)
        m = np.abs(b).max() * 1.5
        b[rng.choice(qk, 2, replace=False)] = [m, -m]
        return b
    if kind == "zeros":
        return np.where(rng.random(qk) < 0.5, -0.0, 0.0)
    if kind == "subnormal":             # id overflows: 0 < amax < 127 / FLT_MAX; 0 * inf is NaN
        b = rng.standard_normal(qk) * rng.choice([1e-40, 1e-44, 1e-38, 3e-37, 1e-36])
        return np.where(rng.random(qk) < 0.2, 0.0, b)
    if kind == "huge":                  # d past fp16's range, up to FLT_MAX
        return np.clip(rng.standard_normal(qk) * 10.0 ** rng.uniform(4, 38.5), -3.4e38, 3.4e38)
    if kind == "near-half":
        return _near_half(qk, rng)
    raise ValueError(kind)


def _near_half(qk: int, rng) -> np.ndarray:
    """A block where a quarter of the products x * multiplier (the reference's: 1/(amax/127), q8_K's -127/max)
    round in float32 to exactly n + 0.5 though the exact product is not: roundf and half-even part there, and so
    do a product rounded first and a fused one."""
    a = F32(rng.uniform(0.5, 2) * 10.0 ** rng.integers(-5, 6))
    m = a * F32(rng.choice([-1, 1]))
    mult = F32(-127) / m if qk == 256 else F32(1) / (a / F32(127))
    b = np.clip(rng.standard_normal(qk) * a / 3, -a, a).astype(F32)
    b[0] = m
    for j in rng.choice(np.arange(1, qk), qk // 4, replace=False):
        t = rng.integers(-126, 126) + 0.5
        x = F32(t / float(mult))
        for cand in (x, *(np.nextafter(x, F32(s * np.inf)) for s in (1, -1))):
            if F32(cand * mult) == t and float(cand) * float(mult) != t:
                b[j] = cand
                break
    return b


KINDS = ("normal", "ties", "signs", "zeros", "subnormal", "huge", "near-half")


def measured_rows(y_type: str, rows: int, seed: int = 35):
    """`rows` rows of k = 1 to 32 blocks (q8_0/q8_1: 32..1024; q8_K: 256..2048 floats), each block of a random
    kind (two in five normal)."""
    rng = np.random.default_rng(seed)
    qk = QK[y_type]
    for _ in range(rows):
        nb = int(rng.integers(1, (1024 if qk == 32 else 2048) // qk + 1))
        kinds = rng.choice(KINDS, nb, p=[0.4, 0.15, 0.1, 0.05, 0.1, 0.1, 0.1])
        yield np.concatenate([_block(k, qk, rng) for k in kinds]).astype(F32)


def measure(q: Quantizers, y_type: str, rows: int, generic: bool = False) -> dict[str, int]:
    """equal counts per model variant over `rows` rows (and 'total') of quantize_row_<y_type> (or _generic)."""
    counts = {"total": 0, **{n: 0 for n, v in VARIANTS.items() if y_type in v.y_types}}
    prior_of = {}
    for x in measured_rows(y_type, rows):
        got = q.call(y_type, x, x.size, generic)
        prior = prior_of.setdefault(got.size, np.full(got.size, POISON, np.uint8))
        counts["total"] += 1
        for name in matching_variants(y_type, x, x.size, got, prior):
            counts[name] += 1
    return counts


# (ggml build, vector length, backend, extra flags, the compiler it stands for): the x86 builds natively with the
# host's GCC, AArch64 and RISC-V on qemu-user and wasm on wasmtime with zig's clang; armv8.0_1 once more with
# -ffp-contract=fast, GCC's default for GNU C, to stand for a GCC build (no AArch64 GCC here).
MEASURED = (("x64", None, None, (), "gcc"), ("sandybridge", None, None, (), "gcc"),
            ("haswell", None, None, (), "gcc"), ("skylakex", None, None, (), "gcc"),
            ("armv8.0_1", None, "qemu", (), "clang"), ("armv8.2_1", None, "qemu", (), "clang"),
            ("armv8.0_1", None, "qemu", ("-ffp-contract=fast",), "gcc"),
            ("riscv64_v", 128, None, (), "clang"), ("wasm_simd128", None, None, (), "clang"))
ROWS = 1000


@pytest.fixture(scope="module")
def quantizers():
    from lowp.kernels.ggml.variants import variant
    built = {}

    def get(name, vector_bits, backend, flags):
        key = (name, flags)
        if key not in built:
            built[key] = Quantizers(Path(CHECKOUT), variant(name), vector_bits, backend, flags)
        q = built[key]
        why = q.vd.unavailable()
        if why:
            pytest.skip(f"{name}: {why}")
        return q
    yield get
    for q in built.values():
        q.vd.close()
        if "machine" in q.__dict__ and hasattr(q.machine, "close"):
            q.machine.close()


@needs_checkout
@pytest.mark.parametrize("generic", [False, True], ids=["plain", "generic"])
@pytest.mark.parametrize("y_type", FUNCTIONS)
@pytest.mark.parametrize("name, vector_bits, backend, flags, compiler", MEASURED,
                         ids=[m[0] + "".join(m[3]) for m in MEASURED])
def test_each_builds_quantizer_is_its_claimed_variant(quantizers, name, vector_bits, backend, flags, compiler,
                                                       y_type, generic):
    """quantize_row_<y_type> (and its _generic twin, which calls ggml-quants.c's reference) of one ggml build on
    ROWS rows of normals, constructed ties and near-halves, sign ties, zeros, subnormal and huge blocks: every
    row's bytes (y poisoned before the call) are the claimed variant's."""
    q = quantizers(name, vector_bits, backend, flags)
    build = q.vd.build.variant
    claim = generic_variant if generic else claimed_variant
    claimed = claim(build.arch, frozenset(build.features), y_type, compiler)
    counts = measure(q, y_type, ROWS, generic)
    print(f"\nMEASURED {name}{''.join(flags)} {y_type}{'_generic' if generic else ''} claimed={claimed} {counts}")
    assert counts[claimed] == counts["total"], counts


FP16_SOURCE = r"""/* lowp's probe of ggml's fp32 -> fp16 conversions (tests/test_ggml_quantize.py): not ggml code. */
#include <immintrin.h>
#include <string.h>
#include "ggml-impl.h"
static float from_bits(unsigned bits) { float f; memcpy(&f, &bits, sizeof f); return f; }
/* counts[0]: non-NaN inputs where ggml_compute_fp32_to_fp16 (GGML_FP32_TO_FP16: the reference's, and every
   non-F16C x86 build's) and F16C's _cvtss_sh(x, 0) (GGML_CPU_FP32_TO_FP16 with F16C) differ; counts[1]: NaN ones */
void lowp_fp16_count(unsigned long long *counts) {
    unsigned bits = 0;
    do {
        float f = from_bits(bits);
        if (ggml_compute_fp32_to_fp16(f) != _cvtss_sh(f, 0)) counts[f != f]++;
    } while (++bits != 0);
}
void lowp_f16c(const float *x, unsigned short *y, unsigned n) {
    for (unsigned i = 0; i < n; i++) y[i] = _cvtss_sh(x[i], 0);
}
"""


@needs_checkout
def test_ggml_software_fp16_f16c_and_numpy_agree_on_every_finite_float32():
    """ggml_compute_fp32_to_fp16 (ggml-impl.h L407) against F16C's _cvtss_sh(x, 0) on all 2^32 float32 inputs, and
    numpy's astype(float16) (what the model stores d and s with) against F16C on every sign, exponent and the
    top 16 mantissa bits with the low 7 bits 0 or 1 (below the rounding bit of every fp16 result, they only
    count as sticky): equal wherever the input is not NaN."""
    import cffi

    from lowp.emulator import buildcache
    from lowp.emulator.native_build import build_shared_library, cache_dir
    from lowp.kernels import guard
    from lowp.kernels.ggml.executor import shim_source
    if "f16c" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("this CPU has no F16C")
    src = Path(CHECKOUT) / "src"
    probe = buildcache.source_file(FP16_SOURCE, cache_dir() / "src", "ggml-fp16-probe")
    shim = buildcache.source_file(shim_source(src / "ggml-quants.h", True), cache_dir() / "src", "ggml-shim")
    lib = Path(build_shared_library([probe, shim],
                                    ("-O2", "-mf16c", f"-I{Path(CHECKOUT) / 'include'}", f"-I{src}"), "ggml-fp16"))
    handle = cffi.FFI().dlopen(str(lib))                       # noqa: F841 (loaded: the guard calls into it)
    with guard.Arena() as arena:
        counts = arena.place("counts", np.zeros(2, np.uint64))
        guard.call(guard.function_address(lib, "lowp_fp16_count"), [counts.base], arena, budget=600.0, library=lib)
        soft = counts.array.copy()
    high = np.arange(1 << 25, dtype=np.uint32) << 7
    numpy_differ = 0
    for low in (0, 1):
        x = (high | low).view(F32)
        with guard.Arena() as arena:
            rx, ry = arena.place("x", x), arena.place("y", np.zeros(x.size, np.uint16))
            guard.call(guard.function_address(lib, "lowp_f16c"), [rx.base, ry.base, x.size], arena, budget=600.0,
                       library=lib)
            with np.errstate(over="ignore"):
                numpy_differ += int(np.count_nonzero((x.astype(np.float16).view(np.uint16) != ry.array)
                                                     & ~np.isnan(x)))
    print(f"\nMEASURED fp16: software vs F16C over 2^32: {soft[0]} non-NaN, {soft[1]} NaN differ; "
          f"numpy vs F16C over 2^26: {numpy_differ} non-NaN differ")
    assert soft[0] == 0 and numpy_differ == 0
