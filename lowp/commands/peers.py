"""`lowp peers`: run generated quantized problems through the real libraries (PyTorch's fbgemm and onednn engines,
ONNX Runtime) on every arithmetic path this machine has, compare every output element with lowp's contract model,
print a table per library, operator and path, and write it as JSON."""
from __future__ import annotations

from lowp.cli import seed as seed_type

import json
import sys
import time
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("peers", help="check lowp's contract models against PyTorch (FBGEMM, oneDNN) and ONNX Runtime")
    p.add_argument("--count", type=int, default=None,
                   help="problems per operator and path (default 2000; --quick: 150)")
    p.add_argument("--quick", action="store_true", help="a short run (150 problems per operator and path)")
    p.add_argument("--library", action="append", default=[], choices=("torch-fbgemm", "torch-onednn", "onnxruntime"),
                   help="only this library (repeatable)")
    p.add_argument("--path", action="append", default=[], metavar="PATH",
                   help="only this path (native, avx2, default, x64quantprecision; repeatable)")
    p.add_argument("--emulate-avx2", action="store_true",
                   help="run every path as an AVX2-only CPU (no AVX-512, no VNNI) would: ONNX Runtime under valgrind "
                        "(its CPUID dispatch has no override), PyTorch's engines under their AVX2 ISA caps; lowp "
                        "predicts the contracts from that CPU's flags (needs valgrind; about 10x slower for ONNX "
                        "Runtime)")
    p.add_argument("--seed", type=seed_type, default=0, help="seed of the generated problems (default 0)")
    p.add_argument("--jobs", type=int, default=None, help="paths run in parallel (default: one per core)")
    p.add_argument("--out", type=Path, default=Path("lowp-report/peers.json"), help="JSON report (default "
                   "lowp-report/peers.json)")
    p.set_defaults(func=cmd_peers)


def cmd_peers(args) -> int:
    from lowp.conformance import peers
    count = args.count or (150 if args.quick else 2000)
    start = time.perf_counter()
    rows = peers.run(count=count, seed=args.seed, jobs=args.jobs, libraries=args.library, paths=args.path,
                     emulate_avx2=args.emulate_avx2)
    seconds = time.perf_counter() - start
    env = peers.environment(emulate_avx2=args.emulate_avx2)
    emulated = f" (emulating an AVX2-only CPU: flags {' '.join(env['emulated_cpu_flags'])})" if \
        args.emulate_avx2 else ""
    print(f"lowp peers: {count} problems per operator and path, seed {args.seed}; CPU {env.get('cpu')}; flags "
          f"{' '.join(env['cpu_flags'])}{emulated}; torch {env.get('torch')}, onnxruntime {env.get('onnxruntime')}, "
          f"onnx {env.get('onnx')}; {seconds:.1f} s")
    print(peers.table(rows))
    for r in rows:
        for d in r.get("disagreements", []):
            print(f"disagreement: {r['library']} {r['operator']} {r['path']}: {json.dumps(d)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from lowp.conformance.report.rows import header, validate_peers_report
    doc = {**header({"count": count, "seed": args.seed, "jobs": args.jobs, "libraries": args.library,
                     "paths": args.path, "emulate_avx2": args.emulate_avx2}, seconds), "rows": rows}
    doc["machine"].update(env)      # the libraries' versions and the CPU flags that pick their paths
    doc = json.loads(json.dumps(doc, default=str))      # numpy scalars and paths as JSON has them
    validate_peers_report(doc)
    args.out.write_text(json.dumps(doc, indent=1))
    print(f"report: {args.out}")
    failed = [f"{r['library']}/{r['operator']}/{r['path']}" for r in rows if r["verdict"] in ("FAIL", "CRASH")]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
