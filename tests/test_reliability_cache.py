"""Issue 24, items 2, 4 and 5 (docs/reliability.md, "The cache" and "Bad input"): the build cache checks what it
loads (a flipped bit, a planted library, a truncated or random ELF, a folder that is a file, read-only, another
user's or writable by others), `lowp emulate` stops a runaway loop in seconds, a model's result is checked, and
each bad CLI input exits 2 with one line naming it.

Every test uses a cache folder of its own (LOWP_CACHE_DIR), never ~/.cache/lowp."""
from __future__ import annotations

import errno
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator import buildcache
from lowp.emulator.buildcache import CacheError, CacheWarning

X86 = platform.machine().lower() in ("x86_64", "amd64")

# MADD accumulates (acc + a * b): flip its o0 bit (15) and it is MSUB (acc - a * b), the one-bit damage.
DOT_C = """#include <stdint.h>
#include <stddef.h>
size_t dot_workspace(int64_t M, int64_t N, int64_t K) { (void)M; (void)N; (void)K; return 0; }
void dot_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    (void)w;
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += (int64_t)A[i * K + k] * B[k * N + j];
            C[i * N + j] = (int32_t)acc;
        }
}
"""
VALUE_C = "long value(void) {{ return {value}; }}\n"
LOOP_C = 'long spin(long n) { __asm__ volatile("1: add x0, x0, #1\\n b 1b" ::: "x0"); return n; }\n'
HUGE_WORKSPACE_C = """#include <stdint.h>
#include <stddef.h>
size_t huge_workspace(int64_t M, int64_t N, int64_t K) { return (size_t)4 << 30; }
void huge_gemm(int64_t M, int64_t N, int64_t K, const int8_t *A, const int8_t *B, int32_t *C, void *w) {
    for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
}
"""


def use_cache(monkeypatch, folder: Path) -> Path:
    """`folder` as lowp's cache folder in this process (and the children it starts)."""
    monkeypatch.setenv("LOWP_CACHE_DIR", str(folder))
    monkeypatch.delenv("ZIG_GLOBAL_CACHE_DIR", raising=False)
    monkeypatch.delenv("ZIG_LOCAL_CACHE_DIR", raising=False)
    buildcache.cache_dir.cache_clear()          # read once a process
    buildcache._READY.clear()                   # folders checked once a process
    return folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    yield use_cache(monkeypatch, tmp_path / "cache")
    buildcache.cache_dir.cache_clear()
    buildcache._READY.clear()


def native_or_skip():
    from lowp.emulator.x86 import native
    if not X86:
        pytest.skip(f"native x86 builds need an x86-64 host, not {platform.machine()}")
    try:
        native.compiler()
    except native.NativeUnavailable as e:
        pytest.skip(str(e))
    return native


def value_library(directory: Path, value: int) -> Path:
    """A shared object whose value() returns `value`, built into the current cache."""
    source = directory / f"value{value}" / "value.c"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(VALUE_C.format(value=value))
    return native_or_skip().build_shared_library([source], ("-O2",), "value")


def call_value(library: Path) -> int:
    """value() of a shared object, loaded for the rest of the process (call_value_fresh for one a test damages)."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("long value(void);")
    return int(ffi.dlopen(str(library)).value())


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    return lines[0]


def lowp(*args, env=None, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lowp", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


# -- the cache checks what it loads ---------------------------------------------------------------------------

def _flip_madd(path: Path, symbol: str) -> str:
    """Turn the first MADD of `symbol` into MSUB (or, with none, flip a bit of its first instruction) in the ELF
    file; what was changed."""
    from elftools.elf.elffile import ELFFile
    from lowp.emulator import Binary
    address, code = Binary(path).code(symbol)
    words = [int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code), 4)]
    index = next((i for i, w in enumerate(words) if w & 0x7FE08000 == 0x1B000000), 0)
    target = address + 4 * index
    with open(path, "rb") as f:
        segment = next(s for s in ELFFile(f).iter_segments()
                       if s["p_type"] == "PT_LOAD" and s["p_vaddr"] <= target < s["p_vaddr"] + s["p_filesz"])
        offset = segment["p_offset"] + target - segment["p_vaddr"]
    data = bytearray(path.read_bytes())
    data[offset + 1] ^= 0x80                     # bit 15 of the little-endian word
    path.write_bytes(bytes(data))
    return "MADD -> MSUB" if words[index] & 0x7FE08000 == 0x1B000000 else "one bit"


def test_a_flipped_bit_in_a_cached_elf_is_named_rebuilt_and_the_kernel_passes(cache, tmp_path, forget_kernels):
    from lowp.conformance.run.checks import Check, run_check
    from lowp.kernels import executor, register
    from lowp.kernels.registry import Domain, Kernel, Tile
    source = tmp_path / "dot" / "dot.c"
    source.parent.mkdir()
    source.write_text(DOT_C)
    kernel = register(Kernel(name="rel_dot_aarch64", target="aarch64", features=(), source=source,
                             symbol="dot_gemm", signature="gemm", a_type="s8", b_type="s8", tile=Tile(1, 1, 1),
                             packing="row-major A (M x K), B (K x N)", contract="exact",
                             domain=Domain((-128, 127), (-128, 127)), cflags=("-O1",),
                             model=lambda A, B: A.astype(np.int32) @ B.astype(np.int32)))
    artifact = executor(kernel).machine.binary.path
    assert artifact.parent == cache
    _flip_madd(artifact, "dot_gemm")

    check, rows = Check(kernel.name, "exact", "claimed", True), []
    with pytest.warns(CacheWarning, match=str(artifact)):
        row = run_check(check, rows.append, examples=0, grid=False)
    assert row["verdict"] == "PASS", row
    assert buildcache.sha256_file(artifact) == json.loads(Path(f"{artifact}.manifest").read_text())["sha256"]


def test_a_library_planted_under_the_predicted_name_is_not_loaded(cache, tmp_path, monkeypatch):
    honest = value_library(tmp_path, 1)
    assert call_value_fresh(honest) == 1      # a copy: rewriting a loaded library's file in place would crash us
    # Another build's library (value() returns 666) copied over the cached one, manifest left as it was.
    evil = tmp_path / "evil.so"
    use_cache(monkeypatch, tmp_path / "elsewhere")
    evil.write_bytes(value_library(tmp_path, 666).read_bytes())
    use_cache(monkeypatch, cache)
    honest.write_bytes(evil.read_bytes())
    with pytest.warns(CacheWarning, match=str(honest)):
        again = value_library(tmp_path, 1)
    assert again == honest and buildcache.stats["builds"] and call_value_fresh(again) == 1


def call_value_fresh(library: Path) -> int:
    """value() of a copy (dlopen of a path already loaded returns the first load)."""
    copy = Path(tempfile.mkdtemp()) / "copy.so"
    copy.write_bytes(library.read_bytes())
    return call_value(copy)


def test_an_artifact_without_its_manifest_is_rebuilt_never_looked_up(cache, tmp_path):
    honest = value_library(tmp_path, 1)
    Path(f"{honest}.manifest").unlink()
    honest.write_bytes(b"\x7fELF planted")
    builds = buildcache.stats["builds"]
    again = value_library(tmp_path, 1)
    assert buildcache.stats["builds"] == builds + 1 and call_value_fresh(again) == 1


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_a_truncated_or_random_cached_elf_is_named_and_rebuilt(damage, cache, tmp_path):
    from lowp.emulator import Machine, build
    source = tmp_path / "spin.c"
    source.write_text("long twice(long n) { return 2 * n; }\n")
    path = build(source).path
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3] if damage == "truncated" else np.random.default_rng(1).bytes(len(data)))
    with pytest.warns(CacheWarning, match=str(path)):
        binary = build(source)
    assert Machine(binary).call("twice", 21).ret == 42


@pytest.mark.parametrize("damage", ["truncated", "random"])
def test_an_unreadable_elf_names_its_file(damage, tmp_path):
    from lowp.emulator import Binary, BuildError
    path = tmp_path / "kernel.elf"
    path.write_bytes(b"\x7fELF\x02\x01\x01" if damage == "truncated" else np.random.default_rng(2).bytes(4096))
    with pytest.raises(BuildError, match=str(path)):
        Binary(path).symbols


def test_a_file_where_the_cache_folder_should_be_is_one_line_exit_2(tmp_path):
    folder = tmp_path / "not-a-folder"
    folder.write_text("")
    (tmp_path / "spin.c").write_text(LOOP_C)
    r = lowp("emulate", tmp_path / "spin.c", "--function", "spin", "--arg", "n=1",
             env={"LOWP_CACHE_DIR": str(folder)})
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = one_line(r.stderr)
    assert str(folder) in line and "is a file, not a folder" in line


def test_a_file_where_the_cache_folder_should_be_fails_the_conformance_run_before_any_row(tmp_path):
    folder = tmp_path / "not-a-folder"
    folder.write_text("")
    toml = tmp_path / "k.toml"
    (tmp_path / "dot.c").write_text(DOT_C)
    toml.write_text(_toml("rel_dot_native", "x86-64" if X86 else "aarch64", "dot.c", "dot_gemm"))
    r = lowp("conformance", "--kernels", toml, "--no-builtin", "--out", tmp_path / "out", "--profile", "quick",
             env={"LOWP_CACHE_DIR": str(folder)})
    assert r.returncode == 2 and str(folder) in one_line(r.stderr)
    assert not (tmp_path / "out" / "journal.jsonl").exists()


def _toml(name: str, target: str, source: str, symbol: str) -> str:
    return f"""[[kernel]]
name = "{name}"
target = "{target}"
source = "{source}"
symbol = "{symbol}"
signature = "gemm"
a_type = "s8"
b_type = "s8"
packing = "none"
contract = "exact"
model = "lowp.kernels.models:exact_gemm"
tile = {{mr = 1, nr = 1, kr = 1}}
domain = {{a = [-128, 127], b = [-128, 127]}}
"""


def test_a_read_only_cache_folder_is_a_clear_error(cache, tmp_path, monkeypatch, capsys):
    # As root, permission bits do not stop a write: make the cache's own writes fail as on a read-only file system.
    real = tempfile.mkdtemp

    def read_only(*args, dir=None, **kwargs):
        if dir is not None and Path(dir).is_relative_to(cache):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(*args, dir=dir, **kwargs)
    monkeypatch.setattr(tempfile, "mkdtemp", read_only)
    source = tmp_path / "spin.c"
    source.write_text(LOOP_C)
    from lowp.emulator import build
    with pytest.raises(CacheError, match=f"cannot write {cache}.*Read-only file system"):
        build(source)

    import warnings
    from lowp.cli import main
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)     # main() sets lowp's own
    assert main(["emulate", str(source), "--function", "spin", "--arg", "n=1"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("lowp: cannot write") and str(cache) in line


def test_a_cache_folder_others_can_write_is_refused(cache, tmp_path):
    cache.mkdir(mode=0o700)
    cache.chmod(0o777)
    from lowp.emulator import build_text
    with pytest.raises(CacheError, match=f"{cache} can be written by other users .*chmod go-w"):
        build_text("long f(void) { return 1; }\n")
    assert not [p for p in cache.iterdir() if p.suffix in (".so", ".elf")]


def test_a_cache_folder_of_another_user_is_refused(cache, tmp_path, monkeypatch):
    cache.mkdir(mode=0o700)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache).st_uid + 1)
    with pytest.raises(CacheError, match=f"{cache} belongs to another user"):
        buildcache.ready_folder(cache / "native")


def test_a_new_cache_folder_is_private(cache):
    buildcache.ready_folder(cache / "native")
    for folder in (cache, cache / "native"):
        assert folder.stat().st_mode & 0o777 == 0o700


def test_a_generated_source_that_is_not_its_text_is_rewritten(cache):
    path = buildcache.source_file("int x;\n", cache / "src", "gen")
    path.write_text("int y;\n")
    with pytest.warns(CacheWarning, match=str(path)):
        assert buildcache.source_file("int x;\n", cache / "src", "gen") == path
    assert path.read_text() == "int x;\n"


# -- lowp emulate stops a runaway loop by its budget ----------------------------------------------------------

def test_emulate_stops_an_infinite_loop_within_seconds(tmp_path):
    source = tmp_path / "spin.c"
    source.write_text(LOOP_C)
    lowp("emulate", source, "--function", "spin", "--arg", "n=1", "--budget", "10",
         env={"LOWP_CACHE_DIR": str(tmp_path / "cache")})           # the build, outside the timing
    start = time.monotonic()
    r = lowp("emulate", source, "--function", "spin", "--arg", "n=1", env={"LOWP_CACHE_DIR": str(tmp_path / "cache")},
             timeout=60)
    took = time.monotonic() - start
    assert r.returncode == 1 and "BudgetExceeded" in r.stderr and "budget" in r.stderr, r.stderr
    assert "--seconds" in r.stderr and took < 30


# -- a model's result is checked -----------------------------------------------------------------------------

def _model_kernel(model):
    from lowp.kernels.registry import Domain, Kernel, Tile
    return Kernel(name="rel_model", target="x86-64", features=(), source="none.c", symbol="m_gemm", signature="gemm",
                  a_type="s8", b_type="s8", tile=Tile(1, 1, 1), packing="none", contract="exact",
                  domain=Domain((-128, 127), (-128, 127)), model=model)


def none_model(A, B):
    return None


def scalar_model(A, B):
    return 7


def wrong_shape_model(A, B):
    return np.zeros((1, 1), np.int32)


def float_model(A, B):
    return (A.astype(np.int32) @ B.astype(np.int32)).astype(np.float64)


@pytest.mark.parametrize("model, says", [(none_model, "returned None"), (scalar_model, "returned int 7"),
                                         (wrong_shape_model, "int32 array of shape (1, 1)"),
                                         (float_model, "float64 array of shape (2, 3)")])
def test_a_model_returning_something_else_than_c_is_named(model, says):
    from lowp.kernels.registry import ModelResultError
    A, B = np.ones((2, 4), np.int8), np.ones((4, 3), np.int8)
    with pytest.raises(ModelResultError) as e:
        _model_kernel(model).predict(A, B)
    message = str(e.value)
    assert f"{__name__}:{model.__name__}" in message and says in message and "(M, N) = (2, 3)" in message


# -- bad inputs: exit 2, one line naming the input ------------------------------------------------------------

@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache folder for the CLI tests below (each a process of its own)."""
    return {"LOWP_CACHE_DIR": str(tmp_path_factory.mktemp("cli") / "cache")}


def test_out_naming_a_file_is_one_line_exit_2(tmp_path, shared_cache):
    out = tmp_path / "report.txt"
    out.write_text("")
    for command in ("conformance", "fuzz"):
        r = lowp(command, "--out", out, env=shared_cache)
        assert r.returncode == 2 and f"--out {out}: is a file" in one_line(r.stderr)


def test_isa_verify_negative_registers_is_one_line_exit_2(shared_cache):
    r = lowp("isa", "verify", "--registers", "-5", "vpmaddubsw", env=shared_cache)
    assert r.returncode == 2 and "--registers -5" in one_line(r.stderr)


def test_emulate_negative_budget_is_one_line_exit_2(tmp_path, shared_cache):
    (tmp_path / "spin.c").write_text(LOOP_C)
    for option, value in (("--budget", "-5"), ("--seconds", "0")):
        r = lowp("emulate", tmp_path / "spin.c", "--function", "spin", "--arg", "n=1", option, value, env=shared_cache)
        assert r.returncode == 2 and f"{option} {value}" in one_line(r.stderr)


def test_an_unknown_disabled_feature_is_one_line_exit_2(shared_cache):
    r = lowp("isa", "list", env={**shared_cache, "LOWP_DISABLE_FEATURES": "avx512_vnni,AVX2"})
    assert r.returncode == 2
    assert "LOWP_DISABLE_FEATURES: unknown feature 'AVX2' (did you mean avx2" in one_line(r.stderr)
    assert lowp("isa", "list", env={**shared_cache, "LOWP_DISABLE_FEATURES": "avx2"}).returncode == 0


def test_intrinsic_of_none_is_a_type_error_naming_it():
    from lowp.isa_models import instruction, intrinsic
    with pytest.raises(TypeError, match="intrinsic's name as a str .*not None"):
        intrinsic(None)
    with pytest.raises(TypeError, match="mnemonic as a str .*not 5"):
        instruction(5)


def test_replay_of_a_pass_rows_id_is_one_line_exit_2(tmp_path, shared_cache):
    native_or_skip()
    (tmp_path / "dot.c").write_text(DOT_C)
    (tmp_path / "k.toml").write_text(_toml("rel_dot", "x86-64", "dot.c", "dot_gemm"))
    # a real journal (a hand-written row that does not fit the row schema is skipped by the reader)
    r = lowp("conformance", "--kernels", tmp_path / "k.toml", "--no-builtin", "--out", tmp_path / "out",
             "--case", "k_eq_kr", "--examples", "1", env=shared_cache)
    assert r.returncode == 0, r.stderr[-2000:]
    r = lowp("conformance", "replay", "--kernels", tmp_path / "k.toml", "--no-builtin", "--out", tmp_path / "out",
             "rel_dot:exact:claimed", env=shared_cache)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "rel_dot:exact:claimed: the check is PASS and has no counterexample" in one_line(r.stderr)


def test_a_4_gib_workspace_is_named_not_a_memory_error(cache, tmp_path):
    native_or_skip()
    from lowp.kernels.executors import NativeExecutor, WorkspaceTooLarge
    from lowp.kernels.registry import Domain, Kernel, Tile
    source = tmp_path / "huge.c"
    source.write_text(HUGE_WORKSPACE_C)
    kernel = Kernel(name="rel_huge", target="x86-64", features=(), source=source, symbol="huge_gemm",
                    signature="gemm", a_type="s8", b_type="s8", tile=Tile(1, 1, 1), packing="none",
                    contract="exact", domain=Domain((-128, 127), (-128, 127)), model=none_model)
    with pytest.raises(WorkspaceTooLarge, match=r"huge_workspace\(2, 3, 4\) asks for 4,294,967,296 bytes"):
        NativeExecutor(kernel).run(np.ones((2, 4), np.int8), np.ones((4, 3), np.int8))
