"""The records lowp's reports are made of, typed once: a check's row (runner, checks, reports, the pytest plugin),
a peer library's row (`lowp peers`), and the report documents that carry them, with the JSON Schema tools can
validate report.json and peers.json against (`lowp conformance schema`).

Rows stay plain dicts at run time (they cross pipes and journals as JSON, and users index them: row["verdict"]);
these TypedDicts say what a row holds, the builders below are the only places rows are made, and `validate_*`
checks a row or a report against the types before it is written, so a misspelt or missing field fails loudly in
lowp's own tests instead of in a user's dashboard. SCHEMA_VERSION changes when a field changes meaning or goes
away; a new optional field does not change it.
"""
from __future__ import annotations

from dataclasses import asdict
from functools import lru_cache
from typing import Any, Literal, Union

from pydantic import ConfigDict, TypeAdapter
from typing_extensions import NotRequired, TypedDict

SCHEMA_VERSION = 1

Verdict = Literal["PASS", "FAIL", "CRASH", "SKIPPED", "NOT RUN"]
VERDICTS: tuple[str, ...] = Verdict.__args__
Matrix = list[list[Union[int, float]]]
STRICT = ConfigDict(extra="forbid")


class Call(TypedDict):
    """A call made before the failing one, on the same copy of the kernel (a failure that depends on earlier calls)."""
    __pydantic_config__ = STRICT
    A: Matrix
    B: Matrix
    shape: list[int]
    seed: int
    case: str | None
    quant: dict[str, Any] | None
    options: NotRequired[dict[str, Any] | None]   # its ABI options, as the counterexample's


class Counterexample(TypedDict):
    """The minimal failing call, as found and shrunk: operands, what the kernel gave, what the check expected."""
    __pydantic_config__ = STRICT
    case: str | None            # the generated case (or search) it was shrunk from
    shape: list[int]            # [M, N, K]
    seed: int                   # the poison seed of C and the workspace
    nonzero: int
    A: Matrix
    B: Matrix
    actual: Matrix | None       # None: the call faulted
    expected: Matrix
    first_diff: list[int] | None
    actual_at_first: int | float | None
    expected_at_first: int | float | None
    matched: str | None         # the variant the actual C matched, 'fault', or None
    kind: str                   # value, fault, poison-C, unwritten, state, nondeterministic, abi, ...
    cause: str
    fault: str | None
    previous: Call | None
    quant: dict[str, Any] | None  # a requantizing kernel's parameters (lowp.conformance.search.quantized)
    tile: list[int]             # the kernel's [mr, nr]: the report shows the first differing tile lane by lane
    # an XNNPACK ukernel's ABI options, {"strides": {...}, "igemm": {...}, "align": {...}} (search.cases.abi_options)
    options: NotRequired[dict[str, Any] | None]


class GgmlCounterexample(TypedDict):
    """The minimal failing call of a ggml vec_dot (lowp.conformance.run.ggml): its blocks as hex, the float it
    returned and the one its contract expected, and the lines the report prints."""
    __pydantic_config__ = STRICT
    case: str | None
    shape: list[int]            # [1, 1, n]
    nonzero: int
    seed: int
    x_type: str
    y_type: str
    blocks: int
    x: str                      # the weight blocks' bytes, hex
    y: str                      # the activation blocks' bytes, hex
    actual: float | None        # None: the call faulted
    expected: float
    matched: str | None
    kind: str
    cause: str
    fault: str | None
    lines: list[str]


class GgmlRepackCounterexample(TypedDict):
    """The minimal failing call of a ggml gemv/gemm (lowp.conformance.run.ggml.run_repacked): the rows' blocks
    repacked and interleaved as the call took them (hex), its shape, and the elements that differ."""
    __pydantic_config__ = STRICT
    case: str
    shape: list[int]            # [nr, nc, n]
    seed: int
    x_type: str
    y_type: str
    blocks: int                 # per row
    nc: int
    nr: int
    bs: int
    vx: str                     # the repacked weights, hex
    vy: str                     # the activations (interleaved for a gemm), hex
    differ: list[list[float]]   # (row, column, got, expected), the first 16
    expected: list[list[float]]     # every result lowp's model gives: [row][column]
    kind: str
    cause: str
    lines: list[str]


class GgmlQuantizerCounterexample(TypedDict):
    """The first row a ggml activation quantizer wrote otherwise than its claimed variant
    (lowp.conformance.run.ggml.run_quantizer): its floats and the bytes the variant writes over the poison."""
    __pydantic_config__ = STRICT
    case: str
    k: int
    y_type: str
    variant: str
    poison: int                 # the byte y held before the call
    x: str                      # k float32, little-endian, hex
    expected: str               # the claimed variant's bytes, hex
    cause: str
    lines: list[str]


class Build(TypedDict):
    """How the kernel that ran was built (from the build cache's manifest)."""
    __pydantic_config__ = STRICT
    compiler: str
    compile_flags: list[str]
    link_flags: list[str]


class Node(TypedDict):
    """The machine that ran a check, when a campaign ran on several (`lowp conformance --ray`)."""
    __pydantic_config__ = STRICT
    hostname: str
    ray_node: str               # Ray's id of the node
    arch: str | None            # lowp's name of the architecture: 'x86-64', 'aarch64'
    cpu: str                    # /proc/cpuinfo's model name
    features: list[str]         # the CPU features lowp runs there (CPUID + XGETBV, less LOWP_DISABLE_FEATURES)
    compiler: str               # the native C compiler that built the kernels there
    python: str


class Producer(TypedDict):
    """What produced a journal row (lowp.conformance.run.provenance): `--resume` keeps a row only if this run's would
    be the same."""
    __pydantic_config__ = STRICT
    lowp: str                   # lowp's version
    kernel: str                 # SHA-256 of the kernel's entry and its build (the build cache's key: sources, headers)
    options: dict[str, Any]     # the options that change the cases: seed, examples, grid, --case, --shapes
    backend: dict[str, str]     # backends chosen by environment (--backend): LOWP_X86_BACKEND, ...


class CheckRow(TypedDict):
    """One check: a kernel against its behaviour model or a contract, on a domain, through one backend."""
    __pydantic_config__ = STRICT
    event: Literal["row"]
    id: str                     # kernel:check:domain
    kernel: str
    check: str                  # 'model' or a contract (an output-stage contract for a requantizing kernel)
    domain: str                 # claimed, full or outside
    claimed: bool               # a FAIL or CRASH of a claimed check fails the run
    backend: str                # native, unicorn, qemu; '?' when the check died before it chose
    target: str | None
    emulator: NotRequired[str]  # what ran an emulated kernel: 'qemu-aarch64 10.0.2 (/usr/bin/qemu-aarch64) -cpu max'
    contract_claimed: str | None
    origin: str | None          # the file that registered the kernel (a TOML file, or Python)
    verdict: Verdict
    reason: str                 # why SKIPPED, CRASH or NOT RUN
    cause: str | None           # why FAIL
    cases: int                  # planned (generated cases + search examples tried)
    executed: int
    failed: int
    matched: dict[str, int]     # cases per variant the results matched
    path: str | None            # the instructions that carried the kernel
    counterexample: Counterexample | GgmlCounterexample | GgmlRepackCounterexample | GgmlQuantizerCounterexample | None
    seconds: float
    build: NotRequired[Build | None]
    searched: NotRequired[int | None]   # examples the hypothesis search tried; None: it did not run (--case)
    drawn: NotRequired[int]     # cases drawn from the search's distribution and run batched (`lowp fuzz`)
    replayed: NotRequired[int]  # of them, counterexamples kept in the example database, replayed first
    shared_runs: NotRequired[int]   # of the executed cases, those judged on the kernel's earlier check's run of the
                                    # same call, in the same state (run/shared_runs.py)
    first_failure_seconds: NotRequired[float]
    traceback: NotRequired[str]
    test: NotRequired[str]      # the pytest node that made the check (pytest --lowp-report)
    node: NotRequired[Node]     # the machine that ran it (the Ray backend; otherwise the report's `machine`)
    producer: NotRequired[Producer]     # what produced it (the runner's rows; `--resume` compares it)
    reused: NotRequired[bool]   # an earlier campaign's verdict of the same check and producer (run/verdicts.py)


def check_row(check, **fields) -> CheckRow:
    """A check's row before it runs (NOT RUN, nothing executed); `fields` fill in what is known."""
    row: dict = {"event": "row", **asdict(check), "id": check.id, "backend": "?", "target": None,
                 "contract_claimed": None, "origin": kernel_origin(check.kernel), "verdict": "NOT RUN", "reason": "",
                 "cause": None, "cases": 0, "executed": 0, "failed": 0, "matched": {}, "path": None,
                 "counterexample": None, "seconds": 0.0}
    unknown = set(fields) - set(CheckRow.__annotations__)
    if unknown:
        raise TypeError(f"not a field of a check's row: {', '.join(sorted(unknown))}")
    row.update(fields)
    return row


def kernel_origin(kernel: str) -> str | None:
    from lowp.kernels.registry import origin
    where = origin(kernel)        # None for a kernel not registered: the row says so through its verdict
    return None if where is None else str(where)


class PeerRow(TypedDict):
    """One peer library's operator on one of its paths against lowp's contract models (`lowp peers`)."""
    __pydantic_config__ = ConfigDict(extra="allow")     # per library: the child's info, the path description
    library: str
    operator: str
    path: str
    verdict: Verdict
    reason: NotRequired[str]
    cases: int
    agree: int
    seconds: NotRequired[float]


def peer_row(library: str, operator: str, path: str, verdict: str = "NOT RUN", **fields) -> PeerRow:
    return {"library": library, "operator": operator, "path": path, "verdict": verdict, "cases": 0, "agree": 0,
            **fields}


# A verdict is a key of the summary, and "NOT RUN" has a space: the functional form.
Summary = TypedDict("Summary", {"checks": int, **{v: int for v in VERDICTS}, "cases_executed": int,
                                "cases_planned": int, "claimed_failures": list[str]})
Summary.__pydantic_config__ = STRICT


class Report(TypedDict):
    """report.json (`lowp conformance`) and FILE.json (`pytest --lowp-report=FILE`)."""
    __pydantic_config__ = STRICT
    schema_version: int
    lowp_version: str
    created: str                # ISO 8601, UTC
    settings: dict[str, Any]    # what the run was asked: examples, seed, kernels files, selection, ...
    machine: dict[str, Any]     # the fingerprint: CPU, features, Python, emulators, compilers
    summary: Summary
    seconds: float | None
    rows: list[CheckRow]


class PeersReport(TypedDict):
    """peers.json (`lowp peers`)."""
    __pydantic_config__ = STRICT
    schema_version: int
    lowp_version: str
    created: str
    settings: dict[str, Any]
    machine: dict[str, Any]
    seconds: float | None
    rows: list[PeerRow]


@lru_cache(maxsize=None)
def _adapter(kind) -> TypeAdapter:
    return TypeAdapter(kind)


def validate_row(row: dict) -> CheckRow:
    """The row, checked against CheckRow (pydantic's ValidationError names the field)."""
    return _adapter(CheckRow).validate_python(row, strict=True)


def validate_report(report: dict) -> Report:
    return _adapter(Report).validate_python(report, strict=True)


def validate_peers_report(report: dict) -> PeersReport:
    return _adapter(PeersReport).validate_python(report, strict=True)


def json_schema(kind: str = "report") -> dict:
    """The JSON Schema (draft 2020-12) of report.json ('report') or peers.json ('peers')."""
    schema = _adapter({"report": Report, "peers": PeersReport}[kind]).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://lowp.invalid/schema/{kind}-v{SCHEMA_VERSION}.json"
    return schema


def header(settings: dict, seconds: float | None) -> dict:
    """The fields every report document starts with: versions, time, settings, the machine's fingerprint."""
    from datetime import datetime, timezone

    from lowp import __version__
    return {"schema_version": SCHEMA_VERSION, "lowp_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "settings": settings,
            "machine": machine(), "seconds": seconds}


def machine() -> dict:
    """This machine as a report records it: the host (CPU model and features, Python, Unicorn) and the compilers
    lowp builds kernels with (their identity; each row's `build` has the flags its kernel was built with)."""
    from lowp.emulator.x86 import bochs
    from lowp.emulator.targets import disabled_features, host
    env = dict(host().environment())
    disabled = disabled_features()
    if disabled and isinstance(env.get("x86_features"), list):     # what lowp used; what it was told to ignore
        env["x86_features"] = [f for f in env["x86_features"] if f not in disabled]
        env["disabled_features"] = sorted(disabled)
    env["bochs"] = None if bochs.unavailable() else f"bochscpu-python {bochs.bochscpu_version()}"
    env["compilers"] = compilers()
    return env


def compilers() -> dict[str, str]:
    """The native C compiler (path and the first line of its --version) and zig, the cross compiler."""
    from lowp.emulator.buildcache import compiler_name
    from lowp.emulator.build import compiler_version
    from lowp.emulator.x86.native import toolchain
    out = {}
    for name, probe in (("native", lambda: compiler_name(toolchain().identity)), ("zig", compiler_version)):
        try:
            out[name] = probe()
        except Exception as e:      # a missing compiler is a fact about the machine, not an error of the report
            out[name] = f"unavailable: {e}"
    return out
