"""x86-64, natively: kernels built by the host's C compiler into a shared library and called in-process through cffi
(lowp.kernels.executors.NativeExecutor, behind guard pages in a child process); instruction models proven against
this CPU's own instructions (lowp.emulator.x86.native.NativeX86).

x86-64 on Bochs (lowp.emulator.x86.bochs): the same sources and flags, linked as a static program and run on Bochs's
Sapphire Rapids or Arrow Lake CPU model, for the x86 extensions the host lacks (AVX-512, AVX-512 VNNI, AVX-VNNI,
AVX-VNNI-INT8; AMX on lowp's models). Native is preferred wherever the host runs every feature of a kernel."""
from __future__ import annotations

from lowp.emulator.build import X86_64_STATIC as STATIC
from lowp.emulator.host import host
from lowp.emulator.targets.base import Target, register


class NativeX86_64(Target):
    name, arch, isa, backend = "x86-64-native", "x86-64", "x86", "native"

    def unavailable(self) -> str | None:
        from lowp.emulator.x86.native import unavailable
        return unavailable()

    def features(self, vector_bits=None, **options) -> frozenset[str]:
        """lowp's CPUID + XGETBV detection and the flags of /proc/cpuinfo (nothing on a host that is not x86-64)."""
        h = host()
        return h.x86_features | h.flags if h.arch == "x86-64" else frozenset()

    def describe(self, vector_bits=None, **options) -> str:
        return "CPU"

    def intrinsic_backends(self) -> list:
        from lowp.emulator.x86.native import NativeX86
        return [NativeX86()]


class X86Bochs(Target):
    """The kernel's CPU model is the first Bochs model with all its features (lowp.emulator.x86.bochs.model_for)."""
    name, arch, isa, backend, preference = "x86-64-bochs", "x86-64", "x86", "bochs", 1
    recipe = STATIC

    @property
    def models_only(self) -> frozenset[str]:
        from lowp.emulator.x86.bochs import MODELED
        return MODELED

    @property
    def defects(self) -> dict:
        from lowp.emulator.x86.bochs import DEFECTS
        return DEFECTS

    def unavailable(self) -> str | None:
        if host().arch != "x86-64":
            return f"the host is {host().machine}, not x86-64 (lowp builds Bochs's programs with the host compiler)"
        from lowp.emulator.x86 import bochs
        return bochs.unavailable()

    def model(self, features=(), model: str | None = None) -> str:
        from lowp.emulator.x86.bochs import model_for
        return model or model_for(features)

    def features(self, vector_bits=None, model: str | None = None, features=(), **options) -> frozenset[str]:
        """The features of the Bochs model a kernel with `features` gets, and lowp's AMX models."""
        from lowp.emulator.x86.bochs import MODELED, MODELS
        return MODELS[self.model(features, model)] | MODELED

    def cannot_run(self, features=(), vector_bits=None, **options) -> str | None:
        reason = self.unavailable()
        if reason:
            return reason
        have = self.features(vector_bits, features=features, **options)
        missing = [f for f in features if f not in have]
        if not missing:
            return None
        if options.get("model"):
            return f"{self.describe(vector_bits, features=features, **options)} lacks {', '.join(missing)}"
        from lowp.emulator.x86.bochs import MODELED, MODELS, bochscpu_version
        needed = [f for f in features if f not in MODELED]
        what = f"no Bochs CPU model (bochscpu-python {bochscpu_version()}) has"
        if not any(set(needed) & MODELS[m] for m in MODELS):
            return f"{what} {', '.join(needed)}"
        closest = sorted(MODELS, key=lambda m: (len(set(needed) - MODELS[m]), len(MODELS[m])))[:2]
        return f"{what} all of {', '.join(needed)}: " + "; ".join(
            f"{m} lacks {', '.join(f for f in needed if f not in MODELS[m])}" for m in closest)

    def describe(self, vector_bits=None, model: str | None = None, features=(), **options) -> str:
        from lowp.emulator.x86.bochs import describe
        return describe(self.model(features, model))

    def machine(self, sources, *, flags=(), depends=(), vector_bits=None, features=(), **options):
        from lowp.emulator.x86.bochs import BochsMachine, build_for_bochs
        options["model"] = self.model(features, options.get("model"))
        return BochsMachine(build_for_bochs(*sources, flags=flags, depends=depends), **options)

    def intrinsic_backends(self) -> list:
        from lowp.emulator.x86.bochs_intrinsics import BochsX86
        return [BochsX86(model) for model in ("sapphire_rapids", "arrow_lake")]


NATIVE = register(NativeX86_64())
BOCHS = register(X86Bochs())
