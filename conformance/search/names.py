"""The names cases go by: the value classes, the ladder's all-ends classes and the XNNPACK ABI cases' names
(strides, taps, alignment).

A case's name says why it exists (search/cases.py makes them); the quantized parameters pin values by the same
names (search/quantized.py). Both read this vocabulary, which depends on neither.
"""
from __future__ import annotations

VALUE_CLASSES = ("uniform", "extremes", "realistic", "adversarial")
# Every element at one end of its range: "a_min_b_max" is A all at its low end, B all at its high end.
END_CLASSES = tuple(f"a_{a}_b_{b}" for a in ("min", "max") for b in ("min", "max"))
# Which k share an int16 pair sum: "pairs_4" is A and B at the ends of the largest product on every k with
# k mod 8 < 4, zero elsewhere; a kernel pairing k with k + d wraps on pairs_e for e < d dividing it (both products
# at the ends), not on pairs_d (one product a lane), so the four tell the pair distances 1, 2, 4, 8 apart.
PAIR_DISTANCES = (1, 2, 4, 8)
PAIR_CLASSES = tuple(f"pairs_{d}" for d in PAIR_DISTANCES)
# The XNNPACK ABI cases (the tester's strides, indirection taps, a_offset and zero buffer), and a sub-tile's suffix.
STRIDED_NAMES = ("strided_a", "strided_cm", "strided_cn")
SUBTILE = "_subtile"
SMALL_KERNEL, A_OFFSET, ZERO_INDEX = "small_kernel", "a_offset", "zero_index_"
# The alignment cases (docs/alignment.md): every buffer at its element size from a 64-byte boundary (the least
# aligned start a caller may give), every buffer 64-byte aligned, and offsets drawn from the case's seed.
ALIGN_ELEMENT, ALIGN_64, ALIGN_DRAWN = "align_element", "align_64", "align_drawn"
ALIGN_NAMES = (ALIGN_ELEMENT, ALIGN_64, ALIGN_DRAWN)


def abi_name(name: str) -> bool:
    """Whether a case name is one of the ABI cases' (its options are not the defaults)."""
    base = name.removesuffix(SUBTILE)
    return base in STRIDED_NAMES or base in (SMALL_KERNEL, A_OFFSET, *ALIGN_NAMES) or zero_row(base) is not None


def zero_row(name: str) -> int | None:
    """The row whose every tap a `zero_index_<i>` case points at the zero buffer (XNNPACK's zero_index); None for
    other names."""
    tail = name.removeprefix(ZERO_INDEX)
    return int(tail) if tail != name and tail.isdigit() else None
