"""Bounds checks compiled into a WebAssembly module: every load and store of every function goes through a check
that the bytes it touches lie inside a region the host allows, so a read one byte past a buffer is a trap naming
the buffer, not a silent read of the next byte of linear memory.

Why a rewrite: wasm linear memory is one flat range; the engine traps only past its end, and wasmtime's Python API
cannot protect pages inside it. So `instrument()` rewrites the module's code (WebAssembly Core Specification 2.0,
5.4 "Instructions": the binary encoding walked here) and adds

- two check functions, `lowp_check_read` and `lowp_check_write` ((addr, offset, size, site) -> addr): the
  accessed range is addr + offset .. + size (33-bit effective address, spec 4.4.7 "Memory Instructions");
  inside one of the REGIONS allowed regions it returns addr unchanged, else it stores the address, size and site in
  globals and executes `unreachable`;
- an export of every function the "name" section names and the module does not export already (a kernel's
  internal functions are called by name);
- exported mutable globals: `lowp_region_<i>_lo`, `_read_hi`, `_write_hi` (a buffer's allowed over-read is in
  the read range only), `lowp_fault_addr`, `lowp_fault_size`, `lowp_fault_site`.

Before a load (address on top of the stack) the rewrite pushes offset, size and site and calls the check; before a
store, a lane load/store or a bulk memory instruction it first parks the operands above the address in scratch
locals it adds to the function. `Site` says which function, instruction and access each site number is, for the
fault's words. Custom sections other than "name" are dropped (DWARF offsets no longer hold).
"""
from __future__ import annotations

from dataclasses import dataclass

REGIONS = 12              # allowed regions: the module's static data and stack, and the call's buffers
I32, I64, F32, F64, V128 = 0x7F, 0x7E, 0x7D, 0x7C, 0x7B
SCRATCH = (I32, I32, I32, I64, F32, F64, V128)     # locals added to every function, in this order


class WasmFormatError(ValueError):
    """The module uses an encoding the rewrite does not know (e.g. atomics, multiple memories)."""


@dataclass(frozen=True)
class Site:
    """One checked memory access of the module: the function (index and name), the instruction, its static
    offset and size, read or write."""
    function: int
    name: str
    instruction: str
    offset: int
    size: int | None         # None: the run-time length of a bulk instruction
    access: str

    def describe(self) -> str:
        return f"{self.instruction} offset={self.offset} in function {self.name or self.function}"


# ---- LEB128 ------------------------------------------------------------------------------------------------------
def uleb(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def sleb(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, i


def enc_u(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def enc_s(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        done = (n == 0 and not b & 0x40) or (n == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def vec(items: list[bytes]) -> bytes:
    return enc_u(len(items)) + b"".join(items)


def name(text: str) -> bytes:
    raw = text.encode()
    return enc_u(len(raw)) + raw


# ---- the memory instructions (spec 5.4.6 and 5.4.8) ---------------------------------------------------------------
# opcode -> (mnemonic, bytes accessed, 'read'/'write', the value type stored, or None for a load)
PLAIN = {
    0x28: ("i32.load", 4, None), 0x29: ("i64.load", 8, None), 0x2A: ("f32.load", 4, None),
    0x2B: ("f64.load", 8, None), 0x2C: ("i32.load8_s", 1, None), 0x2D: ("i32.load8_u", 1, None),
    0x2E: ("i32.load16_s", 2, None), 0x2F: ("i32.load16_u", 2, None), 0x30: ("i64.load8_s", 1, None),
    0x31: ("i64.load8_u", 1, None), 0x32: ("i64.load16_s", 2, None), 0x33: ("i64.load16_u", 2, None),
    0x34: ("i64.load32_s", 4, None), 0x35: ("i64.load32_u", 4, None),
    0x36: ("i32.store", 4, I32), 0x37: ("i64.store", 8, I64), 0x38: ("f32.store", 4, F32),
    0x39: ("f64.store", 8, F64), 0x3A: ("i32.store8", 1, I32), 0x3B: ("i32.store16", 2, I32),
    0x3C: ("i64.store8", 1, I64), 0x3D: ("i64.store16", 2, I64), 0x3E: ("i64.store32", 4, I64),
}
# 0xFD prefix: sub-opcode -> (mnemonic, bytes, kind): 'load' (address on top), 'store' (address, v128),
# 'lane-load' / 'lane-store' (address, v128; a lane index byte follows the memarg)
SIMD_MEMORY = {
    0: ("v128.load", 16, "load"), 1: ("v128.load8x8_s", 8, "load"), 2: ("v128.load8x8_u", 8, "load"),
    3: ("v128.load16x4_s", 8, "load"), 4: ("v128.load16x4_u", 8, "load"), 5: ("v128.load32x2_s", 8, "load"),
    6: ("v128.load32x2_u", 8, "load"), 7: ("v128.load8_splat", 1, "load"), 8: ("v128.load16_splat", 2, "load"),
    9: ("v128.load32_splat", 4, "load"), 10: ("v128.load64_splat", 8, "load"), 11: ("v128.store", 16, "store"),
    92: ("v128.load32_zero", 4, "load"), 93: ("v128.load64_zero", 8, "load"),
    84: ("v128.load8_lane", 1, "lane-load"), 85: ("v128.load16_lane", 2, "lane-load"),
    86: ("v128.load32_lane", 4, "lane-load"), 87: ("v128.load64_lane", 8, "lane-load"),
    88: ("v128.store8_lane", 1, "lane-store"), 89: ("v128.store16_lane", 2, "lane-store"),
    90: ("v128.store32_lane", 4, "lane-store"), 91: ("v128.store64_lane", 8, "lane-store"),
}
SIMD_LANE = set(range(21, 35))          # extract_lane / replace_lane: one lane byte


class _Function:
    """One function body being rewritten: its scratch locals' indices and the sites it adds."""

    def __init__(self, index: int, fname: str, first_scratch: int, sites: list, checks: tuple[int, int]):
        self.index, self.fname, self.sites = index, fname, sites
        self.local = {}
        for k, t in enumerate(SCRATCH):
            self.local.setdefault(t, []).append(first_scratch + k)
        self.read, self.write = checks

    def check(self, instruction: str, offset: int, size: int | None, access: str, size_code: bytes = b"") -> bytes:
        """offset, size (a constant, or `size_code` pushing it at run time) and site pushed, then the call: the
        address on the stack is checked in place."""
        site = len(self.sites)
        self.sites.append(Site(self.index, self.fname, instruction, offset, size, access))
        code = b"\x41" + enc_s(_i32(offset)) + (b"\x41" + enc_s(size) if size is not None else size_code)
        return code + b"\x41" + enc_s(site) + b"\x10" + enc_u(self.read if access == "read" else self.write)

    def park(self, t: int, k: int = 0) -> tuple[bytes, bytes]:
        """(local.set, local.get) of scratch local k of type t."""
        idx = enc_u(self.local[t][k])
        return b"\x21" + idx, b"\x20" + idx


def _i32(x: int) -> int:
    return x - (1 << 32) if x >= 1 << 31 else x


def rewrite_body(expr: bytes, fn: _Function) -> bytes:
    """The expression with every memory access checked (spec 5.4: every instruction's immediates are skipped)."""
    out = bytearray()
    i, n = 0, len(expr)
    while i < n:
        start = i
        op = expr[i]
        i += 1
        if op in PLAIN:
            _, i = uleb(expr, i)                    # align
            offset, i = uleb(expr, i)
            mnemonic, size, stored = PLAIN[op]
            if stored is None:
                out += fn.check(mnemonic, offset, size, "read")
            else:
                park, restore = fn.park(stored)
                out += park + fn.check(mnemonic, offset, size, "write") + restore
            out += expr[start:i]
            continue
        if op == 0xFD:
            sub, j = uleb(expr, i)
            if sub in SIMD_MEMORY:
                _, j = uleb(expr, j)
                offset, j = uleb(expr, j)
                mnemonic, size, kind = SIMD_MEMORY[sub]
                if kind.startswith("lane"):
                    j += 1
                if kind == "load":
                    out += fn.check(mnemonic, offset, size, "read")
                else:
                    park, restore = fn.park(V128)
                    access = "read" if kind == "lane-load" else "write"
                    out += park + fn.check(mnemonic, offset, size, access) + restore
                out += expr[start:j]
                i = j
                continue
            if sub in (12, 13):                     # v128.const, i8x16.shuffle: 16 bytes
                j += 16
            elif sub in SIMD_LANE:
                j += 1
            out += expr[start:j]
            i = j
            continue
        if op == 0xFC:
            sub, j = uleb(expr, i)
            if sub in (8, 10, 11):                  # memory.init, memory.copy, memory.fill
                out += _bulk(fn, sub)
            j = _skip_fc(expr, sub, j)
            out += expr[start:j]
            i = j
            continue
        i = _skip(expr, op, i)
        out += expr[start:i]
    return bytes(out)


def _bulk(fn: _Function, sub: int) -> bytes:
    """Checks of memory.init (dst, src, n), memory.copy (dst, src, n) and memory.fill (dst, value, n): the
    destination as a write of n bytes, memory.copy's source as a read."""
    set_n, get_n = fn.park(I32, 1)
    set_s, get_s = fn.park(I32, 2)
    mnemonic = {8: "memory.init", 10: "memory.copy", 11: "memory.fill"}[sub]
    code = set_n + set_s + fn.check(mnemonic, 0, None, "write", get_n)
    if sub == 10:
        code += get_s + fn.check(mnemonic, 0, None, "read", get_n)
    else:
        code += get_s
    return code + get_n


def _skip_fc(expr: bytes, sub: int, j: int) -> int:
    if sub <= 7:
        return j
    if sub == 8:
        _, j = uleb(expr, j)
        return j + 1
    if sub == 9:
        return uleb(expr, j)[1]
    if sub == 10:
        return j + 2
    if sub == 11:
        return j + 1
    if sub in (12, 14):
        return uleb(expr, uleb(expr, j)[1])[1]
    if sub in (13, 15, 16, 17):
        return uleb(expr, j)[1]
    raise WasmFormatError(f"unknown instruction 0xFC {sub}")


def _skip(expr: bytes, op: int, i: int) -> int:
    """The position after the immediates of a non-memory instruction `op` (its byte already read)."""
    if op in (0x02, 0x03, 0x04):                    # block, loop, if: a block type
        if expr[i] == 0x40 or expr[i] in (I32, I64, F32, F64, V128, 0x70, 0x6F):
            return i + 1
        return sleb(expr, i)[1]
    if op in (0x0C, 0x0D, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0xD2):
        return uleb(expr, i)[1]
    if op == 0x0E:                                  # br_table
        count, i = uleb(expr, i)
        for _ in range(count + 1):
            _, i = uleb(expr, i)
        return i
    if op == 0x11:                                  # call_indirect
        return uleb(expr, uleb(expr, i)[1])[1]
    if op == 0x1C:                                  # select t*
        count, i = uleb(expr, i)
        return i + count
    if op in (0x3F, 0x40):                          # memory.size, memory.grow
        return i + 1
    if op == 0x41:
        return sleb(expr, i)[1]
    if op == 0x42:
        return sleb(expr, i)[1]
    if op == 0x43:
        return i + 4
    if op == 0x44:
        return i + 8
    if op == 0xD0:                                  # ref.null t
        return i + 1
    if op == 0xFE:
        raise WasmFormatError("atomic memory instructions (0xFE): not supported by lowp's bounds checks")
    if op in (0x00, 0x01, 0x05, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1) or 0x45 <= op <= 0xC4:
        return i
    raise WasmFormatError(f"unknown opcode {op:#04x}")


# ---- the module ----------------------------------------------------------------------------------------------------
ORDER = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 10, 11)     # the sections' required order (spec 5.5.2); customs apart
FAULT_GLOBALS = ("lowp_fault_addr", "lowp_fault_size", "lowp_fault_site")


@dataclass
class Instrumented:
    """The rewritten module's bytes and what each check site is."""
    wasm: bytes
    sites: list[Site]
    functions: dict[int, str]        # function index -> name (the "name" section), for the words of a fault


def region_globals(i: int) -> tuple[str, str, str]:
    return f"lowp_region_{i}_lo", f"lowp_region_{i}_read_hi", f"lowp_region_{i}_write_hi"


def _sections(wasm: bytes) -> list[tuple[int, bytes]]:
    if wasm[:8] != b"\0asm\x01\0\0\0":
        raise WasmFormatError("not a WebAssembly 1.0 binary module")
    out, i = [], 8
    while i < len(wasm):
        sid = wasm[i]
        size, j = uleb(wasm, i + 1)
        out.append((sid, wasm[j:j + size]))
        i = j + size
    return out


def _items(payload: bytes) -> tuple[int, int]:
    return uleb(payload, 0)


def _types(payload: bytes) -> list[int]:
    """The parameter count of every function type."""
    count, i = _items(payload)
    params = []
    for _ in range(count):
        if payload[i] != 0x60:
            raise WasmFormatError(f"type section: form {payload[i]:#x} is no function type")
        n, i = uleb(payload, i + 1)
        params.append(n)
        i += n
        m, i = uleb(payload, i)
        i += m
    return params


def _limits(payload: bytes, i: int) -> int:
    flag = payload[i]
    _, i = uleb(payload, i + 1)
    return uleb(payload, i)[1] if flag & 1 else i


def _imports(payload: bytes) -> tuple[list[int], int]:
    """(the type index of every imported function, the number of imported globals)."""
    count, i = _items(payload)
    functions, globals_ = [], 0
    for _ in range(count):
        for _ in range(2):
            n, i = uleb(payload, i)
            i += n
        kind = payload[i]
        i += 1
        if kind == 0:
            t, i = uleb(payload, i)
            functions.append(t)
        elif kind == 1:
            i = _limits(payload, i + 1)
        elif kind == 2:
            i = _limits(payload, i)
        elif kind == 3:
            i += 2
            globals_ += 1
        else:
            raise WasmFormatError(f"import kind {kind}")
    return functions, globals_


def _function_names(payload: bytes) -> dict[int, str]:
    """The function names of a "name" custom section (its subsection 1), {} where there are none."""
    try:
        n, i = uleb(payload, 0)
        i += n                                       # the section's own name, "name"
        while i < len(payload):
            sub = payload[i]
            size, j = uleb(payload, i + 1)
            if sub == 1:
                count, k = uleb(payload, j)
                names = {}
                for _ in range(count):
                    idx, k = uleb(payload, k)
                    length, k = uleb(payload, k)
                    names[idx] = payload[k:k + length].decode(errors="replace")
                    k += length
                return names
            i = j + size
    except IndexError:
        pass
    return {}


def module_function_names(wasm: bytes) -> dict[int, str]:
    """Function index -> name, from the module's "name" section ({} without one)."""
    for sid, payload in _sections(wasm):
        if sid == 0 and _custom_name(payload) == "name":
            return _function_names(payload)
    return {}


def _custom_name(payload: bytes) -> str:
    n, i = uleb(payload, 0)
    return payload[i:i + n].decode(errors="replace")


def _check_body(kind: str, first_global: int) -> bytes:
    """lowp_check_read / lowp_check_write: (addr, offset, size, site) -> addr, or the fault globals set and a
    trap. Locals 4 and 5 (i64): the first byte's effective address and the end of the range."""
    g = lambda k: enc_u(first_global + k)              # noqa: E731
    code = bytearray(b"\x20\x00\xAD\x20\x01\xAD\x7C\x22\x04"      # ea = u64(addr) + u64(offset)
                     b"\x20\x02\xAD\x7C\x21\x05"                  # end = ea + u64(size)
                     b"\x20\x02\x45\x04\x40\x20\x00\x0F\x0B")     # size 0: nothing touched
    hi = 1 if kind == "read" else 2
    for r in range(REGIONS):
        code += (b"\x23" + g(3 * r) + b"\xAD\x20\x04\x58"         # lo <= ea
                 + b"\x20\x05\x23" + g(3 * r + hi) + b"\xAD\x58"  # end <= hi
                 + b"\x71\x04\x40\x20\x00\x0F\x0B")
    base = 3 * REGIONS
    code += (b"\x20\x04\xA7\x24" + g(base) + b"\x20\x02\x24" + g(base + 1) + b"\x20\x03\x24" + g(base + 2)
             + b"\x00\x0B")
    return vec([b"\x02\x7E"]) + bytes(code)


def instrument(wasm: bytes) -> Instrumented:
    """`wasm` with every memory access bounds-checked against the exported region globals (the module docstring)."""
    sections = _sections(wasm)
    by_id = {sid: payload for sid, payload in sections if sid}
    params = _types(by_id.get(1, b"\0"))
    imported, imported_globals = _imports(by_id[2]) if 2 in by_id else ([], 0)
    count, i = _items(by_id.get(3, b"\0"))
    own_types = []
    for _ in range(count):
        t, i = uleb(by_id[3], i)
        own_types.append(t)
    names = {}
    for sid, payload in sections:
        if sid == 0 and _custom_name(payload) == "name":
            names = _function_names(payload)
    n_globals = imported_globals + (_items(by_id[6])[0] if 6 in by_id else 0)
    check_type = len(params)
    read_index = len(imported) + len(own_types)
    checks = (read_index, read_index + 1)

    # code: every body rewritten, the two checks appended
    sites: list[Site] = []
    code = by_id.get(10, b"\0")
    count, i = _items(code)
    bodies = []
    for k in range(count):
        size, i = uleb(code, i)
        body, i = code[i:i + size], i + size
        groups, j = uleb(body, 0)
        local_groups, declared = [], 0
        for _ in range(groups):
            n, j = uleb(body, j)
            local_groups.append(enc_u(n) + body[j:j + 1])
            declared += n
            j += 1
        index = len(imported) + k
        first = params[own_types[k]] + declared
        fn = _Function(index, names.get(index, ""), first, sites, checks)
        expr = rewrite_body(body[j:], fn)
        locals_ = vec(local_groups + [b"\x01" + bytes([t]) for t in SCRATCH])
        bodies.append(enc_u(len(locals_) + len(expr)) + locals_ + expr)
    for kind in ("read", "write"):
        body = _check_body(kind, n_globals)
        bodies.append(enc_u(len(body)) + body)

    new = dict(by_id)
    new[1] = _append(by_id.get(1, b"\0"), [b"\x60\x04" + bytes([I32] * 4) + b"\x01" + bytes([I32])])
    new[3] = _append(by_id.get(3, b"\0"), [enc_u(check_type)] * 2)
    new[6] = _append(by_id.get(6, b"\0"), [b"\x7F\x01\x41\x00\x0B"] * (3 * REGIONS + len(FAULT_GLOBALS)))
    exported = [g for r in range(REGIONS) for g in region_globals(r)] + list(FAULT_GLOBALS)
    taken = _export_names(by_id.get(7, b"\0"))
    functions = []
    for idx, f in sorted(names.items()):             # one export per name: a second static f() keeps none
        if idx >= len(imported) and f not in taken:
            taken.add(f)
            functions.append(name(f) + b"\x00" + enc_u(idx))
    new[7] = _append(by_id.get(7, b"\0"), [name(g) + b"\x03" + enc_u(n_globals + k) for k, g in enumerate(exported)]
                     + functions)
    new[10] = vec(bodies)
    out = bytearray(wasm[:8])
    for sid in ORDER:
        if sid in new:
            out += bytes([sid]) + enc_u(len(new[sid])) + new[sid]
    for sid, payload in sections:
        if sid == 0 and _custom_name(payload) == "name":
            out += b"\x00" + enc_u(len(payload)) + payload
    names[checks[0]], names[checks[1]] = "lowp_check_read", "lowp_check_write"
    return Instrumented(bytes(out), sites, names)


def _export_names(payload: bytes) -> set[str]:
    count, i = _items(payload)
    names = set()
    for _ in range(count):
        n, i = uleb(payload, i)
        names.add(payload[i:i + n].decode(errors="replace"))
        i += n + 1
        _, i = uleb(payload, i)
    return names


def _append(payload: bytes, items: list[bytes]) -> bytes:
    count, i = _items(payload)
    return enc_u(count + len(items)) + payload[i:] + b"".join(items)
