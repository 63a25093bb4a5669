"""A built kernel's entry prototype, read from its DWARF (pyelftools), so a ukernel whose parameters do not match its
signature kind is a configuration error before any case runs, not a crash or garbage on the first call. lowp builds
kernels with -g (GCC and clang generate the same code with and without it); an assembly kernel has no DWARF for its
symbol and is not checked.
"""
from __future__ import annotations

from pathlib import Path

# What each signature kind's parameters are, as the calling convention sees them: 'int' (an integer of a register's
# size, the ELF's word: int64_t, size_t; on a 32-bit target size_t and int32_t) or 'ptr'; qd8 XNNPACK ukernels take one more pointer (the per-row quantization parameters).
EXPECTED = {
    "gemm": ("int", "int", "int", "ptr", "ptr", "ptr", "ptr"),
    "quant-gemm": ("int", "int", "int", "ptr", "ptr", "ptr", "ptr", "ptr"),
    "xnnpack-gemm": ("int", "int", "int", "ptr", "int", "ptr", "ptr", "int", "int", "ptr"),
    "xnnpack-igemm": ("int", "int", "int", "int", "ptr", "ptr", "ptr", "int", "int", "int", "ptr", "ptr"),
}
NAMES = {
    "gemm": "int64_t M, int64_t N, int64_t K, const A*, const B*, C*, void *work",
    "quant-gemm": "int64_t M, int64_t N, int64_t K, const A*, const B*, C*, void *work, const struct lowp_requant *q",
    "xnnpack-gemm": "size_t mr, size_t nc, size_t kc, const int8_t *a, size_t a_stride, const void *w, C *c, "
                    "size_t cm_stride, size_t cn_stride, const params *params[, const float *row_sum (qd8-qc2w)]"
                    "[, const struct xnn_qd8_quantization_params *quantization_params (qd8)]",
    "xnnpack-igemm": "size_t mr, size_t nc, size_t kc, size_t ks, const int8_t **a, const void *w, C *c, "
                     "size_t cm_stride, size_t cn_stride, size_t a_offset, const int8_t *zero, "
                     "[const int8_t *zero_data (qd8), ]const params *params",
}


def expected(kernel) -> tuple[str, ...]:
    base = EXPECTED[kernel.signature]
    if kernel.signature in ("xnnpack-gemm", "xnnpack-igemm") and _dynamic(kernel):
        # qd8/qdu8: the rows' quantization parameters; an IGEMM's zero_data before its params too; qd8-qc2w the
        # rows' sums before them (xnn_qd8_f32_qc2w_gemm_ukernel_fn)
        if kernel.signature == "xnnpack-igemm":
            return base[:-1] + ("ptr", "ptr", "ptr")
        return base + ("ptr",) * (1 + _datatype(kernel).row_sums)
    return base + ("int",) * len(kernel.params)


def _datatype(kernel):
    from lowp.kernels.xnnpack import DATATYPES
    return DATATYPES.get((kernel.xnnpack or {}).get("datatype", ""))


def _dynamic(kernel) -> bool:
    d = _datatype(kernel)
    return d is not None and d.dynamic


def parameters(path: str | Path, symbol: str) -> list[tuple[str, str, str]] | None:
    """[(name, 'int' | 'ptr' | other kind, type text)] of the function `symbol` defined in the ELF at `path`, or None
    when its DWARF does not describe it (no -g, assembly) or the build is no ELF (a wasm module: its machine checks
    each call's arguments against the function's type)."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None
        f.seek(0)
        elf = ELFFile(f)
        if not elf.has_dwarf_info():
            return None
        word = elf.elfclass // 8           # an integer of this size is a register's: size_t
        for cu in elf.get_dwarf_info().iter_CUs():
            assembly = _assembly(cu)
            for die in cu.iter_DIEs():
                if die.tag != "DW_TAG_subprogram" or _name(die) != symbol or "DW_AT_low_pc" not in die.attributes:
                    continue
                if assembly:       # GNU as 2.40 describes a .type @function symbol, with no parameters to read
                    return None
                return [(_name(child) or "?", *_kind(child, word)) for child in die.iter_children()
                        if child.tag == "DW_TAG_formal_parameter"]
    return None


DW_LANG_MIPS_ASSEMBLER = 0x8001      # what assemblers put in DW_AT_language (DWARF 5 section 7.12)


def _assembly(cu) -> bool:
    """Whether the compilation unit is an assembler's: its DW_AT_language, or a producer naming an assembler."""
    top = cu.get_top_DIE()
    language = top.attributes.get("DW_AT_language")
    producer = top.attributes.get("DW_AT_producer")
    text = producer.value.decode(errors="replace") if producer and isinstance(producer.value, bytes) else ""
    return (language is not None and language.value == DW_LANG_MIPS_ASSEMBLER) or text.startswith(("GNU AS", "AS "))


def mismatch(kernel, path: str | Path) -> str | None:
    """Why the kernel's entry symbol does not have its signature kind's parameters, or None (matches, or cannot be
    read)."""
    params = parameters(path, kernel.symbol)
    if params is None:
        return None
    want = expected(kernel)
    got = tuple(kind for _, kind, _ in params)
    if got == want:
        return None
    found = ", ".join(f"{text} {name}" for name, _, text in params) or "no parameters"
    return (f"{kernel.symbol} has the wrong prototype for signature {kernel.signature!r}: expected {len(want)} "
            f"parameters ({NAMES[kernel.signature]}{', int64_t param...' if kernel.params else ''}), found "
            f"{len(params)} ({found})")


def _name(die) -> str | None:
    attr = die.attributes.get("DW_AT_name")
    return attr.value.decode() if attr else None


def _kind(die, word: int = 8) -> tuple[str, str]:
    """('int' for an integer of `word` bytes, 'ptr', or the type's own kind) and a C-like spelling of the type."""
    quals = []
    while die is not None and "DW_AT_type" in die.attributes:
        die = die.get_DIE_from_attribute("DW_AT_type")
        if die.tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type", "DW_TAG_restrict_type"):
            if die.tag == "DW_TAG_typedef" and not quals:
                quals.append(_name(die) or "")
            continue
        if die.tag == "DW_TAG_pointer_type":
            return "ptr", f"{quals[0]} (a pointer)" if quals else "pointer"
        if die.tag == "DW_TAG_base_type":
            size = die.attributes["DW_AT_byte_size"].value
            text = quals[0] if quals else _name(die) or "?"
            float_type = die.attributes["DW_AT_encoding"].value == 4         # DW_ATE_float
            return ("float" if float_type else "int" if size == word else f"int{8 * size}"), text
        if die.tag == "DW_TAG_array_type":                     # a parameter declared as an array is a pointer
            return "ptr", "array"
        return die.tag.replace("DW_TAG_", ""), _name(die) or die.tag
    return "void", "void"
