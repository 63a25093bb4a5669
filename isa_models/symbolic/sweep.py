"""A bit-vector term evaluated on numpy arrays: every value of its free variables at once.

lowp prove splits a requantizing kernel's output in two (docs/prove.md, "Requantizing kernels"): the int32
accumulator, proved equal to the contract's by the solver, and what the kernel does to it, a function of that one
integer. The second half is checked by evaluating the kernel's own term for every value the accumulator can take,
a few million at most, which numpy does in a fraction of a second where a solver would struggle with the
floating-point steps.

Bit-vectors of up to 64 bits are held as uint64 arrays (their unsigned value), booleans as bool arrays, IEEE
binary32 as float32 arrays: numpy's float32 arithmetic is IEEE with round to nearest even, the only rounding mode
evaluated (any other is refused). A term outside these sorts or operations raises NotImplementedError naming it.
"""
from __future__ import annotations

import numpy as np
import z3

_FLOAT32 = (8, 24)


def _mask(width: int) -> np.uint64:
    return np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFF_FFFF_FFFF_FFFF)


def _signed(v, width: int) -> np.ndarray:
    """The unsigned `width`-bit values read as two's complement int64."""
    v = np.asarray(v, np.uint64)
    if width == 64:
        return v.view(np.int64)
    sign = np.uint64(1 << (width - 1))
    return (v ^ sign).astype(np.int64) - np.int64(1 << (width - 1))


def _unsigned(v, width: int) -> np.ndarray:
    return np.asarray(v).astype(np.int64).view(np.uint64) & _mask(width) if np.asarray(v).dtype != np.uint64 \
        else np.asarray(v) & _mask(width)


def _bv_width(t) -> int:
    w = t.size()
    if w > 64:
        raise NotImplementedError(f"a {w}-bit term: evaluated up to 64 bits")
    return w


def _rne(rm) -> None:
    if rm != "RNE":
        raise NotImplementedError(f"rounding mode {rm}: only round to nearest even is evaluated")


def _integral(rm, x):
    """x rounded to an integral value: to nearest even, or toward zero (the two modes the models use)."""
    if rm == "RTZ":
        return np.trunc(x)
    _rne(rm)
    return np.rint(x)


def _float_constant(t) -> np.float32:
    bits = z3.simplify(z3.fpToIEEEBV(t))
    return np.array([bits.as_long()], np.uint32).view(np.float32)[0]


def _shift(v, amount, width, kind):
    amount = np.asarray(amount, np.uint64)
    big = amount >= np.uint64(width)
    safe = np.where(big, np.uint64(0), amount)
    if kind == "shl":
        return np.where(big, np.uint64(0), (v << safe) & _mask(width))
    if kind == "lshr":
        return np.where(big, np.uint64(0), v >> safe)
    s = _signed(v, width)
    return _unsigned(np.where(big, np.where(s < 0, -1, 0), s >> safe.astype(np.int64)), width)


class _Node:
    """What evaluating one subterm needs, read from z3 once (its API is slow): the operation, widths, parameters."""
    __slots__ = ("op", "name", "width", "params", "kid_widths", "kid_float", "float32", "value")

    def __init__(self, t):
        self.op = t.decl().kind()
        self.name = t.decl().name()
        self.width = _bv_width(t) if z3.is_bv(t) else 0
        self.params = t.params() if self.op in (z3.Z3_OP_EXTRACT,) else ()
        kids = t.children()
        self.kid_widths = [_bv_width(c) if z3.is_bv(c) else 0 for c in kids]
        self.kid_float = [z3.is_fp(c) for c in kids]
        self.float32 = _is_float32(t) if z3.is_fp(t) else False
        self.value = None
        if self.op == z3.Z3_OP_UNINTERPRETED and not kids:
            self.value = str(t)
        elif self.op == z3.Z3_OP_BNUM:
            self.value = np.uint64(t.as_long())
        elif self.op in _FP_CONSTANTS:
            self.value = _float_constant(t)
        elif self.op in (z3.Z3_OP_FPA_TO_FP, z3.Z3_OP_FPA_TO_FP_UNSIGNED) and not self.float32:
            raise NotImplementedError(f"a conversion to {t.sort()}: binary32 only")


_FP_CONSTANTS = (z3.Z3_OP_FPA_NUM, z3.Z3_OP_FPA_PLUS_INF, z3.Z3_OP_FPA_MINUS_INF, z3.Z3_OP_FPA_NAN,
                 z3.Z3_OP_FPA_PLUS_ZERO, z3.Z3_OP_FPA_MINUS_ZERO)


def _bv(n: _Node, args):
    w, k = n.width, n.op
    if k == z3.Z3_OP_BADD:
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out & _mask(w)
    if k == z3.Z3_OP_BMUL:
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out & _mask(w)
    if k == z3.Z3_OP_BSUB:
        return (args[0] - args[1]) & _mask(w)
    if k == z3.Z3_OP_BNEG:
        return (np.uint64(0) - args[0]) & _mask(w)
    if k in (z3.Z3_OP_BAND, z3.Z3_OP_BOR, z3.Z3_OP_BXOR):
        f = {z3.Z3_OP_BAND: np.bitwise_and, z3.Z3_OP_BOR: np.bitwise_or, z3.Z3_OP_BXOR: np.bitwise_xor}[k]
        out = args[0]
        for a in args[1:]:
            out = f(out, a)
        return out
    if k == z3.Z3_OP_BNOT:
        return ~args[0] & _mask(w)
    if k == z3.Z3_OP_EXTRACT:
        hi, lo = n.params
        return (args[0] >> np.uint64(lo)) & _mask(hi - lo + 1)
    if k == z3.Z3_OP_CONCAT:
        out = np.uint64(0)
        for width, a in zip(n.kid_widths, args):
            out = (out << np.uint64(width)) | a
        return out & _mask(w)
    if k == z3.Z3_OP_SIGN_EXT:
        return _unsigned(_signed(args[0], n.kid_widths[0]), w)
    if k == z3.Z3_OP_ZERO_EXT:
        return args[0]
    if k in (z3.Z3_OP_BSHL, z3.Z3_OP_BLSHR, z3.Z3_OP_BASHR):
        return _shift(args[0], args[1], w, {z3.Z3_OP_BSHL: "shl", z3.Z3_OP_BLSHR: "lshr",
                                            z3.Z3_OP_BASHR: "ashr"}[k])
    return None


_COMPARE = {z3.Z3_OP_SLT: (True, np.less), z3.Z3_OP_SLEQ: (True, np.less_equal), z3.Z3_OP_SGT: (True, np.greater),
            z3.Z3_OP_SGEQ: (True, np.greater_equal), z3.Z3_OP_ULT: (False, np.less),
            z3.Z3_OP_ULEQ: (False, np.less_equal), z3.Z3_OP_UGT: (False, np.greater),
            z3.Z3_OP_UGEQ: (False, np.greater_equal)}
_FP_COMPARE = {z3.Z3_OP_FPA_LT: np.less, z3.Z3_OP_FPA_LE: np.less_equal, z3.Z3_OP_FPA_GT: np.greater,
               z3.Z3_OP_FPA_GE: np.greater_equal, z3.Z3_OP_FPA_EQ: np.equal}
_FP_ARITH = {z3.Z3_OP_FPA_ADD: np.add, z3.Z3_OP_FPA_SUB: np.subtract, z3.Z3_OP_FPA_MUL: np.multiply,
             z3.Z3_OP_FPA_DIV: np.divide}
_RM = {z3.Z3_OP_FPA_RM_NEAREST_TIES_TO_EVEN: "RNE", z3.Z3_OP_FPA_RM_TOWARD_ZERO: "RTZ",
       z3.Z3_OP_FPA_RM_NEAREST_TIES_TO_AWAY: "RNA", z3.Z3_OP_FPA_RM_TOWARD_POSITIVE: "RTP",
       z3.Z3_OP_FPA_RM_TOWARD_NEGATIVE: "RTN"}


def _is_float32(t) -> bool:
    s = t.sort()
    return isinstance(s, z3.FPSortRef) and (s.ebits(), s.sbits()) == _FLOAT32


def _fp(n: _Node, args):
    op = n.op
    if op in _FP_ARITH:
        _rne(args[0])
        with np.errstate(all="ignore"):
            return _FP_ARITH[op](args[1], args[2]).astype(np.float32)
    if op in _FP_COMPARE:
        return _FP_COMPARE[op](args[0], args[1])
    if op == z3.Z3_OP_FPA_IS_NAN:
        return np.isnan(args[0])
    if op == z3.Z3_OP_FPA_IS_INF:
        return np.isinf(args[0])
    if op == z3.Z3_OP_FPA_IS_ZERO:
        return args[0] == 0
    if op == z3.Z3_OP_FPA_NEG:
        return -args[0]
    if op == z3.Z3_OP_FPA_ROUND_TO_INTEGRAL:
        return _integral(args[0], args[1]).astype(np.float32)
    if op == z3.Z3_OP_FPA_TO_IEEE_BV:
        return np.asarray(args[0], np.float32).view(np.uint32).astype(np.uint64)
    if op == z3.Z3_OP_FPA_TO_SBV:
        x = np.asarray(args[1], np.float64)
        with np.errstate(invalid="ignore"):
            r = _integral(args[0], np.where(np.isfinite(x) & (np.abs(x) < 2.0 ** 63), x, 0.0)).astype(np.int64)
        return _unsigned(r, n.width)                 # undefined out of range: the models guard it with an If
    if op in (z3.Z3_OP_FPA_TO_FP, z3.Z3_OP_FPA_TO_FP_UNSIGNED):
        return _to_fp(n, args)
    if op == z3.Z3_OP_FPA_FP:
        sign, exp, sig = args
        bits = (sign << np.uint64(31)) | (exp << np.uint64(23)) | sig
        return np.asarray(bits, np.uint64).astype(np.uint32).view(np.float32)
    return None


def _to_fp(n: _Node, args):
    if len(args) == 1:                                            # fpBVToFP: the bits themselves
        return np.asarray(args[0], np.uint64).astype(np.uint32).view(np.float32)
    _rne(args[0])
    if n.kid_float[1]:
        return np.asarray(args[1], np.float64).astype(np.float32)
    w = n.kid_widths[1]
    values = _signed(args[1], w) if n.op == z3.Z3_OP_FPA_TO_FP else np.asarray(args[1], np.uint64)
    if w > 53:
        raise NotImplementedError("an integer of more than 53 bits to float: not exact through float64")
    return values.astype(np.float64).astype(np.float32)         # exact in float64, then one rounding


def _node(n: _Node, args, env):
    op = n.op
    if op == z3.Z3_OP_UNINTERPRETED and isinstance(n.value, str):
        if n.value not in env:
            raise NotImplementedError(f"free variable {n.value} has no values")
        return _unsigned(env[n.value], n.width) if n.width else env[n.value]
    if n.value is not None:
        return n.value
    if op in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
        return np.bool_(op == z3.Z3_OP_TRUE)
    if op in _RM:
        return _RM[op]
    if op == z3.Z3_OP_ITE:
        return np.where(args[0], args[1], args[2])
    if op == z3.Z3_OP_EQ:
        a, b = args
        if n.kid_float[0]:               # SMT-LIB '=' on floats is equality of the values as bits (NaN = NaN)
            a, b = np.asarray(a, np.float32).view(np.uint32), np.asarray(b, np.float32).view(np.uint32)
        return np.equal(a, b)
    if op == z3.Z3_OP_DISTINCT:
        return np.not_equal(args[0], args[1])
    if op == z3.Z3_OP_AND:
        return np.logical_and.reduce(np.broadcast_arrays(*args))
    if op == z3.Z3_OP_OR:
        return np.logical_or.reduce(np.broadcast_arrays(*args))
    if op == z3.Z3_OP_NOT:
        return np.logical_not(args[0])
    if op == z3.Z3_OP_XOR:
        return np.logical_xor(args[0], args[1])
    if op in _COMPARE:
        signed, f = _COMPARE[op]
        w = n.kid_widths[0]
        a, b = (_signed(x, w) for x in args) if signed else args
        return f(a, b)
    if n.width:
        out = _bv(n, args)
        if out is not None:
            return out
    out = _fp(n, args)
    if out is not None:
        return out
    raise NotImplementedError(f"the operation {n.name} is not evaluated")


def walk(term) -> list[tuple[object, list[int]]]:
    """Each distinct subterm of `term` once, children before parents, with its children's ids (z3's Python API is
    slow to walk: walk a term once, then use the list)."""
    out, entered = [], {term.get_id()}
    stack = [(term, iter(term.children()), [])]
    while stack:
        t, pending, kids = stack[-1]
        for c in pending:
            kids.append(c.get_id())
            if c.get_id() not in entered:
                entered.add(c.get_id())
                stack.append((c, iter(c.children()), []))
                break
        else:
            stack.pop()
            out.append((t, kids))
    return out


def post_order(term) -> list[tuple[_Node, int, list[int]]]:
    """walk(term) with what evaluating each subterm needs: a term is read from z3 once and evaluated many times."""
    return [(_Node(t), t.get_id(), kids) for t, kids in walk(term)]


_COMMUTATIVE = {z3.Z3_OP_BADD, z3.Z3_OP_BMUL, z3.Z3_OP_BAND, z3.Z3_OP_BOR, z3.Z3_OP_BXOR, z3.Z3_OP_AND, z3.Z3_OP_OR,
                z3.Z3_OP_XOR, z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT}


def canonical(order) -> str:
    """A digest of a term (its post_order) equal for terms that differ only in the order of a commutative
    operation's arguments: z3 orders them by when their subterms were made, so two outputs computed alike can
    differ there. Equal digests, equal functions."""
    import hashlib
    digest = {}
    for node, key, kids in order:
        parts = [digest[k] for k in kids]
        if node.op in _COMMUTATIVE:
            parts.sort()
        value = node.value.view(np.uint32) if isinstance(node.value, np.float32) else node.value
        text = f"{node.name}|{node.width}|{node.params}|{value}|{','.join(parts)}"
        digest[key] = hashlib.sha1(text.encode()).hexdigest()
    return digest[order[-1][1]]


def evaluate(term, env: dict[str, np.ndarray], order=None) -> np.ndarray:
    """term's value for every entry of the arrays in `env` (variable name -> values, broadcast together): uint64
    for a bit-vector, bool, or float32. `order`: the term's post_order, if the caller has it."""
    memo: dict[int, object] = {}
    for node, key, kids in order or post_order(term):
        memo[key] = _node(node, [memo[k] for k in kids], env)
    return memo[term.get_id()]
