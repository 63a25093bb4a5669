"""XNNPACK's int8 GEMM micro-kernels as lowp sees them: a checkout's test YAMLs and kernel names read, each entry
mapped to a lowp kernel entry (or to the reason it cannot be), for `lowp xnnpack PATH` (lowp/commands/xnnpack.py).

Facts, not code, from XNNPACK's public sources (google/XNNPACK @75db3c0, 2026-08-21, unless a line says otherwise;
docs/xnnpack-campaign.md has the citations): the YAML keys (tools/generate-gemm-test.py, the loop over
`spec_yaml`), the name grammar (the same file's `split_ukernel_name`: MRxNR[v]cKRsSR, the requantization token),
the ISA tokens of a name's target part (tools/xnncommon.py `parse_target_name`), the per-ISA compile flags
(CMakeLists.txt L1186-1208, the GCC branch) and the CPU features XNNPACK's run-time dispatch asks for each ISA
(src/configs/hardware-config.c L258-287). Nothing of XNNPACK is copied: lowp reads the checkout it is given.

A mapping that lowp cannot make (an init, pack or datatype it does not know yet, an ISA no target here runs, a
name it cannot read, a source it cannot find) is a `Skip` naming what is missing, never an exception: a campaign
goes on past it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from lowp.isa_models.requant import OUTPUT_STAGES
from lowp.kernels.xnnpack import UkernelName, parse_ukernel_name

from lowp.conformance.run import campaign as seam

STUBS = Path(__file__).resolve().parent / "xnnpack_stubs"   # pthreadpool.h: what include/xnnpack.h needs of it
KAI_STUBS = Path(__file__).resolve().parent / "kleidiai_stubs"   # stdio.h, stdlib.h: what kai/kai_common.h needs
XNN_EXTRA_BYTES = 16     # include/xnnpack.h L25-32: "XNNPACK may read beyond array bounds" (128 on Hexagon)
XNN_EXTRA_BYTES_HEXAGON = 128


# ---- the ISA table -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Isa:
    """One XNNPACK ISA token: where lowp runs its kernels and how XNNPACK's build compiles them."""
    name: str                      # XNNPACK's token ('avx512vnni', 'neondot'; 'scalar' for the portable C)
    target: str | None             # lowp's kernel target: 'x86-64', 'aarch64', 'riscv64'; None: not run (skip)
    features: tuple[str, ...] = ()     # Linux names: XNNPACK's dispatch check and what the compile flags allow
    copts: tuple[str, ...] = ()        # XNNPACK's per-ISA compile flags (CMakeLists.txt, GCC branch)
    requires: tuple[str, ...] = ()     # the dot instruction of its claimed path (any of them must execute)
    fp32_stage: str | None = None      # the output stage its fp32 kernels compute (fp32_scalar params)
    skip: str = ""                     # why lowp does not run it
    layouts: tuple[tuple[str, str], ...] = ()   # (params layout, output stage) this ISA's kernels compute
    # wasm relaxed dots: the behaviours a kernel is judged under (one row each) and the one XNNPACK dispatches it on
    relaxed_dot: tuple[str, ...] = ()
    dispatch: str | None = None
    # AArch64: what lowp adds to zig's -mcpu (the recipe's cortex_a76+i8mm) where the ISA needs more
    zig_cpu: tuple[str, ...] = ()


_SKX = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "fma", "f16c")
_SKX_FLAGS = ("-mf16c", "-mfma", "-mavx512f", "-mavx512cd", "-mavx512bw", "-mavx512dq", "-mavx512vl")
# The x86 fp32 output stages (lowp.isa_models.requant): SSE2 to AVX2 and AVX256SKX add the zero point with a
# saturating PADDSW after PACKSSDW (src/qs8-gemm/MRx8c8-avx2.c.in L441-471); AVX512SKX, every VNNI flavour and AMX
# add it with a wrapping 32-bit add after CVTPS2DQ (MRx8c8-avxvnni.c.in L535-558): checked over every qs8-qc8w
# source of the checkout (docs/xnnpack-campaign.md).
_X86, _WRAP = "xnnpack-fp32-x86", "xnnpack-fp32-avxvnni-wrap"
_ARM_FP16 = ("fphp", "asimdhp")
_NEON_MLAL = ("smlal*", "smull*", "umlal*", "umull*")
_WASM, _RELAXED, _RELAXED_FLAGS = "xnnpack-fp32-imagic", ("simd128", "relaxed_simd"), ("-msimd128", "-mrelaxed-simd")
_DOTS = ("sdot", "pmaddubsw", "vpdpbusd")       # lowp.isa_models.wasm.RELAXED_DOT
_RVV_MUL = ("vwmacc*", "vwmul*")

ISAS: dict[str, Isa] = {i.name: i for i in (
    Isa("scalar", "x86-64", (), (), ()),
    Isa("sse2", "x86-64", ("sse2",), ("-msse2", "-mno-sse3"), ("pmaddwd",), _X86),
    Isa("ssse3", "x86-64", ("ssse3",), ("-mssse3", "-mno-sse4.1"), ("pmaddwd",), _X86),
    Isa("sse41", "x86-64", ("sse4_1",), ("-msse4.1", "-mno-sse4.2"), ("pmaddwd",), _X86),
    Isa("avx", "x86-64", ("avx",), ("-mavx", "-mno-avx2", "-mno-fma", "-mno-f16c"), ("vpmaddwd",), _X86),
    Isa("avx2", "x86-64", ("avx2", "fma", "f16c"), ("-mf16c", "-mfma", "-mavx2"), ("vpmaddwd",), _X86),
    Isa("avxvnni", "x86-64", ("avx2", "fma", "f16c", "avx_vnni", "gfni"),
        ("-mf16c", "-mfma", "-mavx2", "-mavxvnni", "-mgfni"), ("vpdpbusd",), _WRAP),
    Isa("avxvnniint8", "x86-64", ("avx2", "fma", "f16c", "avx_vnni_int8", "gfni"),
        ("-mf16c", "-mfma", "-mavx2", "-mavxvnniint8", "-mgfni"), ("vpdpbssd", "vpdpbusd"), _WRAP),
    Isa("avx256skx", "x86-64", _SKX, _SKX_FLAGS, ("vpmaddwd",), _X86),
    Isa("avx256vnni", "x86-64", _SKX + ("avx512_vnni",), _SKX_FLAGS + ("-mavx512vnni",), ("vpdpbusd",), _WRAP),
    Isa("avx256vnnigfni", "x86-64", _SKX + ("avx512_vnni", "gfni"), _SKX_FLAGS + ("-mavx512vnni", "-mgfni"),
        ("vpdpbusd",), _WRAP),
    Isa("avx512skx", "x86-64", _SKX, _SKX_FLAGS, ("vpmaddwd",), _WRAP),
    Isa("avx512vnni", "x86-64", _SKX + ("avx512_vnni",), _SKX_FLAGS + ("-mavx512vnni",), ("vpdpbusd",), _WRAP),
    Isa("avx512vnnigfni", "x86-64", _SKX + ("avx512_vnni", "gfni"), _SKX_FLAGS + ("-mavx512vnni", "-mgfni"),
        ("vpdpbusd",), _WRAP),
    Isa("avx512amx", "x86-64", _SKX + ("avx512_vnni", "gfni", "amx_tile", "amx_int8"),
        _SKX_FLAGS + ("-mavx512vnni", "-mgfni", "-mamx-tile", "-mamx-int8"), ("tdpbssd", "tdpbusd"), _WRAP),
    # AArch64 (CMakeLists.txt L1096-1107, the aarch64 branch: -march=armv8.2-a+dotprod, +i8mm+fp16, asm
    # +fp16+dotprod). zig takes no -march: lowp's AArch64 build is -mcpu=cortex_a76+i8mm, which has all of them.
    Isa("neon", "aarch64", ("asimd",), (), _NEON_MLAL),
    Isa("neonv8", "aarch64", ("asimd",), (), _NEON_MLAL),
    Isa("neondot", "aarch64", ("asimd", "asimddp"), ("-march=armv8.2-a+dotprod",), ("sdot", "udot")),
    Isa("neondotfp16arith", "aarch64", ("asimd", "asimddp") + _ARM_FP16, ("-march=armv8.2-a+dotprod+fp16",),
        ("sdot", "udot")),
    Isa("neonfp16arith", "aarch64", ("asimd",) + _ARM_FP16, ("-march=armv8.2-a+fp16",), _NEON_MLAL),
    Isa("neoni8mm", "aarch64", ("asimd", "asimddp", "i8mm") + _ARM_FP16, ("-march=armv8.2-a+i8mm+fp16",),
        ("smmla", "ummla", "usmmla")),
    Isa("neoni8mmbf16", "aarch64", ("asimd", "asimddp", "i8mm", "bf16") + _ARM_FP16,
        ("-march=armv8.2-a+i8mm+fp16+bf16",), ("smmla", "ummla", "usmmla"), zig_cpu=("-mcpu=cortex_a76+i8mm+bf16",)),
    # RVV: the 8-bit kernels multiply-accumulate with VWMACC, the 4-bit ones multiply the shifted nibbles with VWMUL
    # and add with VWADD.WV (src/qs8-gemm/rvv.c.in L116-151)
    Isa("rvv", "riscv64", ("v", "zvl128b"), ("-march=rv64gcv", "-mabi=lp64d"), _RVV_MUL, "xnnpack-fp32-lrintf"),
    # RVV with half-precision vector arithmetic (CMakeLists.txt L1119: -march=rv64gcv_zvfh -mabi=lp64d; the dispatch
    # asks riscv_hwprobe for Zvfh: src/configs/hardware-config.c L159-185, L349): the qd8-f16 kernels
    Isa("rvvfp16arith", "riscv64", ("v", "zvl128b", "zvfh"), ("-march=rv64gcv_zvfh", "-mabi=lp64d"), _RVV_MUL,
        "xnnpack-fp32-lrintf"),
    Isa("fp16arith", None, skip="fp16 output (qd8-f16) kernels: lowp has no f16 output type"),
    # SME (CMakeLists.txt L132-133, L350-351: XNN_ENABLE_ARM_SME/SME2; hardware-config.c L255-256): KleidiAI's
    # kernels, mr and nr asked of <name>_get_mr()/_get_nr() on the target (kleidiai_tile); SME2 runs on qemu 11.
    Isa("neonsme", "aarch64", ("asimd", "sme"), ("-mcpu=cortex_a76+i8mm+sve2+sme",), ("smopa", "sdot")),
    Isa("neonsme2", "aarch64", ("asimd", "sme", "sme2"), ("-mcpu=cortex_a76+i8mm+sve2+sme2",), ("smopa", "sdot")),
    # ARMv6 SIMD32 C kernels (CMakeLists.txt L1046: -march=armv6 -mfpu=vfp -munaligned-access, and -marm for every
    # arm source, L1045): zig takes the -mcpu lowp.emulator.targets.arm chooses for armv6 (arm1176jzf_s+dsp)
    Isa("armsimd32", "arm", ("armv6",), ("-marm", "-munaligned-access"), ("smlad",),
        layouts=(("fp32_armsimd32", "xnnpack-fp32-armsimd32"),)),
    Isa("neonmlal", None, skip="an AArch32 assembly token (the qd8 *_asm_aarch32_neonmlal_* kernels)"),
    # Hexagon HVX: XNNPACK's build targets Hexagon as a whole (no per-ISA flag: CMakeLists.txt L386-390, L900-906;
    # the Hexagon toolchain's -mhvx -mhvx-length=128B, zig's -mcpu hexagonv68+hvxv68+hvx_length128b); its dispatch
    # turns hvx on from v69 (src/configs/hardware-config.c L321-323). Built for v68 (v69-v71 compile the same: only
    # __HVX_ARCH__ >= 73 switches the rescale to qfloat, which qemu-hexagon cannot run); no `requires`: lowp has no
    # Hexagon decoder to count vrmpy with (capstone 5 has none).
    Isa("hvx", "hexagon", ("hvx", "hvxv68", "hvx_length128b"), ("-mhvx", "-mhvx-length=128B"), (),
        "xnnpack-fp32-hvx"),
    # WebAssembly on wasmtime (CMakeLists.txt L1123-1129: -msimd128 for wasmsimd, -msimd128 -mrelaxed-simd for the
    # relaxed ones; L427-430 for the whole wasm build). The fp32 kernels' stage: f32x4 convert, mul, add the magic
    # bias, i32x4.max with magic_min, i32x4.sub, narrow to int16 and int8 (saturating), i8x16.min output_max
    # (src/qs8-gemm/MRx4c8-wasmsimd-dot16x2.c.in, MRx4c16-wasmdot.c.in): the scalar imagic stage bit for bit (the
    # upper clamp after the saturating narrows is the same as imagic's magic_max clamp; tests/test_wasm.py).
    # wasmsdot / wasmusdot: XNNPACK dispatches on its probe of the engine's relaxed dot (src/configs/
    # hardware-config.c L403-423: use_wasm_sdot wants signed x signed exact, use_wasm_usdot signed x unsigned
    # exact); lowp judges each kernel under every behaviour an engine may give (lowp.isa_models.wasm.RELAXED_DOT).
    Isa("wasm", "wasm32", (), (), ()),
    Isa("wasmsimd", "wasm32", ("simd128",), ("-msimd128",), (), _WASM),
    Isa("wasmrelaxedsimd", "wasm32", _RELAXED, _RELAXED_FLAGS, (), _WASM),
    Isa("wasmsdot", "wasm32", _RELAXED, _RELAXED_FLAGS, (), _WASM, relaxed_dot=_DOTS, dispatch="sdot"),
    Isa("wasmusdot", "wasm32", _RELAXED, _RELAXED_FLAGS, (), _WASM, relaxed_dot=_DOTS, dispatch="vpdpbusd"),
    *(Isa(w, None, skip="relaxed swizzle / laneselect behaviours are not modelled; no int8 GEMM kernel of XNNPACK "
                        "@75db3c0 uses this ISA")
      for w in ("wasmpshufb", "wasmblendvps")),
)}
# The AArch32 kernels' ISA tokens (a name with asm_aarch32 / aarch32): the same tokens as AArch64's, another
# target. XNNPACK assembles every AArch32 .S file with -march=armv8.2-a+dotprod+fp16 -mfpu=neon-fp-armv8 (CMakeLists.txt
# L1066) and dispatches them by what the CPU has (src/configs/gemm-config.c: neon, neon_v8, neon_dot); lowp
# assembles each for the least CPU its dispatch asks (lowp.emulator.targets.arm.build_cpu: cortex_a7 for neon,
# cortex_a53 for neonv8, cortex_a55 for neondot), so that an instruction beyond the claim does not build.
_A32_MLAL = ("vmlal", "vmull")
_A32_NEON = (("fp32_neon", "xnnpack-fp32-neon"),)
AARCH32_ISAS: dict[str, Isa] = {i.name: i for i in (
    Isa("neon", "arm", ("neon",), ("-marm",), _A32_MLAL, layouts=_A32_NEON),
    Isa("neonmlal", "arm", ("neon",), ("-marm",), _A32_MLAL),
    Isa("neonv8", "arm", ("neon", "armv8"), ("-marm",), _A32_MLAL),
    Isa("neondot", "arm", ("neon", "asimddp"), ("-marm",), ("vsdot", "vudot")),
    # ARMv8.2-A half-precision NEON arithmetic (cpuinfo's neon_fp16_arith: AT_HWCAP fphp and asimdhp), the qd8-f16
    # kernels' f16 clamp and store (VMIN.F16, VCVT.F16.F32): built for cortex_a55 (BUILD_CPUS of the arm target)
    Isa("neonfp16arith", "arm", ("neon",) + _ARM_FP16, ("-marm",), _A32_MLAL),
    Isa("neondotfp16arith", "arm", ("neon", "asimddp") + _ARM_FP16, ("-marm",), ("vsdot", "vudot")),
)}


def isa_of(name: UkernelName) -> Isa | None:
    """The ISA row of a kernel: the AArch32 table's for an AArch32 kernel, ISAS' otherwise (None: unknown)."""
    return (AARCH32_ISAS if name.arch == "aarch32" else ISAS).get(name.isa or "")


# The output-stage models lowp knows for each params layout that is not per ISA.
LAYOUT_STAGES = {"fp32_neonv8": "xnnpack-fp32-neonv8", "fp32_neon": "xnnpack-fp32-neon", "rndnu_neon": "xnnpack-rndnu-neon",
                 "rndnu_scalar": "xnnpack-rndnu-scalar", "rndnu16_scalar": "xnnpack-rndnu16"}


# ---- names ---------------------------------------------------------------------------------------------------
def parse_name(name: str) -> UkernelName:
    """The parts of an XNNPACK GEMM ukernel name (lowp.kernels.xnnpack.parse_ukernel_name), its ISA among ISAS'
    tokens; ValueError naming what does not fit the grammar."""
    return parse_ukernel_name(name, ISAS)


# ---- the checkout ----------------------------------------------------------------------------------------------
class NotACheckout(seam.NotACheckout):
    """PATH is not an XNNPACK checkout (the command exits 2 with this message)."""


@dataclass(frozen=True)
class YamlEntry:
    """One entry of a test YAML, as read."""
    file: Path
    index: int              # 0-based position in the file
    data: dict
    datatype: str           # from the file name: 'qs8-qc8w'
    op: str                 # 'gemm' or 'igemm'
    behaviour: str | None = None    # the wasm relaxed dot's behaviour this row judges the kernel under

    @property
    def name(self) -> str:
        name = self.data.get("name") if isinstance(self.data, dict) else None
        name = name if isinstance(name, str) else f"{self.file.name}#{self.index + 1}"
        return f"{name}+{self.behaviour}" if self.behaviour else name

    @property
    def where(self) -> str:
        return f"test/{self.file.name} entry {self.index + 1}"


_YAML_FILE = re.compile(r"^(?P<datatype>(?:q|pq)[a-z0-9-]+?)-(?P<op>gemm|igemm)(?:-minmax)?(?:-(?:fp32|rndnu))?"
                        r"\.yaml$")


class Checkout:
    """An XNNPACK source tree: test/*.yaml, src/, include/. Reads what lowp needs of it, nothing else."""

    def __init__(self, path: Path):
        self.root = Path(path).expanduser().resolve()
        problems = []
        if not self.root.is_dir():
            raise NotACheckout(f"{path}: no such directory (expected an XNNPACK checkout: test/*gemm*.yaml, src/, "
                               "include/xnnpack.h)")
        if not sorted((self.root / "test").glob("*gemm*.yaml")):
            problems.append("no test/*gemm*.yaml")
        if not (self.root / "src").is_dir():
            problems.append("no src/ folder")
        if not (self.root / "include" / "xnnpack.h").is_file():
            problems.append("no include/xnnpack.h")
        if problems:
            raise NotACheckout(f"{path} is not an XNNPACK checkout: {', '.join(problems)} (expected the tree of "
                               "github.com/google/XNNPACK: test/<datatype>-gemm-*.yaml, src/<datatype>-gemm/gen/, "
                               "include/xnnpack.h)")
        self._index: dict[Path, dict[str, Path]] = {}

    def yaml_files(self) -> list[tuple[Path, str, str]]:
        """(file, datatype, op) of every int8 GEMM and IGEMM test YAML (q* and pq*: f32, f16 and bf16 are not
        int8)."""
        out = []
        for path in sorted((self.root / "test").glob("*.yaml")):
            m = _YAML_FILE.match(path.name)
            if m:
                out.append((path, m["datatype"], m["op"]))
        return out

    def entries(self, datatypes=()) -> tuple[list[YamlEntry], list[tuple[Path, str]]]:
        """Every entry of the int8 YAMLs of `datatypes` (all if empty), and the files that could not be read with
        why (a YAML syntax error, a top level that is not a list)."""
        import yaml
        entries, unreadable = [], []
        for path, datatype, op in self.yaml_files():
            if datatypes and datatype not in datatypes:
                continue
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as e:
                unreadable.append((path, f"cannot read it as YAML: {' '.join(str(e).split())}"))
                continue
            if not isinstance(data, list):
                unreadable.append((path, f"its top level is a {type(data).__name__}, not a list of entries"))
                continue
            entries += [YamlEntry(path, i, item, datatype, op) for i, item in enumerate(data)]
        return entries, unreadable

    def datatypes(self) -> list[str]:
        return sorted({datatype for _, datatype, _ in self.yaml_files()})

    def source(self, name: UkernelName) -> Path | None:
        """The file that defines the ukernel: its datatype's src/<datatype>-<op>/ folder first, then all of src/
        (a C definition `void <name>(` or an assembly `BEGIN_FUNCTION <name>`)."""
        for folder in (self.root / "src" / f"{name.datatype}-{name.op}", self.root / "src"):
            found = self._definitions(folder).get(name.name)
            if found:
                return found
        return None

    def _definitions(self, folder: Path) -> dict[str, Path]:
        if folder not in self._index:
            index: dict[str, Path] = {}
            if folder.is_dir():
                for path in sorted(folder.rglob("*")):
                    if path.suffix in (".c", ".S", ".cc") and "gemm" in path.name:
                        for m in _DEFINITION.finditer(path.read_text(errors="replace")):
                            index.setdefault(m[1] or m[2], path)
            self._index[folder] = index
        return self._index[folder]

    def commit(self) -> str | None:
        """The checkout's git commit, where it is the top of a git work tree (not a folder inside another
        repository, whose commit would say nothing of it)."""
        import subprocess
        try:
            out = subprocess.run(["git", "-C", str(self.root), "rev-parse", "--show-toplevel", "HEAD"],
                                 capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        lines = out.stdout.split()
        if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != self.root:
            return None
        return lines[1]

    def extra_bytes(self, target: str | None = None) -> int:
        """XNN_EXTRA_BYTES as this checkout's include/xnnpack.h defines it for `target` (its `#if XNN_ARCH_HEXAGON`
        branch for 'hexagon', the last definition otherwise): the over-read of every input XNNPACK documents."""
        text = (self.root / "include" / "xnnpack.h").read_text(errors="replace")
        if target == "hexagon":
            hexagon = re.search(r"#if\s+XNN_ARCH_HEXAGON\s+#define\s+XNN_EXTRA_BYTES\s+(\d+)", text)
            if hexagon:
                return int(hexagon[1])
            return XNN_EXTRA_BYTES_HEXAGON
        values = [int(v) for v in re.findall(r"#define\s+XNN_EXTRA_BYTES\s+(\d+)", text)]
        return values[-1] if values else XNN_EXTRA_BYTES


_DEFINITION = re.compile(r"^(?:void\s+|XNN_\w+\s+void\s+)(xnn_\w+_ukernel_\w+)\s*\(|^BEGIN_FUNCTION\s+(xnn_\w+)\s*$",
                         re.M)


# ---- one entry -> a kernel entry, or why not ---------------------------------------------------------------------
Skip = seam.Skip      # why an entry is not judged: `category` groups the campaign's counts, `message` names it


@dataclass
class Mapped:
    """A YAML entry lowp can judge: the TOML entry it made ([[kernel]] table, paths absolute)."""
    entry: dict
    name: UkernelName
    isa: Isa
    notes: list[str] = field(default_factory=list)


def translate(item: YamlEntry, checkout: Checkout) -> Mapped | Skip:
    """The lowp kernel entry of one YAML entry, or the Skip saying what lowp lacks to make it."""
    data = item.data
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return Skip("entry unreadable", f"{item.where}: not a mapping with a 'name' string ({_short(data)})")
    try:
        name = parse_name(data["name"])
    except ValueError as e:
        return Skip("name unreadable", str(e))
    missing = [key for key in ("init", "pack", "k-block") if key not in data]
    if missing:
        return Skip("entry unreadable", f"{item.where}: no {', '.join(missing)}")
    return _unsupported(name, data, checkout) or _mapped(item, name, data, checkout)


def _unsupported(name: UkernelName, data: dict, checkout: Checkout) -> Skip | None:
    """What the name or the entry's extra keys ask for that lowp does not run, before the ABI is consulted."""
    isa = isa_of(name)
    if name.arch == "aarch32" and isa is None:
        return Skip("AArch32 not run", f"AArch32 kernel of ISA {name.isa or '(none)'}: lowp has no model of its "
                                       f"ISA (tokens: {', '.join(name.variant)})")
    if isa is None:
        return Skip("ISA unknown", f"no ISA lowp knows in {name.name.split('__', 1)[1]!r} (tokens: "
                                   f"{', '.join(name.variant)})")
    if isa.target is None:
        return Skip(f"ISA {isa.name} not run", isa.skip)
    check = str(data.get("cpp-check") or "")
    if "KLEIDIAI" in check:
        return _kleidiai(name, data, check, checkout)
    if check and not re.fullmatch(r"[A-Za-z_]\w*", check):
        return Skip("entry unreadable", f"cpp-check {check!r}: lowp defines one macro name, not an expression")
    for key, why in (("pack-lh-fn", "a packed-LHS kernel (pack-lh-fn)"),
                     ("packed-stride", "a custom packed stride (packed-stride)")):
        if key in data:
            return Skip("not supported yet", f"{why}: not supported yet")
    if name.mstep:
        return Skip("not supported yet", f"a packed-LHS kernel (mstep{name.mstep}): not supported yet")
    return None


# ---- KleidiAI's kernels (cpp-check XNN_ENABLE_KLEIDIAI) ---------------------------------------------------------
KLEIDIAI_ENV = "LOWP_KLEIDIAI"      # a KleidiAI checkout (github.com/ARM-software/kleidiai): kai/ukernels/...
SME_VECTOR_BITS = 512               # the streaming vector length lowp runs SME kernels at (as sme_smopa_s8_svl512)
_KAI_INCLUDE = re.compile(r'^#include\s+"(kai/ukernels/[^"]+)\.h"', re.M)


def kleidiai_checkout() -> Path | None:
    """The KleidiAI checkout $LOWP_KLEIDIAI names (a folder with kai/ukernels), or None."""
    import os
    named = os.environ.get(KLEIDIAI_ENV)
    return Path(named).expanduser() if named and (Path(named).expanduser() / "kai" / "ukernels").is_dir() else None


def _kleidiai(name: UkernelName, data: dict, check: str, checkout: Checkout) -> Skip:
    """A KleidiAI kernel: without a KleidiAI checkout, the skip names the path to give; with one, its tile is
    learned on the target (kleidiai_tile) and the skip names what lowp still lacks: models of KleidiAI's packers."""
    kai = kleidiai_checkout()
    if kai is None:
        return Skip("third-party build", f"cpp-check {check}: built only with KleidiAI, a dependency an XNNPACK "
                                         f"checkout does not carry: give a KleidiAI checkout as {KLEIDIAI_ENV}=PATH "
                                         "(github.com/ARM-software/kleidiai; XNNPACK pins its commit in "
                                         "cmake/DownloadKleidiAI.cmake)")
    packers = ", ".join(f"{key} {data[key]}" for key in ("pack", "pack-lh-fn") if key in data)
    tile = kleidiai_tile(name, kai, checkout) if ISAS[name.isa].name in ("neonsme", "neonsme2") else None
    if isinstance(tile, Skip):
        return tile
    learned = f"tile {tile[0]}x{tile[1]} at SVL {SME_VECTOR_BITS} from {name.name}_get_mr()/_get_nr() on " \
              f"{tile[2]}; " if tile else ""
    return Skip("packing not supported yet", f"{name.name}: {learned}KleidiAI's packed operands ({packers}; the LHS "
                                             "packed or quantized by kai_lhs_*) have no lowp model yet")


def kleidiai_sources(wrapper: Path, kai: Path) -> list[Path] | Skip:
    """The KleidiAI kernel an XNNPACK wrapper includes: its .c and, where it has one, its _asm.S, with KleidiAI's
    SME helpers (kai/kai_common_sme_asm.S: kai_get_sme_vector_length_u8, kai_commit_za)."""
    found = _KAI_INCLUDE.search(wrapper.read_text(errors="replace"))
    if not found:
        return Skip("source not found", f"{wrapper}: includes no kai/ukernels/... header")
    stem = kai / found[1]
    sources = [p for p in (stem.with_suffix(".c"), Path(f"{stem}_asm.S")) if p.is_file()]
    helpers = [p for p in (kai / "kai" / "kai_common_sme_asm.S",) if p.is_file() and "_sme" in stem.name]
    if not sources:
        return Skip("source not found", f"{stem}.c not in the KleidiAI checkout {kai} (another KleidiAI version "
                                        "than the checkout's cmake/DownloadKleidiAI.cmake pins?)")
    return sources + helpers


def _sme_support() -> Path:
    """__arm_tpidr2_save, which kai_commit_za calls (lowp.emulator.aarch64.sve.SME_SUPPORT), as a source file."""
    from lowp.emulator.aarch64.sve import SME_SUPPORT
    from lowp.emulator.buildcache import cache_dir, ready_folder, source_file
    return source_file(SME_SUPPORT, ready_folder(cache_dir() / "sources"), "lowp-sme-support")


def kleidiai_tile(name: UkernelName, kai: Path, checkout: Checkout) -> tuple[int, int, str] | Skip:
    """(mr, nr, the qemu that answered): <name>_get_mr() and _get_nr() run on the AArch64 target at SVL
    SME_VECTOR_BITS (KleidiAI's SME tiles are multiples of the streaming vector length), built as XNNPACK builds
    the wrapper with KleidiAI; a Skip naming why they cannot run here."""
    from lowp.emulator.errors import EmulatorError
    from lowp.emulator.targets import find
    wrapper = checkout.source(name)
    if wrapper is None:
        return Skip("source not found", f"no definition of {name.name} in the checkout")
    sources = kleidiai_sources(wrapper, kai)
    if isinstance(sources, Skip):
        return sources
    isa, target = ISAS[name.isa], find("aarch64", "qemu")
    reason = target.cannot_run(isa.features, SME_VECTOR_BITS)
    if reason:
        return Skip(f"ISA {isa.name} not run", f"{name.name}: {reason}")
    flags = ("-O2", *isa.copts, f"-I{STUBS}", f"-I{KAI_STUBS}", f"-I{checkout.root}", f"-I{kai}", "-DXNN_ENABLE_KLEIDIAI=1",
             "-DXNN_LOG_LEVEL=0")
    try:
        with target.machine([wrapper, *sources, _sme_support()], flags=flags, vector_bits=SME_VECTOR_BITS,
                            features=isa.features) as m:
            mr, nr = (int(m.call(f"{name.name}_get_{what}").ret) for what in ("mr", "nr"))
            who = str(target.identity(m.qemu))
    except EmulatorError as e:
        return Skip("build failed", f"{name.name}: its tile could not be asked: {' '.join(str(e).split())[-400:]}")
    return mr, nr, who


def _mapped(item: YamlEntry, name: UkernelName, data: dict, checkout: Checkout) -> Mapped | Skip:
    from lowp.kernels import xnnpack
    try:        # lowp.kernels.xnnpack knows the ABI: a refusal names its step, the reason the campaign counts
        abi = xnnpack.from_test_entry({**data, "name": name.name})
    except xnnpack.Unmapped as e:
        return Skip(e.step, str(e))
    d = xnnpack.DATATYPES[abi["xnnpack"]["datatype"]]
    scaled = d.weight_bits == 4 and abi["xnnpack"].get("nibbles") != "unsigned"     # 16x sums: 28-bit accumulators
    output = _output_contract(d, name.requantization, scaled)
    stage = _qc2w_stage(name, abi["xnnpack"]["params"], isa_of(name)) if d.row_sums else \
        _stage(name, abi["xnnpack"]["params"], isa_of(name), scaled)
    for result in (output, stage):
        if isinstance(result, Skip):
            return result
    source = checkout.source(name)
    if source is None:
        return Skip("source not found", f"no definition of {name.name} under {checkout.root / 'src'} (a C "
                                        f"'void {name.name}(' or an assembly 'BEGIN_FUNCTION {name.name}')")
    entry = _entry(item, name, abi, d, output, stage, source, checkout)
    return entry if isinstance(entry, Skip) else Mapped(entry, name, isa_of(name))


# The output-stage contract of each datatype's kernels (the requantizing ones: by their requantization token).
FLOAT_CONTRACTS = {"qd8-f32-qc8w": "qd8-f32", "qdu8-f32-qc8w": "qdu8-f32", "qd8-f32-qc4w": "qd8-f32-qc4w",
                   "qdu8-f32-qc4w": "qdu8-f32-qc4w", "qd8-f16-qc8w": "qd8-f16", "qdu8-f16-qc8w": "qdu8-f16",
                   "qd8-f16-qc4w": "qd8-f16-qc4w", "qdu8-f16-qc4w": "qdu8-f16-qc4w",
                   **{f"{a}-{c}-qc2w": f"{a}-{c}-qc2w" for a in ("qd8", "qdu8") for c in ("f32", "f16")}}
# The variants of XNNPACK's xngen qd8 AArch64 assembly (src/qs8-gemm/4x16c4-aarch64-neondot-{ld64,ld128,cortex-a55}.S.in)
XNGEN_QD8_VARIANTS = (("ld64",), ("ld128",), ("cortex", "a55"))
# The qd8 float stage of each float params layout: its output type (the stage's name part)
QD8_LAYOUTS = {"minmax_f32": "f32", "qc4w_minmax_f32": "f32", "minmax_f16": "f16", "qc4w_minmax_f16": "f16"}
REQUANTIZED_CONTRACTS = {"fp32": "xnnpack-fp32", "rndnu": "xnnpack-rndnu", "rndnu16": "xnnpack-rndnu16"}


def _output_contract(d, requantization: str | None, scaled: bool) -> str | Skip:
    """The contract of the datatype's kernels; scaled: 4-bit weights whose int32 sums are 16x (the signed planar
    packers), whose contracts are the 28-bit ones; XNNPACK's qc4uw kernels (unsigned nibbles, madd) sum exactly in
    int32 and claim the 8-bit datatypes' contracts."""
    if d.blockwise:
        return d.name          # qd8-f32-qb4w, qdu8-bf16-qb4w, ...: lowp.conformance.contracts.output._qb4w_contracts
    if d.c_type in ("f32", "f16", "bf16"):
        return FLOAT_CONTRACTS[d.name if scaled or d.weight_bits != 4 else d.name.replace("qc4w", "qc8w")]
    if scaled:
        return "xnnpack-fp32-qc4w"
    return REQUANTIZED_CONTRACTS[requantization]


def _stage(name: UkernelName, layout: str, isa: Isa, scaled: bool) -> str | Skip:
    """The output stage model of the kernel: by params layout, then by ISA (x86 and RVV fp32), then by the scalar
    variant (fmagic, imagic, lrintf); on 4-bit weights its -acc28 form (the int32 holds 16x the sum); a Skip where
    lowp has no model of it."""
    if layout.startswith("qb4w_"):
        return _qb4w_stage(name, layout, isa)
    stage = _base_stage(name, layout, isa)
    if isinstance(stage, Skip) or not scaled:
        return stage
    if f"{stage}-acc28" not in OUTPUT_STAGES:
        return Skip("output stage not modelled", f"{name.name}: no 4-bit (-acc28) form of the output stage {stage}")
    return f"{stage}-acc28"


# The float order of each family of XNNPACK's qb4w kernels (lowp.kernels.models.quant.QB4W_STAGES; src/qd8-{f32,f16,
# bf16}-qb4w-gemm/gen/*.c @75db3c0): by ISA, the MLAL-lane kernels by their variant
QB4W_ORDER_OF_ISA = {"scalar": "qb4w-unfused", "sse2": "qb4w-unfused", "sse41": "qb4w-unfused", "avx": "qb4w-unfused",
                     "avx2": "qb4w-fma-fused-lanes4", "avx512vnni": "qb4w-fma", "avx512vnnigfni": "qb4w-fma",
                     "neondot": "qb4w-fma", "neondotfp16arith": "qb4w-fma", "neoni8mm": "qb4w-fma",
                     "neoni8mmbf16": "qb4w-fma"}


def _qb4w_stage(name: UkernelName, layout: str, isa: Isa) -> str | Skip:
    """The qb4w kernel's float order (`stage`), with its bf16 store where that is not the NaN-quieting RNE
    (`stage:store`, lowp.isa_models.float32.BF16_CONVERSIONS): src/qd8-bf16-qb4w-gemm/gen/qd8-bf16-qb4w-gemm-1x8c4-
    minmax-neondot.c (vaddq_u32 of 0x7FFF + the kept bit, then the narrowing shift), ...-1x16c8-minmax-avx512vnni.c
    (_mm512_cvtneps_pbh)."""
    if isa.target == "arm":
        return Skip("output stage not modelled", f"{name.name}: no flush-to-zero model of the qb4w float order "
                                                 "(AArch32 NEON flushes denormals)")
    if "mlal" in name.variant and "lane" in name.variant and isa.target == "aarch64":
        stage = "qb4w-fma-fused"          # vfmaq_f32 per block and vfmaq_f32(bias, vout, inv_scale) on ARM64
    elif isa.name in QB4W_ORDER_OF_ISA:
        stage = QB4W_ORDER_OF_ISA[isa.name]
    else:
        return Skip("output stage not modelled", f"{name.name}: no qb4w float order read for {isa.name}")
    if layout.endswith("bf16"):
        # the NEON dot kernels: vaddq_u32 and a narrowing shift, no NaN test; the AVX-512 ones: _mm512_cvtneps_pbh
        # (VCVTNEPS2BF16: subnormals as zero); the rest math_cvt_bf16_fp32, its AVX2 blend, BFCVTN: quieted NaNs
        store = {"neondot": "rne-nonan", "avx512vnni": "rne-daz"}.get(isa.name)
        return f"{stage}:{store}" if store else stage
    return stage


def _qc2w_stage(name: UkernelName, layout: str, isa: Isa) -> str | Skip:
    """The float order of a qd8-qc2w kernel (lowp.isa_models.requant.QC2W_ORDERS): the scalar C's, x86's (VFNMADD
    and VFMADD where the ISA has FMA, SSSE3's multiplies and adds), the AArch64 NEON intrinsics'; a Skip elsewhere."""
    out = QD8_LAYOUTS[layout]
    if isa.name == "scalar":
        order = "scalar"
    elif isa.target == "x86-64":
        order = "fma" if "fma" in isa.features else "unfused"
    elif isa.target == "aarch64" and not name.assembly:
        order = "neon-fmla"           # lowp builds AArch64 C with zig's clang: vmlaq_f32 contracts to FMLA
    else:
        return Skip("output stage not modelled", f"{name.name}: no model of the qd8-qc2w float order on {isa.name}")
    return f"qd8-{out}-qc2w-{order}"


def _base_stage(name: UkernelName, layout: str, isa: Isa) -> str | Skip:
    if layout in QD8_LAYOUTS and name.assembly and name.arch == "aarch64" and (name.mr, name.nr, name.kr) == \
            (4, 16, 4) and isa.name.startswith("neondot") and name.variant in XNGEN_QD8_VARIANTS:
        # the xngen-templated dot-product assembly multiplies the two scales first (src/qs8-gemm/4x16c4-aarch64-
        # neondot-ld128.S.in L267-300, "kernel_scale * scale"; ld64 and cortex_a55 alike): every qd8 source of the
        # checkout with that comment is one of these, and no other is (gemm_compiler's 4x16c4 ld64_2 and ld128_2
        # multiply by inv_scale first)
        return f"qd8-{QD8_LAYOUTS[layout]}-scale-product-unfused"
    if layout in QD8_LAYOUTS:
        # FMLA / VFMADD where the C templates fuse (x86 with FMA, AArch64 intrinsics); the AArch64 assembly from
        # gemm_compiler multiplies, then adds (FMUL, FADD: every qd8-f32-qc8w *-asm-aarch64-* source of @75db3c0),
        # and so do RVV (vfmul, vfadd) and the scalar kernels
        fused = (isa.target == "x86-64" and "fma" in isa.features) or (isa.target == "aarch64" and not name.assembly)
        if isa.target == "arm":       # AArch32 NEON flushes denormals (the Standard FPSCR value)
            # the 4x8c4 cortex_a55 dot-product assembly multiplies the two scales first, as the AArch64 xngen one
            # does (src/qs8-gemm/4x8c4-aarch32-neondot-cortex-a55.S.in: VMUL.F32 q2, q0, d12[1], then the
            # accumulators by q2); the MLAL assembly and the C kernels scale by inv_scale first
            order = "scale-product-unfused" if name.assembly and (name.mr, name.nr, name.kr) == (4, 8, 4) and \
                isa.name == "neondot" else "unfused"
            ftz = f"qd8-{QD8_LAYOUTS[layout]}-{order}-ftz"
            return ftz if ftz in OUTPUT_STAGES else Skip(
                "output stage not modelled", f"{name.name}: no flush-to-zero model of the {QD8_LAYOUTS[layout]} "
                                             "output (AArch32 NEON flushes denormals)")
        return f"qd8-{QD8_LAYOUTS[layout]}-{'fma' if fused else 'unfused'}"
    own = dict(isa.layouts).get(layout)
    if own:
        return own
    if layout in LAYOUT_STAGES:
        return LAYOUT_STAGES[layout]
    if isa.name in ("scalar", "wasm"):
        flavour = next((v for v in name.variant if v in ("fmagic", "imagic", "lrintf")), None)
        if flavour:
            return f"xnnpack-fp32-{flavour}"
    if isa.target == "x86-64" and "madd" in name.variant and layout == "fp32_scalar":
        # the madd kernels (qs8-qc4w, qs8-qc2w on SSSE3, AVX, AVX2, AVX256SKX, AVX512SKX) come from the AVX-VNNI
        # template with VPDPBUSD emulated by PMADDUBSW + PMADDWD: they add the zero point as VNNI does, wrapping
        # (e.g. src/qs8-qc4w-gemm/gen/qs8-qc4w-gemm-1x8c8-minmax-avx2-madd.c L121-125: _mm256_cvtps_epi32, then
        # _mm256_add_epi32 of the zero point, then _mm256_packs_epi32)
        return _WRAP
    if isa.fp32_stage and layout == "fp32_scalar":
        return isa.fp32_stage
    return Skip("output stage not modelled", f"{name.name}: no output-stage model for params {layout} on {isa.name}")


# XNNPACK's NEON MLAL templates (not MLAL-by-lane), per (kr, sr): which two k share an int16 lane (SMULL of one,
# SMLAL of the other, then SADALP), as (distance, kc rounding): lane l pairs k0 + l with k0 + l + 8 in each whole
# 16-k block of a call's (an IGEMM tap's) kc, kc first rounded up to the template's k-block; the k past the last
# whole block are lone SMULL products. Every template loads A's two 8-byte halves of a 16-k step, va x0 = a[k0:k0+8]
# and va x1 = a[k0+8:k0+16] (or duplicates the same int16/int32 lane of both: dup, LD1R, LD2R, LD4R; or rotates both
# by the same VEXT: the s4/s2 shuffles), and the weights of a lane from the same halves of the packed block, so the
# distance is 8 in all of them; the rounding is the template's own (@75db3c0: src/qs8-gemm/c2-neon-mull-dup.c.in
# L51 round_up_po2(kc, 2), L83-133 "while (k >= 16" with vmull_s8 of the x0 operands, vmlal_s8 of the x1, L136-209
# SMULL alone; c2-neon-mull-shuffle.c.in L85 (8), L111-134, vext_s8 by 2 of va x0 and va x1 alike; c4-neon-mull-
# dup.c.in L51 (4), L83-122; c4-neon-mull-shuffle.c.in L71 (8), L81-104, vext_s8 by 4; c8-neon-mull.c.in L50 (8),
# L82-99; c16-neon-mlal.c.in L42 (16), L84-88; the src/qs8-igemm/ templates of the same names per tap). A kc of 10
# pairs nothing in a c2 dup kernel and k 0 with k 8 in a c2s4 one.
MLAL_PAIRS = {(2, 1): (8, 2), (2, 4): (8, 8), (4, 1): (8, 4), (4, 2): (8, 8), (8, 1): (8, 8), (16, 1): (8, 16)}
# lowp.kernels.models.arm's named models of mlal_pairs_gemm / _igemm (+ "_gemm" or "_igemm"): rounding kc to 8 or
# 16 pairs the same k (a block of 16 is whole or holds 8 lone products)
PAIR_MODELS = {(8, 2): "smlal_sadalp_kc2", (8, 4): "smlal_sadalp_kc4", (8, 8): "smlal_sadalp",
               (8, 16): "smlal_sadalp"}


def _accumulation(name: UkernelName, isa: Isa, source: Path) -> tuple[str, tuple[int, int] | None] | Skip:
    """(the int32 accumulation model, the weight domain claimed if narrower than int8). Every kernel lowp maps
    accumulates exactly except NEON's MLAL ones (not MLAL-by-lane): SMULL + SMLAL put two products in an int16
    lane (the pairs of MLAL_PAIRS), exact while the weights stay in [-127, 127], the range XNNPACK's tester
    draws them from (test/gemm-microkernel-tester.cc: w8rng over [-int8 max, int8 max], every qs8/qd8 Test)."""
    if _mlal_pairs(name, isa, source):
        pairs = MLAL_PAIRS.get((name.kr, name.sr))
        if pairs is None:
            return Skip("accumulation not modelled", f"{name.name}: no reading of which k a c{name.kr}s{name.sr} "
                                                     "MLAL template pairs in an int16 lane (MLAL_PAIRS)")
        op = "igemm" if name.op == "igemm" else "gemm"      # an IGEMM's pairs restart at every tap
        return f"lowp.kernels.models.arm:{PAIR_MODELS[pairs]}_{op}", (-127, 127)
    return "lowp.kernels.models:exact_gemm", None


def _mlal_pairs(name: UkernelName, isa: Isa, source: Path) -> bool:
    """Whether a NEON C or assembly kernel puts two int8 products in an int16 lane: its name says mlal (not
    mlal_lane), or its C source calls vmlal_s8. The second is for the qd8-f16-qc8w c2s4 GEMMs, generated with MLA=1
    and named without the token (scripts/generate-qs8-gemm.sh L594-595 @75db3c0: ...-1x8c2s4-minmax-neonfp16arith.c;
    their IGEMMs are ...-neonfp16arith-mlal.c): read as exact, their full-range model checks failed as
    int16-pair-wrap."""
    if isa.name not in ("neon", "neonv8", "neonfp16arith") or "lane" in name.variant:
        return False
    return "mlal" in name.variant or (source.suffix == ".c" and "vmlal_s8(" in source.read_text(errors="replace"))


def _entry(item: YamlEntry, name: UkernelName, abi: dict, d, output: str, stage: str, source: Path,
           checkout: Checkout) -> dict | Skip:
    """The kernel entry: the ABI facts lowp.kernels.xnnpack read from the test entry (signature, tile, the xnnpack
    table, a_shift, types; its packing follows from them, no free text), XNNPACK's build of the source, the
    contracts and the models."""
    isa = isa_of(name)
    accumulation = _accumulation(name, isa, source)
    if isinstance(accumulation, Skip):
        return accumulation
    model, b_domain = accumulation
    tile, vector_bits = dict(abi["tile"]), None
    if name.vector_tile:           # RVV: NR vectors of vlenb / sizeof(output) lanes; lowp runs VLEN 128
        vector_bits = 128
        tile["nr"] = name.nr * (vector_bits // 8) // {"f32": 4, "f16": 2, "bf16": 2}.get(d.c_type, 1)
    lo_b, hi_b = d.weight_range
    if b_domain:
        lo_b, hi_b = max(lo_b, b_domain[0]), min(hi_b, b_domain[1])
    x86, arm = isa.target == "x86-64", isa.target == "arm"
    copts, features = (*isa.copts, *_bf16_copts(d, isa)), (*isa.features, *_bf16_features(d, isa))
    entry = {
        "name": name.name, "target": isa.target, "features": list(features), "sources": [str(source)],
        "symbol": abi["symbol"], "signature": abi["signature"],
        "a_type": abi["a_type"], "b_type": abi["b_type"], "c_type": abi["c_type"],
        # XNNPACK's build: -fno-math-errno for every ukernel (CMakeLists.txt L1042), -ffp-contract=off under GCC
        # (L411: no FMA contraction), the ISA's flags (x86; zig's AArch64 -mcpu covers theirs, with what the ISA adds to
        # it: Isa.zig_cpu), -O2. 32-bit Arm: the ISA's flags but -march/-mfpu (zig's -mcpu:
        # lowp.emulator.targets.arm.build_cpu). RISC-V: the ISA's -march (rv64gcv, rv64gcv_zvfh: lowp.emulator.cpuflags
        # reads it as zig's -mcpu)
        "cflags": ["-O2", "-fno-math-errno", *(("-ffp-contract=off", *copts) if x86 or arm else ()),
                   *(isa.copts if isa.target in ("wasm32", "riscv64") else ()), *isa.zig_cpu],
        "include_dirs": [str(STUBS), str(checkout.root)],
        # what XNNPACK's build defines (CMakeLists.txt L345-384, L1226): assembly on, the ISA on, no logging
        "defines": ["XNN_ENABLE_ASSEMBLY=1", "XNN_LOG_LEVEL=0", f"XNN_ENABLE_{isa.name.upper()}=1",
                    *([f"{item.data['cpp-check']}=1"] if item.data.get("cpp-check") else [])],
        "tile": tile,
        # qb4w: lowp's cases draw every depth; one that is not a whole number of blocks runs padded with zeros
        "xnnpack": {**abi["xnnpack"], **({"depth": "padded"} if d.blockwise else {})},
        "contract": "exact",
        "output": output,
        "domain": {"a": [0, 255] if d.a_type == "u8" else [-128, 127], "b": [lo_b, hi_b]},
        "model": {"accumulate": model, "output": stage},
        "overread": {"A": checkout.extra_bytes(isa.target)},
        "description": f"XNNPACK {item.where}: init {item.data['init']}, pack {item.data['pack']}, k-block "
                       f"{item.data['k-block']}" + ("" if not name.variant else f"; variant {'_'.join(name.variant)}"),
    }
    if isa.requires:
        entry["requires"] = list(isa.requires)
    if abi["a_shift"]:
        entry["a_shift"] = abi["a_shift"]
    if vector_bits:
        entry["vector_bits"] = vector_bits
    if item.behaviour:
        _relaxed_dot(entry, isa, item.behaviour)
    return entry


def _bf16_copts(d, isa: Isa) -> tuple[str, ...]:
    """XNNPACK builds its AVX-512 VNNI bf16-output kernels in the avx512bf16 set (cmake/gen/
    avx512bf16_microkernels.cmake; CMakeLists.txt L1203 adds -mavx512bf16 to those sources): their store is
    VCVTNEPS2BF16 (_mm512_cvtneps_pbh)."""
    return ("-mavx512bf16",) if d.c_type == "bf16" and isa.name == "avx512vnni" else ()


def _bf16_features(d, isa: Isa) -> tuple[str, ...]:
    return ("avx512_bf16",) if _bf16_copts(d, isa) else ()


def _relaxed_dot(entry: dict, isa: Isa, behaviour: str) -> None:
    """The row of a wasmsdot / wasmusdot kernel under one behaviour of the relaxed dot: its own name
    (<ukernel>+<behaviour>), the behaviour as a feature (the wasm target runs it in the wasmtime mode that gives it,
    or substitutes it at compile time: the row's emulator says which), and whether XNNPACK would dispatch it so."""
    from lowp.isa_models.wasm import RELAXED_DOT
    entry["name"] = f"{entry['name']}+{behaviour}"
    entry["features"] = [*entry["features"], f"relaxed_dot_{behaviour}"]
    dispatched = "XNNPACK dispatches it under this behaviour" if behaviour == isa.dispatch else \
        f"XNNPACK dispatches it only under {isa.dispatch} (hardware-config.c use_wasm_{isa.name[4:]}): a wrong " \
        "result here is what an engine with this behaviour would compute, not a dispatched path, so it claims nothing"
    entry["description"] += f"; relaxed dot: {behaviour} ({RELAXED_DOT[behaviour]}); {dispatched}"
    if behaviour != isa.dispatch:
        entry["claims"] = False


def _short(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---- the library on the seam (lowp.conformance.run.campaign) ---------------------------------------------------
class Xnnpack(seam.Library):
    """XNNPACK as a campaign: its checkout's int8 GEMM/IGEMM test YAMLs are the kernels, grouped by datatype, op and
    ISA; each maps through `translate`."""
    name = "XNNPACK"
    group_keys = ("datatype", "op", "isa")

    def open(self, path: Path) -> Checkout:
        return Checkout(path)

    def refuse(self, checkout: Checkout, selection: dict) -> str | None:
        known = checkout.datatypes()
        unknown = [d for d in selection.get("datatype", ()) if d not in known]
        if unknown:
            return (f"--datatype {', '.join(unknown)}: no int8 GEMM YAML of that datatype in {checkout.root / 'test'}"
                    f"; it has {', '.join(known)}")
        bad = [i for i in selection.get("isa", ()) if i not in ISAS]
        if bad:
            return f"--isa {', '.join(bad)}: not an XNNPACK ISA lowp knows; known: {', '.join(ISAS)}"
        return None

    def found(self, checkout: Checkout, selection: dict):
        """Every entry of the selected datatypes' YAMLs; a file that cannot be read first, as one skipped kernel."""
        entries, unreadable = checkout.entries(selection.get("datatype", ()))
        kinds = {path: (datatype, op) for path, datatype, op in checkout.yaml_files()}
        for path, why in unreadable:
            datatype, op = kinds[path]
            yield seam.Found(path.name, {"datatype": datatype, "op": op, "isa": "?"}, f"test/{path.name}",
                             skip=Skip("YAML unreadable", f"test/{path.name}: {why}"))
        for entry in entries:
            try:
                isa = parse_name(entry.name).isa or "?"
            except ValueError:
                isa = "?"
            group = {"datatype": entry.datatype, "op": entry.op, "isa": isa}
            behaviours = ISAS[isa].relaxed_dot if isa in ISAS else ()
            for row in [replace(entry, behaviour=b) for b in behaviours] or [entry]:   # one row per behaviour
                yield seam.Found(row.name, group, entry.where, what=row)

    def map(self, checkout: Checkout, found: seam.Found) -> dict | Skip:
        result = translate(found.what, checkout)
        return result.entry if isinstance(result, Mapped) else result

    def source(self, checkout: Checkout) -> dict:
        return {"path": str(checkout.root), "commit": checkout.commit()}


__all__ = ["ISAS", "Checkout", "Isa", "Mapped", "NotACheckout", "Skip", "UkernelName", "Xnnpack", "YamlEntry",
           "parse_name", "translate"]
