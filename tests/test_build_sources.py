"""Kernels made of what real kernels are made of (tests/build_sources/kernels.toml): several C files with a
header directory and defines, C++ and an AArch64 `.S` entry with a C helper, natively and under Unicorn; the
build cache rebuilds when any source, header, define or include directory changes and not otherwise; lowp's
freestanding AArch64 headers each build and run from C and C++; a source that does not build, a missing file or
directory and a malformed define are errors naming the kernel, the file and the key before anything runs."""
from __future__ import annotations

import platform
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator import buildcache
from lowp.cli import main
from lowp.kernels import Kernel, executor
from lowp.kernels.schema import specs_from_toml

HERE = Path(__file__).resolve().parent / "build_sources"
TOML = HERE / "kernels.toml"
NAMES = ("bs_two_c_x86", "bs_two_c_arm", "bs_cxx_x86", "bs_cxx_arm", "bs_asm_arm")


@pytest.fixture(autouse=True)
def forget_test_kernels(forget_kernels):
    """Unregister what a test registered (check() and the commands register the TOML's kernels)."""
    yield


def load(path: Path = TOML) -> dict[str, Kernel]:
    """The kernels of a TOML file, not registered."""
    return {spec.name: spec.to_kernel() for spec in specs_from_toml(path)}


def runnable(k: Kernel):
    if k.target == "x86-64" and platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"{k.name} runs natively on an x86-64 host, not {platform.machine()}")
    ex = executor(k)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{k.name}: {reason}")
    return ex


def exact(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return A.astype(np.int64) @ B.astype(np.int64)


# ---- the kernels run, natively and emulated ------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_each_kernel_computes_the_exact_gemm(name):
    k = load()[name]
    ex = runnable(k)
    rng = np.random.default_rng(7)
    for M, N, K in ((1, 1, 1), (3, 5, 17), (4, 2, 64), (2, 3, 0)):
        A = rng.integers(-128, 128, (M, K), dtype=np.int8)
        B = rng.integers(-128, 128, (K, N), dtype=np.int8)
        C = ex.run(A, B, seed=M)
        assert C.dtype == np.int32 and np.array_equal(C, exact(A, B)), (name, M, N, K)


@pytest.mark.parametrize("name", NAMES)
def test_each_kernel_passes_its_claim_through_conformance(name):
    from lowp.conformance import check
    k = load()[name]
    runnable(k)
    assert check(k, examples=15)["verdict"] == "PASS"


def test_the_kernels_are_what_the_toml_says():
    ks = load()
    two = ks["bs_two_c_arm"]
    assert two.sources == (HERE / "two_c" / "bs_kernel.c", HERE / "two_c" / "bs_dot.c")
    assert two.source == two.sources[0] and two.include_dirs == (HERE / "two_c" / "include",)
    assert two.defines == ("BS_OFFSET=0", "BS_CHECKED")
    assert two.build_flags() == ("-O2", f"-I{HERE / 'two_c' / 'include'}", "-DBS_OFFSET=0", "-DBS_CHECKED")
    assert ks["bs_cxx_x86"].sources == (HERE / "cxx" / "bs_cxx.cc",)


def test_native_cxx_links_its_runtime_and_c_stays_c(tmp_path):
    """A C++ source that needs the C++ runtime (operator new, std::vector) loads: the C++ driver linked the
    library; a C source beside it is still compiled as C (a C++ compile would reject `int new;`)."""
    import cffi
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("native builds need an x86-64 host")
    from lowp.emulator.x86.native import build_shared_library
    (tmp_path / "v.cc").write_text('#include <vector>\n#include <numeric>\nextern "C" int c_side(int);\n'
                                   'extern "C" long long total(int n) { std::vector<long long> v(n); '
                                   'std::iota(v.begin(), v.end(), 1); return std::accumulate(v.begin(), v.end(), 0LL) '
                                   '+ c_side(n); }\n')
    (tmp_path / "c.c").write_text("int c_side(int n) { int new = n * 1000; return new; }\n")
    ffi = cffi.FFI()
    ffi.cdef("long long total(int n);")
    lib = ffi.dlopen(str(build_shared_library([tmp_path / "v.cc", tmp_path / "c.c"], ("-O2",), "cxx-probe")))
    assert lib.total(100) == 100 * 101 // 2 + 100 * 1000


# ---- the build cache: everything that goes into a build is in the key -----------------------------------------
# Per kernel, the files whose bytes go into its build (the header ones reached only through the compiler's -MMD
# list: through include_dirs, "" next to a .cc and a .S).
INPUTS = {
    "bs_two_c_x86": ["two_c/bs_kernel.c", "two_c/bs_dot.c", "two_c/include/bs_kernel.h"],
    "bs_two_c_arm": ["two_c/bs_kernel.c", "two_c/bs_dot.c", "two_c/include/bs_kernel.h"],
    "bs_cxx_x86": ["cxx/bs_cxx.cc", "cxx/bs_cxx.h"],
    "bs_cxx_arm": ["cxx/bs_cxx.cc", "cxx/bs_cxx.h"],
    "bs_asm_arm": ["asm/bs_asm.S", "asm/bs_asm.h", "two_c/bs_dot.c", "two_c/include/bs_kernel.h"],
}


def artifact(k: Kernel) -> Path:
    """Build `k` as its executor does (through the cache) and return the library or ELF."""
    ex = executor(k)
    if ex.backend == "native":
        ex._lib
        return ex.library_path
    return ex.machine.binary.path


def compiles(k: Kernel) -> tuple[int, Path]:
    """(compiler runs this build took, the artifact)."""
    before = buildcache.stats["compiler_runs"]
    path = artifact(k)
    return buildcache.stats["compiler_runs"] - before, path


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of tests/build_sources in its own cache directory: edits there touch nothing shared."""
    root = tmp_path / "proj"
    shutil.copytree(HERE, root)
    monkeypatch.setenv("LOWP_CACHE_DIR", str(tmp_path / "cache"))
    return root


@pytest.mark.parametrize("name", NAMES)
def test_the_cache_rebuilds_when_a_source_or_header_changes_and_not_otherwise(name, project):
    k = load(project / "kernels.toml")[name]
    runnable(k)
    runs, first = compiles(k)
    runtime = (1 + any(s.suffix == ".cc" for s in k.sources)) if k.target == "aarch64" else 0   # runtime.c, _cxx.cc
    assert runs == len(k.sources) + runtime + 1                         # each source compiled once, one link
    assert compiles(k) == (0, first)                                    # untouched: no compiler runs
    (project / "unrelated.h").write_text("#define NOTHING 1\n")         # a file no compile reads
    (project / k.source.parent.name / "notes.txt").write_text("next to the sources\n")
    assert compiles(k) == (0, first)
    for rel in INPUTS[name]:
        path = project / rel
        path.write_text(path.read_text() + "\n/* touched */\n")
        runs, rebuilt = compiles(k)
        assert runs >= 1 and rebuilt != first, f"{rel} changed but {name} was not rebuilt"
        assert compiles(k)[0] == 0, f"{name} rebuilt twice after one change of {rel}"
    A, B = np.full((2, 3), -128, np.int8), np.full((3, 2), 127, np.int8)
    assert np.array_equal(executor(k).run(A, B), exact(A, B))          # comments changed nothing it computes


@pytest.mark.parametrize("name", ["bs_two_c_x86", "bs_two_c_arm"])
def test_defines_and_include_dirs_are_in_the_key(name, project):
    base = load(project / "kernels.toml")[name]
    runnable(base)
    import dataclasses
    A = np.array([[1, -2, 3]], np.int8)
    B = np.array([[4], [5], [-6]], np.int8)
    compiles(base)
    for offset in (3, -7):
        k = dataclasses.replace(base, defines=(f"BS_OFFSET={offset}", "BS_CHECKED"))
        runs, _ = compiles(k)
        assert runs >= 1
        assert executor(k).run(A, B)[0, 0] == exact(A, B)[0, 0] + offset   # the define reached the compile
    assert compiles(base)[0] == 0                      # back to the first define: its build is still cached
    (project / "empty").mkdir()
    more = dataclasses.replace(base, include_dirs=(*base.include_dirs, project / "empty"))
    assert compiles(more)[0] >= 1
    assert compiles(more)[0] == 0
    wrong = dataclasses.replace(base, defines=("BS_OFFSET=0",))       # BS_CHECKED missing: the #error fires
    with pytest.raises(Exception, match="BS_CHECKED comes from the entry's defines"):
        compiles(wrong)


def test_the_language_of_each_source_is_in_the_key(tmp_path, monkeypatch):
    source = tmp_path / "x.c"
    source.write_text("int x;\n")
    chain = buildcache.Toolchain(("cc",), "cc 1")

    def key():
        return buildcache._key1(chain, ("-O2",), (), tmp_path, [source], [], None, {})
    as_c = key()
    assert key() == as_c
    monkeypatch.setitem(buildcache.LANGUAGES, ".c", "c++")
    assert key() != as_c
    assert buildcache._key1(chain, ("-O2",), (), tmp_path, [source], [], chain, {"c++": ("-fno-rtti",)}) != key()


@pytest.mark.parametrize("name, suffix", [("x.f90", ".f90"), ("x", "(no suffix)"), ("x.C", ".C")])
def test_a_source_of_no_known_language_is_refused(name, suffix, tmp_path):
    with pytest.raises(ValueError, match=re.escape(f"unknown source language {suffix!r}")):
        buildcache.language(tmp_path / name)


# ---- lowp's freestanding headers for AArch64, from C and from C++ ----------------------------------------------
# header -> (the body of `long long probe(long long x)` using it, what it returns for x = 5, computed independently)
I8, U8, I64, U64 = np.iinfo(np.int8), np.iinfo(np.uint8), np.iinfo(np.int64), np.iinfo(np.uint64)
C_HEADERS = {
    "assert.h": ("assert(x > 0); return x * 2;", 10),
    "stdint.h": ("return (long long)INT8_MIN + UINT16_MAX + (long long)sizeof(int64_t) + x;",
                 int(I8.min) + 65535 + 8 + 5),
    "stddef.h": ("struct s { char c; long long v; }; return offsetof(struct s, v) + sizeof(size_t) + x;", 8 + 8 + 5),
    "limits.h": ("return CHAR_BIT * 1000 + (SCHAR_MIN == -128) * 100 + (UCHAR_MAX == 255) * 10 + (CHAR_MIN == 0);",
                 8 * 1000 + 100 + 10 + 1),                # AAPCS64: plain char is unsigned
    "string.h": ("unsigned char b[8]; memset(b, (int)x, 8); unsigned char c[8]; memcpy(c, b, 8); "
                 "return c[7] + c[0] * 256 + (memcmp(b, c, 8) == 0);", 5 + 5 * 256 + 1),
    "stdbool.h": ("bool t = x > 3; return t + (bool)2 * 10 + (int)sizeof(bool) * 100;", 1 + 10 + 100),
}
CXX_HEADERS = {
    "cassert": ("assert(x > 0); return x * 2;", 10),
    "cstdint": ("std::int8_t a = -128; std::uint16_t b = std::uint16_t(-1); "
                "return a + b + (long long)sizeof(std::int64_t) + x;", int(I8.min) + 65535 + 8 + 5),
    "cstddef": ("std::size_t n = alignof(std::max_align_t); std::ptrdiff_t d = -x; std::nullptr_t p = nullptr; "
                "return (long long)n + d + (p == nullptr) + (long long)sizeof(std::byte);", 16 - 5 + 1 + 1),
    "climits": ("return LLONG_MAX == 9223372036854775807LL ? INT_MIN / 65536 + x : 0;", -(2 ** 31) // 65536 + 5),
    "cstring": ("char a[4] = {1, 2, 3, 4}, b[4]; std::memcpy(b, a, 4); std::memset(a, 0, 2); "
                "return b[3] * 10 + a[1] + (std::memcmp(a, b, 4) < 0) + x;", 40 + 0 + 1 + 5),
    "algorithm": ("return std::min<long long>(x, 3) * 100 + std::max<long long>(x, 3) * 10 + "
                  "std::clamp<long long>(x, 6, 9) + std::max(2, 1, [](int a, int b) { return a > b; });",
                  300 + 50 + 6 + 1),
    "type_traits": ("static_assert(std::is_same_v<std::make_unsigned_t<signed char>, unsigned char>);"
                    "static_assert(std::is_integral<long>::value && !std::is_integral_v<float>);"
                    "static_assert(std::is_same<std::conditional_t<true, int, char>, int>::value);"
                    "return std::is_signed<char>::value * 100 + std::is_unsigned_v<char> * 10 + "
                    "std::is_floating_point<double>{} + x;", 0 + 10 + 1 + 5),
    "stdbool.h": ("bool t = x > 3; return t * 10 + (int)sizeof(bool);", 11),
}
# <limits>: what each query returns, against numpy's type information (independent of the header's arithmetic)
LIMITS = [
    ("std::numeric_limits<std::int8_t>::min()", int(I8.min)), ("std::numeric_limits<std::int8_t>::max()", int(I8.max)),
    ("std::numeric_limits<std::uint8_t>::max()", int(U8.max)),
    ("std::numeric_limits<std::int16_t>::min()", int(np.iinfo(np.int16).min)),
    ("std::numeric_limits<std::uint16_t>::max()", int(np.iinfo(np.uint16).max)),
    ("std::numeric_limits<std::int32_t>::min()", int(np.iinfo(np.int32).min)),
    ("std::numeric_limits<std::int32_t>::max()", int(np.iinfo(np.int32).max)),
    ("(long long)std::numeric_limits<std::uint32_t>::max()", int(np.iinfo(np.uint32).max)),
    ("std::numeric_limits<long long>::min()", int(I64.min)), ("std::numeric_limits<long>::max()", int(I64.max)),
    ("(long long)std::numeric_limits<unsigned long long>::max()", int(U64.max) - 2 ** 64),    # the bits of -1
    ("std::numeric_limits<char>::min()", 0), ("std::numeric_limits<char>::max()", 255),       # unsigned on AArch64
    ("std::numeric_limits<const short>::lowest()", int(np.iinfo(np.int16).min)),
    ("std::numeric_limits<int>::digits", 31), ("std::numeric_limits<unsigned>::digits", 32),
    ("std::numeric_limits<std::int64_t>::digits10", 18), ("std::numeric_limits<std::uint64_t>::digits10", 19),
    ("std::numeric_limits<bool>::digits", 1), ("std::numeric_limits<bool>::max()", 1),
    ("std::numeric_limits<int>::is_signed + 2 * std::numeric_limits<unsigned>::is_modulo", 3),
    ("std::numeric_limits<float>::digits", int(np.finfo(np.float32).nmant) + 1),
    ("bits(std::numeric_limits<float>::max())", int(np.float32(np.finfo(np.float32).max).view(np.uint32))),
    ("bits(std::numeric_limits<float>::min())", int(np.float32(np.finfo(np.float32).tiny).view(np.uint32))),
    ("bits(std::numeric_limits<float>::lowest())", int(np.float32(np.finfo(np.float32).min).view(np.uint32))),
    ("bits(std::numeric_limits<float>::epsilon())", int(np.float32(np.finfo(np.float32).eps).view(np.uint32))),
    ("bits(std::numeric_limits<float>::infinity())", int(np.float32(np.inf).view(np.uint32))),
    ("std::numeric_limits<float>::quiet_NaN() != std::numeric_limits<float>::quiet_NaN()", 1),
    ("std::numeric_limits<double>::max() == 1.7976931348623157e308", 1),
]


def run_probe(text: str, suffix: str, x: int):
    from lowp.emulator import Machine, build_text
    return Machine(build_text(text, suffix=suffix, name="headers")).call("probe", x).ret


def signed(value: int) -> int:
    return value - 2 ** 64 if value >= 2 ** 63 else value


@pytest.mark.parametrize("header", C_HEADERS)
def test_each_freestanding_header_builds_and_runs_from_c(header):
    body, expected = C_HEADERS[header]
    text = f"#include <{header}>\nlong long probe(long long x) {{ {body} }}\n"
    assert signed(run_probe(text, ".c", 5)) == expected


@pytest.mark.parametrize("header", CXX_HEADERS)
def test_each_freestanding_header_builds_and_runs_from_cxx(header):
    body, expected = CXX_HEADERS[header]
    text = f"#include <{header}>\nextern \"C\" long long probe(long long x) {{ {body} }}\n"
    assert signed(run_probe(text, ".cc", 5)) == expected


def test_numeric_limits_match_the_types():
    cases = "\n".join(f"    case {i}: return (long long)({query});" for i, (query, _) in enumerate(LIMITS))
    text = ("#include <limits>\n#include <cstdint>\n#include <cstring>\n"
            "static long long bits(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }\n"
            f"extern \"C\" long long probe(long long x) {{\n  switch (x) {{\n{cases}\n  }}\n  return -1;\n}}\n")
    from lowp.emulator import Machine, build_text
    machine = Machine(build_text(text, suffix=".cc", name="limits"))
    got = [signed(machine.call("probe", i).ret) for i in range(len(LIMITS))]
    assert got == [expected for _, expected in LIMITS]


@pytest.mark.parametrize("header, suffix", [("assert.h", ".c"), ("cassert", ".cc")])
def test_a_failed_assert_is_a_trap_under_unicorn_and_ndebug_turns_it_off(header, suffix):
    from lowp.emulator import Machine, Trap, build_text
    extern = 'extern "C" ' if suffix == ".cc" else ""
    text = f"#include <{header}>\n{extern}long long probe(long long x) {{ assert(x > 0); return x; }}\n"
    machine = Machine(build_text(text, suffix=suffix, name="assert"))   # -O2: zig's own NDEBUG is undone
    assert machine.call("probe", 4).ret == 4
    with pytest.raises(Trap, match="brk"):
        machine.call("probe", 0)
    quiet = Machine(build_text(text, suffix=suffix, name="assert", flags=["-DNDEBUG"]))
    assert quiet.call("probe", 0).ret == 0


def test_a_cxx_class_hierarchy_links_and_a_pure_virtual_call_traps():
    """The two hooks a class hierarchy references without a C++ runtime (emulator/runtime_cxx.cc)."""
    from lowp.emulator import Machine, Trap, build_text
    text = """
struct Shape { virtual ~Shape() {} virtual long long area() const = 0; };
struct Square : Shape {
    long long s;
    explicit Square(long long s) : s(s) {}
    long long area() const override { return s * s; }
};
extern "C" long long probe(long long x) { Square q(x); const Shape &shape = q; return shape.area(); }
extern "C" void __cxa_pure_virtual();
extern "C" long long pure(long long) { __cxa_pure_virtual(); return 0; }
"""
    machine = Machine(build_text(text, suffix=".cc", name="hierarchy"))
    assert machine.call("probe", 7).ret == 49
    with pytest.raises(Trap):
        machine.call("pure", 0)


# ---- bad input: named before anything runs ---------------------------------------------------------------------
def write_toml(root: Path, text: str) -> Path:
    path = root / "bad.toml"
    path.write_text(text)
    return path


def entry_text(name: str, target: str, lines: str) -> str:
    return (f'[[kernel]]\nname = "{name}"\ntarget = "{target}"\n{lines}\nsymbol = "bs_two_c_gemm"\n'
            'signature = "gemm"\na_type = "s8"\nb_type = "s8"\ntile = {mr = 1, nr = 1, kr = 1}\npacking = "none"\n'
            'contract = "exact"\ndomain = {a = [-128, 127], b = [-128, 127]}\n'
            'model = "lowp.kernels.models:exact_gemm"\n\n')


BROKEN = 'sources = ["two_c/bs_kernel.c", "two_c/broken.c"]\ninclude_dirs = ["two_c/include"]\n' \
         'defines = ["BS_OFFSET=0", "BS_CHECKED"]'


@pytest.mark.parametrize("target", ["x86-64", "aarch64"])
def test_a_source_that_does_not_build_exits_2_naming_kernel_file_and_compiler_message(target, project, capsys):
    (project / "two_c" / "broken.c").write_text("int broken(void) { return undeclared_name; }\n")
    path = write_toml(project, entry_text("bs_broken", target, BROKEN))
    out = project / "report"
    assert main(["conformance", "--kernels", str(path), "--kernel", "bs_broken", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{path}: kernel 'bs_broken': sources: " in err
    assert f"{project / 'two_c' / 'broken.c'} does not build" in err and "undeclared_name" in err
    assert "bs_kernel.c does not build" not in err
    assert not out.exists()                            # nothing ran


def test_a_link_that_fails_names_every_source_and_the_missing_symbol(project, capsys):
    (project / "two_c" / "other.c").write_text("int other(void) { return 1; }\n")
    lines = BROKEN.replace("two_c/broken.c", "two_c/other.c")
    path = write_toml(project, entry_text("bs_unlinked", "aarch64", lines))
    assert main(["conformance", "--kernels", str(path), "--kernel", "bs_unlinked", "--out", str(project / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{project / 'two_c' / 'bs_kernel.c'}, {project / 'two_c' / 'other.c'} do not link" in err
    assert "bs_dot" in err


BAD_FILES = 'sources = ["two_c/bs_kernel.c", "two_c/none.c"]\ninclude_dirs = ["two_c/include", "nodir"]\n' \
            'defines = ["BS_OFFSET=0", "BS CHECKED"]'


@pytest.mark.parametrize("command", [
    ["emulate", "--kernel", "bs_bad_files"],
    ["bench", "gemm", "--quick", "--no-torch"],
    ["bounds"],
    ["conformance", "--kernel", "bs_bad_files"],
])
def test_missing_files_and_a_bad_define_are_schema_problems_in_every_command(command, project, capsys):
    path = write_toml(project, entry_text("bs_bad_files", "aarch64", BAD_FILES))
    assert main([*command, "--kernels", str(path)]) == 2
    err = capsys.readouterr().err
    prefix = f"{path}: kernel 'bs_bad_files': "
    assert f"{prefix}sources[1]: no such file: {project / 'two_c' / 'none.c'}" in err
    assert f"{prefix}include_dirs[1]: no such directory: {project / 'nodir'}" in err
    assert f"{prefix}defines[1]: 'BS CHECKED' is not a valid defines entry: NAME or NAME=VALUE" in err
    # conformance also says the --kernel it was asked for is not registered (the refused file registered nothing)
    assert f"{3 + (command[0] == 'conformance')} problems" in err


def test_emulate_builds_a_registered_kernel_as_its_entry_says(capsys):
    """bs_two_c_arm #errors without its defines and does not link without its second source: it ran, so both
    applied; the C it prints is the exact product of the given operands."""
    A = (np.arange(8) % 256).astype(np.int8).reshape(2, 4)
    B = np.ones((4, 3), np.int8)
    status = main(["emulate", "--kernels", str(TOML), "--kernel", "bs_two_c_arm", "--arg", "M=2", "--arg", "N=3",
                   "--arg", "K=4", "--arg", "A=s8:2x4:arange", "--arg", "B=s8:4x3:ones", "--arg", "C=s32:2x3",
                   "--arg", "work=u8:16"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "C (int32[2, 3], changed):\n" + str(exact(A, B).astype(np.int32)) in out


def test_emulate_runs_an_x86_kernel_on_bochs_and_refuses_sources_with_a_kernel(capsys):
    from lowp.emulator.x86 import bochs
    if bochs.unavailable() is None:       # two C files, a header directory and defines, built for Bochs
        args = ["--arg", "M=2", "--arg", "N=3", "--arg", "K=4", "--arg", "A=s8:2x4:ones", "--arg", "B=s8:4x3:ones",
                "--arg", "C=s32:2x3", "--arg", "work=u8:64"]
        assert main(["emulate", "--kernels", str(TOML), "--kernel", "bs_two_c_x86", *args]) == 0
        out = capsys.readouterr().out
        assert "ran on: Bochs" in out and "[[4 4 4]\n [4 4 4]]" in out
    from lowp.kernels.registry import _KERNELS
    registered = [] if "bs_two_c_x86" in _KERNELS else ["--kernels", str(TOML)]
    assert main(["emulate", *registered, "--kernel", "bs_two_c_x86", "--backend", "qemu"]) == 2
    assert "unknown backend 'qemu': x86-64 kernels run on native or bochs" in capsys.readouterr().err
    assert main(["emulate", str(HERE / "two_c" / "bs_dot.c"), "--kernel", "bs_two_c_arm"]) == 2
    assert "not both" in capsys.readouterr().err


def test_bench_gemm_selects_with_kernel_and_takes_kernels_files(capsys):
    from lowp.cli import build_parser
    from lowp.commands.bench import gemm_kernels
    args = build_parser().parse_args(["bench", "gemm", "--kernels", str(TOML), "--kernel", "bs_two_c_x86",
                                      "--kernel", "bs_cxx_x86"])
    assert gemm_kernels(args) == ["bs_two_c_x86", "bs_cxx_x86"]
    assert capsys.readouterr().err == ""
    old = build_parser().parse_args(["bench", "gemm", "--kernels", "u8s8s32_avx2", "bs_cxx_x86"])
    assert gemm_kernels(old) == ["u8s8s32_avx2", "bs_cxx_x86"]          # the old spelling still selects ...
    err = capsys.readouterr().err
    assert "deprecated" in err and "--kernel u8s8s32_avx2 --kernel bs_cxx_x86" in err    # ... and says the new one
    arm = build_parser().parse_args(["bench", "gemm", "--kernel", "bs_asm_arm"])
    assert gemm_kernels(arm) == ["bs_asm_arm"] and "bs_asm_arm is an aarch64 kernel" in capsys.readouterr().err
    typo = build_parser().parse_args(["bench", "gemm", "--kernel", "bs_cxx_x68"])
    assert main(["bench", "gemm", "--kernel", "bs_cxx_x68"]) == 2
    assert "did you mean 'bs_cxx_x86'" in capsys.readouterr().err and typo.kernel == ["bs_cxx_x68"]
