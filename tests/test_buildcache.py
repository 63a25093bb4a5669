"""lowp.emulator.buildcache through both builders (x86-64 native with the host's C compiler, AArch64 with zig): a header
reached through "" next to the source, through a relative -I and through -include is part of the key, an untouched
rebuild runs no compiler, parallel builders agree, and a broken source names itself and the compiler's message."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import platform
import re
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator import buildcache
from lowp.emulator.buildcache import BuildFailed, parse_depfile

TARGETS = ("x86-native", "aarch64")
# name of the macro, the header defining it, and how the source reaches it (the flags below)
HEADERS = {"LOCAL": "local.h", "IDIR": "inc/idir.h", "FORCED": "pre/forced.h"}
FLAGS = ("-O2", "-Iinc", "-include", "pre/forced.h")     # relative: they resolve in the source's directory
SOURCE = """#include "local.h"
#include "idir.h"
long value(void) { return LOCAL * 10000L + IDIR * 100L + FORCED; }
"""


def native_or_skip():
    from lowp.emulator.x86 import native
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip(f"native x86 builds need an x86-64 host, not {platform.machine()}")
    try:
        native.compiler()
    except native.NativeUnavailable as e:
        pytest.skip(str(e))
    return native


def build_target(target: str, source: Path, flags=FLAGS, depends=()) -> Path:
    if target == "x86-native":
        return native_or_skip().build_shared_library([source], flags, "probe", depends=depends)
    from lowp.emulator import build
    return build(source, flags=flags, depends=depends).path


def call_value(target: str, artifact: Path) -> int:
    """value() of a built artifact: natively through cffi, AArch64 under Unicorn."""
    if target == "x86-native":
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("long value(void);")
        return int(ffi.dlopen(str(artifact)).value())
    from lowp.emulator import Binary, Machine
    return Machine(Binary(artifact)).call("value").ret


class Project:
    """A source directory with one header per way of reaching it, and the value its defines imply."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.source = root / "value.c"
        self.source.write_text(SOURCE)
        self.defines = {}
        for number, macro in enumerate(HEADERS, 1):
            self.define(macro, number)

    def define(self, macro: str, number: int) -> None:
        header = self.root / HEADERS[macro]
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text(f"#define {macro} {number}\n")
        self.defines[macro] = number

    def expected(self) -> int:
        return self.defines["LOCAL"] * 10000 + self.defines["IDIR"] * 100 + self.defines["FORCED"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty cache for both builders (zig's own caches inside it too)."""
    monkeypatch.setenv("LOWP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ZIG_GLOBAL_CACHE_DIR", raising=False)
    monkeypatch.delenv("ZIG_LOCAL_CACHE_DIR", raising=False)
    buildcache.cache_dir.cache_clear()          # read once a process: this test's folder, not the last one's
    yield tmp_path / "cache"
    buildcache.cache_dir.cache_clear()


@pytest.fixture
def project(tmp_path, cache) -> Project:
    return Project(tmp_path / "project")


def artifacts_dir(target: str, cache: Path) -> Path:
    return cache / "native" if target == "x86-native" else cache


def compiler_runs() -> int:
    return buildcache.stats["compiler_runs"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("macro", list(HEADERS))
def test_editing_a_header_rebuilds_and_an_untouched_build_is_a_hit(target, macro, project):
    first = build_target(target, project.source)
    assert call_value(target, first) == project.expected()

    runs, mtime = compiler_runs(), first.stat().st_mtime_ns
    assert build_target(target, project.source) == first
    assert compiler_runs() == runs and first.stat().st_mtime_ns == mtime

    original = project.defines[macro]
    project.define(macro, 7)
    second = build_target(target, project.source)
    assert compiler_runs() > runs and second != first
    assert call_value(target, second) == project.expected()

    runs = compiler_runs()
    assert build_target(target, project.source) == second and compiler_runs() == runs

    # Back to the first header: the first build's manifest matches again, so nothing compiles.
    project.define(macro, original)
    assert build_target(target, project.source) == first and compiler_runs() == runs
    assert call_value(target, first) == project.expected()


@pytest.mark.parametrize("target", TARGETS)
def test_the_manifest_lists_every_header_the_compiler_read_with_its_hash(target, project, cache):
    artifact = build_target(target, project.source)
    manifest = json.loads(Path(str(artifact) + buildcache.MANIFEST_SUFFIX).read_text())
    listed = {Path(p) for p in manifest["headers"]}
    assert {(project.root / h).resolve() for h in HEADERS.values()} <= listed
    assert project.source.resolve() not in listed
    for path, digest in manifest["headers"].items():
        assert buildcache.sha256_file(Path(path)) == digest
    # system headers (stdint.h, arm_neon.h, immintrin.h) are the compiler's identity's business, not listed
    assert not [p for p in listed if p.name in ("stdint.h", "stddef.h")]


@pytest.mark.parametrize("target", TARGETS)
def test_depends_still_joins_the_key(target, project, tmp_path):
    extra = tmp_path / "not-included.txt"
    extra.write_text("one")
    first = build_target(target, project.source, depends=[extra])
    runs = compiler_runs()
    assert build_target(target, project.source, depends=[extra]) == first and compiler_runs() == runs
    extra.write_text("two")
    assert build_target(target, project.source, depends=[extra]) != first and compiler_runs() > runs


def _build_in_child(target, source, cache, barrier, results):
    import os
    os.environ["LOWP_CACHE_DIR"] = cache
    barrier.wait()
    path = build_target(target, Path(source))
    results.put((str(path), call_value(target, path)))


@pytest.mark.parametrize("target", TARGETS)
def test_two_processes_building_at_once_leave_one_good_artifact(target, project, cache):
    if target == "x86-native":
        native_or_skip()
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_build_in_child, args=(target, str(project.source), str(cache), barrier, results))
               for _ in range(2)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert outcomes[0] == outcomes[1] and outcomes[0][1] == project.expected()
    files = [p for p in artifacts_dir(target, cache).iterdir() if p.is_file()]
    suffix = ".so" if target == "x86-native" else ".elf"
    assert [p.name for p in files if p.name.endswith(suffix)] == [Path(outcomes[0][0]).name]
    assert len([p for p in files if p.name.endswith(buildcache.MANIFEST_SUFFIX)]) == 1
    assert not [p for p in artifacts_dir(target, cache).iterdir() if p.name.startswith(".")]   # no temp files


@pytest.mark.parametrize("target", TARGETS)
def test_a_source_that_does_not_compile_names_the_file_and_the_compilers_message(target, tmp_path, cache):
    from lowp.emulator import BuildError
    bad = tmp_path / "broken kernel.c"
    bad.write_text("long value(void) { return no_such_variable; }\n")
    with pytest.raises((BuildFailed, BuildError)) as e:
        build_target(target, bad, flags=("-O2",))
    message = str(e.value)
    assert f"compiling {bad}" in message and "no_such_variable" in message and "error" in message
    directory = artifacts_dir(target, cache)
    left = [p.name for p in directory.iterdir()] if directory.is_dir() else []
    assert not [n for n in left if n.endswith((".so", ".elf", buildcache.MANIFEST_SUFFIX)) or n.startswith(".")]


TINY_KERNEL = """#include <stddef.h>
#include <stdint.h>
#include "bias.h"
size_t tiny_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void tiny_gemm(int64_t M, int64_t N, int64_t K, const void *A, const void *B, int32_t *C, void *work) {
    const int8_t *a = A, *b = B;
    (void)work;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            int32_t acc = BIAS;
            for (int64_t k = 0; k < K; ++k) acc += a[i * K + k] * b[k * N + j];
            C[i * N + j] = acc;
        }
}
"""


@pytest.mark.parametrize("target", ["x86-64", "aarch64"])
def test_an_executor_runs_the_build_of_the_header_as_it_is_now(target, tmp_path, cache):
    """The issue's case: a kernel whose header (here reached only through -I) changed must not run the old build."""
    if target == "x86-64":
        native_or_skip()
    from lowp.kernels.executors import executor
    from lowp.kernels.registry import Domain, Kernel, Tile
    root = tmp_path / "kernel"
    (root / "include").mkdir(parents=True)
    source = root / "tiny.c"
    source.write_text(TINY_KERNEL)
    header = root / "include" / "bias.h"
    kernel = Kernel(name="tiny", target=target, features=(), source=source, symbol="tiny_gemm", signature="gemm",
                    a_type="s8", b_type="s8", tile=Tile(1, 1, 1), packing="row-major A (M x K), B (K x N)",
                    contract="exact", domain=Domain((-128, 127), (-128, 127)),
                    model=lambda A, B: A.astype(np.int32) @ B.astype(np.int32), cflags=("-O2", "-Iinclude"))
    rng = np.random.default_rng(5)
    A = rng.integers(-128, 128, (3, 5), dtype=np.int8)
    B = rng.integers(-128, 128, (5, 4), dtype=np.int8)
    for bias in (1, 2):
        header.write_text(f"#define BIAS {bias}\n")
        C = executor(dataclasses.replace(kernel)).run(A, B)
        np.testing.assert_array_equal(C, A.astype(np.int32) @ B.astype(np.int32) + bias)


def test_depfile_parsing_undoes_make_escapes_and_continuations():
    text = "out.o: src/a.c sp\\ ace/q.h \\\n  inc/b.h dollar$$sign.h\\\n hash\\#.h"   # zig writes no final newline
    assert parse_depfile(text) == ["src/a.c", "sp ace/q.h", "inc/b.h", "dollar$sign.h", "hash#.h"]
    assert parse_depfile("out.o:\n") == []


def test_build_failed_message_keeps_the_command_for_a_rerun(tmp_path, cache):
    native = native_or_skip()
    bad = tmp_path / "k.c"
    bad.write_text("#include \"missing.h\"\n")
    with pytest.raises(BuildFailed) as e:
        native.build_shared_library([bad], ("-O2",), "k")
    assert "missing.h" in str(e.value)
    assert re.search(r"command \(in .*\): .*-c .*k\.c", str(e.value))


# -- warming zig's runtimes (lowp.emulator.warm, run by .ci/run while pip installs) ----------------------------------
def test_the_warm_up_builds_with_every_zig_recipe_every_aarch32_cpu_and_wasm():
    from lowp.emulator.build import RECIPES
    from lowp.emulator.targets.arm import BUILD_CPUS
    from lowp.emulator.warm import builds
    names = [what for what, _ in builds()]
    zig_recipes = {name for name in RECIPES if name not in ("x86-64-static", "arm-linux")}
    assert zig_recipes <= set(names), "a zig recipe the warm-up does not build"
    assert {f"arm-linux {cpu}" for _, cpu in BUILD_CPUS} | {f"arm-linux {RECIPES['arm-linux'].cpu}"} <= set(names)
    assert "wasm32" in names and len(names) == len(set(names))


def test_the_warm_up_builds_into_the_cache_and_names_a_build_that_fails(cache, monkeypatch, capsys):
    from lowp.emulator import warm
    from lowp.emulator.build import BuildError
    bare = dict(warm.builds())["bare"]

    def broken():
        raise BuildError("no such compiler")
    monkeypatch.setattr(warm, "builds", lambda: [("bare", bare), ("hexagon-linux", broken)])
    assert warm.main() == 1
    out = capsys.readouterr()
    assert "bare:" in out.out and "hexagon-linux: not built: no such compiler" in out.err
    assert list(cache.glob("warm-*-bare-*.elf")), sorted(p.name for p in cache.iterdir())
