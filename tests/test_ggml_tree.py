"""tests/ggml_tree, lowp's own ggml-shaped checkout (what CI's tests of `lowp ggml PATH` run on), built the way ggml
builds its CPU vec_dots for each target lowp runs, and called on blocks of the exact domain
(lowp.kernels.ggml.exact.draw: every result a float32 number whatever the order). Its right kernels must equal
lowp's exact model (lowp.kernels.ggml.dot.exact_dot) bit for bit on every case; each of its four one-bug kernels
must equal a model of its bug (below, one short function each) and so differ from the exact value exactly where
that bug bites. The verdicts and the smallest failing block counts are tests/ggml_tree/EXPECTED.md's, read here.

Builds (one per module, shared by every test), on lowp's ggml executor (kernels/ggml/executor.py) as ggml's variants
build them: x86-64 haswell (AVX2, FMA, F16C) and x64 (the generic fallbacks, fp16 through ggml's table), natively
or on Bochs; AArch64 armv8-a and armv8.2-a+dotprod on Unicorn or qemu; RISC-V 64 rv64gcv at VLEN 128 and 1024 on
qemu-user (skipped with the reason where nothing here runs one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from lowp.kernels.ggml.blocks import FORMATS
from lowp.kernels.ggml.dot import exact_dot, terms
from lowp.kernels.ggml.exact import draw, margin
from lowp.kernels.ggml.executor import GgmlBuild, VecDot
from lowp.kernels.ggml.variants import variant

TREE = Path(__file__).resolve().parent / "ggml_tree"
CPU = TREE / "src" / "ggml-cpu"
INCLUDES = tuple(f"-I{TREE / d}" for d in ("include", "src", "src/ggml-cpu"))
BLOCK_COUNTS = range(1, 10)
TYPES = {"q4_0": "ggml_vec_dot_q4_0_q8_0", "q8_0": "ggml_vec_dot_q8_0_q8_0", "iq4_nl": "ggml_vec_dot_iq4_nl_q8_0"}
ONE = np.float16(1.0).view(np.uint16)


@dataclass(frozen=True)
class Build:
    name: str               # EXPECTED.md's column
    folder: str             # src/ggml-cpu/arch/<folder>
    variant: str            # the ggml variant whose flags build it (lowp.kernels.ggml.variants)
    vector_bits: int | None = None      # RISC-V: qemu's VLEN (the kernels are written for any VLEN >= 128)


BUILDS = (
    Build("x86-avx2", "x86", "haswell"),
    Build("x86-baseline", "x86", "x64"),
    Build("armv8-a", "arm", "armv8.0_1"),
    Build("armv8.2-a+dotprod", "arm", "armv8.2_1"),
    Build("rv64gcv@128", "riscv", "riscv64_v", 128),
    Build("rv64gcv@1024", "riscv", "riscv64_v", 1024),
)


def runner(build: Build) -> VecDot:
    """The build on lowp's ggml executor (natively, on Bochs where this CPU lacks AVX2, on Unicorn or qemu-user),
    or pytest.skip saying why nothing here runs it."""
    src = TREE / "src"
    vd = VecDot(GgmlBuild(CPU / "arch" / build.folder / "quants.c", CPU / "quants.c", (TREE / "include", src, CPU),
                          src / "ggml-quants.h", variant(build.variant)), build.vector_bits)
    why = vd.unavailable()
    if why:
        pytest.skip(f"{build.name}: {why}")
    return vd


@pytest.fixture(scope="module", params=BUILDS, ids=lambda b: b.name)
def built(request):
    r = runner(request.param)
    yield request.param, r
    r.close()


# -- the cases ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    label: str
    x_type: str
    x: np.ndarray
    y: np.ndarray
    n: int

    @property
    def blocks(self) -> int:
        return self.n // 32


def drawn_cases(x_type: str) -> list[Case]:
    """draw()'s blocks at every count, full range (activations halved where the bound needs) and |y| <= 64."""
    rng = np.random.default_rng(sum(map(ord, x_type)))
    cases = []
    for limit in (127, 64):
        for nb in BLOCK_COUNTS:
            x, y, n = draw(x_type, nb, rng, limit=limit)
            cases.append(Case(f"drawn |y|<={limit} nb={nb}", x_type, x, y, n))
    return cases


def full_range_iq4_nl(nb: int, rng, all_max: bool) -> Case:
    """iq4_nl against activations of +-127 with unit scales (draw may halve its activations, so built here): every
    pair of values meets +-127, the case an int16 pair sum of (value + 128) * y overflows on. all_max: every nibble
    15 (113) and every activation +127, the largest pair sum there is."""
    x = np.zeros(nb, FORMATS["iq4_nl"].dtype)
    y = np.zeros(nb, FORMATS["q8_0"].dtype)
    x["d"], y["d"] = ONE, ONE
    x["qs"] = 0xFF if all_max else rng.integers(0, 256, x["qs"].shape)
    y["qs"] = 127 if all_max else rng.choice(np.array([-127, 127], np.int8), y["qs"].shape)
    label = "all 113 x +127" if all_max else "full-range x +-127"
    return Case(f"{label} nb={nb}", "iq4_nl", x.view(np.uint8).reshape(nb, -1), y.view(np.uint8).reshape(nb, -1),
                32 * nb)


@cache
def cases(x_type: str) -> tuple[Case, ...]:
    found = drawn_cases(x_type)
    if x_type == "iq4_nl":
        rng = np.random.default_rng(427)
        found += [full_range_iq4_nl(nb, rng, m) for m in (False, True) for nb in BLOCK_COUNTS]
    return tuple(found)


# -- the models: the exact value, and what each bug makes of it ---------------------------------------------------
def exact(c: Case) -> Fraction:
    return exact_dot(c.x_type, c.x, c.y, c.n)


def codes_and_scales(c: Case) -> tuple[np.ndarray, np.ndarray, list[Fraction]]:
    """(x codes, y codes: (blocks, 32) int64 in element order; each block's dx * dy, exactly)."""
    xd = FORMATS[c.x_type].decode(FORMATS[c.x_type].records(c.x))
    yd = FORMATS["q8_0"].decode(FORMATS["q8_0"].records(c.y))
    scales = [Fraction(float(a)) * Fraction(float(b)) for a, b in zip(xd.scale[:, 0], yd.scale[:, 0])]
    return xd.codes.astype(np.int64), yd.codes.astype(np.int64), scales


def odd_tail_dropped(c: Case) -> Fraction:
    """llama.cpp #8549 (NEON q4_0) and #29131 (RVV iq4_nl): two blocks a step, no tail: an odd count's last block
    is never read."""
    even = c.blocks - c.blocks % 2
    if even == 0:
        return Fraction(0)
    return exact_dot(c.x_type, c.x[:even], c.y[:even], 32 * even)


def vdotq_fallback_lanes(c: Case) -> Fraction:
    """llama.cpp #21462: SDOT emulated by widening pairwise adds feeds lane i bytes 2i, 2i+1, 8+2i, 8+2i+1 of a
    register whose 4-byte groups alternate between blocks ib and ib + 1 (scaled by {d0, d1, d0, d1}): in every
    group of 4 bytes of either block the first two products get d0, the last two d1. An odd tail block is right."""
    xc, yc, d = codes_and_scales(c)
    p = (xc * yc).reshape(c.blocks, 8, 4)
    total = Fraction(0)
    for ib in range(0, c.blocks - 1, 2):
        first, last = p[ib:ib + 2, :, :2].sum(), p[ib:ib + 2, :, 2:].sum()
        total += int(first) * d[ib] + int(last) * d[ib + 1]
    if c.blocks % 2:
        total += int(p[-1].sum()) * d[-1]
    return total


def maddubs_saturated(c: Case) -> Fraction:
    """ik_llama.cpp #427: VPMADDUBSW of (value + 128) with y saturates each adjacent pair's sum to int16; 128 *
    sum(y) (no overflow for |y| <= 127) is subtracted after."""
    xc, yc, d = codes_and_scales(c)
    pairs = ((xc + 128) * yc).reshape(c.blocks, 16, 2).sum(axis=2)
    sums = np.clip(pairs, -32768, 32767).sum(axis=1) - 128 * yc.sum(axis=1)
    return sum((int(s) * k for s, k in zip(sums, d)), Fraction(0))


BUG_MODELS = {"odd tail dropped": odd_tail_dropped, "vdotq fallback lanes": vdotq_fallback_lanes,
              "maddubs saturation": maddubs_saturated}


# -- EXPECTED.md -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Expected:
    kernel: str
    build: str
    verdict: str            # PASS or FAIL
    smallest: int | None    # the smallest failing block count (FAIL)
    bug: str | None         # BUG_MODELS' key (FAIL)


ROW = re.compile(r"^\|\s*`(\w+)`\s*\|\s*([^|\s]+)\s*\|\s*(PASS|FAIL)\s*\|\s*(\d+|-)\s*\|\s*([^|]*?)\s*\|")


def expected_rows() -> list[Expected]:
    rows = []
    for line in (TREE / "EXPECTED.md").read_text().splitlines():
        m = ROW.match(line)
        if m:
            kernel, build, verdict, smallest, bug = m.groups()
            rows.append(Expected(kernel, build, verdict, None if smallest == "-" else int(smallest),
                                 bug.split(":")[0] if verdict == "FAIL" else None))
    return rows


def expected(kernel: str, build: str) -> Expected:
    found = [r for r in expected_rows() if r.kernel == kernel and (r.build == "every" or build in r.build.split(","))]
    assert len(found) == 1, f"EXPECTED.md: {len(found)} rows for {kernel} on {build}"
    return found[0]


def test_expected_table_covers_every_kernel_and_names_a_model():
    rows = expected_rows()
    for kernel in [*TYPES.values(), *(k + "_generic" for k in TYPES.values())]:
        for b in BUILDS:
            expected(kernel, b.name)
    assert all(r.bug in BUG_MODELS for r in rows if r.verdict == "FAIL")
    assert sum(r.verdict == "FAIL" for r in rows) == 5, "four bugs; the q4_0 one in both AArch64 builds"


# -- the runs ----------------------------------------------------------------------------------------------------
def as_float32(v: Fraction) -> np.float32:
    f = np.float32(float(v))
    assert Fraction(float(f)) == v, f"the model's value {v} is not a float32 number: not an exact-domain case"
    return f


@pytest.mark.parametrize("x_type", TYPES)
@pytest.mark.parametrize("suffix", ["", "_generic"])
def test_tree_kernel_against_its_expected_verdict(built, x_type, suffix):
    build, run = built
    kernel = TYPES[x_type] + suffix
    row = expected(kernel, build.name)
    model = BUG_MODELS[row.bug] if row.bug else exact
    wrong, failing = [], []
    for c in cases(x_type):
        got = run.call(kernel, c.x, c.y, c.n)
        want = as_float32(model(c))
        if got.view(np.uint32) != want.view(np.uint32):
            wrong.append(f"{c.label}: {got!r}, the model says {want!r}")
        if want != as_float32(exact(c)):
            failing.append(c.blocks)
    assert not wrong, f"{kernel} on {build.name} ({row.bug or 'exact'}): " + "; ".join(wrong[:5])
    if row.verdict == "PASS":
        return
    assert failing, f"{kernel} on {build.name}: no case shows {row.bug}"
    assert min(failing) == row.smallest, f"{kernel} on {build.name}: first fails at {min(failing)} blocks"


def test_bug_cases_are_where_the_bugs_bite():
    """The cases reach each bug and spare what it spares: the odd tail only at odd counts; the lane mix-up from
    two blocks on; the saturation on full-range activations and never at |y| <= 64."""
    q4, q8, iq4 = cases("q4_0"), cases("q8_0"), cases("iq4_nl")
    assert all(margin(terms(c.x_type, c.x, c.y, c.n)) >= 1 for c in (*q4, *q8, *iq4)), "all in the exact domain"
    assert all((odd_tail_dropped(c) != exact(c)) == (c.blocks % 2 == 1) for c in q4)
    assert all(vdotq_fallback_lanes(c) == exact(c) for c in q8 if c.blocks == 1)
    assert any(vdotq_fallback_lanes(c) != exact(c) for c in q8 if c.blocks == 2)
    assert all(maddubs_saturated(c) == exact(c) for c in iq4 if "|y|<=64" in c.label)
    assert all(maddubs_saturated(c) != exact(c) for c in iq4 if "+-127" in c.label or "+127" in c.label)


# -- the builds no test runs: what the fallbacks make of them ------------------------------------------------------
def vec_dot_symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(the vec_dots an object file defines, those it calls)."""
    from elftools.elf.elffile import ELFFile
    with open(obj, "rb") as f:
        symbols = [s for s in ELFFile(f).get_section_by_name(".symtab").iter_symbols() if "vec_dot" in s.name]
        return ({s.name for s in symbols if s["st_shndx"] != "SHN_UNDEF"},
                {s.name for s in symbols if s["st_shndx"] == "SHN_UNDEF"})


def compile_object(source: Path, triple: str, cpu: str, out: Path) -> Path:
    import subprocess
    import sys
    subprocess.run([sys.executable, "-m", "ziglang", "cc", "-target", triple, f"-mcpu={cpu}", "-O2", "-std=gnu11",
                    "-ffreestanding", "-Werror", "-Wall", "-Wextra", *INCLUDES, "-c", str(source), "-o", str(out)],
                   check=True, capture_output=True)
    return out


PLAIN = set(TYPES.values())
GENERIC = {k + "_generic" for k in PLAIN}


@pytest.mark.parametrize("folder, triple, cpu, arch_defines, arch_calls, generic_defines", [
    # RISC-V without V (ggml's riscv64 variant without RVV): the arch file's kernels call the generic ones
    ("riscv", "riscv64-linux-none", "generic_rv64+m+a+f+d+c", PLAIN, GENERIC, GENERIC),
    # POWER: only the q8_0 dot is in arch/powerpc; arch-fallback.h makes the other generics the plain names
    ("powerpc", "powerpc64le-linux-none", "generic", {TYPES["q8_0"]}, {TYPES["q8_0"] + "_generic"},
     {TYPES["q4_0"], TYPES["iq4_nl"], TYPES["q8_0"] + "_generic"}),
])
def test_every_arch_folder_builds_and_falls_back(tmp_path, folder, triple, cpu, arch_defines, arch_calls,
                                                 generic_defines):
    arch = compile_object(CPU / "arch" / folder / "quants.c", triple, cpu, tmp_path / "arch.o")
    generic = compile_object(CPU / "quants.c", triple, cpu, tmp_path / "generic.o")
    assert vec_dot_symbols(arch) == (arch_defines, arch_calls)
    assert vec_dot_symbols(generic)[0] == generic_defines
