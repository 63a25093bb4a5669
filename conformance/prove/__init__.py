"""`lowp prove`: for one shape, every input in the claimed domain, the compiled kernel computes its contract bit for
bit (PROVED), or here is an input where it does not, replayed on a real executor (REFUTED), or lowp cannot say,
and why (UNKNOWN).

How (docs/prove.md):
1. The kernel's own binary (the x86-64 shared library lowp builds, or the AArch64 ELF) is run symbolically for
   M x N x K (lowp.emulator.symbolic.x86 / symbolic_a64): addresses and control flow concrete, the bytes of A and B
   free variables bounded by the domain, each instruction executed by lowp.isa_models on bit-vector lanes.
2. Memory is judged as the checks judge it: a load outside A, B, C, the workspace and the stack (beyond a declared
   over-read) or a store outside C, the workspace and the stack refutes the kernel for this shape; bytes read
   past a buffer's end, or before they are written, are free symbols, so a C that depends on them differs from
   the contract for some of their values.
3. Narrow intermediates (an int16 pair sum, an int16 accumulator lane) are kept exact where their interval shows
   they fit; where it cannot, a local lemma asks the solver about that one term over its own inputs (32 bits of
   input for a pair), and the answer is cached by the term's shape (across outputs, and across runs on disk).
4. For every element of C the solver is asked whether C[i][j] can differ from each accepted variant of the
   contract (as the same numpy contract functions compute it, on symbolic lanes). unsat for every element:
   PROVED. A model: the counterexample is run on a real executor (native, Bochs, Unicorn, qemu) and reported
   only if the kernel's C there fails the contract's judgement.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lowp.kernels.registry import Kernel, workspace_symbol

from lowp.conformance.prove.quantized import NotFactored
from lowp.conformance.prove.solver import PROVED, REFUTED, UNKNOWN, check, too_big, variables

BASES = {"A": 0x1000_0000, "B": 0x2000_0000, "C": 0x3000_0000, "work": 0x4000_0000, "stack": 0x5000_0000}
STACK_BYTES = 1 << 20
TYPE_RANGES = {"u8": (0, 255), "s8": (-128, 127)}


@dataclass
class Lemma:
    """One kind of local fact the proof used: `count` terms of the same shape, proved `proved` times, from the
    cache `cached` times."""
    shape: str
    bounds: tuple[int, int]
    inputs: int
    count: int = 0
    proved: bool = True
    seconds: float = 0.0
    cached: int = 0


@dataclass
class Proof:
    kernel: str
    shape: tuple[int, int, int]
    domain: dict
    verdict: str = UNKNOWN
    reason: str = ""
    address: int | None = None
    instruction: str = ""
    seconds: float = 0.0               # wall time of the whole proof
    run_seconds: float = 0.0           # symbolic execution
    solver_seconds: float = 0.0        # the per-element queries
    slowest_query: float = 0.0
    outputs: int = 0                   # elements of C proved
    steps: int = 0                     # instructions executed symbolically
    instructions: dict = field(default_factory=dict)
    lemmas: list[Lemma] = field(default_factory=list)
    variant: str = ""                  # the contract variant C was proved equal to
    counterexample: dict | None = None
    replay: str = ""                   # what confirmed (or could not confirm) a counterexample
    solver: str = "z3"
    params: dict | None = None         # a requantizing kernel's fixed quantization parameters
    sweep_values: int = 0              # accumulator values its output stage was checked on

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape))

    def summary(self) -> str:
        head = f"{self.kernel} {self.shape_text} [{self.domain['name']}]: {self.verdict}"
        if self.verdict == PROVED:
            used = sum(lm.count for lm in self.lemmas)
            swept = f", the output stage on {self.sweep_values} accumulator values" if self.sweep_values else ""
            return (f"{head} ({self.variant}) in {self.seconds:.2f} s: {self.outputs} outputs, {self.steps} "
                    f"instructions, solver {self.solver_seconds:.2f} s{swept}, {used} lemma uses of "
                    f"{len(self.lemmas)} kinds")
        where = f" at {self.address:#x}" if self.address is not None else ""
        text = f"{head}: {self.reason}{where}" + (f" ({self.instruction})" if self.instruction else "")
        if self.counterexample:
            text += f"; {self.replay}"
        return text

    def to_json(self) -> dict:
        d = asdict(self)
        d["shape"] = self.shape_text
        d["summary"] = self.summary()
        return d


# -- the inputs --------------------------------------------------------------------------------------------------------

def domain_of(kernel: Kernel, which: str) -> dict:
    """The value ranges the proof quantifies over: the kernel's claim, or the whole of its operand types."""
    if which == "claimed":
        return {"name": "claimed", "a": tuple(kernel.domain.a), "b": tuple(kernel.domain.b)}
    if which == "full":
        return {"name": "full", "a": TYPE_RANGES[kernel.a_type], "b": TYPE_RANGES[kernel.b_type]}
    raise ValueError(f"domain {which!r}: expected 'claimed' or 'full'")


class Inputs:
    """A and B as bounded byte variables, and the lookup the lemmas and the counterexample need."""

    def __init__(self, kernel: Kernel, M: int, N: int, K: int, domain: dict):
        import z3
        from lowp.isa_models.symbolic.bitvec import SymArray, SymInt
        self.M, self.N, self.K = M, N, K
        self.bounds: dict[str, tuple[int, int, bool]] = {}
        self.vars: dict[str, object] = {}
        self.cells = {}
        for name, rows, cols, typ, (lo, hi) in (("A", M, K, kernel.a_type, domain["a"]),
                                                 ("B", K, N, kernel.b_type, domain["b"])):
            signed = typ.startswith("s")
            grid = np.empty((rows, cols), dtype=object)
            for r in range(rows):
                for c in range(cols):
                    label = f"{name}[{r}][{c}]"
                    var = z3.BitVec(label, 8)
                    self.vars[label] = var
                    self.bounds[label] = (lo, hi, signed)
                    grid[r, c] = SymInt.from_bits(var, signed, lo, hi)
            self.cells[name] = SymArray(grid, np.dtype("i1" if signed else "u1"))

    def constraints(self, variables) -> list:
        """The domain of each input among `variables` (z3 constants); free symbols have none."""
        import z3
        out = []
        for v in variables:
            b = self.bounds.get(str(v))
            if b is None:
                continue
            lo, hi, signed = b
            if signed:
                out += [v >= lo, v <= hi] if (lo, hi) != (-128, 127) else []
            else:
                out += [z3.UGE(v, lo), z3.ULE(v, hi)] if (lo, hi) != (0, 255) else []
        return out

    def arrays(self, model: dict[str, int], kernel: Kernel) -> tuple[np.ndarray, np.ndarray]:
        """The counterexample's A and B: the solver's values, the rest at the value nearest 0 in the domain."""
        out = []
        for name, rows, cols, typ in (("A", self.M, self.K, kernel.a_type), ("B", self.K, self.N, kernel.b_type)):
            dtype = np.int8 if typ.startswith("s") else np.uint8
            x = np.zeros((rows, cols), np.int64)
            for r in range(rows):
                for c in range(cols):
                    label = f"{name}[{r}][{c}]"
                    lo, hi, signed = self.bounds[label]
                    v = model.get(label)
                    if v is None:
                        v = min(max(0, lo), hi)
                    elif signed and v >= 128:
                        v -= 256
                    x[r, c] = v
            out.append(x.astype(dtype))
        return out[0], out[1]


# -- local lemmas ------------------------------------------------------------------------------------------------------

def lemma_cache_path() -> Path:
    from lowp.emulator.x86.native import cache_dir
    return cache_dir() / "prove-lemmas.json"


class Lemmas:
    """lo <= x <= hi for one narrow intermediate, proved over x's own inputs and cached by x's shape: the same
    pair sum at every output and every k has one shape, so it is proved once (and once per machine, on disk)."""

    max_inputs = 16        # bytes of input a lemma may range over (a pair sum has 4; a 4-pair int16 chain 16)
    max_nodes = 400        # terms larger than this are chains, not local facts

    def __init__(self, inputs: Inputs, timeout: float, solver: str, path: Path | None):
        self.inputs, self.timeout, self.solver, self.path = inputs, timeout, solver, path
        self.known: dict[str, bool] = {}
        self.kinds: dict[str, Lemma] = {}
        self.refuted: list[dict] = []           # counterexamples of failed lemmas: candidates for the kernel
        if path is not None and path.is_file():
            try:
                self.known = {k: bool(v) for k, v in json.loads(path.read_text()).items()}
            except (OSError, ValueError):
                self.known = {}
        self._loaded = dict(self.known)

    def __call__(self, x, lo: int, hi: int) -> bool:
        import z3
        if too_big(x.term, self.max_nodes):
            return False                         # a long chain, not a local fact: left to the final query
        found = variables(x.term)
        if len(found) > self.max_inputs or any(str(v) not in self.inputs.bounds for v in found):
            return False                         # not local, or depends on free symbols (no domain to use)
        key, shape = self._key(x, found, lo, hi)
        kind = self.kinds.get(key)
        if kind is None:
            kind = self.kinds[key] = Lemma(shape, (lo, hi), len(found))
        kind.count += 1
        if key in self.known:
            kind.cached += key in self._loaded
            return self.known[key]
        w = x.width
        goal = z3.Or(x.term < z3.BitVecVal(lo, w) if lo >= -(1 << (w - 1)) else z3.BoolVal(False),
                     x.term > z3.BitVecVal(hi, w) if hi < (1 << (w - 1)) else z3.BoolVal(False))
        start = time.perf_counter()
        result, model = check(self.inputs.constraints(found), goal, self.timeout, self.solver)
        kind.seconds += time.perf_counter() - start
        proved = result == "unsat"
        kind.proved = kind.proved and proved
        if result == "sat":
            self.refuted.append(model)
        if result != "unknown":
            self.known[key] = proved
        return proved

    def _key(self, x, found, lo, hi):
        """The term with its inputs renamed in order of appearance, and their domains: equal keys, equal facts."""
        import z3
        ordered = sorted(found, key=lambda v: str(v))
        renamed = [(v, z3.BitVec(f"v{i}", v.size())) for i, v in enumerate(ordered)]
        text = z3.substitute(x.term, *renamed).sexpr() if renamed else x.term.sexpr()
        doms = [self.inputs.bounds[str(v)] for v in ordered]
        digest = hashlib.sha256(f"{text}|{doms}|{lo}|{hi}".encode()).hexdigest()[:24]
        shape = f"{lo} <= term over {len(ordered)} inputs <= {hi}"
        return digest, shape

    def save(self) -> None:
        if self.path is None or self.known == self._loaded:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.known, sort_keys=True))
        tmp.replace(self.path)


# -- the run -----------------------------------------------------------------------------------------------------------

def binary_path(kernel: Kernel) -> Path:
    """The kernel's compiled code as lowp builds it to run it: the x86-64 shared library, or the AArch64 ELF."""
    if kernel.target == "x86-64":
        from lowp.kernels.executors import native_library
        return native_library(kernel)
    if kernel.target == "aarch64":
        from lowp.emulator.build import build
        return Path(build(*kernel.sources, target="bare", flags=(*kernel.build_flags(), "-g"),
                          depends=kernel.depends).path)
    raise Unprovable(f"target {kernel.target!r}: lowp prove runs x86-64 and AArch64 code")


class Unprovable(Exception):
    """The kernel is outside what lowp prove takes (its signature, target or contract): UNKNOWN with the reason."""


def _architecture(kernel: Kernel):
    if kernel.target == "x86-64":
        from lowp.emulator.symbolic import x86 as symbolic_x86
        return symbolic_x86
    from lowp.emulator.symbolic import a64 as symbolic_a64
    return symbolic_a64


def _check_supported(kernel: Kernel) -> None:
    if kernel.quantized:
        from lowp.conformance.prove.quantized import supported
        why = supported(kernel)
        if why:
            raise Unprovable(why)
    elif kernel.signature != "gemm":
        raise Unprovable(f"signature {kernel.signature!r}: lowp prove takes int32 GEMM kernels (signature 'gemm') "
                         "and XNNPACK GEMM ukernels ('xnnpack-gemm')")
    if kernel.vector_bits or kernel.backend == "qemu":
        raise Unprovable("SVE/SME kernels (vector-length agnostic, qemu-only) are not covered by lowp prove")


def _memory(kernel, image, arch, inputs: Inputs, M, N, K, max_steps):
    from lowp.emulator.symbolic import Memory, Region, lane_bytes
    memory = Memory()
    for region in image.regions():
        memory.add(region)
    over = kernel.overread or {}
    memory.add(Region("A", BASES["A"], M * K, overread=over.get("A", 0)), lane_bytes(inputs.cells["A"]))
    memory.add(Region("B", BASES["B"], K * N, overread=over.get("B", 0)), lane_bytes(inputs.cells["B"]))
    stack = memory.add(Region("stack", BASES["stack"], STACK_BYTES, writable=True))
    # The workspace size is the kernel's own answer, computed by its code (concrete for a fixed shape).
    ran = arch.call(image, memory, workspace_symbol(kernel), [M, N, K], stack=stack, max_steps=max_steps)
    size = ran["result"]
    if not isinstance(size, int):
        raise Unprovable("the workspace function's result depends on data")
    memory.add(Region("C", BASES["C"], M * N * 4, writable=True, overread=over.get("C", 0)))
    memory.add(Region("work", BASES["work"], max(size, 1), writable=True, overread=over.get("work", 0)))
    return memory, stack


def prove(kernel: Kernel, shape: tuple[int, int, int], *, domain: str = "claimed", solver: str = "z3",
          timeout: float = 60.0, lemma_timeout: float = 10.0, max_steps: int = 5_000_000,
          lemma_cache: Path | None | bool = True, replay: bool = True, quant: dict | str = "typical",
          quant_seed: int = 0) -> Proof:
    """The proof (or refutation) that `kernel` computes its contract for every input of `domain` at `shape`."""
    from lowp.emulator.symbolic import Image, MemoryViolation, Unsupported, lanes
    from lowp.isa_models.symbolic import bitvec
    M, N, K = shape
    dom = domain_of(kernel, domain)
    proof = Proof(kernel.name, (M, N, K), dom, solver=solver)
    start = time.perf_counter()
    try:
        _check_supported(kernel)
        arch = _architecture(kernel)
        image = Image.load(binary_path(kernel))
        inputs = Inputs(kernel, M, N, K, dom)
        path = lemma_cache_path() if lemma_cache is True else (lemma_cache or None)
        lemmas = Lemmas(inputs, lemma_timeout, solver, path)
        bitvec.LEMMAS = lemmas
        try:
            if kernel.quantized:
                _prove_quantized(proof, kernel, image, arch, inputs, (M, N, K), max_steps, solver, timeout, quant,
                                 quant_seed)
            else:
                memory, stack = _memory(kernel, image, arch, inputs, M, N, K, max_steps)
                run_start = time.perf_counter()
                ran = arch.call(image, memory, kernel.symbol,
                                [M, N, K, BASES["A"], BASES["B"], BASES["C"], BASES["work"],
                                 *kernel.params.values()], stack=stack, max_steps=max_steps)
                proof.run_seconds = time.perf_counter() - run_start
                proof.steps, proof.instructions = ran["steps"], dict(Counter(ran["mnemonics"]).most_common())
                C = lanes(memory.load(BASES["C"], M * N * 4), np.int32).reshape(M, N)
                if not (replay and _lemma_counterexample(proof, kernel, inputs, lemmas)):
                    _judge(proof, kernel, inputs, C, lemmas, solver, timeout)
        finally:
            bitvec.LEMMAS = None
            proof.lemmas = list(lemmas.kinds.values())
            lemmas.save()
    except Unprovable as e:
        proof.verdict, proof.reason = UNKNOWN, str(e)
    except (KeyError, ValueError) as e:       # a missing symbol, an unreadable ELF: named, never a crash
        proof.verdict, proof.reason = UNKNOWN, str(e.args[0] if isinstance(e, KeyError) and e.args else e)
    except MemoryViolation as e:
        proof.verdict, proof.reason = REFUTED, f"{e.kind} outside the buffers: {e.where}"
        proof.address, proof.instruction = e.pc, e.instruction
        proof.counterexample = {"any input": True, "access": str(e)}
        if replay:
            _replay_fault(proof, kernel, M, N, K)
    except Unsupported as e:
        proof.verdict, proof.reason = UNKNOWN, e.reason
        proof.address, proof.instruction = e.address, e.instruction
    except NotFactored as e:
        proof.verdict, proof.reason = UNKNOWN, str(e)
    if proof.verdict == "candidate":
        _confirm(proof, kernel, replay)
        if proof.verdict == REFUTED:
            proof.reason = f"C[{proof.counterexample['element'][0]}][{proof.counterexample['element'][1]}] " \
                           f"differs from {kernel.output if kernel.quantized else kernel.contract}"
    proof.seconds = time.perf_counter() - start
    return proof


def _prove_quantized(proof: Proof, kernel: Kernel, image, arch, inputs: Inputs, shape, max_steps: int, solver: str,
                     timeout: float, quant: dict | str, quant_seed: int) -> None:
    """A requantizing kernel: its fixed parameters, the symbolic ukernel calls, the split judgement
    (lowp.conformance.prove.quantized)."""
    from lowp.conformance.prove import quantized as pq
    M, N, K = shape
    q = quant if isinstance(quant, dict) else pq.fixed_params(kernel, M, N, K, proof.domain, quant, quant_seed)
    proof.params = pq.json_params(q)
    run_start = time.perf_counter()
    C, proof.steps, mnemonics = pq.run(kernel, image, arch, inputs, q, shape, max_steps)
    proof.run_seconds = time.perf_counter() - run_start
    proof.instructions = dict(Counter(mnemonics).most_common())
    pq.judge(proof, kernel, inputs, q, C, solver, timeout)


def quant_of(proof: Proof) -> dict | None:
    """The proof's quantization parameters as the executors take them."""
    from lowp.conformance.prove.quantized import params_from_json
    return None if proof.params is None else params_from_json(proof.params)


def _variants(kernel: Kernel):
    """The contract's accepted variants whose numpy function also runs on symbolic lanes."""
    from lowp.conformance.contracts.int32 import contract
    c = contract(kernel.contract)
    return c, list(c.accepted)


def _judge(proof: Proof, kernel: Kernel, inputs: Inputs, C, lemmas: Lemmas, solver: str, timeout: float):
    import z3
    contract, variants = _variants(kernel)
    expected, skipped = [], []
    for v in variants:
        try:
            expected.append((v.name, v.compute(inputs.cells["A"], inputs.cells["B"])))
        except (NotImplementedError, TypeError, ValueError) as e:
            skipped.append(f"{v.name} ({type(e).__name__}: {e})")
    if not expected:
        raise Unprovable(f"contract {contract.name!r}: no accepted variant has a symbolic form yet: "
                         + "; ".join(skipped))
    M, N = C.shape
    per_variant_failures = {}
    for name, E in expected:
        solver_time, slowest, failure = 0.0, 0.0, None
        for i in range(M):
            for j in range(N):
                c, e = C[i, j], E[i, j]
                t0 = time.perf_counter()
                # The difference in sum-of-monomials form: where the kernel and the contract sum the same
                # products (in any order, with any compensation that cancels), it is 0 on sight.
                difference = z3.simplify(c.bits(32) - e.bits(32), som=True)
                if z3.is_bv_value(difference) and difference.as_long() == 0:
                    result, model = "unsat", {}
                else:
                    goal = difference != 0
                    result, model = check(inputs.constraints(variables(difference)), goal, timeout, solver)
                dt = time.perf_counter() - t0
                solver_time, slowest = solver_time + dt, max(slowest, dt)
                if result != "unsat":
                    failure = (result, model, i, j)
                    break
            if failure:
                break
        proof.solver_seconds += solver_time
        proof.slowest_query = max(proof.slowest_query, slowest)
        if failure is None:
            proof.verdict, proof.variant, proof.outputs = PROVED, name, M * N
            return
        per_variant_failures[name] = failure
    # No accepted variant holds everywhere: a counterexample (sat), or the solver gave up (unknown).
    name, (result, model, i, j) = next(iter(per_variant_failures.items()))
    if result == "unknown":
        proof.verdict, proof.reason = UNKNOWN, (f"solver timeout ({timeout:g} s) on C[{i}][{j}] against "
                                                f"variant {name}")
        return
    A, B = inputs.arrays(model, kernel)
    free = {k: v for k, v in model.items() if k not in inputs.bounds}
    proof.verdict = "candidate"
    proof.reason = f"C[{i}][{j}] can differ from {contract.name} ({name})"
    proof.counterexample = {"A": A.tolist(), "B": B.tolist(), "element": [i, j],
                            "free": free, "skipped_variants": skipped}


def _lemma_counterexample(proof: Proof, kernel: Kernel, inputs: Inputs, lemmas: Lemmas) -> bool:
    """A refuted lemma (an intermediate that does saturate or wrap in the domain) names a few input bytes; with
    every other input at 0 they are often already a counterexample of the whole kernel. Replayed first: a
    confirmed one ends the proof without the large queries."""
    for model in lemmas.refuted[:3]:
        A, B = inputs.arrays(model, kernel)
        proof.verdict = "candidate"
        proof.reason = "an intermediate leaves its range in the domain (a refuted local lemma)"
        proof.counterexample = {"A": A.tolist(), "B": B.tolist(), "element": [0, 0], "free": {},
                                "from": "lemma"}
        _confirm(proof, kernel, True)
        if proof.verdict == REFUTED:
            return True
    proof.verdict, proof.reason, proof.counterexample, proof.replay = UNKNOWN, "", None, ""
    return False


def _confirm(proof: Proof, kernel: Kernel, replay: bool) -> None:
    """A solver counterexample becomes REFUTED only when a real executor's C fails the contract on it."""
    A = np.array(proof.counterexample["A"], dtype=np.int8 if kernel.a_type.startswith("s") else np.uint8)
    B = np.array(proof.counterexample["B"], dtype=np.int8 if kernel.b_type.startswith("s") else np.uint8)
    if not replay:
        proof.verdict, proof.replay = UNKNOWN, "counterexample not replayed (replay off)"
        return
    from lowp.kernels.executors import KernelUnavailable, executor
    ex = executor(kernel)
    why = ex.unavailable()
    if why:
        proof.verdict, proof.replay = UNKNOWN, f"counterexample not confirmed: no executor here ({why})"
        return
    quant = quant_of(proof)
    try:
        got = ex.run(A, B, quant=quant) if quant is not None else ex.run(A, B)
    except KernelUnavailable as e:
        proof.verdict, proof.replay = UNKNOWN, f"counterexample not confirmed: {e}"
        return
    except Exception as e:  # noqa: BLE001 - a fault on replay confirms a wrong kernel as well
        proof.verdict, proof.replay = REFUTED, f"confirmed on {ex.backend}: the call faults ({type(e).__name__}: {e})"
        return
    judgement = _judgement(kernel, got, A, B, quant)
    i, j = proof.counterexample["element"]
    if not judgement.ok and got[i, j] == judgement.expected[i, j]:
        # the inputs were solved for one element (or a lemma's few bytes); name one that does differ
        bad = np.argwhere(got != judgement.expected)
        proof.counterexample["element"] = [int(bad[0][0]), int(bad[0][1])] if bad.size else [i, j]
    i, j = proof.counterexample["element"]
    proof.counterexample.update(C=got.tolist(), expected=judgement.expected.tolist(), matched=judgement.matched)
    if judgement.ok:
        proof.verdict = UNKNOWN
        proof.replay = (f"the solver's counterexample did not reproduce on {ex.backend} (C matches "
                        f"{judgement.matched}): a variant without a symbolic form, or a model/emulator difference")
        return
    proof.verdict = REFUTED
    proof.replay = (f"confirmed on {ex.backend}: C[{i}][{j}] = {got[i, j]}, contract {judgement.expected[i, j]}"
                    + (f" (C equals the known variant {judgement.matched})" if judgement.matched else ""))


@dataclass
class _Judgement:
    ok: bool
    matched: str | None
    expected: np.ndarray


def _judgement(kernel: Kernel, C, A, B, quant):
    """The checks' own judgement of a replayed C: the accumulation contract's, or for a requantizing kernel its
    output contract's on the accepted accumulators (lowp.conformance.search.quantized.judge)."""
    from lowp.conformance.contracts.int32 import contract
    if quant is None:
        return contract(kernel.contract).judge(C, A, B)
    from lowp.conformance.search.quantized import judge
    ok, matched, expected = judge(kernel.output, kernel, A, B, quant, C)
    return _Judgement(ok, matched, np.asarray(expected))


def _replay_fault(proof: Proof, kernel: Kernel, M: int, N: int, K: int) -> None:
    """A memory violation holds for every input (control flow is concrete): replay zeros on a guarded executor."""
    from lowp.kernels.executors import executor
    ex = executor(kernel)
    why = ex.unavailable()
    if why:
        proof.replay = f"not replayed: no executor here ({why})"
        return
    A = np.zeros((M, K), np.int8 if kernel.a_type.startswith("s") else np.uint8)
    B = np.zeros((K, N), np.int8 if kernel.b_type.startswith("s") else np.uint8)
    quant = quant_of(proof)
    try:
        ex.run(A, B, quant=quant) if quant is not None else ex.run(A, B)
    except Exception as e:  # noqa: BLE001 - the fault is the confirmation
        proof.replay = f"confirmed on {ex.backend}: {type(e).__name__}: {e}"
        return
    proof.verdict = UNKNOWN
    proof.replay = f"the access did not fault on {ex.backend} (the guard page was not reached)"


# -- what lowp prove takes, and its reports ---------------------------------------------------------------------------

def provable(kernel: Kernel) -> str | None:
    """None if lowp prove takes the kernel; else why not (its verdict is then UNKNOWN with this reason)."""
    try:
        _check_supported(kernel)
        if kernel.target not in ("x86-64", "aarch64"):
            raise Unprovable(f"target {kernel.target!r}")
    except Unprovable as e:
        return str(e)
    return None


def markdown(proofs: list[Proof]) -> str:
    from tabulate import tabulate
    counts = Counter(p.verdict for p in proofs)
    lines = ["# lowp prove", "",
             f"{len(proofs)} proofs: {counts[PROVED]} PROVED, {counts[REFUTED]} REFUTED, {counts[UNKNOWN]} UNKNOWN. "
             "A PROVED row holds for every input of its domain at its shape, on lowp's instruction models "
             "(docs/prove.md says what that assumes).", ""]
    rows = []
    for p in proofs:
        lemmas = ", ".join(f"{lm.count}x {lm.shape} ({'proved' if lm.proved else 'refuted'}"
                           f"{', cached' if lm.cached else ''})" for lm in p.lemmas) or "none"
        rows.append((p.kernel, p.shape_text, f"{p.domain['name']} A{list(p.domain['a'])} B{list(p.domain['b'])}",
                     p.verdict, f"{p.seconds:.2f}", f"{p.solver_seconds:.2f}", p.steps, lemmas,
                     p.summary().split(": ", 1)[-1] if p.verdict != PROVED else p.variant))
    lines.append(tabulate(rows, headers=("kernel", "shape", "domain", "verdict", "seconds", "solver s",
                                         "instructions", "lemmas", "detail"), tablefmt="github"))
    with_params = [p for p in proofs if p.params is not None]
    if with_params:
        lines += ["", "## Quantization parameters", "",
                  "A requantizing kernel's proof holds for these parameters (A and B range over the domain):", ""]
        lines += [f"- {p.kernel} {p.shape_text}: `{json.dumps(p.params)}`" for p in with_params]
    for p in proofs:
        if p.counterexample and "A" in p.counterexample:
            i, j = p.counterexample["element"]
            lines += ["", f"## {p.kernel} {p.shape_text}: counterexample", "", p.replay, "",
                      f"- A = {p.counterexample['A']}", f"- B = {p.counterexample['B']}",
                      f"- repro: `lowp prove --kernel {p.kernel} --shape {p.shape_text} --domain {p.domain['name']}"
                      + (" --params q.json` (q.json: the parameters above)" if p.params is not None else "`")]
            if "C" in p.counterexample:
                lines.append(f"- C[{i}][{j}] = {p.counterexample['C'][i][j]}, contract "
                             f"{p.counterexample['expected'][i][j]}")
    return "\n".join(lines) + "\n"


def junit_xml(proofs: list[Proof]) -> str:
    """One testcase per proof: PROVED passes, REFUTED fails, UNKNOWN is skipped with its reason."""
    from xml.sax.saxutils import escape, quoteattr
    counts = Counter(p.verdict for p in proofs)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuite name="lowp prove" tests="{len(proofs)}" failures="{counts[REFUTED]}" '
           f'skipped="{counts[UNKNOWN]}" time="{sum(p.seconds for p in proofs):.3f}">']
    for p in proofs:
        out.append(f'  <testcase classname={quoteattr("prove." + p.kernel)} name={quoteattr(p.shape_text)} '
                   f'time="{p.seconds:.3f}">')
        if p.verdict == REFUTED:
            out.append(f'    <failure message={quoteattr(p.reason)}>{escape(p.summary())}</failure>')
        elif p.verdict == UNKNOWN:
            out.append(f'    <skipped message={quoteattr(p.summary())}/>')
        else:
            out.append(f'    <system-out>{escape(p.summary())}</system-out>')
        out.append('  </testcase>')
    out.append('</testsuite>')
    return "\n".join(out) + "\n"
