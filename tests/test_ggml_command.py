"""`lowp ggml PATH` on lowp's own ggml-shaped tree (tests/ggml_tree): the campaign finds every vec_dot per variant,
judges each where an executor runs it, and its verdicts are EXPECTED.md's: the odd tail (#8549, #29131), the vdotq
fallback lanes (#21462) and the maddubs saturation (ik_llama #427) fail, with shrunk counterexamples grouped into
findings, each with a reproducer; everything else passes. PATH may be a llama.cpp checkout (ggml/ inside); anything
else exits 2 saying what was expected."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lowp.cli import main
from tests.test_ggml_tree import TREE, expected

# EXPECTED.md's builds as ggml's variants
VARIANT_OF_BUILD = {"x86-avx2": "haswell", "x86-baseline": "x64", "armv8-a": "armv8.0_1",
                    "armv8.2-a+dotprod": "armv8.2_1", "rv64gcv@128": "riscv64_v@128"}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    out = tmp_path_factory.mktemp("ggml-campaign")
    argv = ["ggml", str(TREE), "--out", str(out), "--jobs", "2", "--examples", "8", "--fresh"]     # judged here
    for variant in VARIANT_OF_BUILD.values():
        argv += ["--isa", variant]
    status = main(argv)
    return status, out, json.loads((out / "campaign.json").read_text())


def test_the_verdicts_are_the_expected_ones(campaign):
    status, out, doc = campaign
    assert status == 1
    kernels = {k["name"]: k for k in doc["kernels"]}
    judged = 0
    for build, variant in VARIANT_OF_BUILD.items():
        for symbol in ("ggml_vec_dot_q4_0_q8_0", "ggml_vec_dot_q8_0_q8_0", "ggml_vec_dot_iq4_nl_q8_0"):
            k = kernels[f"{symbol}@{variant}"]
            assert {"name", "type", "isa", "status", "category", "reason"} <= set(k)
            if k["status"] == "skipped":          # no executor here (a CPU without AVX2 and no Bochs)
                assert k["reason"], k
                continue
            judged += 1
            want = "failed" if expected(symbol, build).verdict == "FAIL" else "passed"
            assert k["status"] == want, (k["name"], k["status"], k["checks"])
    assert judged >= 12
    assert doc["totals"]["judged"] + doc["totals"]["skipped"] + doc["totals"]["not_run"] == doc["totals"]["found"]


def test_failures_shrink_and_group_into_findings_with_reproducers(campaign):
    _, out, doc = campaign
    rows = {r["id"]: r for r in json.loads((out / "report.json").read_text())["rows"]}
    tail = next(f for f in doc["findings"] if "odd block count's tail" in f["cause"])
    assert "ggml_vec_dot_iq4_nl_q8_0@riscv64_v@128" in tail["kernels"]
    assert "ggml_vec_dot_q4_0_q8_0@armv8.0_1" in tail["kernels"]
    example = rows[tail["example"]]["counterexample"]
    assert example["blocks"] == 1 and example["actual"] == 0.0 and example["expected"] != 0.0
    source = Path(tail["reproducer"]).read_text()
    assert "ggml_get_type_traits_cpu(GGML_TYPE_" in source and example["x"][:8] in source.replace(",0x", "")
    markdown = (out / "campaign.md").read_text()
    assert "## Findings" in markdown and "minimal counterexample" in markdown


def test_generic_twins_are_judged_at_the_baselines_and_powerpc_is_a_row_that_says_why(tmp_path):
    status = main(["ggml", str(TREE), "--out", str(tmp_path), "--type", "q8_0", "--isa", "x64", "--isa", "powerpc",
                   "--examples", "2"])
    doc = json.loads((tmp_path / "campaign.json").read_text())
    names = {k["name"]: k for k in doc["kernels"]}
    assert status == 0
    assert names["ggml_vec_dot_q8_0_q8_0_generic@x64"]["status"] == "passed"
    assert names["ggml_vec_dot_q8_0_q8_0@powerpc"]["category"] == "no target here"


def test_a_llama_cpp_layout_is_a_checkout_and_anything_else_exits_2(tmp_path, capsys):
    llama = tmp_path / "llama.cpp"
    llama.mkdir()
    (llama / "ggml").symlink_to(TREE.resolve())
    assert main(["ggml", str(llama), "--out", str(tmp_path / "o"), "--type", "q8_0", "--isa", "x64",
                 "--examples", "2"]) == 0
    assert main(["ggml", str(tmp_path / "o"), "--out", str(tmp_path / "p")]) == 2
    assert "not a ggml checkout" in capsys.readouterr().err
    assert main(["ggml", str(TREE), "--type", "q9_9", "--out", str(tmp_path / "q")]) == 2


def test_bench_ggml_needs_a_checkout(capsys):
    assert main(["bench", "ggml"]) == 2
    assert "needs --checkout" in capsys.readouterr().err


def test_bench_ggml_cold_builds_everything_and_judges_every_verdict_again(capsys):
    """`lowp bench ggml --cold` (issue 35's 20 minutes are a cold campaign's): the builds on an empty cache join
    the time, and no verdict is reused (the campaign runs --fresh), even right after the same campaign."""
    assert main(["bench", "ggml", "--checkout", str(TREE), "--isa", "x64", "--cold", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "an empty build cache, every verdict judged again" in out and "| wall time" in out
    builds = float(next(line for line in out.splitlines() if "builds" in line and "|" in line).split("|")[2])
    assert builds > 0.5, out          # the tree's x64 build compiled, not found in a cache


def test_quantizers_are_judged_against_their_named_variant(campaign):
    """The tree's q8_0 quantizer: x86's AVX path (127/amax, ties to even) and the generic reference (1/(amax/127),
    roundf) are right; AArch64's rounds ties away where ggml's NEON path rounds them to even, and the failure names
    the variants whose bytes it produced (the reference's rounding)."""
    _, out, doc = campaign
    status = {k["name"]: k["status"] for k in doc["kernels"]}
    assert status["quantize_row_q8_0@haswell"] == "passed"
    assert status["quantize_row_q8_0@x64"] == "passed" and status["quantize_row_q8_0_generic@x64"] == "passed"
    assert status["quantize_row_q8_0@riscv64_v@128"] == "passed"      # arch-fallback.h's renamed generic
    assert status["quantize_row_q8_0@armv8.0_1"] == "failed"
    rows = json.loads((out / "report.json").read_text())["rows"]
    row = next(r for r in rows if r["kernel"] == "quantize_row_q8_0@armv8.0_1")
    assert "variant ref" in row["cause"] and "ties" in row["cause"]
    finding = next(f for f in doc["findings"] if f["cause"].startswith("wrong value: the bytes are variant ref"))
    source = Path(finding["reproducer"]).read_text()
    assert "ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(x, y, " in source
    assert _bytes_of(row["counterexample"]["expected"])[:20] in source.replace("\n", "")


def _bytes_of(hex_text: str) -> str:
    return ",".join(f"0x{b:02x}" for b in bytes.fromhex(hex_text))


def test_repacked_gemv_and_gemm_are_judged_every_element_exact(campaign):
    """The tree's repack.cpp (EXPECTED.md): x86's AVX2 gemv loses an odd last column group, and the failure shrinks
    to one block, one group of four columns and one row, with the NaN poison left where its results belong; the
    generic gemm (renamed) and the gemv's _generic twin pass."""
    _, out, doc = campaign
    status = {k["name"]: k["status"] for k in doc["kernels"]}
    assert status["ggml_gemv_q4_0_4x4_q8_0@haswell"] == "failed"
    assert status["ggml_gemv_q4_0_4x4_q8_0@x64"] == "passed"
    assert status["ggml_gemv_q4_0_4x4_q8_0_generic@x64"] == "passed"
    assert status["ggml_gemm_q4_0_4x4_q8_0@haswell"] == "passed" and status["ggml_gemm_q4_0_4x4_q8_0@x64"] == "passed"
    assert not any("gemv" in name or "gemm" in name for name in status if "armv8" in name or "riscv" in name)
    row = next(r for r in json.loads((out / "report.json").read_text())["rows"]
               if r["kernel"] == "ggml_gemv_q4_0_4x4_q8_0@haswell")
    cx = row["counterexample"]
    assert "left unwritten" in row["cause"]
    assert (cx["blocks"], cx["nc"], cx["nr"]) == (1, 4, 1) and len(cx["differ"]) == 4
    assert all(d[2] != d[2] for d in cx["differ"])          # NaN: the poison
    finding = next(f for f in doc["findings"] if row["id"] == f["example"])
    _reproducer_fails_the_same_way(Path(finding["reproducer"]), out)


def _reproducer_fails_the_same_way(source: Path, folder: Path) -> None:
    """The finding's C reproducer, linked with the tree's repack files as the haswell build compiles them, prints
    the four unwritten results and exits 1 (where this host runs AVX2 and has a C and a C++ compiler)."""
    import shutil
    import subprocess
    from lowp.kernels.features import host_arch, host_features
    if host_arch() != "x86-64" or "avx2" not in host_features("x86-64") or not (shutil.which("cc") and
                                                                             shutil.which("c++")):
        return
    cpu = TREE / "src" / "ggml-cpu"
    folder = folder / "repro-build"
    folder.mkdir(exist_ok=True)
    subprocess.run(["cc", "-O2", "-c", str(source), "-o", str(folder / "repro.o")], check=True)
    subprocess.run(["c++", "-O2", "-mavx2", "-mfma", "-mf16c", f"-I{TREE / 'include'}", f"-I{TREE / 'src'}",
                    f"-I{cpu}", str(cpu / "repack.cpp"), str(cpu / "arch" / "x86" / "repack.cpp"),
                    str(folder / "repro.o"), "-o", str(folder / "repro")], check=True)
    run = subprocess.run([str(folder / "repro")], capture_output=True, text=True)
    assert run.returncode == 1 and "4 of 4 results wrong" in run.stdout, run.stdout


def test_a_second_campaign_reuses_unchanged_verdicts_and_judges_an_edited_kernel_again(tmp_path):
    """Verdicts kept across campaigns (lowp.conformance.run.verdicts): a second campaign with another --out takes
    every verdict of the first; after an edit of arch/x86/repack.cpp only the kernels built from it are judged
    again; --fresh judges everything. The verdicts are the same each time."""
    import shutil
    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)

    def campaign(out: str, *more: str) -> dict:
        assert main(["ggml", str(tree), "--out", str(tmp_path / out), "--isa", "x64", "--isa", "haswell",
                     "--type", "q4_0", "--examples", "2", *more]) == 1
        doc = json.loads((tmp_path / out / "campaign.json").read_text())
        return {k["name"]: (k["status"], k["reused"]) for k in doc["kernels"] if k["status"] in ("passed", "failed")}

    first = campaign("a", "--fresh")
    assert first and not any(reused for _, reused in first.values())
    second = campaign("b")
    assert second == {name: (status, True) for name, (status, _) in first.items()}
    source = tree / "src" / "ggml-cpu" / "arch" / "x86" / "repack.cpp"
    source.write_text(source.read_text() + "\n// an edit\n")
    third = campaign("c")
    assert {name for name, (_, reused) in third.items() if not reused} == {n for n in first if "_gem" in n}
    assert {name: status for name, (status, _) in third.items()} == {n: s for n, (s, _) in first.items()}
    assert not any(reused for _, reused in campaign("d", "--fresh").values())


def test_an_executor_gap_is_a_skipped_row_naming_the_executor_not_a_failure(tmp_path, monkeypatch):
    """An instruction the emulator decodes but does not implement (EmulatorLacksInstruction) or a fault the
    instruction's own operand does not explain (ExecutorDisagrees) is the executor's problem: the vec_dot's checks
    are SKIPPED with its words, never FAIL (run in forked children, which inherit the patch)."""
    from lowp.emulator.errors import EmulatorLacksInstruction
    from lowp.kernels.ggml import executor

    def lacking(self, *args, **kwargs):
        raise EmulatorLacksInstruction("undefined instruction at f+0x10: vgatherdps ymm21 {k1}, ymmword ptr "
                                       "[rax + ymm22*4] (Bochs's model does not implement it)", pc=0, encoding=None)
    monkeypatch.setattr(executor.VecDot, "call", lacking)
    status = main(["ggml", str(TREE), "--out", str(tmp_path), "--type", "q8_0", "--isa", "x64", "--examples", "2",
                   "--fresh"])
    kernels = {k["name"]: k for k in json.loads((tmp_path / "campaign.json").read_text())["kernels"]}
    dot = kernels["ggml_vec_dot_q8_0_q8_0@x64"]
    assert status == 0 and dot["status"] == "skipped" and "does not implement" in dot["reason"]
    assert kernels["quantize_row_q8_0@x64"]["status"] == "passed"          # vd.quantize was not patched


def test_since_judges_only_the_kernels_built_from_changed_files(tmp_path, capsys):
    """`--since REV` (issue 36): on a git checkout, only the kernels whose build compiles a file changed since REV
    (or may include a changed header) are judged; nothing changed is exit 0 with nothing judged; a REV git does
    not know is exit 2 naming it."""
    import shutil
    import subprocess
    tree = tmp_path / "ggml"
    shutil.copytree(TREE, tree)

    def git(*argv):
        subprocess.run(["git", "-C", str(tree), *argv], check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=lowp", "-c", "user.email=lowp@example.org", "commit", "-qm", "the tree")
    argv = ["ggml", str(tree), "--isa", "x64", "--examples", "2", "--since", "HEAD"]
    assert main([*argv, "--out", str(tmp_path / "unchanged")]) == 0
    assert "no kernel of the selection changed since HEAD" in capsys.readouterr().out
    edited = tree / "src" / "ggml-cpu" / "arch" / "x86" / "repack.cpp"
    edited.write_text(edited.read_text() + "\n// an edit\n")
    main([*argv, "--out", str(tmp_path / "edited")])
    out = capsys.readouterr().out
    judged = [k["name"] for k in json.loads((tmp_path / "edited" / "campaign.json").read_text())["kernels"]]
    assert judged and all(name.startswith(("ggml_gemv_", "ggml_gemm_")) for name in judged), judged
    assert "--since HEAD: " in out and "kernels build from files changed since then" in out
    header = tree / "src" / "ggml-cpu" / "simd-mappings.h"
    header.write_text("// a new header: every kernel that may include it is judged again\n")
    main([*argv, "--out", str(tmp_path / "header")])
    capsys.readouterr()
    again = json.loads((tmp_path / "header" / "campaign.json").read_text())["kernels"]
    assert {k["name"] for k in again} > set(judged)
    assert main([*argv[:-1], "no-such-rev", "--out", str(tmp_path / "bad")]) == 2
    assert "--since no-such-rev" in capsys.readouterr().err
