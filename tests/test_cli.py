"""The command line as a user meets it: every command `--help` offers answers its own --help, usage errors exit 2
with a did-you-mean, ranges are values, a closed pipe is quiet."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lowp.cli import SIGPIPE_STATUS, build_parser, main


def _commands(parser, prefix=()):
    """Every command path the parsers offer: ('isa',), ('isa', 'list'), ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _commands(sub, (*prefix, name))


COMMANDS = list(_commands(build_parser()))


def test_the_smoke_test_sees_the_commands():
    assert {("conformance",), ("isa", "list"), ("isa", "verify"), ("bench",), ("docs", "isa")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_offered_command_answers_help(path, capsys):
    with pytest.raises(SystemExit) as e:
        main([*path, "--help"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("usage: lowp " + " ".join(path))


def test_version(capsys):
    import lowp
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"lowp {lowp.__version__}"


@pytest.mark.parametrize("argv, message", [
    (["conformance", "--kernal", "X"], "unknown option --kernal (did you mean --kernel?)"),
    (["conformance", "replay"], "replay needs the id"),
    (["isa", "lisst"], "invalid choice: 'lisst' (did you mean list?)"),
    (["bounds", "--acc", "s17", "--a", "s8", "--b", "s8"], "unknown accumulator type 's17' (did you mean s16?)"),
    (["bounds", "--acc", "s32"], "--acc needs --a and --b"),
    (["bounds", "--a", "1:x", "--b", "s8", "--acc", "s32"], "not a range: '1:x'"),
    (["conformance", "--kernel", "u8s8s32_avx3"], "did you mean 'u8s8s32_avx2'"),
    (["conformance", "--kernels", "nope.toml"], "nope.toml: cannot read"),
])
def test_usage_errors_exit_2_and_name_the_problem(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as e:
        status = e.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_negative_ranges_are_values(capsys):
    assert main(["bounds", "--a", "-127:127", "--b", "-128:127", "--acc", "s32"]) == 0
    assert "A in [-127, 127] and B in [-128, 127]" in capsys.readouterr().out


def test_emulate_refuses_too_few_arguments(tmp_path, capsys):
    src = tmp_path / "add3.c"
    src.write_text("long add3(long a, long b, long c) { return a + b + c; }\n")
    assert main(["emulate", str(src), "-f", "add3", "-a", "a=1", "-a", "b=2"]) == 2
    assert "takes 3 argument(s); 2 given" in capsys.readouterr().err
    assert main(["emulate", str(src), "-f", "add3", "-a", "a=1", "-a", "b=2", "-a", "c=3"]) == 0
    assert "returned x0 = 6" in capsys.readouterr().out


def test_emulate_says_what_ran_and_runs_sve_on_qemu(tmp_path, capsys):
    from lowp.emulator.qemu import AARCH64, unavailable
    from lowp.emulator.qemu_batch import identify
    src = tmp_path / "vl.c"
    src.write_text("long bytes(void) { long x; __asm__ volatile(\".arch_extension sve\\n\\trdvl %0, #1\" : \"=r\"(x)); "
                   "return x; }\n")
    assert main(["emulate", str(src), "-f", "bytes"]) == 1             # Unicorn has no SVE: an undefined instruction
    captured = capsys.readouterr()
    assert "ran on: Unicorn" in captured.out and "UndefinedInstruction" in captured.err
    if unavailable():
        assert main(["emulate", str(src), "-f", "bytes", "--backend", "qemu"]) == 2
        assert "qemu-aarch64 is not installed" in capsys.readouterr().err
        return
    assert main(["emulate", str(src), "-f", "bytes", "--backend", "qemu", "--mnemonics"]) == 0
    out = capsys.readouterr().out
    assert f"ran on: {identify(AARCH64.path())} -cpu max" in out
    assert "returned x0 = " in out and "rdvl 1" in out
    assert main(["emulate", str(src), "-f", "bytes", "--backend", "qemu", "--lockstep"]) == 2
    assert "--lockstep needs Unicorn" in capsys.readouterr().err


def test_a_closed_pipe_is_quiet():
    """`lowp isa list | head -1`: the reader leaves early; no traceback, the SIGPIPE status."""
    proc = subprocess.Popen([sys.executable, "-m", "lowp", "isa", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() in (0, SIGPIPE_STATUS) and "Traceback" not in err and "BrokenPipe" not in err


def _mutation_suite(folder) -> list[str]:
    """A two-kernel mutation suite in `folder` made of the shipped suite's own entries and sources (so they must be
    installed): the portable-C control and one of its mutants, renamed so they cannot clash with test_mutants'."""
    import tomllib

    from lowp.conformance.bench import mutants
    from lowp.conformance.bench.conformance import toml_text
    chosen = ("ctl_x86_scalar", "mut_x86_scalar_a_signed")
    entries = [dict(e, name=f"smoke_{e['name']}", source=str(mutants.SUITE / e["source"]))
               for e in tomllib.loads(mutants.SUITES["authors"].read_text())["kernel"] if e["name"] in chosen]
    expected = tomllib.loads(mutants.SUITES["authors"].with_name("expected.toml").read_text())
    (folder / "mutants.toml").write_text(toml_text(entries))
    (folder / "expected.toml").write_text("".join(
        f"[smoke_{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in expected[name].items())
        for name in chosen))
    return ["--toml", str(folder / "mutants.toml"), "--examples", "10"]


def _first_x86_kernel() -> str:
    from lowp.kernels import kernels
    return kernels("x86-64")[0].name


# Every `lowp bench` target with its quickest options, and what its output must say: the benchmarks live in the
# package (lowp.conformance.bench), so each starts from an installed lowp as from a checkout.
BENCH_SMOKE = {
    "gemm": (lambda tmp: ["--quick", "--no-torch", "--rounds", "1", "--kernel", _first_x86_kernel()],
             "seed 004 grid (quick: corners)"),
    "isa": (lambda tmp: ["--registers", "64"], "native / model"),
    "emulator": (lambda tmp: ["--quick"], "1x1x1"),
    "emulator --hooks": (lambda tmp: ["--quick", "--hooks"], "lockstep"),
    "mutants": (_mutation_suite, "killed 1 of 1 mutants (100%), 0 false alarms in 1 controls"),
    "conformance": (lambda tmp: ["--copies", "1", "--examples", "5", "--jobs", "1"], "lowp conformance over 1 kernels"),
    "xnnpack": (lambda tmp: ["--checkout", str(Path(__file__).parent / "xnnpack_tree"), "--datatype", "qs8-qc4w",
                             "--jobs", "1"], "within 60 min"),
    "ggml": (lambda tmp: ["--checkout", str(Path(__file__).parent / "ggml_tree"), "--isa", "x64", "--jobs", "1"],
             "within 20 min"),
    "prove": (lambda tmp: ["--quick", "--kernel", "u8s8s32_avx512vnni"], "4x8x64"),
    "fuzz": (lambda tmp: ["--quick"], "batched/C harness"),
}


def test_the_bench_smoke_test_sees_every_target():
    bench = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    suite = next(a for a in bench._actions if a.dest == "suite")
    assert {case.split()[0] for case in BENCH_SMOKE} == set(suite.choices)


@pytest.mark.parametrize("case", BENCH_SMOKE)
def test_every_bench_target_runs(case, tmp_path, capsys, forget_kernels):
    options, says = BENCH_SMOKE[case]
    assert main(["bench", case.split()[0], *options(tmp_path)]) == 0
    assert says in capsys.readouterr().out


def test_bench_mutants_names_a_missing_suite(tmp_path, capsys):
    (tmp_path / "mutants.toml").write_text("")
    assert main(["bench", "mutants", "--toml", str(tmp_path / "mutants.toml")]) == 2
    assert f"no mutation suite at {tmp_path / 'expected.toml'}" in capsys.readouterr().err


def test_emulate_arguments_take_f32_arrays():
    """An XNNPACK params blob or per-channel scales are float32: TYPE f32 with its fills."""
    import numpy as np

    from lowp.commands.emulate import parse_arg
    rng = np.random.default_rng(0)
    assert parse_arg("s=f32:4:1.5", rng)[1].tolist() == [1.5] * 4
    r = parse_arg("p=f32:2x3:random", rng)[1]
    assert r.dtype == np.float32 and r.shape == (2, 3) and (-1 <= r).all() and (r < 1).all()
    assert parse_arg("q=f32:1:max", rng)[1][0] == np.finfo(np.float32).max
    with pytest.raises(ValueError, match="unknown fill 'abc'"):
        parse_arg("x=f32:2:abc", rng)
