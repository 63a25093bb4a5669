"""lowp's contracts against the real libraries: PyTorch's fbgemm and onednn engines and ONNX Runtime.

For every (library, path) a child interpreter is started with the path's environment set before the library loads
(FBGEMM_ENABLE_INSTRUCTIONS=AVX2 for FBGEMM's saturating AVX2 kernels, ONEDNN_MAX_CPU_ISA=AVX2 for oneDNN's; ONNX
Runtime's session option session.x64quantprecision), runs a batch of generated problems through the library and
hands back the outputs; lowp judges each output element against its contract model (models.py) for that path:
the same model with the instruction-set setting as a parameter (exact sums, or u8*s8 pair sums clipped to int16
with pairs starting at even k) and the library's float epilogue rounding as a named variant.

    from lowp.conformance import peers
    rows = peers.run(count=2000)           # one row per library, operator and path
    print(peers.table(rows))

    rows = peers.run(count=150, emulate_avx2=True)   # as an AVX2-only CPU: ONNX Runtime under valgrind

The contract of each row is predicted from the CPU flags the library sees (expected_isa: for ONNX Runtime, the u8 x s8
kernel MLAS's CPUID dispatch picks, mlas_u8s8_kernel), and each child probes which arithmetic really ran.
The libraries are optional (pip install -e '.[peers]'); a missing one (or valgrind, for an emulated AVX2 CPU) gives
SKIPPED rows with the reason.
"""
from __future__ import annotations

import importlib.util
import os
import pickle
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np

from lowp.conformance.report.rows import peer_row
from lowp.conformance.peers import models, problems

ORT_MATMUL_COMBOS = (("u8", "s8"), ("u8", "u8"), ("s8", "s8"), ("s8", "u8"))
ORT_CONV_COMBOS = (("u8", "u8"), ("u8", "s8"), ("s8", "s8"), ("s8", "u8"))


@dataclass(frozen=True)
class PeerPath:
    library: str            # torch-fbgemm | torch-onednn | onnxruntime
    path: str               # the name of the arithmetic path
    ops: tuple
    env: dict = field(default_factory=dict)
    engine: str | None = None
    session_options: dict = field(default_factory=dict)
    requires: tuple = ()
    wrapper: tuple = ()                 # a command the child runs under (valgrind, for an emulated AVX2 CPU)
    flags: frozenset | None = None      # the CPU flags the library sees; None: this CPU's
    emulation: str | None = None        # how an emulated host is made, for the report

    @property
    def name(self) -> str:
        return f"{self.library}/{self.path}"


PATHS = (
    PeerPath("torch-fbgemm", "native", ("linear", "linear_dynamic"), engine="fbgemm", requires=("torch",)),
    PeerPath("torch-fbgemm", "avx2", ("linear", "linear_dynamic"), env={"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"},
             engine="fbgemm", requires=("torch",)),
    PeerPath("torch-onednn", "native", ("linear", "linear_dynamic"), engine="onednn", requires=("torch",)),
    PeerPath("torch-onednn", "avx2", ("linear", "linear_dynamic"), env={"ONEDNN_MAX_CPU_ISA": "AVX2"},
             engine="onednn", requires=("torch",)),
    PeerPath("onnxruntime", "default", ("MatMulInteger", "QLinearMatMul", "ConvInteger"),
             requires=("onnxruntime", "onnx")),
    PeerPath("onnxruntime", "x64quantprecision", ("MatMulInteger", "QLinearMatMul", "ConvInteger"),
             session_options={"session.x64quantprecision": "1"}, requires=("onnxruntime", "onnx")),
)
# The ISA environment variables a child must not inherit from the user's shell unless its path sets them.
ISA_ENV = ("FBGEMM_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "ONEDNN_VERBOSE", "DNNL_VERBOSE", "DNNL_MAX_CPU_ISA")


def cpu_flags() -> frozenset[str]:
    """The host's CPU flags as Linux names them (/proc/cpuinfo); empty where that is unavailable."""
    from lowp.emulator.targets import host
    return host().flags


RELEVANT_FLAGS = ("avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
                  "avx_vnni_int8", "amx_tile", "amx_int8")

# What valgrind 3.19's CPUID offers a program on x86-64 (its most capable amd64 CPU model: AVX2, FMA, no AVX-512, no
# AVX-VNNI), so ONNX Runtime's MLAS, which dispatches on CPUID with no override, takes its AVX2 kernels under it.
VALGRIND = ("valgrind", "--tool=none", "-q")
AVX2_HOST_FLAGS = frozenset({"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2"})
# The ISA caps that make PyTorch's engines run the kernels an AVX2-only CPU runs (the paths' own 'avx2' overrides).
TORCH_AVX2_CAP = {"torch-fbgemm": {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}, "torch-onednn": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}

MLAS_U8S8_KERNELS = {
    "amx": ("exact", "AMX (TDPBUSD: exact)"),
    "avx512vnni": ("exact", "AVX-512 VNNI (VPDPBUSD: exact)"),
    "avx512core": ("pair_saturating", "AVX-512 without VNNI (VPMADDUBSW: pair-saturating on raw operands, zero "
                                      "points folded by row/column sums)"),
    "avxvnni": ("exact", "AVX-VNNI (VPDPBUSDS: exact products, int32-saturating sums, exact at these sizes)"),
    "avx2": ("pair_saturating", "AVX2 (VPMADDUBSW: pair-saturating on raw operands, zero points folded by "
                                "row/column sums)"),
    "sse": ("exact", "SSE2 (16-bit PMADDWD: exact)"),
}


def mlas_u8s8_kernel(flags) -> str:
    """The u8 x s8 QGEMM kernel ONNX Runtime's MLAS picks on a CPU with these (Linux) flags, in the order of
    MLAS_PLATFORM's constructor (platform.cpp): AVX2 needs avx2 and fma; AVX-VNNI replaces it; AVX-512 core
    (f, dq, bw, vl) replaces that; AVX-512 VNNI replaces that; AMX (amx_tile, amx_int8) replaces the dispatch."""
    kernel = "sse"
    if {"avx2", "fma"} <= flags:
        kernel = "avx2"
        if "avx_vnni" in flags:
            kernel = "avxvnni"
        if {"avx512f", "avx512dq", "avx512bw", "avx512vl"} <= flags:
            kernel = "avx512core"
            if "avx512_vnni" in flags:
                kernel = "avx512vnni"
        if {"amx_tile", "amx_int8"} <= flags:
            kernel = "amx"
    return kernel


def path_flags(pp: PeerPath) -> frozenset:
    return pp.flags if pp.flags is not None else cpu_flags()


def expected_isa(pp: PeerPath, flags: set[str] | None = None) -> str:
    """The accumulation contract lowp predicts for a path on this CPU (or the CPU `flags` describe): exact where the
    library's kernels use a non-saturating dot product (VPDPBUSD on AVX-512 VNNI; oneDNN also on AVX-VNNI; ONNX
    Runtime's VNNI/AMX u8 x s8 kernels), pair-saturating where VPMADDUBSW runs (AVX2, or AVX-512 without VNNI);
    for ONNX Runtime, what its u8 x s8 kernel computes (mlas_u8s8_kernel; its other type pairs are exact anyway)."""
    flags = path_flags(pp) if flags is None else frozenset(flags)
    if pp.library == "onnxruntime":
        return MLAS_U8S8_KERNELS[mlas_u8s8_kernel(flags)][0]
    forced = pp.env.get("FBGEMM_ENABLE_INSTRUCTIONS") or pp.env.get("ONEDNN_MAX_CPU_ISA")
    if forced and forced.upper() in ("AVX2", "AVX512", "AVX512_CORE"):
        return "pair_saturating_igemm" if pp.library == "torch-onednn" else "pair_saturating"
    vnni = "avx512_vnni" in flags or (pp.library == "torch-onednn" and "avx_vnni" in flags)
    if vnni:
        return "exact"
    return "pair_saturating_igemm" if pp.library == "torch-onednn" else "pair_saturating"


def model_options(pp: PeerPath, flags: set[str] | None = None) -> dict:
    """The path's settings lowp's models take besides the accumulation: for ONNX Runtime, whether the
    x64quantprecision weight rewrite is in force (the session option, on a CPU where MlasPlatformU8S8Overflow() is
    true: its u8 x u8 and u8 x s8 dispatches differ, i.e. any AVX2 CPU in a Linux build)."""
    if pp.library != "onnxruntime":
        return {}
    flags = path_flags(pp) if flags is None else frozenset(flags)
    on = pp.session_options.get("session.x64quantprecision") == "1" and {"avx2", "fma"} <= flags
    return {"precision_mode": on}


def avx2_host_path(pp: PeerPath) -> PeerPath:
    """The path as an AVX2-only CPU (no AVX-512, no VNNI) runs it: ONNX Runtime's child under valgrind (MLAS has
    no override, but follows valgrind's CPUID); PyTorch's engines under their ISA caps, which select the same kernels
    as such a CPU (cross-checked under valgrind, docs/peers.md)."""
    if pp.library == "onnxruntime":
        return replace(pp, wrapper=VALGRIND, flags=AVX2_HOST_FLAGS,
                       emulation="AVX2 host: valgrind's CPUID (AVX2, FMA; no AVX-512, no VNNI)")
    return replace(pp, env={**pp.env, **TORCH_AVX2_CAP[pp.library]}, flags=AVX2_HOST_FLAGS,
                   emulation="AVX2 host: the engine's ISA cap")


def missing(pp: PeerPath) -> str | None:
    """Why a path cannot run here (a missing optional package), or None. The parent never imports the library."""
    gone = [m for m in pp.requires if importlib.util.find_spec(m) is None]
    if gone:
        return f"{', '.join(gone)} not installed (pip install -e '.[peers]')"
    if pp.wrapper and shutil.which(pp.wrapper[0]) is None:
        return (f"{pp.wrapper[0]} not installed (apt-get install valgrind): an AVX2-only CPU is emulated by running "
                f"{pp.library} under valgrind, whose CPUID offers no AVX-512 or VNNI")
    return None


def generate(pp: PeerPath, op: str, count: int, seed: int) -> list[dict]:
    """The batch for one operator; one problem in seven is nudged towards the float-epilogue ties that tell the
    library's rounding variants apart (problems.seek_*)."""
    rng = np.random.default_rng([seed, 99])
    if op == "linear":
        probs = problems.linear_problems(seed, count, weight_zero_point=pp.library != "torch-onednn")
        if pp.library == "torch-fbgemm":
            probs = [problems.seek_float_bias_ties(p, rng) if i % 7 == 3 else p for i, p in enumerate(probs)]
        return probs
    if op == "linear_dynamic":
        return problems.dynamic_problems(seed, count, weight_zero_point=pp.library != "torch-onednn")
    if op == "MatMulInteger":
        return problems.matmul_integer_problems(seed, count, ORT_MATMUL_COMBOS)
    if op == "QLinearMatMul":
        probs = problems.qlinear_matmul_problems(seed, count, ORT_MATMUL_COMBOS)
        return [problems.seek_qlinear_ties(p, rng) if i % 7 == 3 else p for i, p in enumerate(probs)]
    if op == "ConvInteger":
        return problems.conv_integer_problems(seed, count, ORT_CONV_COMBOS)
    raise KeyError(op)


def run_child(pp: PeerPath, batches: dict, timeout: float = 3600) -> dict:
    """Run the batches {op: problems} through the library in a fresh interpreter with the path's environment
    (under the path's wrapper command, if it has one)."""
    env = {k: v for k, v in os.environ.items() if k not in ISA_ENV}
    env.update(pp.env)
    env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="lowp-peers-") as tmp:
        job, result = os.path.join(tmp, "job.pkl"), os.path.join(tmp, "result.pkl")
        with open(job, "wb") as f:
            pickle.dump({"library": pp.library, "path": pp.path, "engine": pp.engine, "ops": batches,
                         "session_options": pp.session_options}, f)
        proc = subprocess.run([*pp.wrapper, sys.executable, "-m", "lowp.conformance.peers.child", job, result], env=env,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0 or not os.path.exists(result):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
            return {"fatal": f"child died ({how}): " + " | ".join(tail)}
        with open(result, "rb") as f:
            return pickle.load(f)


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint32) if x.dtype == np.float32 else x


def _shape_of(p: dict) -> str:
    if "A" in p and "W" in p:
        return f"{p['A'].shape[0]}x{p['W'].shape[0]}x{p['A'].shape[1]}"
    if "X" in p and p["X"].ndim == 2:
        return f"{p['X'].shape[0]}x{p['W'].shape[0]}x{p['X'].shape[1]}"
    if "A" in p:
        return f"{p['A'].shape[0]}x{p['B'].shape[1]}x{p['A'].shape[1]}"
    return f"x{list(p['X'].shape)} w{list(p['W'].shape)}"


def compare(pp: PeerPath, op: str, probs: list[dict], outputs: list, isa: str, **options) -> dict:
    """Judge every output element against lowp's contract model (the first candidate) and count, per named
    alternative, the cases it would also explain. options: the path's model_options."""
    cands = models.candidates(pp.library, op, isa, **options)
    names = list(cands)
    row = peer_row(pp.library, op, pp.path, isa=isa, model=names[0], errors=0, elements=0, elements_agree=0,
                   variants={n: 0 for n in names}, disagreements=[], kinds={}, skipped_combos={})
    for p, out in zip(probs, outputs):
        if isinstance(out, str):
            key = "/".join(p.get("types", ())) or "all"
            if "NOT_IMPLEMENTED" in out or "Could not find an implementation" in out:
                row["skipped_combos"].setdefault(key, out[:200])
                continue
            row["errors"] += 1
            if len(row["disagreements"]) < 5:
                row["disagreements"].append({"id": p["id"], "kind": p["kind"], "error": out})
            continue
        row["cases"] += 1
        kind = row["kinds"].setdefault(p["kind"], [0, 0])
        kind[0] += 1
        got = out if not isinstance(out, tuple) else out[0]
        got2 = None if not isinstance(out, tuple) else out[1]
        for i, (name, model) in enumerate(cands.items()):
            want = model(p)
            ok = got.shape == want.shape and np.array_equal(_bits(got), _bits(want))
            if got2 is not None:
                ok = ok and np.array_equal(_bits(got2), _bits(want[:p["m2"]]))
            row["variants"][name] += ok
            if i == 0:
                row["elements"] += want.size
                if got.shape == want.shape:
                    row["elements_agree"] += int((_bits(got) == _bits(want)).sum())
                if ok:
                    row["agree"] += 1
                    kind[1] += 1
                elif len(row["disagreements"]) < 5:
                    d = {"id": p["id"], "kind": p["kind"], "shape": _shape_of(p)}
                    if got.shape == want.shape:
                        idx = tuple(int(v) for v in np.argwhere(_bits(got) != _bits(want))[0]) if \
                            (_bits(got) != _bits(want)).any() else None
                        if idx is not None:
                            d.update(at=list(idx), got=got[idx].item(), expected=want[idx].item(),
                                     differing=int((_bits(got) != _bits(want)).sum()))
                        else:
                            d.update(note="the sub-block run (first m2 rows) differs")
                    else:
                        d.update(got_shape=list(got.shape), expected_shape=list(want.shape))
                    row["disagreements"].append(d)
    row["skipped_combos"] = {k: v for k, v in row["skipped_combos"].items()}
    return row


def run_path(pp: PeerPath, count: int, seed: int) -> list[dict]:
    """All operators of one path: generate, run in the child, judge. Returns one row per operator."""
    start = time.perf_counter()
    isa = expected_isa(pp)
    why = missing(pp)
    if why:
        return [peer_row(pp.library, op, pp.path, "SKIPPED", reason=why) for op in pp.ops]
    options = model_options(pp)
    batches = {op: generate(pp, op, count, seed) for op in pp.ops}
    result = run_child(pp, batches)
    if "fatal" in result:
        return [peer_row(pp.library, op, pp.path, "CRASH", reason=result["fatal"][-600:]) for op in pp.ops]
    rows = []
    for op in pp.ops:
        row = compare(pp, op, batches[op], result["outputs"][op], isa, **options)
        row["info"] = result["info"]
        row["options"] = options
        if pp.emulation:
            row["emulation"] = pp.emulation
        row["cpu_path"] = describe_path(pp, result["info"], op)
        row["verdict"] = "PASS" if row["cases"] and row["agree"] == row["cases"] and not row["errors"] else (
            "SKIPPED" if not row["cases"] and not row["errors"] else "FAIL")
        if row["verdict"] == "SKIPPED":
            row["reason"] = "no operand combination is implemented"
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
    return rows


def describe_path(pp: PeerPath, info: dict, op: str) -> str:
    """What ran, as the library reports it: engine, requested ISA, the probe's arithmetic, oneDNN's
    implementation names (ONEDNN_VERBOSE), ONNX Runtime's session options."""
    emulated = [pp.emulation] if pp.emulation else []
    if pp.library == "onnxruntime":
        opts = ", ".join(f"{k}={v}" for k, v in info.get("session_options", {}).items()) or "default options"
        kernel = MLAS_U8S8_KERNELS[mlas_u8s8_kernel(path_flags(pp))][1]
        rewrite = ""
        if model_options(pp).get("precision_mode"):
            rewrite = ("; s8 weights outside [-64, 64] rewritten to u8" if op in models.S8_WEIGHTS_TO_U8_SINCE
                       else "; no weight rewrite for this operator")
            if op == "QLinearMatMul":
                rewrite += " at opset < 21 only"
        return "; ".join(emulated + [f"MLAS u8s8 kernel {kernel}, by CPUID ({opts}{rewrite})",
                                     f"kernel probe {info.get('probe')}",
                                     f"constant-weight probe {info.get('probe_constant_weights')}"])
    parts = emulated + [f"engine {info.get('engine')}", f"cpu capability {info.get('cpu_capability')}"]
    env = info.get("env") or {}
    parts.append(", ".join(f"{k}={v}" for k, v in env.items()) or "no ISA override")
    impls = info.get("onednn_implementations", {}).get(op)
    if impls:
        parts.append("oneDNN " + " + ".join(i for i in impls if not i.startswith("reorder")))
    parts.append(f"probe {info.get('probe')}")
    return "; ".join(parts)


def _run_path_args(args):
    return run_path(*args)


def run(*, count: int = 2000, seed: int = 0, jobs: int | None = None, libraries=None, paths=None,
        emulate_avx2: bool = False) -> list[dict]:
    """Run every selected path (one child process each, `jobs` at a time) and return the rows. emulate_avx2: run
    each path as an AVX2-only CPU would (avx2_host_path) and predict its contracts from that CPU's flags."""
    selected = [pp for pp in PATHS if (not libraries or pp.library in libraries)
                and (not paths or pp.path in paths or pp.name in paths)]
    if emulate_avx2:
        selected = [avx2_host_path(pp) for pp in selected]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(selected) or 1))
    if jobs == 1:
        results = [run_path(pp, count, seed) for pp in selected]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(_run_path_args, [(pp, count, seed) for pp in selected]))
    return [row for rows in results for row in rows]


def environment(emulate_avx2: bool = False) -> dict:
    from lowp.emulator.targets import host
    h = host()
    env = {"python": platform.python_version(), "machine": h.machine,
           "cpu_flags": sorted(f for f in RELEVANT_FLAGS if f in h.flags), "cpu": h.cpu_model}
    if emulate_avx2:
        env["emulated_cpu_flags"] = sorted(f for f in RELEVANT_FLAGS if f in AVX2_HOST_FLAGS)
        env["valgrind"] = _valgrind_version()
    for mod in ("torch", "onnxruntime", "onnx"):
        spec = importlib.util.find_spec(mod)
        env[mod] = None
        if spec is not None:
            try:
                from importlib.metadata import version
                env[mod] = version(mod)
            except Exception:
                env[mod] = "installed"
    return env


def _valgrind_version() -> str | None:
    exe = shutil.which(VALGRIND[0])
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def table(rows: list[dict]) -> str:
    from tabulate import tabulate
    body = []
    for r in rows:
        if r["verdict"] in ("SKIPPED", "CRASH"):
            body.append((r["library"], r["operator"], r["path"], r["verdict"], "", "", "", r.get("reason", "")))
            continue
        alts = ", ".join(f"{n} {c}" for n, c in list(r["variants"].items())[1:])
        skipped = f"; not implemented: {', '.join(r['skipped_combos'])}" if r.get("skipped_combos") else ""
        body.append((r["library"], r["operator"], r["path"], r["verdict"], f"{r['agree']} of {r['cases']}",
                     f"{r['elements_agree']} of {r['elements']}", f"{r['model']} (others: {alts})" + skipped,
                     r["cpu_path"]))
    return tabulate(body, headers=("library", "operator", "path", "verdict", "cases agreeing",
                                   "elements agreeing", "lowp contract model", "CPU path that ran"),
                    tablefmt="github")
