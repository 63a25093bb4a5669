"""The library seam: what a library campaign supplies, and the engine that judges any library's kernels with it.

A library (one room in lowp.conformance.libraries: XNNPACK now, ggml next) knows its own checkout: where its
kernels are, what each one is as a lowp kernel entry (or the named reason it cannot be one), its ISA or variant
table, the contracts and output stages it claims, and how its report groups kernels. The engine knows none of
that: it registers the entries, builds them (through the build cache, `jobs` at a time), runs the ordinary checks
on the process pool with its journal and --resume, and writes report.md and campaign.md / campaign.json. A second
library is one new room plus its contracts; nothing here changes for it (docs/extending.md, "Adding a library").
"""
from __future__ import annotations

import fnmatch
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from lowp.conformance.report.campaign import Item


class NotACheckout(ValueError):
    """PATH is not a checkout of the library (the command exits 2 with this message)."""


@dataclass(frozen=True)
class Skip:
    """Why a kernel is not judged: `category` groups the campaign's counts, `message` names the kernel's case."""
    category: str
    message: str


@dataclass
class Found:
    """One kernel a checkout declares, as the library found it (cheaply: no mapping yet). `group` holds the values
    of the library's group_keys; `what` is the library's own record of it, handed back to Library.map; `skip` is
    set where the kernel cannot even be read (an unreadable file)."""
    name: str
    group: dict
    where: str
    what: Any = None
    skip: Skip | None = None


class Library:
    """What a library campaign supplies. Subclass it in lowp.conformance.libraries.<name>."""
    name: str = ""                                  # the report's title: 'XNNPACK'
    group_keys: tuple[str, ...] = ()                # how campaign.md groups kernels: ('datatype', 'op', 'isa')
    selectors: dict[str, str] = {}                  # a group key -> the option that selects by it ('isa': '--isa')

    def open(self, path: Path) -> Any:
        """The checkout at `path`; NotACheckout naming what is missing where PATH is not one."""
        raise NotImplementedError

    def refuse(self, checkout, selection: dict) -> str | None:
        """Why this selection ({group key: [values]}) names nothing the checkout or the library has, or None."""
        return None

    def found(self, checkout, selection: dict) -> Iterable[Found]:
        """Every kernel the checkout declares in the selection (the engine filters by group key and name too)."""
        raise NotImplementedError

    def map(self, checkout, found: Found) -> dict | Skip:
        """The lowp kernel entry ([[kernel]] table, paths absolute) of one kernel, or the Skip naming what lowp lacks
        to make it."""
        raise NotImplementedError

    def source(self, checkout) -> dict:
        """What was judged, for campaign.json: {'path': ..., 'commit': ...}."""
        raise NotImplementedError

    # How the entries become runnable kernels, built and checked. The defaults are lowp's kernel entries
    # (lowp.kernels.Kernel: a GEMM micro-kernel and its checks); a library whose kernels are something else (ggml's
    # vec_dots) overrides all three.
    def register(self, entries: list[dict], toml: Path) -> tuple[list, dict[str, str]]:
        """(the kernels of the valid entries, {name: why an entry is not valid})."""
        return register_kernel_entries(entries, toml)

    def build_problem(self, kernel) -> tuple[str, str] | None:
        """(category, message) of a kernel that does not build or lacks its symbol, else None (built)."""
        return kernel_build_problem(kernel)

    def plan(self, kernels: list) -> list:
        """The checks of the built kernels."""
        from lowp.conformance.run.checks import plan
        return plan(kernels)

    def reproduce(self, found: list[dict], rows: list[dict], folder: Path) -> list[dict]:
        """Each finding's standalone C reproducer, written to folder/<id>.c (and run where this machine can)."""
        return reproduce(found, rows, folder)

    def inputs(self, entry: dict) -> tuple[list[Path], list[Path]]:
        """(the files an entry's build compiles, the folders whose headers it may include): what `--since` asks a
        change about. The default reads lowp kernel entries: their sources, include folders and the sources'
        folders."""
        sources = [Path(s) for s in entry.get("sources", [])]
        return sources, [*(Path(d) for d in entry.get("include_dirs", [])), *(s.parent for s in sources)]


@dataclass
class Campaign:
    """One run of the engine: the library, its checkout, the selection and how hard to look."""
    library: Library
    checkout: Any
    out: Path
    selection: dict = field(default_factory=dict)   # group key -> values (empty: all)
    kernel_globs: tuple[str, ...] = ()
    options: dict = field(default_factory=dict)     # the checks' options: examples, seed, grid, database, ...
    jobs: int | None = None
    resume: bool = False
    timeout: float = 600
    write_toml: Path | None = None
    ray: str | None = None                          # run the checks on this Ray cluster ('local': one started here)
    reuse: bool = True                              # take earlier campaigns' verdicts of unchanged checks
                                                    # (lowp.conformance.run.verdicts); --fresh: False
    since: str | None = None                        # --since REV: only kernels whose files changed since REV
    settings: dict = field(default_factory=dict)    # what campaign.json records of the command line

    @property
    def toml(self) -> Path:
        return self.out / "kernels.toml"

    def selected(self, found: Found) -> bool:
        return all(not values or found.group.get(key) in values for key, values in self.selection.items()) and \
            (not self.kernel_globs or any(fnmatch.fnmatchcase(found.name, g) for g in self.kernel_globs))


def run(campaign: Campaign) -> tuple[int, Any]:
    """Map, register, build, judge and report; (exit status, the RunStopped of a run that was stopped, or None).
    Exit status 1 when a kernel fails a claimed check, 2 when nothing was selected, else 0."""
    started = time.perf_counter()
    items, entries = map_kernels(campaign)
    if not items:
        print("error: no kernel of the checkout matches the selection", file=sys.stderr)
        return 2, None
    if campaign.since is not None:
        items, entries = changed_since(campaign, items, entries)
        if not items:
            print(f"no kernel of the selection changed since {campaign.since}: nothing to judge")
            return 0, None
    mapping = time.perf_counter() - started
    kernels = register(campaign.library, items, entries, campaign.toml)
    build_started = time.perf_counter()
    kernels = build(campaign.library, items, kernels, campaign.jobs)
    built = time.perf_counter() - build_started
    for path in filter(None, (campaign.toml, campaign.write_toml)):
        write_toml(path, [entries[k.name] for k in kernels], items, campaign)
    rows, checks_seconds, stop = judge(campaign, kernels)
    seconds = {"wall": round(time.perf_counter() - started, 1), "mapping": round(mapping, 1),
               "build": round(built, 1), "checks": round(checks_seconds, 1)}
    return report(campaign, items, rows, seconds), stop


def map_kernels(campaign: Campaign) -> tuple[list[Item], dict[str, dict]]:
    """The campaign's items (one per selected kernel the checkout declares) and the entries the library made."""
    library, items, entries = campaign.library, [], {}
    for found in library.found(campaign.checkout, campaign.selection):
        if found.skip is None and not campaign.selected(found):      # an unreadable file is listed whatever the
            continue                                                  # selection: it may hold selected kernels
        item = Item(found.name, found.group, found.where)
        items.append(item)
        if found.skip is not None:
            item.skip = (found.skip.category, found.skip.message)
        elif found.name in entries:
            item.skip = ("duplicate", f"{found.where} repeats a kernel of an earlier entry")
        else:
            result = library.map(campaign.checkout, found)
            if isinstance(result, dict):
                entries[found.name] = result
            else:
                item.skip = (result.category, result.message)
    return items, entries


HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inc", ".inl")


class SinceError(ValueError):
    """--since REV cannot be answered: not a git checkout, or git does not know REV (the command exits 2)."""


def changed_files(path: Path, rev: str) -> set[Path]:
    """The files of the git checkout holding `path` that differ from REV: committed, staged and unstaged changes
    (`git diff REV`), deletions included, and the untracked files git does not ignore. Absolute paths."""
    import subprocess

    def git(*argv: str) -> str:
        done = subprocess.run(["git", "-C", str(path), *argv], capture_output=True, text=True)
        if done.returncode:
            raise SinceError(f"--since {rev}: git {argv[0]} failed: {(done.stderr or done.stdout).strip()[:300]}")
        return done.stdout
    try:
        top = Path(git("rev-parse", "--show-toplevel").strip())
        git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        names = git("diff", "--name-only", "-z", rev, "--").split("\0")
        names += git("ls-files", "--others", "--exclude-standard", "-z").split("\0")
    except OSError as e:
        raise SinceError(f"--since {rev}: git cannot run here: {e}") from None
    return {(top / n).resolve() for n in names if n}


def changed_since(campaign: Campaign, items: list[Item], entries: dict) -> tuple[list[Item], dict]:
    """The items --since keeps: a kernel whose build compiles a changed file, or that may include a changed
    header (one in or under its include and source folders: a superset of what it reads, which the kept verdicts
    then narrow: lowp.conformance.run.verdicts keys a verdict by the headers the compiler really read); a kernel
    lowp does not judge, only where the file it was found in changed. Prints how many of how many."""
    where = Path(campaign.library.source(campaign.checkout)["path"])
    changed = changed_files(where, campaign.since)
    headers = [c for c in changed if c.suffix in HEADER_SUFFIXES]

    def touched(item: Item) -> bool:
        entry = entries.get(item.name)
        if entry is None:       # item.where names the file relative to the library's root: match its tail
            return any(str(c).endswith("/" + item.where.split(":")[0]) for c in changed)
        files, folders = campaign.library.inputs(entry)
        folders = [Path(f).resolve() for f in folders]
        return any(Path(f).resolve() in changed for f in files) or \
            any(h.is_relative_to(folder) for h in headers for folder in folders)
    kept = [i for i in items if touched(i)]
    print(f"--since {campaign.since}: {len(kept)} of {len(items)} kernels build from files changed since then "
          f"({len(changed)} changed files); the others are not judged")
    return kept, {i.name: entries[i.name] for i in kept if i.name in entries}


def write_toml(path: Path, entries: list[dict], items: list[Item], campaign: Campaign) -> None:
    """The kernel entries that reached the checks, as [[kernel]] tables, and why each other kernel did not, as
    comments: `lowp conformance --kernels FILE --no-builtin` judges the same kernels again."""
    import tomli_w

    from lowp.conformance.report.outfolder import write_text      # whole or not at all: a later --resume reads it
    path.parent.mkdir(parents=True, exist_ok=True)
    where = campaign.library.source(campaign.checkout)["path"]
    head = (f"# What lowp made of the kernels of the {campaign.library.name} checkout {where} (a campaign):\n"
            f"# one [[kernel]] table per kernel it judges, paths absolute; the skipped ones at the end, with why.\n"
            f"# `lowp conformance --kernels {path} --no-builtin` judges them again.\n\n")
    skipped = [f"# skipped: {i.name} ({i.where}): {' '.join(i.skip[1].split())}" for i in items if i.skip]
    text = tomli_w.dumps({"kernel": entries}) if entries else ""
    write_text(path, head + text + ("\n" + "\n".join(skipped) + "\n" if skipped else ""))


def register(library: Library, items: list[Item], entries: dict, toml: Path) -> list:
    """Register the entries (the library's way); an entry that is not valid is a skipped item naming the problem."""
    kernels, problems = library.register(list(entries.values()), toml)
    by_name = {i.name: i for i in items}
    for name, message in problems.items():
        by_name[name].skip = ("lowp entry invalid", message)
    return kernels


def register_kernel_entries(entries: list[dict], toml: Path) -> tuple[list, dict[str, str]]:
    """lowp kernel entries registered in memory, each checked by the kernel schema and lowp.conformance's own
    checks: (the valid kernels, {name: the problems of each other one})."""
    from lowp.kernels import KernelConfigError
    from lowp.kernels.registry import register_entries

    from lowp.conformance.search.validate import validate_kernels
    kernels, found = register_entries(entries, toml)
    problems = {name: "; ".join(p.message for p in ps) for name, ps in found.items()}
    valid = []
    for k in kernels:
        try:
            validate_kernels([k])
        except KernelConfigError as e:
            problems[k.name] = "; ".join(f"{p.key}: {p.message}" for p in e.problems)
            continue
        valid.append(k)
    return valid, problems


def build(library: Library, items: list[Item], kernels: list, jobs: int | None) -> list:
    """Build every kernel that can run here (the checks' builds come from the same cache), `jobs` at a time; a
    source that does not build or a symbol the build lacks is a skipped item with the compiler's first lines."""
    by_name = {i.name: i for i in items}

    def one(kernel):
        start = time.perf_counter()
        problem = library.build_problem(kernel)
        by_name[kernel.name].build_seconds = time.perf_counter() - start
        return kernel, problem
    results = []
    print(f"building {len(kernels)} kernels (cached builds are instant)", file=sys.stderr, flush=True)
    with ThreadPoolExecutor(max(1, jobs or os.cpu_count() or 1)) as pool:
        for done, result in enumerate(pool.map(one, kernels), 1):
            results.append(result)
            if done % 100 == 0 or done == len(kernels):      # a cold build of a datatype takes minutes: say so
                print(f"  built {done}/{len(kernels)}", file=sys.stderr, flush=True)
    built = []
    for kernel, problem in results:
        if problem:
            by_name[kernel.name].skip = problem
        else:
            built.append(kernel)
    return built


def kernel_build_problem(kernel) -> tuple[str, str] | None:
    """A lowp kernel entry's build problem: the first of build_problems, with the compiler's own words."""
    from lowp.conformance.search.validate import build_problems
    problems = build_problems([kernel])
    if not problems:
        return None
    first = problems[0]
    return ("does not build" if first.key in ("source", "sources") else "symbol problem",
            compiler_words(first.message))


def compiler_words(message: str, default: str = "") -> str:
    """A build failure on one line: its first line and the compiler's own first error line after it."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    error = next((line for line in lines[1:] if "error" in line), "")
    return " ".join(filter(None, [lines[0] if lines else default, error]))


def judge(campaign: Campaign, kernels: list) -> tuple[list[dict], float, Any]:
    """The ordinary checks of the built kernels on the process pool; (rows, seconds, the RunStopped of a run that
    Ctrl-C, SIGTERM or a full disk stopped, else None)."""
    from lowp.conformance.run import runner
    checks = campaign.library.plan(kernels)
    start = time.perf_counter()
    stop = None
    try:
        rows = runner.run(checks, campaign.out / "journal.jsonl", jobs=campaign.jobs, resume=campaign.resume,
                          timeout=campaign.timeout, options=campaign.options, ray=campaign.ray,
                          reuse=campaign.reuse) if checks else []
    except runner.RunStopped as e:
        rows, stop = e.rows, e
    return rows, time.perf_counter() - start, stop


def report(campaign: Campaign, items: list[Item], rows: list[dict], seconds: dict) -> int:
    """report.md/json and junit.xml of every check, campaign.md/json of every kernel; the head of campaign.md on
    stdout; 1 when a kernel failed a claimed check, else 0."""
    from lowp.conformance import report as reports
    from lowp.conformance.report import campaign as campaign_report
    replay_args = f"--kernels {campaign.toml} --no-builtin --out {campaign.out}"
    settings = campaign.settings
    paths = reports.write(rows, campaign.out, seconds["checks"], replay_args, {**settings, "kernels": []}) \
        if rows else {}
    campaign_report.summarize(items, rows)
    found = campaign.library.reproduce(campaign_report.findings(items, rows), rows, campaign.out / "findings")
    cpaths = campaign_report.write(campaign.out, items, rows, library=campaign.library.name,
                                   source=campaign.library.source(campaign.checkout), settings=settings,
                                   seconds=seconds, replay_args=replay_args,
                                   group_keys=campaign.library.group_keys, found=found)
    text = cpaths["markdown"].read_text()
    print(text.split("\n## Every skipped kernel", 1)[0].rstrip())
    print(f"\nreports: {', '.join(str(p) for p in [*cpaths.values(), *paths.values()])}; kernels: {campaign.toml}")
    failed = [i.name for i in items if i.status == "failed"]
    if failed:
        print(f"FAILED: {len(failed)} kernel(s) broke a claimed check", file=sys.stderr)
    return 1 if failed else 0


def reproduce(found: list[dict], rows: list[dict], folder: Path) -> list[dict]:
    """Each finding's standalone C reproducer (lowp.conformance.report.reproducer) of its example, written to
    folder/<id>.c and, where this machine can, built and run: the finding names the file and what it said. A
    failure that depends on an earlier call, or of a kernel called without an adapter's buffers, gets none."""
    from lowp.kernels import kernel as registered

    from lowp.conformance.report import reproducer
    from lowp.conformance.report.outfolder import write_text
    by_id = {r["id"]: r for r in rows}
    for f in found:
        row = by_id[f["example"]]
        cx = row.get("counterexample") or {}
        kern = registered(row["kernel"])
        if not cx or cx.get("previous") or not kern.quantized or cx.get("kind") == "fault":
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{f['id']}.c"
        write_text(path, reproducer.c_source(kern, row, f"lowp finding {f['id']}: {f['cause']}"))
        f["reproducer"], f["reproduced"] = str(path), reproducer.run_here(kern, path)
    return found
