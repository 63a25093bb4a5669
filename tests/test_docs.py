"""The documentation cannot rot: the generated ISA reference matches the registry, the getting-started example
kernels really run through `lowp conformance` and the pytest plugin with the results the page shows, the worked
rounding examples of contracts.md recompute, and every relative link and figure exists."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"


def test_isa_reference_registry_section_is_what_the_registry_generates():
    from lowp.commands import docs
    text = (DOCS / "isa-reference.md").read_text()
    assert docs._section(text, "registry") == docs.registry_section(), "run `lowp docs isa`"
    assert docs._section(text, "verification") is not None


def test_docs_isa_check_and_regenerate(tmp_path):
    from lowp.cli import main
    page = tmp_path / "isa.md"
    page.write_text((DOCS / "isa-reference.md").read_text().replace("`vpmaddubsw`", "`vpmaddubsx`", 1))
    assert main(["docs", "isa", "--out", str(page), "--check"]) == 1
    assert main(["docs", "isa", "--out", str(page)]) == 0           # rewrites the registry, keeps verification
    assert main(["docs", "isa", "--out", str(page), "--check"]) == 0
    assert page.read_text() == (DOCS / "isa-reference.md").read_text()


def _table(md: str) -> tuple[list, dict]:
    """The example report table of getting-started.md (or of a report): its header cells, and its rows as
    (kernel, check, domain) -> {column: cell}."""
    header, rows = None, {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0] == "kernel":
            header = cells
        elif len(cells) == 8 and cells[0].startswith("my_"):
            rows[tuple(cells[:3])] = dict(zip(header, cells))
    return header, rows


def _summary_line(md: str) -> str:
    return next(line for line in md.splitlines() if re.match(r"\d+ checks: ", line))


def _native_avx2() -> bool:
    from lowp.kernels import executor, load_toml  # noqa: F401
    from lowp.emulator.x86.native import host_cpu_features
    return "avx2" in host_cpu_features()


def test_getting_started_conformance_run_matches_the_page(tmp_path):
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "lowp", "conformance", "--kernels", str(EXAMPLES / "kernels.toml"),
           "--kernel", "my_maddubs_avx2", "--kernel", "my_sdot_neon", "--out", str(out), "--examples", "40",
           "--no-grid"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    report = (out / "report.md").read_text()
    page = (DOCS / "getting-started.md").read_text()
    header, shown = _table(page)
    got_header, got = _table(report)
    assert header == got_header and len(shown) == 5
    # The page quotes every count the run prints except the ones that include the hypothesis search's examples
    # (their number varies with hypothesis's version) and the wall time: those are the forms N, n and T. The
    # summary's other counts must be what the run prints, exactly.
    pattern = re.escape(_summary_line(page)).replace("N\\ of\\ N", r"(\d+)\ of\ \1").replace("T\\ s", r"[\d.]+\ s")
    assert "N of N cases executed; T s." in _summary_line(page)
    assert re.fullmatch(pattern, _summary_line(report)), (_summary_line(page), _summary_line(report))
    if not _native_avx2():
        pytest.skip("this CPU lacks AVX2: the page's native rows cannot be reproduced here")
    assert got.keys() == shown.keys()
    searched = {(r["kernel"], r["check"], r["domain"]): r["searched"]
                for r in json.loads((out / "report.json").read_text())["rows"]}
    for key, cells in shown.items():
        assert cells["cases executed"] == "n of n", key
        for column in ("backend", "verdict", "results matched", "path"):
            assert got[key][column] == cells[column], (key, column, got[key][column])
        done, total = got[key]["cases executed"].split(" of ")
        generated = sum(int(n) for n in re.findall(r"\d+", cells["results matched"]))
        # The search's share: what hypothesis draws varies with its version; at most the 40 examples asked for
        # where it found nothing (a probe gets a third), more where it found a failure (shrinking calls count).
        assert done == total and int(done) == generated + searched[key], key
        assert searched[key] <= 40 or cells["verdict"] != "PASS", key
    section = page.split("## my_maddubs_avx2:exact:full: minimal counterexample", 1)[1]
    cause, block = section.split("```")[0], section.split("```")[2]
    assert "cause: wrong value: the result matches pair-saturating" in cause
    assert "cause: wrong value: the result matches pair-saturating" in report
    for line in block.strip().splitlines():
        assert line in report, line
    repro = re.search(r"^repro: `lowp conformance replay --kernels \S+ (.*)`$", section, re.M).group(1)
    assert f" {repro}`" in report, repro
    summary = json.loads((out / "report.json").read_text())["summary"]
    assert summary["claimed_failures"] == []


def test_getting_started_pytest_plugin_example(tmp_path):
    rep = tmp_path / "report.md"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLES / "test_my_kernels.py"),
           f"--lowp-report={rep}", f"--rootdir={tmp_path}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    if _native_avx2():
        assert "4 passed" in p.stdout
    text = rep.read_text()
    assert "lowp conformance report" in text and "my_sdot_neon" in text
    assert json.loads(Path(str(rep) + ".json").read_text())["summary"]["checks"] >= 1


def test_contracts_worked_examples_recompute():
    from lowp.conformance.contracts.fixedpoint import multiply_by_quantized_multiplier
    text = (DOCS / "contracts.md").read_text()
    table = text.split("<!-- worked examples: x, m, shift, exact, G, U, S, S_neon -->", 1)[1]
    lines = table.strip().splitlines()
    rows = lines[:next((i for i, r in enumerate(lines) if not r.startswith("|")), len(lines))][2:]
    assert len(rows) >= 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        x, m, shift = int(cells[0]), int(cells[1]), int(cells[2])
        exact = Fraction(x * m, 2 ** (31 - shift))
        shown = float(cells[3])
        assert abs(float(exact) - shown) < 10 ** -(len(cells[3].split(".")[1]) if "." in cells[3] else 0), row
        for flavour, cell in zip(("G", "U", "S", "S_neon"), cells[4:8]):
            assert int(multiply_by_quantized_multiplier(x, m, shift, flavour=flavour)) == int(cell), (row, flavour)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_relative_links_and_figures_exist(page):
    path = DOCS / page
    for target in LINK.findall(path.read_text()):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{page}: broken link {target}"


def test_study_pages_are_generated_with_their_figures():
    for name in ("seed000", "seed002", "seed004"):
        page = (DOCS / "studies" / f"{name}.md").read_text()
        assert f"Generated by `lowp study {name}`" in page
        pngs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page)
        assert pngs, f"{name}: no figures (regenerate with matplotlib installed)"
        assert json.loads((DOCS / "studies" / f"{name}.json").read_text())["study"] == name


def test_getting_started_requantizing_walkthrough_matches_a_run(tmp_path):
    """The XNNPACK-ABI walk-through's counterexample block is what `lowp conformance` writes for that kernel."""
    from lowp.kernels.features import host_features
    need = ("avx512f", "avx512bw", "avx512vl", "avx512_vnni")
    if any(f not in host_features("x86-64") for f in need):
        pytest.skip("this CPU lacks AVX-512 VNNI: the walk-through's kernel cannot run here")
    toml = DOCS.parent / "kernels" / "quantized" / "x86.toml"
    out = tmp_path / "rep"
    cmd = [sys.executable, "-m", "lowp", "conformance", "--kernels", str(toml), "--kernel",
           "qs8_qc8w_gemm_4x16c4_fp32_avx512vnni", "--examples", "40", "--no-grid", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr          # the seeded kernel breaks its claim
    report = (out / "report.md").read_text()
    page = (DOCS / "getting-started.md").read_text()
    section = page.split("## A requantizing kernel", 1)[1]
    block = section.split("```")[5]                        # toml, sh, then the counterexample
    for line in block.strip().splitlines():
        assert line in report, line
    assert "cause: wrong value: the result matches output stage xnnpack-fp32-avxvnni-wrap" in report


def _anchors(page: Path) -> set:
    """GitHub's heading anchors of a Markdown page: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


SOURCES = ("isa_models", "kernels", "emulator", "conformance", "lowp", "tests", "docs", "benchmarks")
CITED = re.compile(r"docs/research/([\w.-]+\.md)(?:#([\w-]+))?")
OUTSIDE = "/".join(("shared", "research"))        # the notes' old home, outside the repository


def _source_files():
    for top in SOURCES:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".md", ".c", ".S", ".toml", ".h") and "build" not in path.parts:
                yield path
    yield ROOT / "README.md"


def test_research_citations_resolve_inside_the_repository():
    """Every fact the code cites lives in docs/research/ (no notes outside the repository), and every
    page and section of docs/research/ named in code or docs is a page with that section."""
    cited = 0
    for path in _source_files():
        text = path.read_text(errors="replace")
        rel = path.relative_to(ROOT)
        assert OUTSIDE not in text, f"{rel} cites notes outside the repository"
        for page, anchor in CITED.findall(text):
            target = DOCS / "research" / page
            assert target.exists(), f"{rel}: cites docs/research/{page}, which does not exist"
            assert not anchor or anchor in _anchors(target), f"{rel}: no section #{anchor} in docs/research/{page}"
            cited += 1
    assert cited >= 40


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")))
def test_relative_link_anchors_exist(page):
    path = DOCS / page
    for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)#([^)\s]+)\)", path.read_text()):
        if "://" in target:
            continue
        assert anchor in _anchors(path.parent / target), f"{page}: no section #{anchor} in {target}"


FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
PRIVATE = re.compile(r"\bimport\s+_\w|\bfrom\s+[\w.]*\._\w|\bimport\s+[\w.]*\._\w|\._[a-z]\w*|\b_[A-Z][A-Z0-9_]+\b"
                     r"|\bfrom\s+[\w.]+\s+import\s+(?:\([^)]*|[^\n]*)\b_\w")


def _example_code():
    """(where, text) of every fenced block of docs/*.md and docs/**/*.md and of every file in docs/examples/."""
    for page in sorted(DOCS.rglob("*.md")):
        for block in FENCE.findall(page.read_text()):
            yield page.relative_to(ROOT).as_posix(), block
    for path in sorted(EXAMPLES.iterdir()):
        if path.is_file():
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_doc_examples_use_only_public_names():
    """What a reader copies from the docs must not reach into lowp's private names (`_KERNELS`, `mod._helper`):
    those change without notice."""
    bad = [(where, m.group(0)) for where, text in _example_code() for m in PRIVATE.finditer(text)
           if not m.group(0).startswith("__")]
    assert not bad, bad
    assert any("kernels()" in text for where, text in _example_code() if where.endswith("test_my_kernels.py"))


def test_private_name_scan_catches_what_it_should():
    for text in ("from lowp.kernels.registry import _KERNELS", "import _thing", "registry._add(k)",
                 "from lowp.kernels.registry import (kernel,\n _KERNELS)", "from lowp import _private"):
        assert PRIVATE.search(text), text
    for text in ("from lowp.kernels import kernels, load_toml", "k.name", "x = my_var", "__init__"):
        assert not PRIVATE.search(text) or PRIVATE.search(text).group(0).startswith("__"), text


def test_getting_started_pytest_block_is_the_example_file():
    page = (DOCS / "getting-started.md").read_text()
    block = next(b for b in FENCE.findall(page.split("## From pytest", 1)[1]))
    source = (EXAMPLES / "test_my_kernels.py").read_text().splitlines()
    for line in block.strip().splitlines():
        assert not line.strip() or line in source, f"getting-started.md shows a line the example does not have: {line}"


def _resolve(dotted: str):
    """The object a dotted `lowp.x.y` name stands for: the longest importable module prefix, then attributes."""
    import importlib
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def _parses(argv: list[str]) -> bool:
    from lowp.cli import build_parser
    try:
        build_parser().parse_known_args(argv)
    except SystemExit:
        return False
    return True


def test_extending_names_only_what_exists():
    """docs/extending.md walks the extension points by name: every backticked `lowp.module.name` must import,
    every backticked repository path must exist and every `lowp COMMAND ...` must parse, or the page has drifted."""
    text = (DOCS / "extending.md").read_text()
    ticks = re.findall(r"`([^`\n]+)`", text)
    names = [t for t in ticks if re.fullmatch(r"lowp(\.\w+)+", t)]
    paths = [t for t in ticks if re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", t) and "/" in t]
    commands = [t.split() for t in ticks if t.startswith("lowp ")]
    assert len(names) >= 30 and len(paths) >= 10 and len(commands) >= 4
    for name in names:
        assert not any(p.startswith("_") for p in name.split(".")), f"extending.md names a private {name}"
        try:
            _resolve(name)
        except (ImportError, AttributeError) as e:
            raise AssertionError(f"extending.md names `{name}`, which does not exist ({e})") from None
    for path in paths:
        assert (ROOT / path).exists(), f"extending.md names `{path}`, which does not exist"
    for argv in commands:
        assert _parses(argv[1:]), f"`{' '.join(argv)}` does not parse"
    assert _parses(["isa", "verify"]) and not _parses(["isa", "verifyy"])


def _linked(page: Path) -> set:
    """The files a Markdown page links to, resolved."""
    return {(page.parent / target).resolve() for target in LINK.findall(page.read_text()) if "://" not in target}


def test_every_page_is_listed_in_an_index():
    """docs/README.md lists every page of docs/ and of docs/research/; a page in another subdirectory is listed
    by that subdirectory's README.md, which docs/README.md lists. A new page that no index names fails here."""
    top = _linked(DOCS / "README.md")
    missing = []
    for page in sorted(DOCS.rglob("*.md")):
        if page.name == "README.md" and page.parent == DOCS:
            continue
        sub = page.parent
        index = top if sub in (DOCS, DOCS / "research") else _linked(sub / "README.md")
        if page.resolve() not in index and not (page.name == "README.md" and page.resolve() in top):
            missing.append(page.relative_to(DOCS).as_posix())
        if sub not in (DOCS,) and (sub / "README.md").resolve() not in top:
            missing.append(f"{sub.relative_to(DOCS).as_posix()}/README.md (the index of {sub.name}/)")
    assert not missing, f"pages no index lists: {sorted(set(missing))}"
