"""Hexagon HVX on qemu-hexagon: the backend that runs an HVX intrinsic for real (HvxQemuBackend), for the proof
that lowp.isa_models.hexagon's models are the instructions (lowp.isa_models.verify.hvx_proof, tests/test_hexagon.py).

One program holds a wrapper per intrinsic (generated C, built once for the HEXAGON guest and cached): it loads
the vector operands from one input buffer (128-byte blocks, in argument order; a predicate as 128 bytes of 0 or 1,
turned into a Q register with vand(V, 0x01010101)), takes the scalar register Rt as an int argument, calls the
intrinsic and stores its result (a Q register as 128 bytes of 0 or 1). Many register sets go to one long-lived
qemu process in one pipelined batch (QemuMachine.call_batch).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

VBYTES = 128


def _operand(p) -> str:
    return "q" if p.kind == "pred" else "r" if p.kind == "scalar" else "v"


def wrapper(intr) -> str:
    """The C wrapper of one intrinsic: void lowp_hvx_<name>(const HVX_Vector *in, HVX_Vector *out, int rt)."""
    loads, args, k = [], [], 0
    for p in intr.params:
        kind = _operand(p)
        if kind == "r":
            args.append("rt")
        elif kind == "q":
            loads.append(f"  HVX_VectorPred q{k} = Q6_Q_vand_VR(in[{k}], 0x01010101);")
            args.append(f"q{k}")
            k += 1
        else:
            args.append(f"in[{k}]")
            k += 1
    call = f"{intr.name}({', '.join(args)})"
    if intr.name.startswith("Q6_vmem_"):            # a masked store into the block (the second operand)
        q, block, v = args
        body = f"  out[0] = {block};\n  {intr.name}({q}, out, {v});"
    elif intr.result.kind == "pred":
        body = f"  out[0] = Q6_V_vand_QR({call}, 0x01010101);"
    else:
        body = f"  out[0] = {call};"
    return (f"void lowp_hvx_{intr.name}(const HVX_Vector *in, HVX_Vector *out, int rt) {{\n"
            + "\n".join([*loads, body]) + "\n}\n")


def source(intrinsics) -> str:
    head = "#include <hexagon_types.h>\n#include <hexagon_protos.h>\n#include <hvx_hexagon_protos.h>\n\n"
    return head + "\n".join(wrapper(i) for i in intrinsics)


class HvxQemuBackend:
    """Runs HVX intrinsics under qemu-hexagon -cpu v68 (lowp.emulator.qemu's HEXAGON guest)."""
    name, arch = "qemu-hexagon", "hexagon"

    def __init__(self, intrinsics=None, qemu: str | None = None):
        from lowp.isa_models import intrinsics as registered
        self.intrinsics = list(intrinsics or registered("hexagon"))
        self.qemu = qemu

    def unavailable(self, intr=None) -> str | None:
        from lowp.emulator.qemu import HEXAGON
        return HEXAGON.unavailable()

    @cached_property
    def machine(self):
        from lowp.emulator.build import cache_dir
        from lowp.emulator.qemu import HEXAGON, QemuMachine, build_for_qemu
        from lowp.emulator.buildcache import source_file
        path = source_file(source(self.intrinsics), cache_dir() / "src", "hvx_wrappers", ".c")
        return QemuMachine(build_for_qemu(path, guest=HEXAGON), guest=HEXAGON, qemu=self.qemu, counts=False)

    def run(self, intr, batch) -> np.ndarray:
        """The intrinsic's result for each argument tuple of `batch` (arguments as the model takes them), stacked:
        a vector result as lanes of its dtype, a predicate as bools."""
        vectors = [i for i, p in enumerate(intr.params) if p.kind != "scalar"]
        scalar = next((i for i, p in enumerate(intr.params) if p.kind == "scalar"), None)
        calls = []
        for args in batch:
            blocks = [np.asarray(args[i]).astype(np.uint8) if intr.params[i].kind == "pred"
                      else np.ascontiguousarray(args[i]).view(np.uint8) for i in vectors]
            data = np.concatenate(blocks) if blocks else np.zeros(VBYTES, np.uint8)
            rt = int(args[scalar]) if scalar is not None else 0
            calls.append((data, np.zeros(VBYTES, np.uint8), rt))
        results = self.machine.call_many(f"lowp_hvx_{intr.name}", calls, names=["in", "out", "rt"])
        out = []
        for r in results:
            if isinstance(r, Exception):
                raise r
            raw = r.arrays[1]
            out.append(raw.astype(bool) if intr.result.kind == "pred" else raw.view(intr.result.dtype))
        return np.stack(out)

    def describe(self) -> str:
        return f"{self.machine.qemu} -cpu {self.machine.cpu}"

    def close(self) -> None:
        if "machine" in self.__dict__:
            self.machine.close()
