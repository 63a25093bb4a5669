"""`lowp prove` for requantizing kernels (XNNPACK's GEMM ukernel ABI): the proof in two halves.

A requantizing kernel's output element is (bias + accumulator) carried through a dozen float or fixed-point steps
and a clamp. One solver query on all of it mixes a K-long sum with IEEE arithmetic, which no solver does quickly.
But every output element depends on its inputs only through its own int32 accumulator, so the proof splits there
(docs/prove.md, "Requantizing kernels"):

1. The kernel's term for C[i][j] is searched for the accumulator it factors through: the deepest bit-vector subterm
   X that every path to an input byte passes. C[i][j] = F(X) with F a term of one variable.
2. X equals the contract's bias[j] + sum_k (A[i][k] - a_zp)(B[k][j] - b_zp) for every input of the domain: one
   solver query, usually decided by normalising both sums (as for the int32 kernels).
3. F agrees with the output contract's stage for every value that accumulator can take (its interval, a few million
   values at K = 64): F is evaluated on all of them at once (lowp.isa_models.symbolic.sweep), beside the contract's own
   numpy stage on the same values.

The quantization parameters (scales, zero points, bias, clamp) are fixed for a proof: the claim quantified over is
A and B. A value of the accumulator where F and the contract differ becomes inputs by a solver query (X equal to
that value), replayed on a real executor like every counterexample.
"""
from __future__ import annotations

import time

import numpy as np

from lowp.kernels.registry import Kernel

BUFFER_STRIDE = 0x1000_0000       # each buffer of the invocation at its own base, far apart
STACK_BASE, STACK_BYTES = 0x7000_0000, 1 << 20
MAX_SWEEP = 1 << 26               # accumulator values evaluated, at most (K = 1024 of s8 x s8 is 2^25)
CHUNK = 1 << 18


class NotFactored(Exception):
    """The output element does not factor through one accumulator (UNKNOWN, with the reason)."""


def supported(kernel: Kernel) -> str | None:
    """None if the split proof takes this quantized kernel, else why not."""
    if kernel.signature != "xnnpack-gemm":
        return (f"signature {kernel.signature!r}: lowp prove takes XNNPACK GEMM ukernels ('xnnpack-gemm') of the "
                "quantized signatures so far")
    from lowp.kernels.abi import ukernel
    d = ukernel(kernel).d
    if d.weight_bits != 8 or d.blockwise:
        return f"{kernel.xnnpack['datatype']}: sub-byte (4-bit, 2-bit) and blockwise weights are not laid out " \
               "symbolically yet"
    if d.dynamic:
        return f"{kernel.xnnpack['datatype']}: dynamically quantized (float output, per-row parameters) not yet"
    return None


STYLES = ("typical", "ends", "limits")


def fixed_params(kernel: Kernel, M: int, N: int, K: int, domain: dict, style: str = "typical", seed: int = 0) -> dict:
    """The parameters of the proof: the conformance draw of `style` ('typical' like XNNPACK's tester, 'ends' the
    documented domain's ends: narrow clamps, extreme zero points) for inputs of the domain at this shape."""
    from lowp.conformance.search.quantized import draw_params
    if style not in STYLES:
        raise ValueError(f"parameter style {style!r}: expected one of {', '.join(STYLES)} or a JSON file")
    rng = np.random.default_rng(seed)
    A = rng.integers(domain["a"][0], domain["a"][1] + 1, (M, K)).astype(kernel.a_dtype)
    B = rng.integers(domain["b"][0], domain["b"][1] + 1, (K, N)).astype(kernel.b_dtype)
    return draw_params(kernel, A, B, seed, style)


def json_params(q: dict) -> dict:
    return {k: (np.asarray(v).tolist()) for k, v in q.items()}


def params_from_json(d: dict) -> dict:
    """Parameters as the executors take them: per-channel lists as int32 or float32 arrays, scalars as they are."""
    if not isinstance(d, dict):
        raise ValueError(f"quantization parameters: expected a JSON object, got {type(d).__name__}")
    out = {}
    for key, value in d.items():
        a = np.asarray(value)
        if a.ndim:
            out[key] = a.astype(np.float32) if a.dtype.kind == "f" else a.astype(np.int32)
        else:
            out[key] = value
    return out


# -- the symbolic invocation ---------------------------------------------------------------------------------------------

def _weight_bytes(kernel: Kernel, B, q: dict, K: int, N: int) -> list:
    """The packed weights with B's bytes symbolic: the layout of lowp.kernels.xnnpack.pack_weights (weight_blocks),
    the column ints (bias less the zero-point terms) as B's symbolic sums, the scales as numbers."""
    from lowp.emulator.symbolic import const_bytes, int_bytes, lane_bytes
    from lowp.kernels.abi import ukernel
    from lowp.kernels.xnnpack import column_floats, column_ints, weight_blocks, weight_padding
    u = ukernel(kernel)
    ints = column_ints(u, B, q)
    floats = [np.asarray(f, np.float32).view(np.uint32) for f in column_floats(u, q)]
    weights = lane_bytes(B)
    pad = const_bytes(weight_padding(u, q), 1)[0]
    out = []
    for b, taps in weight_blocks(K, N, nr=u.nr, kr=u.kr, sr=u.sr):
        columns = range(b * u.nr, (b + 1) * u.nr)
        for n in columns:
            out += int_bytes(ints.data[n], 4) if n < N else const_bytes(0, 4)
        out += [weights[i] if i >= 0 else pad for i in taps]
        for f in floats:
            for n in columns:
                out += const_bytes(int(f[n]) if n < N else 0, 4)
    return out


def memory(kernel: Kernel, image, inputs, q: dict, M: int, N: int, K: int):
    """(invocation, memory, buffer bases, stack): the ukernel calls' buffers with A's and B's bytes symbolic."""
    from lowp.emulator.symbolic import Memory, Region, const_bytes, lane_bytes
    from lowp.kernels import abi
    inv = abi.invocation(kernel, np.zeros((M, K), kernel.a_dtype), np.zeros((K, N), kernel.b_dtype), q, seed=0,
                         work_seed=None)
    if inv.pointers:
        raise NotFactored("an indirection buffer (IGEMM) is not laid out symbolically yet")
    mem = Memory()
    for region in image.regions():
        mem.add(region)
    over = kernel.overread or {}
    bases = {}
    for i, (name, array) in enumerate(inv.buffers.items()):
        raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        bases[name] = base = BUFFER_STRIDE * (i + 1)
        if name == "A":
            content = lane_bytes(inputs.cells["A"])
        elif name == "w":
            content = _weight_bytes(kernel, inputs.cells["B"], q, K, N)
        elif name in inv.writable:
            content = None                      # read before written: free symbols
        else:
            content = [b for v in raw for b in const_bytes(int(v), 1)]
        if content is not None and len(content) != raw.size:
            raise AssertionError(f"{name}: {len(content)} symbolic bytes for a {raw.size}-byte buffer")
        mem.add(Region(name, base, raw.size, writable=name in inv.writable, overread=over.get(name, 0)), content)
    stack = mem.add(Region("stack", STACK_BASE, STACK_BYTES, writable=True))
    return inv, mem, bases, stack


def run(kernel: Kernel, image, arch, inputs, q: dict, shape, max_steps: int):
    """Every ukernel call of the invocation, symbolically; returns (C's element terms (M, N), steps, mnemonics)."""
    from lowp.emulator.symbolic import lanes
    M, N, K = shape
    inv, mem, bases, stack = memory(kernel, image, inputs, q, M, N, K)
    steps, mnemonics = 0, []
    for symbol, args in inv.calls:
        values = [bases[a.buffer] + a.offset if hasattr(a, "buffer") else int(a) for a in args]
        ran = arch.call(image, mem, symbol, values, stack=stack, max_steps=max_steps)
        steps += ran["steps"]
        mnemonics += ran["mnemonics"]
    layout = inv.layouts["C"]
    item = np.dtype(layout.dtype).itemsize
    offsets = layout.offsets()
    C = np.empty((M, N), dtype=object)
    for (i, j), off in np.ndenumerate(offsets):
        # read as its own type: the stored lane's exact value comes back (an s8 read as u8 would be a new term, and
        # a narrowing the lemmas would try to prove)
        C[i, j] = lanes(mem.load(bases["C"] + int(off), item), layout.dtype).data[0].bits(8 * item)
    return C, steps, mnemonics


# -- the split ------------------------------------------------------------------------------------------------------------

def factor(term):
    """(X, F): the deepest bit-vector subterm X of `term` that every path to a free variable passes, and F, the
    term with X replaced by the variable `x`; (None, term) for a constant. NotFactored if none (the element
    depends on its inputs by two paths)."""
    import z3
    from lowp.isa_models.symbolic.sweep import walk
    order = walk(term)
    leaves = {t.get_id() for t, kids in order if not kids and z3.is_const(t)
              and t.decl().kind() == z3.Z3_OP_UNINTERPRETED}
    if not leaves:
        return None, term                    # a constant: right only if the contract's output is one too
    reach, height = _reach(order, leaves), {}
    for t, kids in order:
        height[t.get_id()] = max((height[k] + 1 for k in kids), default=0)
    everything = reach[term.get_id()]
    candidates = sorted((t for t, _ in order if reach[t.get_id()] == everything and t.get_id() not in leaves),
                        key=lambda t: height[t.get_id()])
    for X in candidates:
        # at least the int32 accumulator's width: a narrower cut is a requantized value, not the accumulator
        if z3.is_bv(X) and 32 <= X.size() <= 64 and not _reach(order, leaves, cut=X.get_id())[term.get_id()]:
            return X, z3.substitute(term, (X, z3.BitVec("x", X.size())))
    raise NotFactored("the output element does not factor through one accumulator (it depends on its inputs by "
                      "more than one path)")


def _reach(order, leaves: set[int], cut: int | None = None) -> dict[int, int]:
    """For each subterm, the set (a bit mask) of free variables it reaches, not passing through `cut`."""
    bit = {key: 1 << n for n, key in enumerate(sorted(leaves))}
    reach = {}
    for t, kids in order:
        key = t.get_id()
        r = bit.get(key, 0)
        for k in kids:
            r |= reach[k]
        reach[key] = 0 if key == cut else r
    return reach


class Stages:
    """The output contract's accepted stages on every accumulator value (a column per output channel), computed
    when first asked for: a kernel that matches the first one never pays for the others."""

    def __init__(self, kernel: Kernel, q: dict, values: np.ndarray, N: int):
        from lowp.conformance.search.quantized import output_contract
        self.kernel, self.q, self.values, self.N = kernel, q, values, N
        self.names = list(output_contract(kernel.output).accepted)
        self._done: dict[str, np.ndarray | None] = {}

    def __getitem__(self, name: str) -> np.ndarray | None:
        """(values, N) as the unsigned bits a store of the element holds; None where the stage is undefined."""
        from lowp.isa_models.requant import OUTPUT_STAGES
        if name not in self._done:
            grid = np.ascontiguousarray(np.broadcast_to(self.values[:, None], (self.values.size, self.N)),
                                        dtype=np.int32)
            try:
                r = np.asarray(OUTPUT_STAGES[name].compute(grid, self.q, self.kernel.c_type))
                self._done[name] = r.view(f"u{r.dtype.itemsize}")
            except (ArithmeticError, ValueError):
                self._done[name] = None             # undefined there: that path cannot be the kernel's
        return self._done[name]


def judge(proof, kernel: Kernel, inputs, q: dict, C, solver: str, timeout: float) -> None:
    """Steps 2 and 3 for every element; sets the proof's verdict (or a 'candidate' counterexample)."""
    from lowp.isa_models.symbolic.sweep import canonical, post_order
    from lowp.conformance.contracts.int32 import contract as accumulation_contract
    from lowp.conformance.search.quantized import accumulators
    from lowp.conformance.prove.solver import PROVED, UNKNOWN
    M, N = C.shape
    bias = np.asarray(q.get("bias", np.zeros(N, np.int32)), np.int64)
    for variant in accumulation_contract(kernel.contract).accepted:
        try:
            acc = accumulators(variant, inputs.cells["A"], inputs.cells["B"], q)
        except (NotImplementedError, TypeError, ValueError):
            continue
        lo = min(c.lo for c in acc.data.reshape(-1))
        hi = max(c.hi for c in acc.data.reshape(-1))
        if hi - lo + 1 > MAX_SWEEP:
            proof.verdict, proof.reason = UNKNOWN, (f"the accumulator takes {hi - lo + 1} values: more than the "
                                                    f"{MAX_SWEEP} a proof sweeps")
            return
        t0 = time.perf_counter()
        values = np.arange(lo, hi + 1, dtype=np.int64)
        outputs = {}                   # F's text and column -> F on every value (rows usually share one F)
        where = {}                     # the same key -> the first element with it
        for i in range(M):
            for j in range(N):
                X, F = factor(C[i, j])
                target = acc.data[i, j] + int(bias[j])
                if X is not None and not _same_accumulator(proof, kernel, inputs, X, target, solver, timeout,
                                                           (i, j)):
                    return
                order = post_order(F)
                key = (canonical(order), j)       # the rows of a column usually compute one F
                if key not in outputs:
                    width = 32 if X is None else X.size()
                    outputs[key], where[key] = _sweep(F, order, width, values + int(bias[j])), (i, j)
        stages = Stages(kernel, q, values, N)
        first_bad = None
        for name in stages.names:
            want = stages[name]
            if want is None:
                continue
            bad = [(key, got != want[:, key[1]]) for key, got in outputs.items()]
            bad = [(key, mask) for key, mask in bad if mask.any()]
            if not bad:
                proof.solver_seconds += time.perf_counter() - t0
                proof.sweep_values = int(values.size)
                proof.verdict, proof.variant, proof.outputs = PROVED, f"{variant.name} + {name}", M * N
                return
            first_bad = first_bad or (name, where[bad[0][0]], bad[0][1])
        proof.solver_seconds += time.perf_counter() - t0
        name, (i, j), mask = first_bad
        _counterexample(proof, inputs, kernel, q, variant, values, mask, (i, j), name, solver, timeout)
        return
    raise NotFactored(f"contract {kernel.contract!r}: no accepted accumulation variant has a symbolic form")


def _same_accumulator(proof, kernel, inputs, X, target, solver, timeout, element) -> bool:
    """Step 2: X = the contract's bias + accumulator, for every input of the domain. False: the proof's verdict
    says why not (a candidate counterexample, or a timeout)."""
    import z3
    from lowp.conformance.prove.solver import UNKNOWN, check, variables
    w = X.size()
    difference = z3.simplify(X - target.at(w), som=True)
    if z3.is_bv_value(difference) and difference.as_long() == 0:
        return True
    result, model = check(inputs.constraints(variables(difference)), difference != 0, timeout, solver)
    if result == "unsat":
        return True
    i, j = element
    if result == "unknown":
        proof.verdict, proof.reason = UNKNOWN, f"solver timeout ({timeout:g} s) on C[{i}][{j}]'s accumulator"
        return False
    A, B = inputs.arrays(model, kernel)
    proof.verdict = "candidate"
    proof.reason = f"C[{i}][{j}]'s accumulator can differ from bias + the contract's accumulator"
    proof.counterexample = {"A": A.tolist(), "B": B.tolist(), "element": [i, j],
                            "free": {k: v for k, v in model.items() if k not in inputs.bounds}}
    return False


def _sweep(F, order, width: int, xs: np.ndarray) -> np.ndarray:
    """Step 3: F (walked: `order`) on every accumulator value, in chunks (each node holds one chunk's values)."""
    from lowp.isa_models.symbolic.sweep import evaluate
    out = np.empty(xs.size, np.dtype(f"u{max(1, F.size() // 8)}"))
    mask = np.int64((1 << width) - 1) if width < 64 else None
    for start in range(0, xs.size, CHUNK):
        part = xs[start:start + CHUNK]
        x = (part & mask if mask is not None else part).astype(np.uint64)
        out[start:start + CHUNK] = np.broadcast_to(evaluate(F, {"x": x}, order), part.shape)
    return out


def _counterexample(proof, inputs, kernel, q, variant, values, bad, element, stage: str, solver, timeout) -> None:
    """Inputs whose accumulator at `element` is one of the values where the kernel and the contract differ
    (`bad`, over `values`): random inputs of the domain first (bad values are rarely rare: a wrong rounding is
    wrong at half of them), the solver on one bad value if none lands."""
    from lowp.conformance.search.quantized import accumulators
    from lowp.conformance.prove.solver import UNKNOWN
    i, j = element
    found = _sampled(kernel, inputs, q, variant, values, bad, element) or \
        _solved(inputs, kernel, q, variant, int(values[np.flatnonzero(bad)[0]]), element, solver, timeout)
    if found is None:
        proof.verdict = UNKNOWN
        proof.reason = (f"C[{i}][{j}] differs from {stage} at {int(bad.sum())} accumulator values, but neither "
                        "random inputs nor the solver reached one")
        return
    A, B = found
    value = int(np.asarray(accumulators(variant, A, B, q))[i, j])
    proof.verdict = "candidate"
    proof.reason = f"C[{i}][{j}] differs from {kernel.output} ({stage}) where the accumulator is {value}"
    proof.counterexample = {"A": A.tolist(), "B": B.tolist(), "element": [i, j], "free": {},
                            "accumulator": value}


def _sampled(kernel, inputs, q, variant, values, bad, element, tries: int = 64, batch: int = 4096):
    """(A, B) drawn from the domain whose accumulator at `element` lands on a bad value, or None. The draw aims
    with the exact sum of (a - a_zp)(b - b_zp) over a row of A and a column of B; the contract's own accumulator
    of the pick decides."""
    from lowp.conformance.search.quantized import accumulators
    i, j = element
    rng = np.random.default_rng(0)
    (alo, ahi), (blo, bhi) = inputs.bounds["A[0][0]"][:2], inputs.bounds["B[0][0]"][:2]
    a_zp = int(np.broadcast_to(np.asarray(q.get("a_zero_point", 0)), (inputs.M,))[i])
    b_zp = int(q.get("b_zero_point", 0))
    for _ in range(tries):
        rows = rng.integers(alo, ahi + 1, (batch, inputs.K))
        cols = rng.integers(blo, bhi + 1, (batch, inputs.K))
        aimed = ((rows - a_zp) * (cols - b_zp)).sum(axis=1)
        inside = (aimed >= values[0]) & (aimed <= values[-1])
        for n in np.flatnonzero(inside & bad[np.clip(aimed - values[0], 0, values.size - 1)])[:8]:
            A = np.zeros((inputs.M, inputs.K), kernel.a_dtype)
            B = np.zeros((inputs.K, inputs.N), kernel.b_dtype)
            A[i, :], B[:, j] = rows[n], cols[n]
            acc = int(np.asarray(accumulators(variant, A, B, q))[i, j])
            if values[0] <= acc <= values[-1] and bad[acc - values[0]]:
                return A, B
    return None


def _solved(inputs, kernel, q, variant, value: int, element, solver, timeout):
    """(A, B) whose accumulator at `element` is `value`, by the solver; None if it finds none in time."""
    import z3
    from lowp.conformance.search.quantized import accumulators
    from lowp.conformance.prove.solver import check, variables
    i, j = element
    target = accumulators(variant, inputs.cells["A"], inputs.cells["B"], q).data[i, j]
    goal = target.at(64) == z3.BitVecVal(value, 64)
    result, model = check(inputs.constraints(variables(goal)), goal, timeout, solver)
    return inputs.arrays(model, kernel) if result == "sat" else None
