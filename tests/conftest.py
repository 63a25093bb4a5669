import contextlib
import functools
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings, strategies as st

from lowp.isa_models.verify.proof import extremes

# The Pythons the tests start (`python -m lowp ...`, `python -c ...`) import the lowp under test, not the checkout's
# lowp/ folder that -m and -c would put first on sys.path from the repository's root: that folder lacks
# lowp.kernels and the rest (they install from the top-level folders), so against a non-editable install every
# such child would fail. PYTHONSAFEPATH is -P for the children (Python 3.11+).
os.environ.setdefault("PYTHONSAFEPATH", "1")

# No hypothesis deadline: an example's time on a shared 2-core machine says nothing about the kernel or the model,
# and a deadline turned a slow first example into a FlakyFailure under load. Speed is the benchmarks' business.
settings.register_profile("lowp", deadline=None)
settings.load_profile("lowp")

# The slowest test files first (their summed durations in a 2-core CI run, 2026-12-03: 170 s down to 40 s). CI runs
# two pytest-xdist workers with --dist loadfile, which hands out whole files in the order it has them: by number
# of tests unless told otherwise (pytest_configure), which sent the 110 s exhaustive SMLAL proof, one test, last,
# and one worker ran it alone. Heaviest first, the run ends on short files with both workers busy. Only the order
# matters; a file not named keeps its place after these.
SLOWEST_FIRST = ("test_batch.py", "test_mutants.py", "test_arm_exhaustive.py", "test_stage_families.py",
                 "test_prove_quantized.py", "test_ray.py", "test_peers.py", "test_xnnpack_zoo.py", "test_fuzz.py",
                 "test_prove.py", "test_batch_invocations.py", "test_wasm.py", "test_x86_native.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):      # pytest-xdist: keep the collection's order of files
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))      # stable: each file's tests stay in order


@pytest.fixture(scope="session")
def native():
    """The host CPU as an x86 executor; the whole module skips, with the reason, where it cannot be built."""
    from lowp.emulator.x86.native import NativeUnavailable, NativeX86
    try:
        return NativeX86()
    except NativeUnavailable as e:
        pytest.skip(f"native x86 back end unavailable: {e}")


@functools.lru_cache(maxsize=None)
def lanes_of(dtype, n):
    """n lanes of dtype, with the type's extremes drawn often (hypothesis shrinks towards 0): a pattern of up to 8
    lanes (each an extreme or any value) repeated across the register, or n lanes of any values. A register drawn
    a choice a lane cost hypothesis some 10 ms (the x86 intrinsics' 40 examples of up to 4 x 3 registers took two
    minutes of the suite); a repeated pattern puts an extreme in every pair and quad of lanes where one lane of it
    has one, which a wrong saturation needs (a VPMADDWD that wraps at -32768 * -32768 * 2 is caught as before)."""
    dtype = np.dtype(dtype)
    info = np.iinfo(dtype)
    element = st.one_of(st.sampled_from(extremes(dtype)), st.integers(int(info.min), int(info.max)))
    pattern = st.lists(element, min_size=1, max_size=8).map(
        lambda xs: np.resize(np.array(xs, np.int64).astype(dtype), n))
    size = n * dtype.itemsize
    spread = st.binary(min_size=size, max_size=size).map(lambda raw: np.frombuffer(raw, dtype).copy())
    return st.one_of(pattern, spread)     # kept (lru_cache): hypothesis validates a new strategy at every draw


def registers_for(intr, batch=st.integers(1, 4)):
    """Hypothesis strategy: a batch of arguments for `intr`, in its parameter order, as proof.Backend.run takes."""
    @st.composite
    def build(draw):
        n = draw(batch)
        args = []
        for p in intr.params:
            if p.kind == "vec":
                args.append(np.stack([draw(lanes_of(p.dtype, p.lanes)) for _ in range(n)]))
            elif p.kind == "mask":
                args.append(np.array([draw(st.integers(0, 2 ** p.bits - 1)) for _ in range(n)], dtype=np.uint64))
            else:
                args.append(draw(st.integers(p.lo, p.hi)))
        return args
    return build()


def runner(k):
    """The executor of kernel `k`, or a skip with the reason it cannot run here."""
    import pytest
    from lowp.kernels import executor
    ex = executor(k)
    reason = ex.unavailable()
    if reason:
        pytest.skip(f"{k.name}: {reason}")
    return ex


SCALAR_KERNEL_TOML = """
[[kernel]]
name = "{prefix}{what}"
target = "x86-64"
source = "{source}"
symbol = "{what}_gemm"
signature = "gemm"
a_type = "u8"
b_type = "s8"
packing = "none"
contract = "exact"
model = "lowp.kernels.models:exact_gemm"
tile = {{mr = 1, nr = 1, kr = 1}}
domain = {{a = [0, 255], b = [-128, 127]}}
"""


def load_kernels(toml: Path) -> dict:
    """The kernels of a TOML by name, registering them once per test process (another module may have already)."""
    from lowp.kernels import KernelConfigError, load_toml
    from lowp.kernels.registry import kernel as registered
    try:
        return {k.name: k for k in load_toml(toml)}
    except KernelConfigError as e:
        if "already registered" not in str(e):
            raise
        import tomllib
        return {entry["name"]: registered(entry["name"]) for entry in tomllib.loads(toml.read_text())["kernel"]}


def scalar_kernels_toml(prefix: str, source: str, whats) -> str:
    """[[kernel]] tables for test kernels `<what>_gemm` in `source`: u8 x s8, 1x1x1 tile, claiming exact."""
    return "".join(SCALAR_KERNEL_TOML.format(prefix=prefix, source=source, what=w) for w in whats)


@pytest.fixture
def forget_kernels():
    """Unregister, after the test, every kernel it registered (load_toml, check() and the commands register)."""
    from lowp.kernels import kernels
    from lowp.kernels.registry import _KERNELS, _ORIGINS
    kernels()
    before = set(_KERNELS)
    yield
    for name in set(_KERNELS) - before:
        _KERNELS.pop(name)
        _ORIGINS.pop(name, None)


# Kernels that misbehave in the ways a run must survive (scalar_kernels_toml names them `<prefix><what>`):
# crasher faults inside the guard, aborter kills its process, hanger never returns, offbyone drops the last k, tired
# is right for its first 60 output elements in a process (or fresh copy) and wrong after.
MISBEHAVING_C = textwrap.dedent("""
    #include <stdint.h>
    #include <stddef.h>
    size_t crasher_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t hanger_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t offbyone_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t aborter_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t tired_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    static long tired_calls;   /* static state: counts the calls of this copy of the library */
    void tired_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int32_t s = ++tired_calls > 60 && i == 0 && j == 0;     /* off by one after 60 calls */
                for (int64_t k = 0; k < K; ++k) s += A[i * K + k] * B[k * N + j];
                C[i * N + j] = s;
            }
    }
    void abort(void);
    void aborter_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) abort();    /* a death no guard can turn into a fault: the worker dies */
        for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
    }
    void crasher_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) *(volatile int *)0 = 1;
        for (int64_t i = 0; i < M * N; ++i) C[i] = 0;
    }
    void hanger_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (;;) __asm__ volatile("");
    }
    void offbyone_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int32_t s = 0;
                for (int64_t k = 0; k + 1 < K; ++k) s += A[i * K + k] * B[k * N + j];   /* drops the last k */
                C[i * N + j] = s;
            }
    }
""")


@pytest.fixture(autouse=True)
def _own_example_database(tmp_path_factory, monkeypatch):
    """Each test its own example database ($LOWP_DATABASE, inherited by the lowp processes it starts): lowp's
    default one is shared by every run of the user, and a counterexample an earlier test (or session) stored would
    be replayed instead of searched for."""
    monkeypatch.setenv("LOWP_DATABASE", str(tmp_path_factory.mktemp("examples")))


CASES = Path(__file__).parent / "cases"


@pytest.fixture(scope="module")
def mutation_suite():
    """The mutation suites' kernels (lowp.conformance.bench.mutants), by name, registered afresh."""
    import tomllib
    from lowp.conformance.bench import mutants
    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS
    out = {}
    for toml in mutants.SUITES.values():
        for entry in tomllib.loads(toml.read_text())["kernel"]:
            _KERNELS.pop(entry["name"], None)
        out.update({k.name: k for k in load_toml(toml)})
    return out


@pytest.fixture(scope="module")
def rare():
    """The kernels of tests/cases/rare.toml, registered afresh: tc_rare is wrong only where K % 11 == 10 and M >= 2
    (a search needs tens of examples to find it), tc_right is its fixed twin, tc_needle is wrong for about 64 of
    the 65,536 values of (A[0][0], B[0][0]) (one run's cases miss it; a fuzzing campaign finds it in a few rounds)."""
    import tomllib

    from lowp.kernels import executor, load_toml
    from lowp.kernels.registry import _KERNELS
    for entry in tomllib.loads((CASES / "rare.toml").read_text())["kernel"]:
        _KERNELS.pop(entry["name"], None)
    out = {k.name: k for k in load_toml(CASES / "rare.toml")}
    reason = executor(out["tc_rare"]).unavailable()
    if reason:
        pytest.skip(reason)
    return out


@pytest.fixture
def redis_url(redis_server):
    """The URL of the session's Redis server, emptied for this test (tests store the same checks' examples)."""
    import redis
    redis.Redis.from_url(redis_server).flushall()
    return redis_server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A Redis server of this session (redis-server on a free port, nothing saved to disk): its URL. Skips with
    the reason where the server or the redis package is missing."""
    import shutil
    import socket
    import subprocess
    import time
    pytest.importorskip("redis", reason="the redis package is not installed (pip install 'lowp[ray]')")
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no redis-server on PATH (apt-get install redis-server): no Redis to share examples through")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path_factory.mktemp("redis"))], stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def registered(path):
    """{name: Kernel} of a TOML file's kernels, registered for the `with` block unless another test of the process
    already did (then left to it), and taken out again after it (as forget_kernels does), since other tests
    (test_bounds) count the registered kernels under kernels/."""
    import tomllib

    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS, _ORIGINS
    names = [e["name"] for e in tomllib.loads(Path(path).read_text())["kernel"]]
    ours = not any(n in _KERNELS for n in names)
    if ours:
        load_toml(path)
    try:
        yield {n: _KERNELS[n] for n in names}
    finally:
        if ours:
            for n in names:
                _KERNELS.pop(n, None)
                _ORIGINS.pop(n, None)
