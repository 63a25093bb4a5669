"""Symbolic execution of the built-in AArch64 kernels (lowp.emulator.symbolic.a64): the compiled code run with
symbolic A and B for one shape, and every element of C proved equal to the contract sum_k A[i][k] * B[k][j]
(wrapped to int32) under the kernel's domain; a wrong expectation is refuted, an instruction without a handler, a
data-dependent branch or address is UNKNOWN (Unsupported), a store outside C a MemoryViolation.

How the proofs are discharged: the models keep a lane's term the exact integer wherever its interval fits (no
wrap), so C's terms are exact sums of products. SDOT, SMMLA and the 24x8 SMLAL kernel add the products in the
contract's order and z3 proves them equal at once; gemmlowp's kernel pairs k with k+8 (SMULL + SMLAL2), then
adjacent pairs (SADALP), then lanes (ADDV): the same sum, reassociated. A bit-vector solver does not see through
that (one element of 4x4x16 ran past 10 minutes, even with the products abstracted), so `exact_int` reads an
exact term as an integer polynomial (each addition and product checked to fit its width by intervals from the
domain; anything else, e.g. a wrap, and it gives up) and z3's polynomial normal form decides it. Where that route
does not apply, the bit-vector query decides.

Measured here (2 shared cores; emulation, then the proof of every element): sdot_s8_neon 4x8x16 0.2 s + 0.3 s,
8x16x64 1.5 s + 4.4 s; smmla_s8_neon 4x4x8 0.05 s + 0.03 s, 8x8x32 0.4 s + 0.8 s; gemmlowp_s8_neon 4x4x16 0.1 s +
0.1 s, 8x8x64 1.2 s + 1.7 s; q46_mlal_24x8_neon 3x8x4 0.1 s + 0.02 s, 24x8x32 1.3 s + 1.7 s, 4x8x300 (past one
flush of 258) 5.2 s + 2.7 s.
"""
from __future__ import annotations

import time
from functools import lru_cache

import numpy as np
import pytest
import z3

from lowp.emulator import build_text
from lowp.emulator.build import build
from lowp.emulator.symbolic import Image, Memory, MemoryViolation, Region, Unsupported, lane_bytes, lanes
from lowp.emulator.symbolic.a64 import call
from lowp.isa_models.symbolic.bitvec import SymArray, SymInt
from lowp.kernels.registry import kernel, workspace_symbol

PROOF_TIMES: dict[tuple, dict] = {}        # (kernel, M, N, K) -> seconds of the run and of the proof

A_BASE, B_BASE, C_BASE, WORK_BASE, STACK_BASE = 0x2000_0000, 0x3000_0000, 0x4000_0000, 0x5000_0000, 0x7000_0000


@lru_cache(maxsize=None)
def image_of(name: str) -> Image:
    k = kernel(name)
    return Image.load(build(*k.sources, target="bare", flags=(*k.build_flags(), "-g"), depends=k.depends).path)


def stack() -> Region:
    return Region("stack", STACK_BASE, 1 << 16, writable=True)


def symbolic_matrix(name: str, rows: int, cols: int, lo: int, hi: int) -> list[list[SymInt]]:
    """Fresh 8-bit variables, read signed or unsigned as the domain says, with the domain as their interval."""
    return [[SymInt.from_bits(z3.BitVec(f"{name}[{i}][{j}]", 8), lo < 0, lo, hi) for j in range(cols)]
            for i in range(rows)]


def workspace(name: str, M: int, N: int, K: int) -> int:
    """The kernel's own <prefix>_workspace(M, N, K), run symbolically too (its result is concrete)."""
    x0 = call(image_of(name), Memory(), workspace_symbol(kernel(name)), [M, N, K], stack=stack())["x0"]
    assert isinstance(x0, int)
    return x0


def run_gemm(name: str, M: int, N: int, K: int, domain=None, c_elements: int | None = None):
    """Run the kernel's gemm on symbolic A and B: (A, B, C lanes (M, N), the call's result)."""
    k = kernel(name)
    (alo, ahi), (blo, bhi) = domain or (k.domain.a, k.domain.b)
    A, B = symbolic_matrix("A", M, K, alo, ahi), symbolic_matrix("B", K, N, blo, bhi)
    memory = Memory()
    memory.add(Region("A", A_BASE, M * K), lane_bytes(SymArray.of(A, np.int8 if alo < 0 else np.uint8)))
    memory.add(Region("B", B_BASE, K * N), lane_bytes(SymArray.of(B, np.int8 if blo < 0 else np.uint8)))
    memory.add(Region("C", C_BASE, 4 * (M * N if c_elements is None else c_elements), writable=True))
    memory.add(Region("work", WORK_BASE, max(workspace(name, M, N, K), 1), writable=True))
    args = [M, N, K, A_BASE, B_BASE, C_BASE, WORK_BASE, *k.params.values()]
    result = call(image_of(name), memory, k.symbol, args, stack=stack())
    C = lanes(memory.load(C_BASE, 4 * M * N), np.int32).reshape(M, N)
    return A, B, C, result


def contract(A, B, i: int, j: int) -> SymInt:
    """sum_k A[i][k] * B[k][j], exact (its 32 low bits are the int32 contract)."""
    return sum((A[i][k] * B[k][j] for k in range(len(B))), SymInt.const(0))


# -- proving C[i][j] == contract ---------------------------------------------------------------------------------------

def exact_int(t, leaves: dict, memo: dict):
    """(an integer term, lo, hi) equal to the signed value of bit-vector term t, or None where that is not shown:
    leaves map a variable's term to its integer and domain; every addition, subtraction and product is checked to
    fit its width (then the bit-vector operation is the integer one), an Extract to keep a value that fits."""
    key = t.get_id()
    if key in memo and memo[key][0].eq(t):     # the term is kept: a freed AST's id may be reused
        return memo[key][1]
    out = _exact_int(t, leaves, memo)
    memo[key] = (t, out)
    return out


def _fits(lo: int, hi: int, bits: int) -> bool:
    return -(1 << (bits - 1)) <= lo and hi < (1 << (bits - 1))


def _exact_int(t, leaves, memo):
    leaf = leaves.get(t.get_id())
    if leaf is not None and leaf[0].eq(t):
        return leaf[1]
    if z3.is_bv_value(t):
        v = t.as_signed_long()
        return z3.IntVal(v), v, v
    kind, n = t.decl().kind(), t.size()
    args = [exact_int(a, leaves, memo) for a in t.children()]
    if any(a is None for a in args):
        return None
    if kind == z3.Z3_OP_SIGN_EXT:
        return args[0]
    if kind == z3.Z3_OP_ZERO_EXT and args[0][1] >= 0:
        return args[0]
    if kind == z3.Z3_OP_EXTRACT and t.params()[1] == 0 and _fits(args[0][1], args[0][2], n):
        return args[0]
    if kind in (z3.Z3_OP_BADD, z3.Z3_OP_BSUB, z3.Z3_OP_BMUL):
        term, lo, hi = args[0]
        for a, alo, ahi in args[1:]:
            if kind == z3.Z3_OP_BADD:
                term, lo, hi = term + a, lo + alo, hi + ahi
            elif kind == z3.Z3_OP_BSUB:
                term, lo, hi = term - a, lo - ahi, hi - alo
            else:
                corners = [x * y for x in (lo, hi) for y in (alo, ahi)]
                term, lo, hi = term * a, min(corners), max(corners)
        return (term, lo, hi) if _fits(lo, hi, n) else None
    if kind == z3.Z3_OP_BNEG and _fits(-args[0][2], -args[0][1], n):
        return -args[0][0], -args[0][2], -args[0][1]
    return None


def domain_of(A, B) -> tuple[dict, list]:
    """The leaves (each input's term -> an integer variable and its domain) and the bit-vector domain constraints."""
    leaves, constraints = {}, []
    for x in [x for row in A + B for x in row]:
        name = str(x.term.children()[0] if x.term.decl().kind() == z3.Z3_OP_ZERO_EXT else x.term)
        leaves[x.term.get_id()] = (x.term, (z3.Int(name), x.lo, x.hi))
        constraints.append(z3.And(x.at(32) >= x.lo, x.at(32) <= x.hi))
    return leaves, constraints


def prove_equal(c: SymInt, e: SymInt, leaves: dict, constraints: list, memo: dict, timeout_ms: int = 60_000):
    """('proved', how) if C's lane equals the expectation's 32 low bits for every input in the domain, ('refuted',
    a counterexample) if not, ('unknown', why) if the solver gave up."""
    ic, ie = exact_int(c.term, leaves, memo), exact_int(e.term, leaves, memo)
    if ic is not None and ie is not None and z3.simplify(ic[0] - ie[0], som=True).eq(z3.IntVal(0)):
        return "proved", "exact polynomial"
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*constraints)
    s.add(c.bits(32) != e.bits(32))
    verdict = s.check()
    if verdict == z3.unsat:
        return "proved", "bit-vector"
    if verdict == z3.sat:
        return "refuted", s.model()
    return "unknown", s.reason_unknown()


def prove_all(A, B, C) -> tuple[float, dict]:
    leaves, constraints = domain_of(A, B)
    memo, how = {}, {}
    t0 = time.perf_counter()
    M, N = C.shape
    for i in range(M):
        for j in range(N):
            verdict, detail = prove_equal(C[i, j], contract(A, B, i, j), leaves, constraints, memo)
            assert verdict == "proved", (i, j, verdict, detail)
            how[detail] = how.get(detail, 0) + 1
    return time.perf_counter() - t0, how


# -- the kernels ----------------------------------------------------------------------------------------------------

SHAPES = [
    ("sdot_s8_neon", 4, 8, 16, None),
    ("sdot_s8_neon", 5, 9, 17, None),                 # two tiles each way, padded K
    ("smmla_s8_neon", 4, 4, 8, None),
    ("smmla_s8_neon", 3, 5, 11, None),
    ("gemmlowp_s8_neon", 4, 4, 16, None),             # A in [-127, 127]: the kernel's domain
    ("q46_mlal_24x8_neon", 3, 8, 4, ((-11, 11), (-11, 11))),
    ("q46_mlal_24x8_neon", 2, 9, 5, ((-11, 11), (-11, 11))),
    ("u4_mlal_24x8_neon", 2, 8, 4, None),             # unsigned u4 x u4 through UMLAL and UADDW
]


@pytest.mark.parametrize("name,M,N,K,domain", SHAPES, ids=[f"{s[0]}-{s[1]}x{s[2]}x{s[3]}" for s in SHAPES])
def test_kernel_proved(name, M, N, K, domain, record_property):
    t0 = time.perf_counter()
    A, B, C, result = run_gemm(name, M, N, K, domain)
    ran = time.perf_counter() - t0
    proof, how = prove_all(A, B, C)
    PROOF_TIMES[(name, M, N, K)] = dict(run=round(ran, 3), proof=round(proof, 3), steps=result["steps"], how=how)
    record_property("times", PROOF_TIMES[(name, M, N, K)])
    print(name, (M, N, K), PROOF_TIMES[(name, M, N, K)])
    modeled = {"sdot_s8_neon": "sdot", "smmla_s8_neon": "smmla", "gemmlowp_s8_neon": "sadalp",
               "q46_mlal_24x8_neon": "smlal2", "u4_mlal_24x8_neon": "umlal2"}[name]
    assert result["mnemonics"][modeled] > 0


def test_a_wrong_expectation_is_refuted():
    """The check can fail: C[0][0] against a contract with one product from the wrong column."""
    A, B, C, _ = run_gemm("sdot_s8_neon", 4, 8, 16)
    leaves, constraints = domain_of(A, B)
    wrong = contract(A, B, 0, 0) + A[0][3] * B[3][1]
    verdict, model = prove_equal(C[0, 0], wrong, leaves, constraints, {})
    assert verdict == "refuted"
    assert model.eval(A[0][3].at(32) * B[3][1].at(32), model_completion=True).as_long() != 0


def test_a_wrapping_kernel_is_refuted_outside_its_domain():
    """gemmlowp's int16 pair sum wraps when both products are (-128)*(-128): with A's -128 allowed, refuted. (The
    inputs are narrowed to [-128, -127] so the solver's search is small: over all of s8 it takes ~50 s to find
    the four -128s.)"""
    A, B, C, _ = run_gemm("gemmlowp_s8_neon", 1, 1, 9, ((-128, -127), (-128, -127)))   # one pair: k = 0 and 8
    leaves, constraints = domain_of(A, B)
    verdict, model = prove_equal(C[0, 0], contract(A, B, 0, 0), leaves, constraints, {})
    assert verdict == "refuted"
    assert all(model.eval(x.term).as_signed_long() == -128 for x in (A[0][0], A[0][8], B[0][0], B[8][0]))


def test_store_past_c_is_a_memory_violation():
    with pytest.raises(MemoryViolation) as e:
        run_gemm("sdot_s8_neon", 4, 8, 16, c_elements=4 * 8 - 1)
    assert e.value.kind == "store" and "C" in e.value.where


# -- small functions: what stops a run ---------------------------------------------------------------------------------

def assembled(body: str) -> Image:
    source = f".text\n.globl f\n.type f, %function\nf:\n{body}\n.size f, .-f\n"
    return Image.load(build_text(source, suffix=".S", name="symbolic_a64").path)


def bytes_region(memory: Memory, name: str, base: int, n: int) -> list[SymInt]:
    xs = [SymInt.from_bits(z3.BitVec(f"{name}{i}", 8), True) for i in range(n)]
    memory.add(Region(name, base, n), lane_bytes(SymArray.of(xs, np.int8)))
    return xs


def test_unsupported_instruction_is_named_with_its_address():
    image = assembled("mov x1, #1\nrbit w0, w0\nret")
    with pytest.raises(Unsupported) as e:
        call(image, Memory(), "f", [0], stack=stack())
    assert "rbit" in str(e.value) and e.value.address == image.symbol("f") + 4


def test_data_dependent_branch_and_address():
    memory = Memory()
    bytes_region(memory, "A", A_BASE, 16)
    with pytest.raises(Unsupported, match="data-dependent branch"):
        call(assembled("ldrb w8, [x0]\ncbz w8, 1f\nmov x0, #1\n1: ret"), memory, "f", [A_BASE], stack=stack())
    with pytest.raises(Unsupported, match="data-dependent branch"):
        call(assembled("ldrsb w8, [x0]\ncmp w8, #3\ncsel x0, x1, x2, lt\nret"), memory, "f", [A_BASE], stack=stack())
    with pytest.raises(Unsupported, match="data-dependent address"):
        call(assembled("ldrb w8, [x0]\nldrb w0, [x0, x8]\nret"), memory, "f", [A_BASE], stack=stack())


def test_bytes_move_unchanged_through_general_registers():
    """LDRB/LDRSB/LDR W then STRB/STR move the very lanes; memcpy (called by name) does too."""
    memory = Memory()
    xs = bytes_region(memory, "A", A_BASE, 16)
    memory.add(Region("C", C_BASE, 64, writable=True))
    body = ("ldrb w8, [x0], #1\nstrb w8, [x1], #1\nldrsb x9, [x0, #1]\nstrb w9, [x1, #1]\n"
            "ldr w10, [x0, #4]\nstr w10, [x1, #4]\nadd x3, x0, #8\nadd x0, x1, #8\nmov x1, x3\nmov x2, #4\n"
            "b memcpy")                                       # a tail call: memcpy(C + 9, A + 9, 4)
    call(assembled(body), memory, "f", [A_BASE, C_BASE], stack=stack())
    for k in (0, 2, 5, 6, 7, 8, 9, 10, 11, 12):          # C[k] = A[k]: the same term, not an equal one
        assert lanes(memory.load(C_BASE + k, 1), np.int8)[0].term.eq(xs[k].term), k


# -- the handlers against Unicorn, on concrete inputs -------------------------------------------------------------------

FORMS = """
mov x9, #-0x5555555555555556
movk x9, #0x1234, lsl #16
str x9, [x0], #8
adds x10, x1, x2
csinc x11, x1, x2, hs
cset w12, mi
stp x10, x11, [x0], #16
str w12, [x0], #8
subs w10, w1, w2
csel w11, w1, w2, lt
ccmp x1, #3, #4, ne
cneg x12, x2, gt
stp x10, x11, [x0, #8]!
str x12, [x0, #16]
add x0, x0, #24
lsl x10, x1, #7
asr x11, x2, #3
ubfiz x12, x1, #3, #5
stp x10, x11, [x0], #16
sbfx x10, x2, #4, #9
bfi x11, x1, #6, #12
bfxil x12, x2, #2, #7
stp x10, x11, [x0], #16
str x12, [x0], #8
sxtw x10, w2
uxtb w11, w2
madd x12, x1, x2, x10
stp x10, x11, [x0], #16
str x12, [x0], #8
smulh x10, x1, x2
umulh x11, x1, x2
msub x12, x1, x2, x11
stp x10, x11, [x0], #16
str x12, [x0], #8
eor x10, x1, x2, ror #13
bic x11, x2, x1, lsr #2
orr w12, w1, #0xff00
stp x10, x11, [x0], #16
str x12, [x0], #8
sdiv x10, x2, x1
udiv x11, x2, x1
neg x12, x2, lsl #1
stp x10, x11, [x0], #16
str x12, [x0], #8
add x10, x1, w2, sxtw #2
sub x11, x1, w2, uxtb
lsr x12, x2, x1
stp x10, x11, [x0], #16
str x12, [x0], #8
ld1 {v0.16b, v1.16b}, [x3], #32
ld1r {v2.4s}, [x3]
movi v3.16b, #0
ld1 {v3.h}[5], [x3], x4
ldr q4, [x3, #-16]
zip1 v5.4s, v0.4s, v1.4s
zip2 v6.8h, v0.8h, v1.8h
uzp1 v7.16b, v0.16b, v1.16b
trn2 v16.4s, v0.4s, v1.4s
ext v17.16b, v0.16b, v1.16b, #5
mov v0.s[1], w1
mov v1.d[0], v4.d[1]
dup v18.8h, v2.h[3]
dup v19.4s, w2
movi v20.4s, #0x12, lsl #8
mvni v21.8h, #0x34
umov w10, v0.h[3]
smov x11, v1.b[9]
fmov d22, x2
add v23.4s, v0.4s, v1.4s
sub v24.8h, v1.8h, v0.8h
addv h25, v0.8h
eor v26.16b, v0.16b, v1.16b
stp x10, x11, [x0], #16
st1 {v0.16b, v1.16b, v2.16b, v3.16b}, [x0], #64
st1 {v4.16b, v5.16b, v6.16b, v7.16b}, [x0], #64
st1 {v16.16b, v17.16b, v18.16b, v19.16b}, [x0], #64
st1 {v20.16b, v21.16b, v22.16b, v23.16b}, [x0], #64
st1 {v24.16b, v25.16b, v26.16b}, [x0], #48
st1 {v0.s}[2], [x0], #4
ret
"""


@pytest.mark.emulated
@pytest.mark.parametrize("x1,x2", [(5, -77), (-3, 0x7FFF_FFFF_1234), (1 << 63, 1), (0x1234_5678_9ABC, -(1 << 40))])
def test_handlers_match_unicorn(x1, x2):
    from lowp.emulator import Machine
    source = ".text\n.globl f\n.type f, %function\nf:\n" + FORMS + ".size f, .-f\n"
    binary = build_text(source, suffix=".S", name="symbolic_a64_forms")
    data = np.arange(64, dtype=np.uint8) * 37 % 251
    out = Machine(binary).call("f", np.zeros(1024, np.uint8), x1, x2, data, 6,
                               names=["out", "x1", "x2", "data", "x4"]).named["out"]
    memory = Memory()
    memory.add(Region("out", C_BASE, 1024, writable=True))
    memory.add(Region("data", A_BASE, 64), [b for v in data.tolist() for b in lane_bytes(SymArray.of([v], np.uint8))])
    call(Image.load(binary.path), memory, "f", [C_BASE, x1, x2, A_BASE, 6], stack=stack())
    used = max(memory.written) - C_BASE + 1
    symbolic = [k for k in range(used) if C_BASE + k in memory.written and memory.data[C_BASE + k].value is None]
    assert not symbolic, (symbolic, [memory.data[C_BASE + k] for k in symbolic[:2]])
    got = bytes(memory.data[C_BASE + k].value if C_BASE + k in memory.written else 0 for k in range(used))
    assert used > 400 and got == out[:used].tobytes()
