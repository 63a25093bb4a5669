"""The bit-vector backend of the lane operations: the same instruction models, run on symbolic lanes.

A `SymArray` is what a model sees instead of a numpy register: lanes on the last axis, a numpy dtype, slicing,
reshape, astype/view, the arithmetic operators, and the few numpy functions the lane layer (lanes.py) dispatches
on. Each element is a `SymInt`: an exact integer held as a z3 bit-vector term read as signed, with a proven
interval [lo, hi]. numpy's fixed-width semantics are kept exactly: an operation whose result dtype cannot hold the
exact value wraps it (astype, view, int32 arithmetic), as numpy would; but where the interval shows the value fits,
the term stays the exact integer, so a sum of products through int16 and int32 lanes remains a plain sum for the
solver (the order of additions is then all a proof has to see through).

Intervals come from the inputs' domains (the claim's u7, s8, ... ranges) and are carried through every operation;
an interval that does not decide a saturation or a wrap leaves the saturating term in place, and lowp.conformance.
prove may discharge it with a local lemma (a small solver query over that term's inputs alone).

z3 is imported here only: numpy users of lowp.isa_models never load it.
"""
from __future__ import annotations

import operator

import numpy as np
import z3

from lowp.isa_models import lanes

_EXACT = np.dtype(object)      # numpy's object lanes: the models' Python-integer arithmetic for 64-bit lanes
_BOOL = np.dtype(np.bool_)     # lanes of conditions (SymBool cells): comparisons, predicates
_F32 = np.dtype(np.float32)    # IEEE binary32 lanes: SymInt cells holding the float's bits (as int32), z3 FP terms
_MAX_SHIFT = 256               # a symbolic shift amount must be capped below this (the models cap at esize + 1)


SUM_BITS = 32     # the width every sum is formed at (an int32 accumulator's): see SymInt._binary


def _bits_for(lo: int, hi: int) -> int:
    """Fewest bits of a signed integer holding every value in [lo, hi]."""
    return max(max(lo.bit_length(), (-lo - 1).bit_length() if lo < 0 else 0, hi.bit_length(),
                   (-hi - 1).bit_length() if hi < 0 else 0) + 1, 1)


def _range(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


class SymInt:
    """An exact integer: `term` (a z3 bit-vector, read as signed) whose value lies in [lo, hi]."""
    __slots__ = ("term", "lo", "hi", "wrapped")

    def __init__(self, term, lo: int, hi: int):
        self.term, self.lo, self.hi = term, int(lo), int(hi)
        # (x, n) when this is x wrapped to n bits by `fit` (the same n bits as x): read back as the other
        # signedness of n bits, it is x itself wherever x lies in that type's range
        self.wrapped = None

    # -- construction ---------------------------------------------------------------------------------------------
    @staticmethod
    def const(value: int) -> "SymInt":
        value = int(value)
        return SymInt(z3.BitVecVal(value, _bits_for(value, value)), value, value)

    @staticmethod
    def from_bits(term, signed: bool, lo: int | None = None, hi: int | None = None) -> "SymInt":
        """The integer a raw bit-vector holds, read as signed or unsigned; [lo, hi] narrows the type's range (a
        domain the caller knows)."""
        n = term.size()
        if z3.is_bv_value(term):
            v = term.as_signed_long() if signed else term.as_long()
            return SymInt.const(v)
        tlo, thi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
        lo = tlo if lo is None else max(lo, tlo)
        hi = thi if hi is None else min(hi, thi)
        return SymInt(term if signed else z3.ZeroExt(1, term), lo, hi)

    # -- reading ----------------------------------------------------------------------------------------------------
    @property
    def width(self) -> int:
        return self.term.size()

    def at(self, width: int):
        """The term at `width` bits: sign-extended, or its low bits (exact only if the value fits)."""
        n = self.width
        if width == n:
            return self.term
        if width > n:
            return z3.SignExt(width - n, self.term)
        return z3.Extract(width - 1, 0, self.term)

    def bits(self, n: int):
        """The low n bits, as a register holds them."""
        return self.at(n)

    @property
    def value(self) -> int | None:
        return self.lo if self.lo == self.hi else None

    def __repr__(self):
        return f"SymInt({self.term}, [{self.lo}, {self.hi}])"

    # -- exact arithmetic ---------------------------------------------------------------------------------------------
    def _binary(self, other, lo, hi, op):
        """x + y or x - y, exact. Sums are formed at SUM_BITS (or wider if the interval needs it) and never
        trimmed below it: the same products then meet in one flat bvadd on both sides of a query, however a
        kernel orders or groups its additions, and z3's normal form of the sum makes them equal on sight."""
        other = _as_symint(other)
        if self.value is not None and other.value is not None:
            return SymInt.const(op(self.value, other.value))
        w = max(_bits_for(lo, hi), SUM_BITS)
        return SymInt(op(self.at(w), other.at(w)), lo, hi)

    def _trimmed(self, w: int) -> "SymInt":
        # The value fits w bits (its interval says so): drop the redundant high bits the wider operation kept.
        return self if self.width <= w else SymInt(z3.Extract(w - 1, 0, self.term), self.lo, self.hi)

    def __add__(self, other):
        other = _as_symint(other)
        if other.value == 0:
            return self
        if self.value == 0:
            return other
        return self._binary(other, self.lo + other.lo, self.hi + other.hi, operator.add)

    __radd__ = __add__

    def __neg__(self):
        return SymInt.const(0) - self

    def __sub__(self, other):
        other = _as_symint(other)
        if other.value == 0:
            return self
        return self._binary(other, self.lo - other.hi, self.hi - other.lo, operator.sub)

    def __rsub__(self, other):
        return _as_symint(other) - self

    def __mul__(self, other):
        other = _as_symint(other)
        if other.value == 1:
            return self
        if self.value == 1:
            return other
        if other.value == 0 or self.value == 0:
            return SymInt.const(0)
        corners = [a * b for a in (self.lo, self.hi) for b in (other.lo, other.hi)]
        lo, hi = min(corners), max(corners)
        # At SUM_BITS, as sums are: a product then has one spelling wherever it is formed (a kernel's VPDPBUSD,
        # the contract's matmul), so the two sides of a query share their monomials.
        w = max(_bits_for(lo, hi), SUM_BITS, self.width, other.width)
        return SymInt(self.at(w) * other.at(w), lo, hi)

    __rmul__ = __mul__

    def _amount(self, n):
        """A shift amount: a Python int, or a lane whose interval is clamped below at 0 (numpy, like C, defines
        no negative shift; a model shifts by a negative amount only in a lane whose result it then discards)."""
        n = _as_symint(n)
        if n.value is not None:
            return int(n.value), None
        if n.hi > _MAX_SHIFT:
            raise NotImplementedError(f"the bit-vector backend shifts by at most {_MAX_SHIFT}, not by up to {n.hi}: "
                                      "cap the amount first (np.minimum), as the models do")
        return None, SymInt(n.term, max(n.lo, 0), max(n.hi, 0))

    def __rshift__(self, n):
        """Arithmetic shift right (floor division by 2^n), as numpy's >> on signed lanes; n may be a lane."""
        k, s = self._amount(n)
        if s is None:
            if k == 0:
                return self
            if self.value is not None:
                return SymInt.const(self.value >> k)
            return SymInt(self.term >> k, self.lo >> k, self.hi >> k)._trimmed(_bits_for(self.lo >> k, self.hi >> k))
        lo, hi = min(self.lo >> s.lo, self.lo >> s.hi), max(self.hi >> s.lo, self.hi >> s.hi)
        w = max(self.width, s.width)
        # z3's >> is arithmetic: shifting by w or more leaves the sign bits, floor(x / 2^n) as exact integers.
        return SymInt(self.at(w) >> s.at(w), lo, hi)._trimmed(_bits_for(lo, hi))

    def __lshift__(self, n):
        k, s = self._amount(n)
        if s is None:
            return self * (1 << k)
        corners = [x << y for x in (self.lo, self.hi) for y in (s.lo, s.hi)]
        lo, hi = min(corners), max(corners)
        w = max(_bits_for(lo, hi), self.width, s.width)
        return SymInt(self.at(w) << s.at(w), lo, hi)._trimmed(_bits_for(lo, hi))

    def __rrshift__(self, other):
        return _as_symint(other) >> self

    def __rlshift__(self, other):
        return _as_symint(other) << self

    def _bitwise(self, other, op, name):
        """&, |, ^ on exact integers (two's complement of unbounded width, as Python's): the same op on both
        terms sign-extended to one width is exact."""
        other = _as_symint(other)
        if self.value is not None and other.value is not None:
            return SymInt.const(op(self.value, other.value))
        w = max(self.width, other.width)
        full = (-(1 << (w - 1)), (1 << (w - 1)) - 1)
        if name == "&":
            if other.value is not None and other.value >= 0 and 0 <= self.lo and self.hi <= other.value \
                    and other.value & (other.value + 1) == 0:
                return self                                   # x & (2^n - 1) with x already in [0, 2^n - 1]
            nonneg = [x.hi for x in (self, other) if x.lo >= 0]
            lo, hi = (0, min(nonneg)) if nonneg else full
        elif self.lo >= 0 and other.lo >= 0:                  # | and ^ of non-negative values stay below 2^bits
            lo, hi = 0, (1 << max(self.hi, other.hi).bit_length()) - 1
        else:
            lo, hi = full
        w = max(w, _bits_for(lo, hi))
        return SymInt(op(self.at(w), other.at(w)), lo, hi)._trimmed(_bits_for(lo, hi))

    def __and__(self, other):
        return self._bitwise(other, operator.and_, "&")

    def __or__(self, other):
        return self._bitwise(other, operator.or_, "|")

    def __xor__(self, other):
        return self._bitwise(other, operator.xor, "^")

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self):
        return -self - 1

    # -- comparisons: SymBool, for where / minimum / maximum -------------------------------------------------------
    def _compare(self, other, op, decided):
        other = _as_symint(other)
        known = decided(self, other)
        if known is not None:
            return SymBool(z3.BoolVal(known), known)
        w = max(self.width, other.width)
        return SymBool(op(self.at(w), other.at(w)))

    def __gt__(self, other):
        return self._compare(other, operator.gt, lambda a, b: True if a.lo > b.hi else False if a.hi <= b.lo else None)

    def __lt__(self, other):
        return self._compare(other, operator.lt, lambda a, b: True if a.hi < b.lo else False if a.lo >= b.hi else None)

    def __ge__(self, other):
        return self._compare(other, operator.ge, lambda a, b: True if a.lo >= b.hi else False if a.hi < b.lo else None)

    def __le__(self, other):
        return self._compare(other, operator.le, lambda a, b: True if a.hi <= b.lo else False if a.lo > b.hi else None)

    def __ne__(self, other):
        return ~(self == other)

    def __eq__(self, other):
        return self._compare(other, operator.eq, lambda a, b: (a.value == b.value if a.value is not None
                                                                and b.value is not None else
                                                                False if a.hi < b.lo or b.hi < a.lo else None))

    __hash__ = None


class SymBool:
    """A lane's condition: a z3 Bool, with its value when the intervals already decide it."""
    __slots__ = ("term", "known")

    def __init__(self, term, known: bool | None = None):
        self.term, self.known = term, known

    def _connective(self, other, absorbing: bool, op):
        """and (absorbing False) / or (absorbing True), decided where either side is known."""
        other = _as_symbool(other)
        if absorbing in (self.known, other.known):
            return SymBool(z3.BoolVal(absorbing), absorbing)
        if self.known is not None:
            return other
        if other.known is not None:
            return self
        return SymBool(op(self.term, other.term))

    def __and__(self, other):
        return self._connective(other, False, z3.And)

    def __or__(self, other):
        return self._connective(other, True, z3.Or)

    def __invert__(self):
        return SymBool(z3.Not(self.term), None if self.known is None else not self.known)

    def __xor__(self, other):
        other = _as_symbool(other)
        if self.known is not None and other.known is not None:
            return _as_symbool(self.known != other.known)
        return SymBool(z3.Xor(self.term, other.term))

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __eq__(self, other):
        return ~(self ^ other)

    def __ne__(self, other):
        return self ^ other

    __hash__ = None

    def __bool__(self):
        if self.known is None:
            raise TypeError("a symbolic lane condition has no truth value here: the model branches on lanes "
                            "(use np.where / lanes.select)")
        return self.known

    def __repr__(self):
        return f"SymBool({self.term}{'' if self.known is None else f', {self.known}'})"


def _as_symbool(x) -> SymBool:
    if isinstance(x, SymBool):
        return x
    if isinstance(x, SymInt):                 # numpy's truth of an integer lane: nonzero
        return x != 0
    return SymBool(z3.BoolVal(bool(x)), bool(x))


def _concrete(x, what: str) -> int:
    if isinstance(x, SymInt):
        if x.value is None:
            raise NotImplementedError(f"the bit-vector backend needs a concrete right operand for {what}")
        return x.value
    return int(x)


def _as_symint(x) -> SymInt:
    if isinstance(x, SymInt):
        return x
    if isinstance(x, SymBool):                # a condition used as a number: 1 or 0
        return select(x, 1, 0)
    if isinstance(x, (bool, np.bool_)):
        return SymInt.const(int(x))
    if isinstance(x, (int, np.integer)):
        return SymInt.const(int(x))
    raise TypeError(f"the bit-vector backend cannot combine a lane with {type(x).__name__}")


def select(cond, x, y) -> SymInt:
    """If(cond, x, y) on one lane, with the interval of both arms."""
    cond, x, y = _as_symbool(cond), _as_symint(x), _as_symint(y)
    if cond.known is True:
        return x
    if cond.known is False:
        return y
    w = max(x.width, y.width)
    return SymInt(z3.If(cond.term, x.at(w), y.at(w)), min(x.lo, y.lo), max(x.hi, y.hi))


# lowp prove's local lemmas: a callable (x, lo, hi) -> bool that proves lo <= x <= hi over x's inputs alone (a small
# solver query, cached), tried where the interval cannot decide a saturation or a narrowing. None: no lemmas.
LEMMAS = None


def within(x: SymInt, lo: int, hi: int) -> SymInt | None:
    """x itself (its interval narrowed) when it provably lies in [lo, hi]: by its interval, else by a lemma
    (LEMMAS); None when neither shows it. Public: the symbolic executor (lowp.emulator.symbolic) reads a byte
    lane through the same rule as np.clip and fit here, so a lane is kept exact in both places or in neither."""
    if lo <= x.lo and x.hi <= hi:
        return x
    if x.hi < lo or x.lo > hi or LEMMAS is None:
        return None
    if LEMMAS(x, lo, hi):
        return SymInt(x.term, max(x.lo, lo), min(x.hi, hi))._trimmed(_bits_for(max(x.lo, lo), min(x.hi, hi)))
    return None


def minimum(x, y) -> SymInt:
    """min(x, y) on one lane, with the interval of the minimum (tighter than either arm's)."""
    x, y = _as_symint(x), _as_symint(y)
    if x.hi <= y.lo:
        return x
    if y.hi <= x.lo:
        return y
    lo, hi = min(x.lo, y.lo), min(x.hi, y.hi)
    picked = select(x < y, x, y)
    return SymInt(picked.term, lo, hi)._trimmed(_bits_for(lo, hi))


def maximum(x, y) -> SymInt:
    """max(x, y) on one lane, with the interval of the maximum."""
    x, y = _as_symint(x), _as_symint(y)
    if x.lo >= y.hi:
        return x
    if y.lo >= x.hi:
        return y
    lo, hi = max(x.lo, y.lo), max(x.hi, y.hi)
    picked = select(x > y, x, y)
    return SymInt(picked.term, lo, hi)._trimmed(_bits_for(lo, hi))


def fit(x, dtype):
    """The value numpy's fixed-width `dtype` keeps of an exact integer: itself if it fits, else its low bits
    (wrap-around), as astype, view and fixed-width arithmetic do. Boolean lanes hold conditions (nonzero)."""
    dtype = np.dtype(dtype)
    if dtype == _BOOL:
        return _as_symbool(x)
    if isinstance(x, SymBool):
        x = _as_symint(x)
    if dtype == _EXACT:
        return x
    lo, hi = _range(dtype)
    if lo <= x.lo and x.hi <= hi:
        return x
    n = dtype.itemsize * 8
    if x.wrapped is not None and x.wrapped[1] == n:
        # x is an exact value y wrapped to these n bits (a + 127 as an s8 lane, then read as u8): the n bits
        # read as `dtype` are y itself if y lies in dtype's range (x and y agree mod 2^n)
        y = x.wrapped[0]
        kept = y if lo <= y.lo and y.hi <= hi else within(y, lo, hi) if dtype.itemsize <= 2 else None
        if kept is not None:
            return kept
    if dtype.itemsize <= 2:               # a narrow intermediate (int16 lanes): worth a lemma
        kept = within(x, lo, hi)
        if kept is not None:
            return kept
    if x.value is not None:
        v = x.value & ((1 << n) - 1)
        return SymInt.const(v - (1 << n) if dtype.kind == "i" and v >> (n - 1) else v)
    r = SymInt.from_bits(z3.simplify(x.bits(n)), dtype.kind == "i")
    if r.value is None:
        r.wrapped = (x.wrapped[0] if x.wrapped is not None and x.wrapped[1] == n else x, n)
    return r


# -- arrays -----------------------------------------------------------------------------------------------------------

def _dtype_of(x):
    return x.dtype if isinstance(x, (SymArray, np.ndarray, np.generic)) else None


def _promote(*xs) -> np.dtype:
    """numpy's result dtype of an operation on these operands (NEP 50: a Python int takes the array's type; with
    boolean lanes it is numpy's default int)."""
    dtypes = [d for d in map(_dtype_of, xs) if d is not None]
    if _EXACT in dtypes:
        return _EXACT
    out = np.result_type(*dtypes)
    if out == _BOOL and any(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in xs):
        out = np.dtype(np.int64)
    if out.kind not in "iub":
        raise NotImplementedError(f"the bit-vector backend has integer lanes only; numpy would compute this in {out}")
    return out


def _const(v):
    return _as_symbool(bool(v)) if isinstance(v, (bool, np.bool_)) else SymInt.const(int(v))


_consts = np.vectorize(_const, otypes=[object])


def _cells(x) -> np.ndarray:
    """An operand as an object array of SymInt / SymBool (numpy arrays and Python ints become constants)."""
    if isinstance(x, SymArray):
        return x.data
    if isinstance(x, np.ndarray):
        return _consts(x) if x.size else x.astype(object)
    if isinstance(x, (int, np.integer, bool, np.bool_)):
        return np.array(_const(x), dtype=object)
    raise TypeError(f"the bit-vector backend cannot take {type(x).__name__} as lanes")


_fit_all = np.vectorize(fit, otypes=[object], excluded={1})
_as_ints = np.vectorize(_as_symint, otypes=[object])
_as_bools = np.vectorize(_as_symbool, otypes=[object])


def _typed_cells(x, dtype) -> np.ndarray:
    """x's cells as the kind of value `dtype` computes with: SymBool for boolean lanes, else SymInt (numpy reads
    a condition as 0/1 in integer arithmetic)."""
    cells = _cells(x)
    if dtype == _BOOL:
        return cells if _dtype_of(x) == _BOOL or not isinstance(x, SymArray) else _as_bools(cells)
    return _as_ints(cells) if _dtype_of(x) == _BOOL or isinstance(x, (bool, np.bool_)) else cells


def _elementwise(op, dtype, *xs) -> "SymArray":
    """op lane by lane over broadcast operands, kept to `dtype` as numpy keeps it."""
    out = np.vectorize(op, otypes=[object])(*[_typed_cells(x, dtype) for x in xs])
    return SymArray(_fit_all(np.asarray(out, dtype=object), dtype), dtype)


def _binary(op, a, b) -> "SymArray":
    return _elementwise(op, _promote(a, b), a, b)


def _compare(op, a, b) -> "SymArray":
    dtype = _promote(a, b)
    out = np.vectorize(op, otypes=[object])(_typed_cells(a, dtype), _typed_cells(b, dtype))
    return SymArray(out, _BOOL)


class SymArray:
    """Symbolic lanes with numpy's interface, as far as the instruction models use it: integer lanes (SymInt
    cells, fixed-width like numpy's dtype) and boolean lanes (SymBool cells: comparisons, predicates)."""
    __array_priority__ = 1000

    def __init__(self, data: np.ndarray, dtype):
        self.data = np.asarray(data, dtype=object)
        self.dtype = np.dtype(dtype)

    # -- construction and reading ---------------------------------------------------------------------------------
    @staticmethod
    def of(values, dtype) -> "SymArray":
        """From SymInt (or Python int) cells; values are taken as already in `dtype`'s range."""
        dtype = np.dtype(dtype)
        cells = np.empty(np.shape(values), dtype=object)
        for index, v in np.ndenumerate(np.asarray(values, dtype=object)):
            cells[index] = _as_symbool(v) if dtype == _BOOL else _as_symint(v)
        return SymArray(cells, dtype)

    @staticmethod
    def const(x) -> "SymArray":
        """Constant lanes: a numpy array (or scalar) as the bit-vector backend holds it."""
        x = np.asarray(x)
        return SymArray(_cells(x), x.dtype)

    @staticmethod
    def from_register(term, dtype) -> "SymArray":
        """The lanes of a raw register term (lane 0 = the low bits), read as `dtype`."""
        dtype = np.dtype(dtype)
        n = dtype.itemsize * 8
        count = term.size() // n
        lanes = [SymInt.from_bits(z3.simplify(z3.Extract(n * i + n - 1, n * i, term)), dtype.kind == "i")
                 for i in range(count)]
        return SymArray.of(lanes, dtype)

    def register(self):
        """The lanes as one raw bit-vector (lane 0 in the low bits); one register's lanes on the last axis."""
        n = self.dtype.itemsize * 8
        parts = [cell.bits(n) for cell in self.data.reshape(-1)[::-1]]
        return parts[0] if len(parts) == 1 else z3.Concat(*parts)

    def values(self) -> np.ndarray | None:
        """The lanes as a numpy array of `dtype` when every lane is a known constant, else None."""
        flat = [c.known if isinstance(c, SymBool) else c.value for c in self.data.reshape(-1)]
        if any(v is None for v in flat):
            return None
        return np.array(flat, dtype=object).reshape(self.shape).astype(self.dtype)

    @property
    def shape(self):
        return self.data.shape

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def size(self):
        return self.data.size

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"SymArray({self.dtype}, shape={self.shape})"

    def __getitem__(self, index):
        got = self.data[_plain_index(index)]
        return SymArray(got, self.dtype) if isinstance(got, np.ndarray) else got

    def __setitem__(self, index, value):
        self.data[_plain_index(index)] = _fit_all(_typed_cells(value, self.dtype), self.dtype)

    def copy(self):
        return SymArray(self.data.copy(), self.dtype)

    def reshape(self, *shape):
        return SymArray(self.data.reshape(*shape), self.dtype)

    def swapaxes(self, a, b):
        return SymArray(self.data.swapaxes(a, b), self.dtype)

    def sum(self, axis=None):
        total = np.add.reduce(_typed_cells(self, self.dtype), axis=axis)
        return SymArray(_fit_all(np.asarray(total, dtype=object), self.dtype), self.dtype)

    def any(self, axis=None):
        return SymArray(np.asarray(np.bitwise_or.reduce(_as_bools(self.data), axis=axis), dtype=object), _BOOL)

    def all(self, axis=None):
        return SymArray(np.asarray(np.bitwise_and.reduce(_as_bools(self.data), axis=axis), dtype=object), _BOOL)

    def astype(self, dtype, copy=True):
        dtype = np.dtype(dtype)
        return SymArray(_fit_all(self.data, dtype), dtype)

    def view(self, dtype):
        dtype = np.dtype(dtype)
        if dtype.itemsize != self.dtype.itemsize or _BOOL in (dtype, self.dtype):
            raise NotImplementedError(f"view from {self.dtype} to {dtype}: the bit-vector backend reinterprets "
                                      "integer lanes of the same size only")
        if dtype == _F32:           # float lanes hold their IEEE bits, as an int32 reads them
            return SymArray(_fit_all(self.data, np.int32), _F32)
        if self.dtype == _F32:
            return SymArray(_fit_all(self.data, dtype), dtype)
        return self.astype(dtype)

    # -- arithmetic: numpy's operators and ufuncs, lane by lane ------------------------------------------------------
    def __add__(self, other):
        return _binary(operator.add, self, other)

    def __radd__(self, other):
        return _binary(operator.add, other, self)

    def __sub__(self, other):
        return _binary(operator.sub, self, other)

    def __rsub__(self, other):
        return _binary(operator.sub, other, self)

    def __mul__(self, other):
        return _binary(operator.mul, self, other)

    def __rmul__(self, other):
        return _binary(operator.mul, other, self)

    def __neg__(self):
        return _elementwise(operator.neg, self.dtype, self)

    def __invert__(self):
        return _elementwise(operator.invert, self.dtype, self)

    def __rshift__(self, n):
        return _binary(operator.rshift, self, n)

    def __rrshift__(self, other):
        return _binary(operator.rshift, other, self)

    def __mod__(self, m):
        """x % 2^n: the low n bits, as numpy's floor modulo gives them (contracts wrap with it)."""
        m = int(m)
        if m <= 0 or m & (m - 1):
            raise NotImplementedError(f"the bit-vector backend takes x % 2**n only, not x % {m}")
        return SymArray(self.data & (m - 1), self.dtype)

    def __matmul__(self, other):
        """(M, K) @ (K, N): every sum over k in ascending k, exact in the promoted dtype (as a contract's int64)."""
        dtype = _promote(self, other)
        a, b = self.data, _cells(other)
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul of shapes {a.shape} and {b.shape}")
        out = np.empty((a.shape[0], b.shape[1]), dtype=object)
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                total = SymInt.const(0)
                for k in range(a.shape[1]):
                    total = total + a[i, k] * b[k, j]
                out[i, j] = fit(total, dtype)
        return SymArray(out, dtype)

    def __lshift__(self, n):
        return _binary(operator.lshift, self, n)

    def __rlshift__(self, other):
        return _binary(operator.lshift, other, self)

    def __and__(self, other):
        return _binary(operator.and_, self, other)

    def __rand__(self, other):
        return _binary(operator.and_, other, self)

    def __or__(self, other):
        return _binary(operator.or_, self, other)

    def __ror__(self, other):
        return _binary(operator.or_, other, self)

    def __xor__(self, other):
        return _binary(operator.xor, self, other)

    def __rxor__(self, other):
        return _binary(operator.xor, other, self)

    def __gt__(self, other):
        return _compare(operator.gt, self, other)

    def __lt__(self, other):
        return _compare(operator.lt, self, other)

    def __ge__(self, other):
        return _compare(operator.ge, self, other)

    def __le__(self, other):
        return _compare(operator.le, self, other)

    def __eq__(self, other):
        return _compare(operator.eq, self, other)

    def __ne__(self, other):
        return _compare(operator.ne, self, other)

    __hash__ = None

    def __bool__(self):
        raise TypeError("the truth value of symbolic lanes is not defined: the models compute lane by lane")

    # -- the numpy functions the models call --------------------------------------------------------------------------
    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func)
        if handler is None:
            raise NotImplementedError(f"the bit-vector backend has no np.{func.__name__} (a model calls it on "
                                      "symbolic lanes): add it to lowp.isa_models.symbolic.bitvec or the lane layer")
        return handler(*args, **kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        handler = _UFUNCS.get(ufunc) if method == "__call__" and not kwargs else None
        if handler is None:
            raise NotImplementedError(f"the bit-vector backend has no np.{ufunc.__name__}.{method} on symbolic lanes")
        return handler(*inputs)

    # -- IEEE binary32 lanes: lanes.f32_* hand an operation with a symbolic operand to that operand's class, so the
    # lane layer never imports this module (which imports it, for the numpy side of constant lanes) ---------------
    @staticmethod
    def f32_from_int32(x) -> "SymArray":
        """lanes.f32_from_int32 on symbolic lanes."""
        return f32_from_int32(x)

    @staticmethod
    def f32_arith(op: str, a, b) -> "SymArray":
        """lanes.f32_arith where a or b is symbolic."""
        return f32_arith(op, a, b)

    @staticmethod
    def f32_pick_less(a, b) -> "SymArray":
        """lanes.f32_pick_less where a or b is symbolic."""
        return f32_pick_less(a, b)

    @staticmethod
    def f32_to_int32(x, rounding: str, invalid: int) -> "SymArray":
        """lanes.f32_to_int32 on symbolic lanes."""
        return f32_to_int32(x, rounding, invalid)


def _plain_index(index):
    """An index into the cells: SymArray indices (symbolic gathers) are not plain indexing."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(isinstance(p, SymArray) for p in parts):
        raise NotImplementedError("indexing by symbolic lanes: use np.take_along_axis")
    return index


_select_all = np.vectorize(select, otypes=[object])


def _where(cond, x, y):
    dtype = _promote(x, y)
    return SymArray(_fit_all(_select_all(_as_bools(_cells(cond)), _typed_cells(x, dtype), _typed_cells(y, dtype)),
                             dtype), dtype)


def _minimum(x, y):
    return _binary(minimum, x, y)


def _maximum(x, y):
    return _binary(maximum, x, y)


def _clip(x, lo, hi):
    """Saturation: where a lane provably lies in [lo, hi] (interval or lemma) it is kept as it is."""
    if isinstance(x, SymArray) and isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer)):
        cells = np.empty(x.shape, dtype=object)
        for index, cell in np.ndenumerate(x.data):
            kept = within(cell, int(lo), int(hi))
            cells[index] = kept if kept is not None else minimum(maximum(cell, int(lo)), int(hi))
        return SymArray(cells, x.dtype)
    return _minimum(_maximum(x, lo), hi)


def _like(x, value, dtype=None):
    dtype = np.dtype(dtype) if dtype is not None else x.dtype
    return SymArray(np.full(x.shape, _const(np.array(value, dtype).item() if dtype != _EXACT else value),
                            dtype=object), dtype)


def _ones_like(x, dtype=None):
    return _like(x, 1, dtype)


def _zeros_like(x, dtype=None):
    return _like(x, 0, dtype)


def _tile(x, reps):
    return SymArray(np.tile(x.data, reps), x.dtype)


def _broadcast_to(x, shape):
    return SymArray(np.broadcast_to(x.data, shape), x.dtype)


def _broadcast_arrays(*xs):
    datas = np.broadcast_arrays(*[x.data if isinstance(x, SymArray) else np.asarray(x) for x in xs])
    return [SymArray(d, x.dtype) if isinstance(x, SymArray) else d for d, x in zip(datas, xs)]


def _joined(join, xs, axis):
    dtype = _promote(*xs)
    return SymArray(_fit_all(join([_typed_cells(x, dtype) for x in xs], axis=axis), dtype), dtype)


def _concatenate(xs, axis=0):
    return _joined(np.concatenate, xs, axis)


def _stack(xs, axis=0):
    return _joined(np.stack, xs, axis)


def _moveaxis(x, source, destination):
    return SymArray(np.moveaxis(x.data, source, destination), x.dtype)


def _einsum(spec, *operands):
    """Sums of products over the spec's summed indices, exact (object einsum over SymInt), then numpy's dtype."""
    dtype = _promote(*operands)
    total = np.einsum(spec, *[_typed_cells(x, dtype) for x in operands])
    return SymArray(_fit_all(np.asarray(total, dtype=object), dtype), dtype)


def _gather(row, index: SymInt):
    """row[index] for a lane index: the candidates its interval allows, chosen by If(index == k, ...)."""
    if index.value is not None:
        return row[index.value]
    if index.lo < 0 or index.hi >= len(row):
        raise NotImplementedError(f"a symbolic index in [{index.lo}, {index.hi}] may leave the {len(row)} lanes")
    picked = row[index.hi]
    for k in range(index.hi - 1, index.lo - 1, -1):
        picked = select(index == k, row[k], picked)
    return picked


def _take_along_axis(x, index, axis):
    if axis not in (-1, index.ndim - 1):
        raise NotImplementedError("the bit-vector backend gathers along the last axis only")
    if not isinstance(index, SymArray):
        return SymArray(np.take_along_axis(_cells(x), index, axis=axis), x.dtype)
    cells, idx = np.broadcast_arrays(_cells(x), index.data)
    out = np.empty(idx.shape, dtype=object)
    for pos in np.ndindex(idx.shape):
        out[pos] = _gather(cells[pos[:-1]], idx[pos])
    return SymArray(out, x.dtype)


def _any(x, axis=None):
    return x.any(axis=axis)


def _all(x, axis=None):
    return x.all(axis=axis)


_FUNCTIONS = {np.where: _where, np.clip: _clip, np.tile: _tile, np.broadcast_arrays: _broadcast_arrays,
              np.broadcast_to: _broadcast_to, np.concatenate: _concatenate, np.stack: _stack,
              np.take_along_axis: _take_along_axis, np.einsum: _einsum, np.ones_like: _ones_like,
              np.zeros_like: _zeros_like, np.moveaxis: _moveaxis, np.any: _any, np.all: _all,
              np.minimum: _minimum, np.maximum: _maximum}
_UFUNCS = {np.minimum: _minimum, np.maximum: _maximum,
           np.add: lambda a, b: _binary(operator.add, a, b), np.subtract: lambda a, b: _binary(operator.sub, a, b),
           np.multiply: lambda a, b: _binary(operator.mul, a, b),
           np.right_shift: lambda a, b: _binary(operator.rshift, a, b),
           np.left_shift: lambda a, b: _binary(operator.lshift, a, b),
           np.bitwise_and: lambda a, b: _binary(operator.and_, a, b),
           np.bitwise_or: lambda a, b: _binary(operator.or_, a, b),
           np.bitwise_xor: lambda a, b: _binary(operator.xor, a, b),
           np.greater: lambda a, b: _compare(operator.gt, a, b), np.less: lambda a, b: _compare(operator.lt, a, b),
           np.greater_equal: lambda a, b: _compare(operator.ge, a, b),
           np.less_equal: lambda a, b: _compare(operator.le, a, b),
           np.equal: lambda a, b: _compare(operator.eq, a, b), np.not_equal: lambda a, b: _compare(operator.ne, a, b),
           np.negative: lambda a: -a, np.invert: lambda a: ~a}


def is_symbolic(x) -> bool:
    return isinstance(x, SymArray)


# -- IEEE binary32 lanes ---------------------------------------------------------------------------------------------
# A float lane is its 32 bits (a SymInt read as int32, interval the whole type); each operation is z3's IEEE
# floating-point term on fpBVToFP of those bits, rounded to nearest even (lanes.py's numpy side computes the same
# with numpy float32). Constant lanes are folded by numpy itself, so a requantization's parameters stay numbers.
# NaN results are whatever bits z3's fpToIEEEBV picks: the fp32 requantizations never make one from finite inputs.

_FLOAT32 = z3.Float32()
_RNE = z3.RNE()


def _float_bits(term) -> SymInt:
    return SymInt(z3.fpToIEEEBV(term), -(1 << 31), (1 << 31) - 1)


def _fp(cell: SymInt):
    return z3.fpBVToFP(cell.bits(32), _FLOAT32)


def _folded(numpy_op, cells, dtype):
    """numpy's own result on constant lanes (as the SymInt of its bits), None if any lane is symbolic."""
    values = [c.value for c in cells]
    if any(v is None for v in values):
        return None
    arrays = [np.array([v], np.int64).astype(np.int32).view(d) for v, d in zip(values, dtype)]
    out = numpy_op(*arrays)
    return SymInt.const(int(out.view(np.int32)[0]) if out.dtype == _F32 else int(out[0]))


def _float_lanes(op, numpy_op, dtypes, out_dtype, *xs) -> SymArray:
    cells = np.broadcast_arrays(*[x.data if isinstance(x, SymArray) else _cells(np.asarray(x).view(np.int32)
                                                                                 if np.asarray(x).dtype == _F32
                                                                                 else np.asarray(x)) for x in xs])
    out = np.empty(cells[0].shape, dtype=object)
    for index in np.ndindex(out.shape):
        lane = [c[index] for c in cells]
        folded = _folded(numpy_op, lane, dtypes)
        out[index] = op(*lane) if folded is None else folded
    return SymArray(out, out_dtype)


def f32_from_int32(x) -> SymArray:
    return _float_lanes(lambda c: _float_bits(z3.fpSignedToFP(_RNE, c.bits(32), _FLOAT32)),
                        lanes.f32_from_int32, (np.int32,), _F32, x)


def f32_arith(op: str, a, b) -> SymArray:
    build = {"add": z3.fpAdd, "sub": z3.fpSub, "mul": z3.fpMul}[op]
    return _float_lanes(lambda x, y: _float_bits(build(_RNE, _fp(x), _fp(y))),
                        lambda x, y: lanes.f32_arith(op, x, y), (_F32, _F32), _F32, a, b)


def f32_pick_less(a, b) -> SymArray:
    return _float_lanes(lambda x, y: SymInt(z3.If(z3.fpLT(_fp(x), _fp(y)), x.bits(32), y.bits(32)),
                                            -(1 << 31), (1 << 31) - 1),
                        lanes.f32_pick_less, (_F32, _F32), _F32, a, b)


def f32_to_int32(x, rounding: str, invalid: int) -> SymArray:
    mode = {"nearest": _RNE, "zero": z3.RTZ()}[rounding]

    def convert(c):
        f = _fp(c)
        r = z3.fpRoundToIntegral(mode, f)
        bad = z3.Or(z3.fpIsNaN(f), z3.fpGEQ(r, z3.FPVal(2.0 ** 31, _FLOAT32)),
                    z3.fpLT(r, z3.FPVal(-(2.0 ** 31), _FLOAT32)))
        return SymInt(z3.If(bad, z3.BitVecVal(invalid, 32), z3.fpToSBV(mode, f, z3.BitVecSort(32))),
                      -(1 << 31), (1 << 31) - 1)
    return _float_lanes(convert, lambda v: lanes.f32_to_int32(v, rounding, invalid), (_F32,), np.dtype(np.int32), x)
