"""Warm zig's per-target runtimes: build a one-function C file with every recipe lowp's emulated targets use.

A zig target's first build also compiles that target's runtime into zig's global cache (under lowp's build cache,
lowp.emulator.build.zig): wasi-libc for wasm32 (some 35 s on 2 cores), compiler-rt for Hexagon (12 s) and for each
AArch32 CPU a kernel can be built for (5 s each). A fresh machine pays that once, inside whichever kernel build comes
first. CI (.ci/run) runs this module in the background while pip installs the heavy packages, when one core is
mostly idle, so the test suite's first emulated builds find the runtimes built (docs/ci.md).

    python -m lowp.emulator.warm

It needs only zig (the ziglang package) and lowp itself; a build that fails is reported and the rest go on (the
suite then pays that build where it comes, as it would have).
"""
from __future__ import annotations

import sys
import time

from lowp.emulator import buildcache
from lowp.emulator.build import RECIPES, BuildError, build_text

# A division: the call into compiler-rt a target without a divide instruction (Hexagon, ARMv7) makes; main: what the
# Linux runtimes start.
SOURCE = "int lowp_warm(int a, int b) { return a / b; }\nint main(void) { return lowp_warm(1, 1) - 1; }\n"
# Every recipe zig builds at its own CPU: x86-64-static is the host compiler's, arm-linux is warmed per build CPU.
ZIG_RECIPES = tuple(name for name in RECIPES if name not in ("x86-64-static", "arm-linux"))


def builds() -> list[tuple[str, object]]:
    """(what, how to build it) for each toolchain: every zig recipe at its CPU, AArch32 at every build CPU
    (lowp.emulator.targets.arm.BUILD_CPUS: compiler-rt is built per CPU), and wasm32."""
    from lowp.emulator.targets.arm import BUILD_CPUS
    from lowp.emulator.wasm.build import build_for_wasm
    plan = [(name, lambda name=name: build_text(SOURCE, name="warm", target=name)) for name in ZIG_RECIPES]
    arm = RECIPES["arm-linux"]
    for cpu in dict.fromkeys([arm.cpu, *(cpu for _, cpu in BUILD_CPUS)]):
        plan.append((f"arm-linux {cpu}", lambda cpu=cpu: build_text(SOURCE, name="warm", target="arm-linux", cpu=cpu)))
    plan.append(("wasm32", lambda: build_for_wasm(buildcache.source_file(SOURCE, buildcache.cache_dir() / "src",
                                                                            "warm"))))
    return plan


def main() -> int:
    failed = 0
    for what, make in builds():
        start = time.perf_counter()
        try:
            make()
        except (BuildError, OSError) as e:
            failed += 1
            print(f"lowp.emulator.warm: {what}: not built: {e}", file=sys.stderr)
            continue
        print(f"lowp.emulator.warm: {what}: {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
