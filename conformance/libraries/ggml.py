"""ggml's room on the library seam: every ggml_vec_dot_* of a ggml or llama.cpp checkout, as each variant ggml ships
builds it (lowp.kernels.ggml.variants), judged by the exact contract and by its float order or the bound
(lowp.conformance.contracts.ggml); `lowp ggml PATH` is its command.

What a kernel is here: one function of src/ggml-cpu/arch/<arch>/quants.c (found by its definition), built for one
variant of that arch at one vector length ('ggml_vec_dot_q4_0_q8_0@haswell', '...@armv8.2_3@256'), plus the
`_generic` twins of src/ggml-cpu/quants.c, built once per arch at its baseline variant as a second opinion (never
the oracle: lowp's own block models are). Arch folders no lowp target runs (powerpc, loongarch, s390) are rows
that say so. The campaign groups kernels by type and ISA (the variant, at its vector length).
"""
from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path

from lowp.kernels.ggml import kernel as vec_dots
from lowp.kernels.ggml.dot import VEC_DOT_TYPE
from lowp.kernels.ggml.executor import GgmlBuild, VecDot
from lowp.kernels.ggml.orders import CLANG_TWIN, GENERIC, MODELLED_FILES, order_for
from lowp.kernels.ggml.kernel import REPACK_KINDS
from lowp.kernels.ggml.quantize import claimed_variant, generic_variant
from lowp.kernels.ggml.repack import REPACKED
from lowp.kernels.ggml.variants import ARCH_OF_FOLDER, UNRUN_FOLDERS, Variant, variant, variants_of

from lowp.conformance.run.campaign import Found, Library, NotACheckout, Skip, compiler_words

# A definition (not a prototype) of a vec_dot at the start of a line: `void ggml_vec_dot_q4_0_q8_0(int n, ...) {`
DEFINITION = re.compile(r"^void\s+(ggml_vec_dot_(\w+?)_(q8_[01K])(_generic)?)\s*\(([^)]*)\)\s*\{", re.M)
# quantize_row_q8_0/q8_1/q8_K (the activation quantizers a vec_dot's caller runs first), their _generic twins too
QUANTIZER = re.compile(r"^void\s+(quantize_row_(q8_[01K])(_generic)?)\s*\(([^)]*)\)\s*\{", re.M)
# A repacked gemv/gemm of repack.cpp (`_generic`) or arch/<arch>/repack.cpp: `void ggml_gemm_q4_0_8x8_q8_0(int n, ...`
REPACK = re.compile(r"^void\s+(ggml_(gemv|gemm)_(\w+?)_\d+x\d+_(q8_[0K])(_generic)?)\s*\(", re.M)
ZVFH_BITS = 256      # the only VLEN ggml uses the RVV 16x1 repacked layouts at
BASELINE = {"x86-64": "x64", "aarch64": "armv8.0_1", "riscv64": "riscv64_0", "wasm32": "wasm_simd128"}


@dataclass
class Checkout:
    root: Path              # the folder holding include/ and src/ (a llama.cpp checkout's ggml/)
    given: Path             # PATH as the user gave it

    @property
    def cpu(self) -> Path:
        return self.root / "src" / "ggml-cpu"

    @cached_property
    def nrows_2(self) -> frozenset[str]:
        """The types whose vec_dot ggml also calls with nrc == 2 on an i8mm build: type_traits_cpu's `.nrows = 2`
        (ggml @d99724f ggml-cpu.c L239-331, under __ARM_FEATURE_MATMUL_INT8: q4_0, q4_1, q8_0, q4_K, q6_K).
        None where the checkout has no ggml-cpu.c."""
        path = self.cpu / "ggml-cpu.c"
        if not path.is_file():
            return frozenset()
        text = path.read_text(errors="replace")
        entries = re.split(r"\[GGML_TYPE_(\w+)\]\s*=\s*\{", text)
        return frozenset(name.lower().replace("_k", "_K") for name, body in zip(entries[1::2], entries[2::2])
                         if re.search(r"\.nrows\s*=\s*2\b", body.split("}", 1)[0]))

    def modelled(self, source: str) -> bool:
        """Whether this checkout's file (an arch folder, or 'generic': quants.c) is the code lowp's float orders model
        (lowp.kernels.ggml.orders.MODELLED_FILES), by its bytes."""
        return source in self._modelled_sources

    @cached_property
    def _modelled_sources(self) -> frozenset[str]:
        def digest(source: str) -> str | None:
            path = self.cpu / ("quants.c" if source == "generic" else f"arch/{source}/quants.c")
            return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
        return frozenset(source for source, want in MODELLED_FILES.items() if digest(source) == want)

    def build(self, folder: str, v: Variant) -> GgmlBuild:
        """The one C build of a variant that its vec_dots and its quantizers share (built once per campaign): with
        src/ggml-quants.c where the checkout has it, the reference quantizers the _generic wrappers call."""
        src = self.root / "src"
        quants = src / "ggml-quants.c"
        return GgmlBuild(self.cpu / "arch" / folder / "quants.c", self.cpu / "quants.c",
                         (self.root / "include", src, self.cpu), src / "ggml-quants.h", v,
                         quants if quants.is_file() else None)


@dataclass(frozen=True)
class Function:
    symbol: str
    x_type: str
    y_type: str
    folder: str             # the arch folder ('x86'), or 'generic' for quants.c's twins
    line: int
    renamed: bool = False   # quants.c's generic under the plain name (arch-fallback.h: the arch has no version)
    kind: str = "vec_dot"   # or 'quantize': x_type is then the activation type it writes (y_type the same)
    twins_at: tuple[str, ...] = ()      # a generic twin: the arch folders whose build has it under this name


class Ggml(Library):
    name = "ggml"
    group_keys = ("type", "isa")
    selectors = {"type": "--type", "isa": "--isa"}

    def open(self, path: Path) -> Checkout:
        path = Path(path)
        for root in (path, path / "ggml"):
            if (root / "src" / "ggml-cpu" / "quants.c").is_file() and (root / "src" / "ggml-cpu" / "arch").is_dir():
                return Checkout(root.resolve(), path)
        raise NotACheckout(f"{path}: not a ggml checkout (src/ggml-cpu/quants.c and src/ggml-cpu/arch/) nor a "
                           f"llama.cpp checkout (ggml/src/ggml-cpu/...)")

    def refuse(self, checkout: Checkout, selection: dict) -> str | None:
        known = (*VEC_DOT_TYPE, "q8_1", "q8_K")           # the weight types, and the activations the quantizers write
        unknown = [t for t in selection.get("type", ()) if t not in known]
        if unknown:
            return f"--type {unknown[0]}: not a ggml type lowp knows ({', '.join(known)})"
        return None

    def functions(self, checkout: Checkout) -> list[Function]:
        """Every vec_dot a build of the checkout has: per arch folder, the arch file's own and, under the plain name,
        quants.c's generic of each type the arch has none of (arch-fallback.h renames it: compiled with the
        variant's flags, it is that build's kernel); and the `_generic` twins, where a build keeps them."""
        arch_files = {d.name: d / "quants.c" for d in sorted((checkout.cpu / "arch").iterdir())
                      if d.is_dir() and (d / "quants.c").is_file()}
        out = []
        for kind, pattern in (("vec_dot", DEFINITION), ("quantize", QUANTIZER)):
            own = {folder: _definitions(path, pattern, generic=False) for folder, path in arch_files.items()}
            generics = _definitions(checkout.cpu / "quants.c", pattern, generic=True)
            for folder, found in own.items():
                out += [Function(sym, x, y, folder, line, kind=kind) for sym, (x, y, line) in found.items()]
                if folder in ARCH_OF_FOLDER:
                    defined = set(found)
                    out += [Function(sym.removesuffix("_generic"), x, y, folder, line, renamed=True, kind=kind)
                            for sym, (x, y, line) in generics.items() if sym.removesuffix("_generic") not in defined]
            for sym, (x, y, line) in generics.items():
                keep = tuple(f for f in ARCH_OF_FOLDER if sym.removesuffix("_generic") in own.get(f, {}))
                out.append(Function(sym, x, y, "generic", line, twins_at=keep, kind=kind))
        return out + self._repacked(checkout)

    @staticmethod
    def _repacked(checkout: Checkout) -> list[Function]:
        """The gemv/gemm functions of repack.cpp as each arch's build has them, as functions() finds the vec_dots:
        arch/<arch>/repack.cpp's own; repack.cpp's `_generic` under the plain name where the arch has none
        (arch-fallback.h), except the 16x1 layouts, which only RISC-V builds with Zvfh compile; the `_generic`
        twins of the arch's own."""
        generic_file = checkout.cpu / "repack.cpp"
        if not generic_file.is_file():
            return []
        generics = _repack_definitions(generic_file, generic=True)
        own = {d.name: _repack_definitions(d / "repack.cpp", generic=False)
               for d in sorted((checkout.cpu / "arch").iterdir()) if (d / "repack.cpp").is_file()}
        out = []
        for folder, found in own.items():
            out += [Function(sym, x, y, folder, line, kind=kind) for sym, (kind, x, y, line) in found.items()]
            out += [Function(plain, x, y, folder, line, renamed=True, kind=kind)
                    for sym, (kind, x, y, line) in generics.items()
                    if (plain := sym.removesuffix("_generic")) not in found and (folder == "riscv" or not _zvfh(plain))]
        for sym, (kind, x, y, line) in generics.items():
            keep = tuple(f for f in own if f in ARCH_OF_FOLDER and sym.removesuffix("_generic") in own[f])
            out.append(Function(sym, x, y, "generic", line, twins_at=keep, kind=kind))
        return out

    def found(self, checkout: Checkout, selection: dict):
        for f in self.functions(checkout):
            where = f"{self._relative(checkout, f)}:{f.line}"
            if f.folder in UNRUN_FOLDERS or (f.folder != "generic" and f.folder not in ARCH_OF_FOLDER):
                yield Found(f"{f.symbol}@{f.folder}", {"type": f.x_type, "isa": f.folder}, where, what=(f, None, None))
                continue
            for v, bits in self._variants(f):
                if f.kind == "quantize" and bits not in (None, v.vector_bits[0]):
                    continue                # a quantizer's code reads no vector length: judged once per build
                yield Found(f"{f.symbol}@{v.label(bits)}", {"type": f.x_type, "isa": v.label(bits)}, where,
                            what=(f, v, bits))

    def _variants(self, f: Function):
        """(variant, vector length) pairs a function is judged at: its arch's variants, or the baselines of the
        arches whose builds keep the twin (x86, AArch64, RISC-V)."""
        if f.kind in REPACK_KINDS and _zvfh(f.symbol.removesuffix("_generic")):
            # A Zvfh build's only (repack_build), at VLEN 256: ggml selects the 16x1 layouts there alone (repack.cpp
            # L4589-4597 and the like: `case 256`, the other lengths `break // TODO`), so no other VLEN is claimed
            return [(variant("riscv64_v"), ZVFH_BITS)]
        if f.folder == "generic":
            chosen = [variant(BASELINE[ARCH_OF_FOLDER[a]]) for a in f.twins_at if a != "wasm"]
        else:
            chosen = variants_of(ARCH_OF_FOLDER[f.folder])
        return [(v, bits) for v in chosen for bits in v.vector_bits]

    @staticmethod
    def _relative(checkout: Checkout, f: Function) -> str:
        file = "repack.cpp" if f.kind in REPACK_KINDS else "quants.c"
        path = checkout.cpu / (file if f.folder == "generic" or f.renamed else f"arch/{f.folder}/{file}")
        try:
            return str(path.relative_to(checkout.given.resolve()))
        except ValueError:
            return str(path)

    def map(self, checkout: Checkout, found: Found) -> dict | Skip:
        f, v, bits = found.what
        if v is None:
            return Skip("no target here", f"no lowp target runs {f.folder} code ({f.symbol})")
        if f.kind == "quantize":
            return self._map_quantizer(checkout, found.name, f, v)
        if f.kind in REPACK_KINDS:
            return self._map_repacked(checkout, found.name, f, v, bits)
        if f.x_type not in VEC_DOT_TYPE:
            return Skip("type not modelled", f"{f.symbol}: lowp has no block model of {f.x_type}")
        if VEC_DOT_TYPE[f.x_type] != f.y_type:
            return Skip("type not modelled", f"{f.symbol}: lowp knows {f.x_type} as multiplied with "
                                             f"{VEC_DOT_TYPE[f.x_type]}, not {f.y_type}")
        folder = ARCH_OF_FOLDER_NAME[v.arch] if f.folder == "generic" else f.folder
        pairs = v.arch == "aarch64" and "i8mm" in v.features and f.folder != "generic" and not f.renamed and \
            f.x_type in checkout.nrows_2
        source = "generic" if f.folder == "generic" or f.renamed else f.folder
        k = vec_dots.VecDotKernel(found.name, f.symbol, f.x_type, checkout.build(folder, v), bits,
                                  _order(v, f, bits), checkout.modelled(source), pairs)
        return k.entry()

    def _map_quantizer(self, checkout: Checkout, name: str, f: Function, v: Variant) -> dict | Skip:
        """A quantizer's entry: the variant its code claims (lowp.kernels.ggml.quantize), built with ggml-quants.c
        where that is the reference path (the _generic wrappers call quantize_row_<q8>_ref)."""
        compiler = _x86_compiler(v) if v.arch == "x86-64" else "clang"
        features = frozenset(v.features)
        claimed = generic_variant(v.arch, features, f.x_type, compiler) if f.folder == "generic" or f.renamed \
            else claimed_variant(v.arch, features, f.x_type, compiler)
        folder = ARCH_OF_FOLDER_NAME[v.arch] if f.folder == "generic" else f.folder
        build = checkout.build(folder, v)
        if claimed.startswith("ref") and build.quants_source is None:
            return Skip("reference not in the checkout", f"{f.symbol} at {v.name} runs the reference quantizer "
                                                          f"of src/ggml-quants.c, which the checkout lacks")
        return vec_dots.VecDotKernel(name, f.symbol, f.x_type, build, None, claimed, True, False, "quantize").entry()

    @staticmethod
    def _map_repacked(checkout: Checkout, name: str, f: Function, v: Variant, bits: int | None) -> dict | Skip:
        """A gemv/gemm's entry: judged by the exact contract on every element (lowp.kernels.ggml.repack)."""
        if f.symbol.removesuffix("_generic") not in REPACKED:
            return Skip("layout not modelled", f"{f.symbol}: lowp has no model of its repacked layout "
                                               f"(lowp.kernels.ggml.repack.REPACKED)")
        folder = ARCH_OF_FOLDER_NAME[v.arch] if f.folder == "generic" else f.folder
        build = replace(checkout.build(folder, v), arch_source=checkout.cpu / "arch" / folder / "repack.cpp",
                        generic_source=checkout.cpu / "repack.cpp", quants_source=None)
        return vec_dots.VecDotKernel(name, f.symbol, f.x_type, build, bits, kind=f.kind).entry()

    def source(self, checkout: Checkout) -> dict:
        try:
            commit = subprocess.run(["git", "-C", str(checkout.root), "rev-parse", "HEAD"], capture_output=True,
                                    text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            commit = None
        return {"path": str(checkout.given), "commit": commit}

    def register(self, entries: list[dict], toml: Path):
        kernels, problems = [], {}
        for e in entries:
            try:
                kernels.append(vec_dots.register(vec_dots.from_entry(e), toml))
            except (ValueError, KeyError) as err:
                problems[e.get("name", "?")] = str(err)
        return kernels, problems

    def build_problem(self, kernel: vec_dots.VecDotKernel) -> tuple[str, str] | None:
        if kernel.kind in REPACK_KINDS:
            from lowp.kernels.ggml.repack import RepackRunner
            vd = RepackRunner(kernel.repack_build(), kernel.vector_bits)
        else:
            vd = VecDot(kernel.build, kernel.vector_bits)
        if vd.unavailable():
            return None                 # its checks say why it cannot run here (SKIPPED rows)
        symbols = self._built(vd)
        if isinstance(symbols, tuple):
            return symbols
        if kernel.symbol not in symbols:
            return "symbol problem", f"the {kernel.label} build defines no {kernel.symbol}"
        return None

    def _built(self, vd: VecDot) -> frozenset[str] | tuple[str, str]:
        """The functions of one build (every kernel of a variant shares it: built and read once per campaign,
        whatever the vector length), or (category, message) when it does not build. vd: a VecDot or a
        RepackRunner."""
        cache = self.__dict__.setdefault("_builds", {})
        key = (vd.build, vd.backend)
        if key not in cache:
            try:
                cache[key] = frozenset(vd.symbols())
            except Exception as e:      # noqa: BLE001 - BuildError, BuildFailed, NativeUnavailable: the words count
                cache[key] = ("does not build", compiler_words(str(e), type(e).__name__)[:600])
            finally:
                vd.close()
        return cache[key]

    def plan(self, kernels: list) -> list:
        from lowp.conformance.run.ggml import plan
        return plan(kernels)

    def inputs(self, entry: dict) -> tuple[list[Path], list[Path]]:
        """A ggml entry's compiled files (its two quants.c or repack.cpp, ggml-quants.c) and the folders whose
        headers its key covers (VecDotKernel.key): its include folders and its arch folder."""
        files = [Path(entry[k]) for k in ("arch_source", "generic_source", "quants_source") if entry.get(k)]
        return files, [*(Path(d) for d in entry["include_dirs"]), Path(entry["arch_source"]).parent]

    def reproduce(self, found: list[dict], rows: list[dict], folder: Path) -> list[dict]:
        from lowp.conformance.report.ggml import reproducers
        return reproducers(found, rows, folder)


ARCH_OF_FOLDER_NAME = {arch: folder for folder, arch in ARCH_OF_FOLDER.items()}


def _definitions(path: Path, pattern: re.Pattern, generic: bool) -> dict[str, tuple[str, str, int]]:
    """{symbol: (x type, y type, line)} of the vec_dots (DEFINITION) or quantizers (QUANTIZER: both types the one
    it writes) a quants.c defines: the `_generic` ones, or the plain ones."""
    text = path.read_text(errors="replace")
    out = {}
    for m in pattern.finditer(text):
        groups = m.groups()
        x, y, twin = (groups[1], groups[2], groups[3]) if pattern is DEFINITION else (groups[1], groups[1], groups[2])
        if bool(twin) == generic:
            out[groups[0]] = (x, y, text.count("\n", 0, m.start()) + 1)
    return out


def _repack_definitions(path: Path, generic: bool) -> dict[str, tuple[str, str, str, int]]:
    """{symbol: (kind, weight type, activation type, line)} of the gemv/gemm functions a repack.cpp defines: the
    `_generic` ones, or the plain ones."""
    text = path.read_text(errors="replace")
    return {m[1]: (m[2], m[3], m[4], text.count("\n", 0, m.start()) + 1) for m in REPACK.finditer(text)
            if bool(m[5]) == generic}


def _zvfh(symbol: str) -> bool:
    return symbol in REPACKED and REPACKED[symbol].riscv_zvfh


def _order(v: Variant, f: Function, bits: int | None) -> str | None:
    """The float order ggml's code for this build takes (lowp.kernels.ggml.orders), or None (the bound). A _generic
    twin is the plain C whatever the flags: AArch64's clang contracts it (the arch always has FMA), the baselines of
    x86 (no -mfma) and wasm do not, RISC-V's does. x86 builds use the host compiler: clang's orders where it is
    clang (it does not contract separate multiply and add intrinsics, GCC does)."""
    if f.folder == "generic":
        name = ("generic-fma" if f.x_type in GENERIC else None) if v.arch == "aarch64" else \
            order_for(v.arch, frozenset(), f.x_type, None)
    else:
        name = order_for(v.arch, frozenset(v.features), f.x_type, bits)
    if name and v.arch == "x86-64" and _x86_compiler(v) == "clang":
        name = CLANG_TWIN.get(name, name)
    return name


def _x86_compiler(v: Variant) -> str:
    """'gcc' or 'clang': what builds this x86 variant here. The host's C compiler, except for the AMX flags where
    the host's AMX intrinsics are unsafe: lowp builds those with zig's clang (lowp.emulator.native_build)."""
    from lowp.emulator.native_build import host_amx_intrinsics_unsafe
    if "-mamx-tile" in v.flags and host_amx_intrinsics_unsafe():
        return "clang"
    return "clang" if _host_compiler_is_clang() else "gcc"


@cache
def _host_compiler_is_clang() -> bool:
    from lowp.emulator.buildcache import compiler_identity
    from lowp.emulator.native_build import compiler
    try:
        return "clang" in compiler_identity(tuple(compiler())).split("\n", 1)[-1].lower()
    except Exception:       # noqa: BLE001 - no compiler: nothing x86 builds natively, the order is moot
        return False
