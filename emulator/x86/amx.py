"""AMX-INT8 on lowp's models, for x86 emulators without AMX (Bochs: no CPU model of bochscpu 0.4.0 has it).

The guest raises #UD at an AMX instruction; AmxUnit.execute decodes it (iced-x86: capstone 5 does not know AMX),
runs it on the tile state kept here and on lowp.isa_models.x86's TDPB*D models, and tells the emulator how long
the instruction was, so execution resumes after it. Results of such a kernel rest on lowp's models, not on a CPU
(the models are proven against the real instructions on an AMX machine: tests/test_x86_amx_avx10.py, `lowp isa
verify`), and every report says so (CallResult.modeled).

The tile architecture, palette 1 (Intel SDM Vol. 1 ch. 18; Vol. 2 LDTILECFG, TILELOADD, TILESTORED, TILEZERO,
TILERELEASE, STTILECFG, TDPBSSD/TDPBSUD/TDPBUSD/TDPBUUD): 8 tiles of at most 16 rows x 64 bytes; LDTILECFG reads
a 64-byte configuration (byte 0 palette_id, byte 1 start_row, bytes 16..47 colsb[16] as u16, bytes 48..63
rows[16]) and zeroes every tile; palette 0 (or TILERELEASE) is the init state, in which every tile instruction but
LDTILECFG, STTILECFG and TILERELEASE raises #UD. A tile write zeroes the bytes of the row past colsb and the rows
past `rows`. TILELOADD/TILESTORED address row r at base + displacement + r * (index << scale).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

ROWS, COLSB, TILES = 16, 64, 8
DOT = {"tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud"}
MNEMONICS = frozenset(DOT | {"ldtilecfg", "sttilecfg", "tilerelease", "tilezero", "tileloadd", "tileloaddt1",
                             "tilestored"})


class AmxFault(Exception):
    """The instruction faults as hardware would: vector 6 (#UD) or 13 (#GP) with a reason, or 14 (#PF) at
    `address` (`write`: the access was a store)."""

    def __init__(self, vector: int, message: str, address: int | None = None, write: bool = False,
                 start: int | None = None, size: int | None = None):
        super().__init__(message)
        self.vector, self.address, self.write, self.start, self.size = vector, address, write, start, size


@lru_cache(maxsize=1)
def _iced():
    import iced_x86
    names = {v: k.lower() for k, v in vars(iced_x86.Register).items() if k.isupper() and isinstance(v, int)}
    mnemonics = {v: k.lower() for k, v in vars(iced_x86.Mnemonic).items() if k.isupper() and isinstance(v, int)}
    return iced_x86, names, mnemonics


@lru_cache(maxsize=4096)
def _decoded(code: bytes, rip: int):
    """(the instruction, its mnemonic, its operands' register names) at `rip`: a kernel's AMX instructions are a
    few addresses run thousands of times (decoding one costs more than its TDPBUSD's model)."""
    iced, reg_names, mnemonics = _iced()
    insn = next(iter(iced.Decoder(64, code, ip=rip)))
    return insn, mnemonics.get(insn.mnemonic, ""), [reg_names.get(insn.op_register(i), "")
                                                       for i in range(insn.op_count)]


class AmxUnit:
    """The tile registers and configuration of one guest CPU."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """The init state (after TILERELEASE): no palette, tiles zero."""
        self.palette = 0
        self.start_row = 0
        self.rows = np.zeros(TILES, np.int64)
        self.colsb = np.zeros(TILES, np.int64)
        self.tiles = np.zeros((TILES, ROWS, COLSB), np.uint8)

    def execute(self, code: bytes, rip: int, regs: dict, read, write) -> tuple[str, int] | None:
        """Run the instruction at `rip` (`code`: its bytes and what follows) if it is an AMX one: returns
        (mnemonic, length); None for any other instruction (left to the emulator's #UD). read(address, n) and
        write(address, data) access guest memory (raising ValueError for an unmapped address). Raises AmxFault."""
        insn, name, operands = _decoded(bytes(code), rip)
        if not (name.startswith("tile") or name in DOT or name in ("ldtilecfg", "sttilecfg")):
            return None
        reg_names = _iced()[1]
        if name in ("ldtilecfg", "sttilecfg", "tilerelease"):
            getattr(self, name)(insn, regs, reg_names, read, write)
            return name, insn.len
        if self.palette == 0:
            raise AmxFault(6, f"{name} with the tiles unconfigured (no LDTILECFG, or after TILERELEASE): #UD")
        if name == "tilezero":
            self.tiles[_tile(operands[0])] = 0
        elif name in ("tileloadd", "tileloaddt1"):
            self._load(_tile(operands[0]), insn, regs, reg_names, read)
        elif name == "tilestored":
            self._store(_tile(operands[1]), insn, regs, reg_names, read, write)
        elif name in DOT:
            self._dot(name, *(_tile(o) for o in operands))
        else:
            raise AmxFault(6, f"{name}: an AMX instruction lowp does not model (AMX-INT8 only)")
        return name, insn.len

    # -- configuration ----------------------------------------------------------------------------------------
    def ldtilecfg(self, insn, regs, reg_names, read, write) -> None:
        address = _address(insn, regs, reg_names)
        cfg = _read(read, address, 64, insn)
        palette, start_row = cfg[0], cfg[1]
        colsb = np.frombuffer(cfg[16:48], "<u2").astype(np.int64)
        rows = np.frombuffer(cfg[48:64], np.uint8).astype(np.int64)
        if palette == 0:
            self.reset()
            return
        if palette != 1 or any(cfg[2:16]):
            raise AmxFault(13, f"LDTILECFG: palette {palette} (only palette 1 exists) or reserved bytes set: #GP")
        bad = [i for i in range(TILES) if rows[i] > ROWS or colsb[i] > COLSB or (rows[i] == 0) != (colsb[i] == 0)]
        if bad or any(rows[TILES:]) or any(colsb[TILES:]):
            raise AmxFault(13, f"LDTILECFG: tile(s) {bad} configured beyond 16 rows x 64 bytes or half-configured: "
                               "#GP")
        self.palette, self.start_row = 1, start_row
        self.rows, self.colsb = rows[:TILES].copy(), colsb[:TILES].copy()
        self.tiles[:] = 0

    def sttilecfg(self, insn, regs, reg_names, read, write) -> None:
        cfg = bytearray(64)
        if self.palette:
            cfg[0], cfg[1] = self.palette, self.start_row
            cfg[16:16 + 2 * TILES] = self.colsb.astype("<u2").tobytes()
            cfg[48:48 + TILES] = self.rows.astype(np.uint8).tobytes()
        _write(write, read, _address(insn, regs, reg_names), bytes(cfg))

    def tilerelease(self, *unused) -> None:
        self.reset()

    # -- data -------------------------------------------------------------------------------------------------
    def _load(self, t: int, insn, regs, reg_names, read) -> None:
        start, stride = _tile_address(insn, regs, reg_names)
        rows, colsb = int(self.rows[t]), int(self.colsb[t])
        data = b"".join(_read(read, start + r * stride, colsb, insn) for r in range(rows))
        self.tiles[t] = 0
        self.tiles[t, :rows, :colsb] = np.frombuffer(data, np.uint8).reshape(rows, colsb)

    def _store(self, t: int, insn, regs, reg_names, read, write) -> None:
        start, stride = _tile_address(insn, regs, reg_names)
        for r in range(int(self.rows[t])):
            _write(write, read, start + r * stride, self.tiles[t, r, :int(self.colsb[t])].tobytes())

    def _dot(self, name: str, d: int, s1: int, s2: int) -> None:
        x86 = _models()
        a_type, b_type = x86.AMX_TYPES[name]
        m, k, n4 = int(self.rows[d]), int(self.colsb[s1]), int(self.colsb[d])
        if len({d, s1, s2}) < 3:
            raise AmxFault(6, f"{name}: the same tile twice: #UD")
        if int(self.rows[s1]) != m or int(self.rows[s2]) != k // 4 or int(self.colsb[s2]) != n4 or not m or n4 % 4 \
                or k % 4:
            raise AmxFault(6, f"{name}: tile shapes do not fit (tmm{d} {m}x{n4}B, tmm{s1} {self.rows[s1]}x{k}B, "
                              f"tmm{s2} {self.rows[s2]}x{self.colsb[s2]}B): #UD")
        c = self.tiles[d, :m, :n4].copy().view(np.int32)
        a = self.tiles[s1, :m, :k].view(a_type)
        b = self.tiles[s2, :k // 4, :n4].view(b_type)
        out = getattr(x86, name)(c, a, b)
        tile = np.zeros((ROWS, COLSB), np.uint8)
        tile[:m, :n4] = out.astype(np.int32).view(np.uint8).reshape(m, n4)
        self.tiles[d] = tile


def _models():
    """lowp.isa_models.x86, whose TDPB*D models the unit runs (imported at the first dot product)."""
    from lowp.isa_models import x86
    return x86


def preload() -> None:
    """Import what the unit's first instructions would (iced-x86, the TDPB*D models): a guest forked from a process
    that called this starts with them (lowp.emulator.x86.bochs.ForkedGuest)."""
    _iced()
    _models()


def _tile(register: str) -> int:
    if not register.startswith("tmm"):
        raise AmxFault(6, f"expected a tile register, got {register!r}")
    return int(register[3:])


def _value(regs: dict, reg_names: dict, register) -> int:
    name = reg_names.get(register, "")
    if name in ("", "none"):
        return 0
    if name not in regs:
        raise AmxFault(6, f"address register {name} is not a 64-bit general register")
    return regs[name]


def _address(insn, regs, reg_names) -> int:
    return (_value(regs, reg_names, insn.memory_base) + insn.memory_displacement) & (2 ** 64 - 1)


def _tile_address(insn, regs, reg_names) -> tuple[int, int]:
    """(first row's address, stride): base + displacement, and index << scale (index absent: stride 0)."""
    stride = _value(regs, reg_names, insn.memory_index) * insn.memory_index_scale
    return _address(insn, regs, reg_names), stride


def _read(read, address: int, n: int, insn) -> bytes:
    try:
        return read(address, n)
    except ValueError:
        raise AmxFault(14, "a row's load touched an unmapped page", address=_first_unmapped(read, address, n),
                       start=address, size=n) from None


def _write(write, read, address: int, data: bytes) -> None:
    try:
        write(address, data)
    except ValueError:
        raise AmxFault(14, "a row's store touched an unmapped page", address=_first_unmapped(read, address, len(data)),
                       write=True, start=address, size=len(data)) from None


def _first_unmapped(read, address: int, n: int) -> int:
    """The first byte of [address, address + n) that is not mapped (what CR2 would say)."""
    page = 4096
    at = address
    while at < address + n:
        try:
            read(at, 1)
        except ValueError:
            return at
        at = (at // page + 1) * page
    return address
