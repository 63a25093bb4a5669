"""The executor that proves lowp's 32-bit Arm models (`lowp isa verify --arch arm`, tests/test_arm32_models.py): a C
wrapper per ACLE intrinsic of arm_acle.h, built for ARMv6 (zig -mcpu=arm1176jzf_s+dsp, the least CPU XNNPACK's
armsimd32 kernels target) as a static Linux program with lowp's batch driver (lowp.emulator.qemu_batch), run under
`qemu-arm -cpu arm1176` (an ARMv6 core: the instructions exist there, not only on ARMv7 and later).

Each wrapper is `void lowp_w_<name>(const void *p0, const void *p1, const void *p2, void *out, long imm, long n)`:
for register i < n it reads the 32-bit operands of register i from p0..p2, calls the intrinsic (an immediate
through a switch over its legal values) and writes the 32-bit result to out.
"""
from __future__ import annotations

from lowp.isa_models import intrinsics as all_intrinsics
from lowp.isa_models.registry import Intrinsic

from lowp.emulator import qemu_batch as batch

BUILD_CPU, QEMU_CPU = "arm1176jzf_s+dsp", "arm1176"


def wrapper(intr: Intrinsic) -> str:
    """The C wrapper of one intrinsic (see the module doc)."""
    lines = [f"void lowp_w_{intr.name}(const void *p0, const void *p1, const void *p2, void *out, long imm, long n) {{",
             "    (void)p0; (void)p1; (void)p2; (void)imm;",
             "    for (long i = 0; i < n; i++) {"]
    args, k = [], 0
    for p in intr.params:
        if p.kind == "vec":
            lines.append(f"        uint32_t a{k}; __builtin_memcpy(&a{k}, (const char *)p{k} + 4 * i, 4);")
            args.append(f"a{k}")
            k += 1
        else:
            args.append("IMM")
    lines.append("        uint32_t r;")
    call = f"(uint32_t){intr.name}({', '.join(args)})"
    imm = next((p for p in intr.params if p.kind == "imm"), None)
    if imm is None:
        lines.append(f"        r = {call};")
    else:
        lines.append("        switch (imm) {")
        lines += [f"        case {v}: r = {call.replace('IMM', str(v))}; break;" for v in range(imm.lo, imm.hi + 1)]
        lines += ["        default: __builtin_trap();", "        }"]
    lines += ["        __builtin_memcpy((char *)out + 4 * i, &r, 4);", "    }", "}", ""]
    return "\n".join(lines)


def wrappers_source(intrs) -> str:
    return "#include <arm_acle.h>\n#include <stdint.h>\n\n" + "\n".join(wrapper(i) for i in intrs)


class ArmQemuBackend(batch.BatchBackend):
    """Run the 32-bit Arm intrinsics under qemu-arm -cpu arm1176 (one long-lived process serves every batch)."""
    name = "qemu"
    arch = "arm"
    target, build_name, build_cpu, inputs, outputs = "arm-linux", "acle-arm32", BUILD_CPU, 3, 1

    def __init__(self, intrinsics=None, qemu: str | None = None, cpu: str = QEMU_CPU):
        super().__init__(intrinsics if intrinsics is not None else all_intrinsics("arm"), qemu)
        self.cpu = cpu

    def wrappers(self, intrinsics) -> str:
        return wrappers_source(intrinsics)

    def unavailable(self, intr: Intrinsic) -> str | None:
        if intr.instruction.arch != "arm":
            return f"{intr.name} is not a 32-bit Arm intrinsic"
        if intr.name not in {i.name for i in self._intrinsics}:
            return f"{intr.name} has no wrapper in this backend"
        return self.missing_qemu()

    def describe(self) -> str:
        if self.qemu is None:
            return "qemu-arm not installed"
        return f"{batch.identify(self.qemu)}, -cpu {self.cpu} (ARMv6: SIMD32, DSP)"
