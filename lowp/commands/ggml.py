"""`lowp ggml PATH`: judge every quantized dot product (ggml_vec_dot_*) of a ggml or llama.cpp checkout, as each
CPU variant ggml ships builds it, as a campaign.

The face of ggml's room on the library seam (lowp.conformance.libraries.ggml): it finds every vec_dot of
src/ggml-cpu/arch/<arch>/quants.c and the _generic twins of quants.c, makes one kernel per variant (x86 natively or
on Bochs; AArch64 and RISC-V 64 on Unicorn or qemu-user at each vector length), and judges each by the exact
contract on the exact domain and by its float order or the stated bound on any scales (docs/ggml.md). The engine
writes OUT/campaign.md and campaign.json (grouped by type and ISA), report.md, junit.xml and a C reproducer per
finding. Exit 2 for a PATH that is not a checkout or a bad option, 1 when a kernel fails a claimed check, 0
otherwise.
"""
from __future__ import annotations

from pathlib import Path

from lowp.commands.library import add_campaign_options, run_library


def add_parser(sub) -> None:
    p = sub.add_parser("ggml", help="judge the quantized dot products of a ggml or llama.cpp checkout, as a campaign")
    p.add_argument("path", type=Path, metavar="PATH",
                   help="a ggml checkout (src/ggml-cpu/) or a llama.cpp checkout (ggml/src/ggml-cpu/)")
    p.add_argument("--type", action="append", default=[], metavar="T",
                   help="only this weight type's vec_dots (repeatable; e.g. q4_0, q4_K, iq4_nl; default: all)")
    p.add_argument("--isa", action="append", default=[], metavar="ISA",
                   help="only this variant (ggml's name, at its vector length: haswell, armv8.2_1, armv8.2_3@256, "
                        "riscv64_v@128; repeatable)")
    add_campaign_options(p, "lowp-ggml")
    p.set_defaults(func=cmd_ggml)


def cmd_ggml(args) -> int:
    from lowp.conformance.libraries.ggml import Ggml
    return run_library(Ggml(), args, {"type": args.type, "isa": args.isa})
