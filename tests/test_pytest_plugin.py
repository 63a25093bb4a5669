"""The pytest plugin: the marker, the fixture and --lowp-report, each check in a child process (a segfaulting or
hanging kernel fails its test and the session goes on), and one merged report under pytest-xdist."""
import json
import platform
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import lowp.kernels.builtin  # noqa: F401  (registered once, before pytester's sys.modules snapshot: an in-process
#                                           run would otherwise import it again into the same registry)
from lowp.kernels import executor, kernel

from .conftest import scalar_kernels_toml

pytest_plugins = ["pytester"]

# Kernels named for this file only (tests/test_conformance.py registers its own crasher, hanger and off-by-one).
PLUGIN_C = textwrap.dedent("""
    #include <signal.h>
    #include <stdint.h>
    #include <stddef.h>
    #include <stdlib.h>
    size_t segv_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t abort_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t spin_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    size_t dropk_workspace(int64_t M, int64_t N, int64_t K) { return 0; }
    static void zero(int64_t M, int64_t N, int32_t *C) { for (int64_t i = 0; i < M * N; ++i) C[i] = 0; }
    void segv_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) *(volatile int *)0 = 1;          /* a few cases run before the fault */
        zero(M, N, C);
    }
    void abort_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        if (K > 5) abort();                         /* what glibc does when it finds its heap corrupted */
        zero(M, N, C);
    }
    void spin_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        sigset_t all;                               /* no signal-based time budget can stop it: only the */
        sigfillset(&all);                           /* runner's timeout, which kills the process         */
        sigprocmask(SIG_BLOCK, &all, NULL);
        for (;;) __asm__ volatile("");
    }
    void dropk_gemm(int64_t M, int64_t N, int64_t K, const uint8_t *A, const int8_t *B, int32_t *C, void *w) {
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int32_t s = 0;
                for (int64_t k = 0; k + 1 < K; ++k) s += A[i * K + k] * B[k * N + j];   /* drops the last k */
                C[i * N + j] = s;
            }
    }
""")
LOAD_KERNELS = """
    from pathlib import Path
    import pytest
    from lowp.kernels import load_toml
    from lowp.kernels.registry import _KERNELS

    if "plugin_segv" not in _KERNELS:
        load_toml(Path(__file__).with_name("plugin_kernels.toml"))
"""
# The tests an author would write, in collection order; the checks they make, in the same order.
CRASHING_SUITE = LOAD_KERNELS + """
    @pytest.mark.lowp("plugin_segv", "model", domain="full", examples=20)
    def test_marker_segv():
        pass

    def test_fixture_segv(lowp_check):
        lowp_check("plugin_segv", examples=20)

    @pytest.mark.lowp("plugin_abort", "model", domain="full", examples=20)
    def test_marker_abort():
        pass

    def test_fixture_abort(lowp_check):
        lowp_check("plugin_abort", examples=20)

    @pytest.mark.lowp("plugin_spin", timeout=3)
    def test_marker_hang():
        pass

    def test_fixture_fail(lowp_check):
        lowp_check("plugin_dropk", examples=20)

    def test_fixture_skip(lowp_check):
        lowp_check("u8s8s32_avxvnni", examples=10)

    def test_after_the_crashes(lowp_check):
        assert lowp_check("sdot_s8_neon", examples=10)["verdict"] == "PASS"
"""
CHECKS = {"test_marker_segv": "plugin_segv:model:full", "test_fixture_segv": "plugin_segv:exact:claimed",
          "test_marker_abort": "plugin_abort:model:full", "test_fixture_abort": "plugin_abort:exact:claimed",
          "test_marker_hang": "plugin_spin:exact:claimed", "test_fixture_fail": "plugin_dropk:exact:claimed",
          "test_fixture_skip": "u8s8s32_avxvnni:exact:claimed", "test_after_the_crashes": "sdot_s8_neon:exact:claimed"}


@pytest.fixture
def suite(pytester):
    """A pytester directory with the crashing kernels and the author's tests; skips where x86 code cannot run."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the crashing kernels are x86-64 native code")
    pytester.path.joinpath("plugin_kernels.c").write_text(PLUGIN_C)
    pytester.path.joinpath("plugin_kernels.toml").write_text(
        scalar_kernels_toml("plugin_", "plugin_kernels.c", ("segv", "abort", "spin", "dropk")))
    pytester.makepyfile(test_author=textwrap.dedent(CRASHING_SUITE))
    return pytester


def failures(junit_path) -> dict[str, str | None]:
    """test name -> its failure message ('skipped' for a skip, None for a pass), from pytest's JUnit XML."""
    out = {}
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        failure, skipped = case.find("failure"), case.find("skipped")
        out[case.get("name")] = (failure.get("message") + "\n" + (failure.text or "") if failure is not None
                                 else "skipped" if skipped is not None else None)
    return out


def expected_skip() -> bool:
    return bool(executor(kernel("u8s8s32_avxvnni")).unavailable())


def assert_outcomes_of_the_crashing_suite(result, junit_path):
    skip = expected_skip()
    result.assert_outcomes(failed=6, passed=1 + (not skip), skipped=int(skip))
    got = failures(junit_path)
    for name in ("test_marker_segv", "test_fixture_segv"):
        # The check's process survives a fault inside the kernel (its guarded call raises OutOfBounds): a CRASH
        # row with the traceback today, a FAIL naming the fault where the search shrinks on faults.
        assert "plugin_segv" in got[name] and ("CRASH" in got[name] or "OutOfBounds" in got[name]), got[name]
    for name in ("test_marker_abort", "test_fixture_abort"):   # the process died: the test fails with the case
        assert "CRASH (the worker died" in got[name] and "signal 6" in got[name], got[name]
        assert "while running case" in got[name], got[name]
    assert "CRASH (timed out after 3 s" in got["test_marker_hang"], got["test_marker_hang"]
    assert "minimal counterexample" in got["test_fixture_fail"] and "1x1x1" in got["test_fixture_fail"]
    assert got["test_after_the_crashes"] is None              # the session went on after the crashes
    assert got["test_fixture_skip"] == ("skipped" if skip else None)


def assert_report_has_every_check(report_path, test_file="test_author.py"):
    md = report_path.read_text()
    rows = json.loads(report_path.with_name(report_path.name + ".json").read_text())["rows"]
    assert [r["id"] for r in rows] == list(CHECKS.values())                # every check once, in test order
    assert [r["test"] for r in rows] == [f"{test_file}::{t}" for t in CHECKS]
    by = {r["id"]: r for r in rows}
    assert [by[c]["verdict"] for c in list(CHECKS.values())[2:6]] == ["CRASH", "CRASH", "CRASH", "FAIL"]
    assert {by[c]["verdict"] for c in list(CHECKS.values())[:2]} <= {"CRASH", "FAIL"}
    assert by["u8s8s32_avxvnni:exact:claimed"]["verdict"] == ("SKIPPED" if expected_skip() else "PASS")
    assert by["sdot_s8_neon:exact:claimed"]["verdict"] == "PASS"
    assert f"{len(CHECKS)} checks: " in md and md.count("| plugin_segv ") == md.count("| plugin_abort ") == 2
    assert "## plugin_dropk:exact:claimed: minimal counterexample" in md


def test_a_crashing_kernel_fails_its_test_and_the_session_goes_on(suite):
    # A subprocess: were a check to run in pytest's own process, the segfault would end this session too.
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--lowp-report=out/rep.md",
                                        "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    assert_outcomes_of_the_crashing_suite(result, suite.path / "junit.xml")
    assert_report_has_every_check(suite.path / "out" / "rep.md")


def test_xdist_workers_rows_merge_into_one_report(suite):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the `test` extra has it)")
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-v", "--lowp-report=rep.md",
                                        "--junitxml=junit.xml")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out + result.stderr.str()
    assert "[gw0]" in out and "[gw1]" in out          # both workers ran tests that made checks
    assert_outcomes_of_the_crashing_suite(result, suite.path / "junit.xml")
    assert_report_has_every_check(suite.path / "rep.md")
    assert sorted(p.name for p in suite.path.glob("rep.md*")) == ["rep.md", "rep.md.json"]   # one report


def test_marker_fixture_and_report(pytester):
    """A kernel that is not exact on the full range fails under the marker with its counterexample; the fixture
    returns the row of a check that passes; the report has both."""
    pytester.makepyfile(test_k=textwrap.dedent("""
        import pytest

        @pytest.mark.lowp("u8s8s32_avx2", "exact", domain="full", examples=60)
        def test_full_range():
            pass

        def test_claimed(lowp_check):
            assert lowp_check("sdot_s8_neon", examples=20)["verdict"] == "PASS"
    """))
    result = pytester.runpytest("-p", "no:cacheprovider", "--lowp-report=rep.md")
    outcomes = result.parseoutcomes()
    if executor(kernel("u8s8s32_avx2")).unavailable():
        assert outcomes.get("skipped") == 1
    else:
        assert outcomes.get("failed") == 1 and outcomes.get("passed") == 1
        result.stdout.fnmatch_lines(["*minimal counterexample*", "*cause: wrong value: the result matches pair-saturating*"])
    report = (pytester.path / "rep.md").read_text()
    assert "lowp conformance report" in report
    assert "| u8s8s32_avx2 " in report and "| sdot_s8_neon " in report


def test_unknown_keyword_is_an_error_not_a_check(pytester):
    pytester.makepyfile(test_k="""
        def test_typo(lowp_check):
            lowp_check("sdot_s8_neon", exampels=5)
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*unexpected keyword argument 'exampels'*"])


def test_the_getting_started_example_under_xdist(tmp_path):
    """The command docs/getting-started.md shows: `pytest -n 2 docs/examples/test_my_kernels.py --lowp-report=...`
    gives one report with the example's four checks, in the order of its tests."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the `test` extra has it)")
    example = Path(__file__).resolve().parent.parent / "docs" / "examples" / "test_my_kernels.py"
    rep = tmp_path / "report.md"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", str(example),
                        f"--lowp-report={rep}", f"--rootdir={tmp_path}"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads(Path(str(rep) + ".json").read_text())["rows"]
    assert [r["id"] for r in rows] == ["my_maddubs_avx2:exact:claimed", "my_maddubs_avx2:model:full",
                                       "my_maddubs_avx2:exact:full", "my_sdot_neon:exact:claimed"]
    assert "lowp conformance report" in rep.read_text()
