"""Reports a kernel author acts on: a failing run prints its minimal counterexample with the commands that rerun it
(run here verbatim, from `lowp conformance`'s terminal and from a pytest report), report.json is a typed document
with a schema, and junit.xml validates against the schema pytest's own tests use."""
import json
import re
import shlex
import subprocess
import sys
import tarfile
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lowp.conformance.search import problem
from lowp.conformance.report import rows
from lowp.conformance.run.checks import Check

pytest_plugins = ["pytester"]
EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples"
COMMAND = re.compile(r"^(replay|repro): `(lowp conformance replay .*)`$", re.M)


def lowp(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lowp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def run_command(line: str, cwd) -> subprocess.CompletedProcess:
    """A printed `lowp ...` command, run as a shell would split it."""
    argv = shlex.split(line)
    assert argv[0] == "lowp"
    return lowp(*argv[1:], cwd=cwd)


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory):
    """`lowp conformance` on the getting-started AVX2 kernel, claiming exactness on the full u8 range it does not
    have (VPMADDUBSW saturates the pair sum 255*-128 + 255*-128): (folder, the completed process)."""
    from lowp.emulator.targets.x86_64 import NATIVE
    why = NATIVE.cannot_run(frozenset({"avx2"}))
    if why:
        pytest.skip(f"the AVX2 example cannot run here: {why}")
    folder = tmp_path_factory.mktemp("failing")
    text = (EXAMPLES / "kernels.toml").read_text().split("\n[[kernel]]", 2)[1]
    text = text.replace('source = "my_maddubs_avx2.c"', f'source = "{EXAMPLES / "my_maddubs_avx2.c"}"')
    text = text.replace("domain = {a = [0, 127], b = [-128, 127]}", "domain = {a = [0, 255], b = [-128, 127]}")
    (folder / "wrong.toml").write_text("[[kernel]]" + text)
    done = lowp("conformance", "--kernels", "wrong.toml", "--kernel", "my_maddubs_avx2", "--out", "rep",
                "--examples", "20", "--no-grid", cwd=folder)
    return folder, done


def test_a_failing_run_prints_its_counterexample_and_commands_that_rerun_it(failing_run):
    folder, done = failing_run
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "## my_maddubs_avx2:exact:claimed: minimal counterexample" in out
    assert "A = [[255, 255]]" in out and "B = [[-128], [-128]]" in out
    assert "actual   C = [[-32768]]" in out and "expected C = [[-65280]]" in out
    assert "1 of 1 lanes differ:\n  C[0][0]: actual -32768, expected -65280" in out
    assert "FAILED: 1 claimed check(s) broken: my_maddubs_avx2:exact:claimed" in done.stderr
    commands = dict(COMMAND.findall(out))
    assert set(commands) == {"replay", "repro"}, out
    assert "--kernels wrong.toml" in commands["repro"] and ":A=255*2:B=-128*2:" in commands["repro"]
    for kind, line in commands.items():      # verbatim: the journal's replay and the self-contained repro
        again = run_command(line, folder)
        assert again.returncode == 1, (kind, again.stdout, again.stderr)
        assert "actual   C = [[-32768]]" in again.stdout and "expected C = [[-65280]]" in again.stdout, kind


def test_not_claimed_failures_print_no_counterexample_on_the_terminal(failing_run):
    """Only claimed failures are shown in full; the report has every counterexample."""
    folder, done = failing_run
    md = (folder / "rep" / "report.md").read_text()
    assert done.stdout.count("minimal counterexample") == 1
    assert md.count("minimal counterexample") >= 1


def test_report_json_is_a_typed_document_with_versions_settings_and_machine(failing_run):
    folder, _ = failing_run
    doc = json.loads((folder / "rep" / "report.json").read_text())
    rows.validate_report(doc)
    from lowp import __version__
    assert doc["schema_version"] == rows.SCHEMA_VERSION and doc["lowp_version"] == __version__
    assert doc["settings"]["examples"] == 20 and doc["settings"]["seed"] == 0
    assert doc["settings"]["kernels_files"] == ["wrong.toml"] and doc["settings"]["grid"] is False
    assert doc["settings"]["kernels"] == ["my_maddubs_avx2"] and len(doc["rows"]) == 2
    assert doc["machine"]["cpu"] and "avx2" in doc["machine"]["x86_features"]
    assert set(doc["machine"]["compilers"]) == {"native", "zig"}
    built = [r["build"] for r in doc["rows"] if r["verdict"] != "SKIPPED"]
    assert built and all("-mavx2" in b["compile_flags"] for b in built)     # the kernel's own cflags
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (the `test` extra has it)")
    jsonschema.validate(doc, rows.json_schema("report"))        # the schema tools get says the same
    doc["rows"][0]["verdict"] = "PASSED"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, rows.json_schema("report"))


def test_a_row_is_made_in_one_place_and_a_wrong_field_fails():
    check = Check("u8s8s32_avx2", "exact", "claimed", True)
    row = rows.check_row(check)
    assert row["verdict"] == "NOT RUN" and row["id"] == "u8s8s32_avx2:exact:claimed"
    rows.validate_row(row)
    with pytest.raises(TypeError, match="verdikt"):
        rows.check_row(check, verdikt="PASS")
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="executed"):
        rows.validate_row({k: v for k, v in row.items() if k != "executed"})
    with pytest.raises(ValidationError, match="verdict"):
        rows.validate_row({**row, "verdict": "OK"})


@pytest.fixture(scope="session")
def junit_schema():
    """pytest's junit-10.xsd (the Jenkins xUnit plugin's schema, which pytest's own tests validate its JUnit XML
    against), from the source distribution of the installed pytest, downloaded once into lowp's cache."""
    xmlschema = pytest.importorskip("xmlschema", reason="xmlschema is not installed (the `test` extra has it)")
    from lowp.emulator.buildcache import cache_dir
    version = pytest.__version__
    xsd = cache_dir() / "pytest-schemas" / version / "junit-10.xsd"
    if not xsd.is_file():
        download = xsd.parent / "sdist"
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", f"pytest=={version}", "--no-binary",
                              ":all:", "--no-deps", "-d", str(download)], capture_output=True, text=True)
        sdists = list(download.glob("pytest-*.tar.gz"))
        if got.returncode or not sdists:
            pytest.skip(f"cannot download pytest {version}'s source distribution for its JUnit schema: "
                        f"{got.stderr.strip()[-300:]}")
        with tarfile.open(sdists[0]) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("testing/example_scripts/junit-10.xsd"))
            xsd.write_bytes(tar.extractfile(member).read())
    return xmlschema.XMLSchema(str(xsd))


def test_junit_validates_against_pytests_schema_with_the_counterexample_as_failure_body(failing_run,
                                                                                        junit_schema):
    folder, _ = failing_run
    path = folder / "rep" / "junit.xml"
    junit_schema.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("failures") == "1" and root.get("errors") == "0"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    failing = suites["my_maddubs_avx2:exact:claimed"]
    assert failing.get("timestamp") and failing.get("hostname") and float(failing.get("time")) > 0
    props = {p.get("name"): p.get("value") for p in failing.iter("property")}
    assert props["kernel"] == "my_maddubs_avx2" and props["contract"] == "exact" and props["domain"] == "claimed"
    assert props["backend"] == "native" and "vpmaddubsw" in props["path"] and props["claimed"] == "True"
    assert int(props["cases_executed"]) > 0 and "-mavx2" in props["compile_flags"]
    failure = failing.find("testcase/failure")
    assert "minimal counterexample" in failure.text and "A = [[255, 255]]" in failure.text
    assert "repro: `lowp conformance replay --kernels wrong.toml" in failure.text
    passing = suites["my_maddubs_avx2:model:full"].find("testcase")
    assert passing.find("failure") is None and passing.find("skipped") is None


def test_junit_outcomes_of_every_verdict(junit_schema, tmp_path):
    """A not-claimed FAIL is skipped with its own type (pytest's xfail pattern): reported, not failing CI."""
    from lowp.conformance.report import junit
    base = Check("k", "exact", "full", False)
    made = [rows.check_row(base, verdict="FAIL", cause="wrong value", backend="native"),
            rows.check_row(Check("k", "model", "full", True), verdict="CRASH", reason="the worker died"),
            rows.check_row(Check("k", "exact", "claimed", True), verdict="SKIPPED", reason="no AVX-512 here"),
            rows.check_row(Check("k", "exact", "outside", False), verdict="NOT RUN", reason="not run"),
            rows.check_row(Check("k", "model", "claimed", True), verdict="PASS", seconds=1.23456)]
    path = tmp_path / "junit.xml"
    path.write_text(junit(made))
    junit_schema.validate(str(path))
    root = ET.parse(path).getroot()
    assert root.get("failures") == "0" and root.get("errors") == "1"
    types = [[child.get("type") for child in case if child.tag != "system-out"] for case in root.iter("testcase")]
    assert types == [["lowp.not-claimed"], ["lowp.crash"], ["lowp.skipped"], ["lowp.not-run"], []]


@pytest.fixture
def failing_test(pytester):
    """An author's test whose marker's check fails: u8s8s32_avx2 is exact on u7 x s8, not on all of u8."""
    from lowp.emulator.targets.x86_64 import NATIVE
    if NATIVE.cannot_run(frozenset({"avx2"})):
        pytest.skip("u8s8s32_avx2 cannot run here")
    pytester.makepyfile(test_k=textwrap.dedent("""
        import pytest

        @pytest.mark.lowp("u8s8s32_avx2", "exact", domain="full", examples=30)
        def test_full_range():
            pass
    """))


def test_pytest_report_gives_a_repro_line_that_runs_verbatim(pytester, failing_test):
    """From `pytest --lowp-report`: no journal, but the self-contained repro line runs as printed."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lowp-report=rep.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = (pytester.path / "rep.md").read_text()
    commands = dict(COMMAND.findall(report))
    assert set(commands) == {"repro"}, report          # no journal to replay from
    result.stdout.fnmatch_lines(["*repro: `lowp conformance replay 'u8s8s32_avx2:exact:full:*"])
    again = run_command(commands["repro"], pytester.path)
    assert again.returncode == 1 and "u8s8s32_avx2:exact:full" in again.stdout, again.stdout + again.stderr
    doc = json.loads((pytester.path / "rep.md.json").read_text())
    rows.validate_report(doc)
    assert doc["rows"][0]["test"] == "test_k.py::test_full_range"


matrices = st.integers(1, 5).flatmap(lambda m: st.integers(1, 5).flatmap(lambda k: st.lists(
    st.sampled_from([0, 0, 1, -1, 127, -128, 255]), min_size=m * k, max_size=m * k).map(
    lambda xs: np.array(xs, np.int64).reshape(m, k))))


@settings(max_examples=200, deadline=None)
@given(matrices, matrices, st.integers(0, 2 ** 31), st.none() | st.fixed_dictionaries({"a_zero_point": st.integers(
    -5, 5), "note": st.just("a:b")}))
def test_problem_ids_round_trip(A, B, seed, quant):
    B = B.reshape(-1)[: A.shape[1] * (B.size // A.shape[1])].reshape(A.shape[1], -1) if B.size >= A.shape[1] \
        else np.zeros((A.shape[1], 1), np.int64)
    text = problem.encode("k", "exact", "claimed", A, B, seed, quant)
    back = problem.decode(text)
    assert np.array_equal(back["A"], A) and np.array_equal(back["B"], B)
    assert back["seed"] == seed and back["quant"] == quant and back["kernel"] == "k"


@pytest.mark.parametrize("text, message", [
    ("k:exact:claimed:1x1x2:A=255*3:B=1*2:seed=0", "A has 3 elements; its shape 1x2 needs 2"),
    ("k:exact:claimed:1x1:A=1:B=1:seed=0", "not MxNxK"),
    ("k:exact:claimed:1x1x1:A=x:B=1:seed=0", "'x' is not VALUE or VALUE\\*COUNT"),
    ("k:exact:claimed:1x1x1:A=1:B=1:seed=0:q={bad", "not JSON"),
    ("k:exact:1x1x1:A=1:B=1:seed=0", "expected KERNEL:CHECK:DOMAIN"),
])
def test_a_malformed_problem_id_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        problem.decode(text)


def test_schema_command_prints_the_report_schema(tmp_path):
    done = lowp("conformance", "schema", cwd=tmp_path)
    schema = json.loads(done.stdout)
    assert done.returncode == 0 and schema["properties"]["schema_version"]["type"] == "integer"
    assert "CheckRow" in schema["$defs"] and schema["$defs"]["CheckRow"]["additionalProperties"] is False
    assert lowp("conformance", "schema", "nope", cwd=tmp_path).returncode == 2


def test_pytest_sessions_keep_an_example_database_in_pytests_cache(pytester, failing_test, monkeypatch):
    """A rerun replays the counterexample an earlier session found before searching anew."""
    monkeypatch.delenv("LOWP_DATABASE")
    searched = []
    for _ in range(2):
        result = pytester.runpytest_subprocess("--lowp-report=rep.md")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        searched.append(json.loads((pytester.path / "rep.md.json").read_text())["rows"][0]["searched"])
    assert (pytester.path / ".pytest_cache" / "d" / "lowp-examples").is_dir()
    assert searched[0] > 1 and searched[1] == 1, searched
