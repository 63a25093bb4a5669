"""CPU flags as kernel authors write them for GCC/clang reach zig with the same meaning (lowp.emulator.cpuflags), and
one zig does not know is refused in a line that names it, not with zig's list of CPUs."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from lowp.emulator import build_text
from lowp.emulator.cpuflags import CpuFlagError, zig_command, zig_cpu
from lowp.emulator.errors import BuildError

TRIPLES = {"aarch64": "aarch64-linux-none", "arm": "arm-linux-musleabihf", "riscv64": "riscv64-linux-none",
           "x86_64": "x86_64-linux-gnu", "hexagon": "hexagon-linux-musl"}
DEFAULTS = {"aarch64": "cortex_a76+i8mm", "arm": "cortex_a7", "riscv64": "baseline_rv64+v", "x86_64": "",
            "hexagon": "hexagonv68"}


def macros(arch: str, flags: list[str]) -> set[str]:
    """The macros zig's clang predefines for `flags` translated (`-E -dM`): what the compiler was told."""
    cpu, rest = zig_cpu(TRIPLES[arch], DEFAULTS[arch], flags)
    out = subprocess.run([*zig_command(), "cc", "-target", TRIPLES[arch],
                          *([f"-mcpu={cpu}"] if cpu else []), *rest, "-E", "-dM", "-x", "c", "/dev/null"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (flags, cpu, out.stderr[-2000:])
    return {line.split()[1] + ("=" + line.split()[2] if len(line.split()) > 2 else "")
            for line in out.stdout.splitlines() if line.startswith("#define ")}


def test_zig_runs_as_its_own_executable_the_packages_version():
    """The builds call the ziglang package's zig binary itself (no Python start before each of a build's three zig
    runs); it is the package's zig, the version the cache keys name."""
    import importlib.metadata
    command = zig_command()
    assert command[0] != sys.executable and command[0].endswith("zig"), command
    out = subprocess.run([*command, "version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == importlib.metadata.version("ziglang").split("+")[0].split(
        ".post")[0], out


# (architecture, what the author wrote, a macro that says the feature reached the compiler, one it must not set)
SPELLINGS = [
    ("aarch64", ["-march=armv8.2-a+dotprod"], "__ARM_FEATURE_DOTPROD=1", "__ARM_FEATURE_MATMUL_INT8=1"),
    ("aarch64", ["-march=armv8.6-a+i8mm"], "__ARM_FEATURE_MATMUL_INT8=1", "__ARM_FEATURE_SVE=1"),
    ("aarch64", ["-march=armv8.2-a+dotprod+fp16", "-mtune=cortex-a76"], "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC=1",
     "__ARM_FEATURE_MATMUL_INT8=1"),
    ("aarch64", ["-mcpu=cortex-a55"], "__ARM_FEATURE_DOTPROD=1", "__ARM_FEATURE_MATMUL_INT8=1"),
    ("aarch64", ["-march=armv8-a+sve2"], "__ARM_FEATURE_SVE2=1", "__ARM_FEATURE_DOTPROD=1"),
    ("riscv64", ["-march=rv64gcv"], "__riscv_vector=1", "__riscv_v_min_vlen=256"),
    ("riscv64", ["-march=rv64gcv_zvl256b"], "__riscv_v_min_vlen=256", "__riscv_zvl512b=1000000"),
    ("arm", ["-march=armv7-a", "-mfpu=neon"], "__ARM_NEON=1", "__ARM_FEATURE_DOTPROD=1"),
    ("arm", ["-march=armv8.2-a+dotprod", "-mfpu=neon-fp-armv8"], "__ARM_FEATURE_DOTPROD=1", "__aarch64__=1"),
    ("arm", ["-mcpu=arm1176jzf-s+dsp"], "__ARM_FEATURE_DSP=1", "__ARM_NEON=1"),
    ("hexagon", ["-mv68", "-mhvx", "-mhvx-length=128B"], "__HVX_LENGTH__=128", "__HVX_ARCH__=73"),
    ("x86_64", ["-march=skylake-avx512"], "__AVX512BW__=1", "__AVX512VNNI__=1"),
    ("x86_64", ["-march=x86-64-v3"], "__AVX2__=1", "__AVX512F__=1"),
]


@pytest.mark.parametrize("arch, flags, present, absent", SPELLINGS, ids=[" ".join(s[1]) for s in SPELLINGS])
def test_an_authors_cpu_flags_mean_the_same_to_zig(arch, flags, present, absent):
    found = macros(arch, flags)
    assert present in found
    assert absent not in found


@pytest.mark.parametrize("flags, named", [
    (["-march=armv8.2-a+dotprd"], "dotprod"),
    (["-mcpu=cortex-a777"], "cortex_a77"),
    (["-march=armv99-a"], "v9a"),
    (["-mcpu=native"], "names the build machine"),
    (["-march=x86-64"], "Arm architecture"),
])
def test_a_flag_zig_does_not_know_is_refused_in_one_line_naming_it(flags, named):
    with pytest.raises(CpuFlagError) as caught:
        zig_cpu(TRIPLES["aarch64"], DEFAULTS["aarch64"], flags)
    message = str(caught.value)
    assert message.startswith(flags[0]) and named in message and "\n" not in message


def test_a_build_with_an_unknown_flag_never_shows_zigs_cpu_list(tmp_path):
    with pytest.raises(BuildError) as caught:
        build_text("int f(int x) { return x; }\n", target="bare", flags=["-march=armv8.2-a+dotprd"])
    assert "available CPUs" not in str(caught.value) and "-march=armv8.2-a+dotprd" in str(caught.value)


def test_a_kernel_entry_with_its_authors_flags_builds_and_judges_as_without_them():
    """XNNPACK's neondot flags in a kernel entry (issue 34: three real kernels failed to build with zig's CPU list as
    the message): the kernel builds for what the author asked (v8.2-a + dotprod, not lowp's default CPU) and its
    claimed check passes as it does without the flag."""
    from lowp.conformance import check
    from lowp.kernels import kernel
    from lowp.kernels.registry import _KERNELS
    base = kernel("sdot_s8_neon")
    flagged = dataclasses.replace(base, name="sdot_s8_neon_authors_flags",
                                  cflags=("-O2", "-march=armv8.2-a+dotprod"))
    try:
        row = check(flagged, examples=20)
    finally:
        _KERNELS.pop(flagged.name, None)
    assert row["verdict"] == "PASS" and row["executed"] == row["cases"] > 0 and "sdot" in row["path"]
