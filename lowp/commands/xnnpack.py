"""`lowp xnnpack PATH`: judge every int8 GEMM micro-kernel of an XNNPACK checkout that lowp can run, as a campaign.

The face of XNNPACK's room on the library seam: lowp.conformance.libraries.xnnpack reads the checkout's test YAMLs
and kernel names and makes a lowp kernel entry of each (or names why not); the campaign engine
(lowp.conformance.run.campaign) writes them to OUT/kernels.toml (which the report's repro lines name), registers
them in memory, builds them against the checkout's own headers, runs the ordinary checks on the process pool (with
its journal and --resume) and writes report.md/report.json/junit.xml of every check and campaign.md/campaign.json
of every kernel: judged, passed, failed, or skipped with the reason. Exit 2 for a PATH that is not a checkout or a
bad option, 1 when a kernel fails a claimed check, 0 otherwise.
"""
from __future__ import annotations

from pathlib import Path

from lowp.commands.library import add_campaign_options, run_library


def add_parser(sub) -> None:
    p = sub.add_parser("xnnpack", help="judge the int8 GEMM micro-kernels of an XNNPACK checkout, as a campaign")
    p.add_argument("path", type=Path, metavar="PATH", help="an XNNPACK checkout (test/*gemm*.yaml, src/, include/)")
    p.add_argument("--datatype", action="append", default=[], metavar="D",
                   help="only this datatype's YAMLs (repeatable; e.g. qs8-qc8w, qu8, qd8-f32-qc8w; default: every "
                        "int8 one)")
    p.add_argument("--isa", action="append", default=[], metavar="ISA",
                   help="only kernels of this ISA (XNNPACK's token: avx2, avx512vnni, neondot, scalar, rvv, ...; "
                        "repeatable)")
    add_campaign_options(p, "lowp-xnnpack")
    p.set_defaults(func=cmd_xnnpack)


def cmd_xnnpack(args) -> int:
    from lowp.conformance.libraries.xnnpack import Xnnpack
    return run_library(Xnnpack(), args, {"datatype": args.datatype, "isa": args.isa})
