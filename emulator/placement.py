"""Where a buffer starts: the alignment option every executor honours (docs/alignment.md).

A caller of a kernel promises no more alignment than a buffer's element needs (XNNPACK's ukernels take `const
int8_t *a`, `void *c`, ...): a kernel that needs more (an aligned load, an address rounded down) is right only by
luck. Every executor places a buffer so that it (and its allowed over-read) ends at a guard page, which fixes its
start's alignment by its length; `align` = {buffer name: offset from a 64-byte boundary} moves the start instead:
the buffer starts at an address = offset (mod 64).

On a page-granular executor (native, Unicorn, Bochs, qemu-user) the guard page cannot move by less than a page, so
the start moves down and leaves `slack` (< 64 bytes) between the buffer's end (with its allowed over-read) and the
guard page: it holds the canary byte like the over-read area, so a kernel that reads into it computes with canary
bytes (a wrong result that shows) and one that writes into it is caught after the call by the canary check; a read
there is not a fault. wasm's bounds checks are byte-exact: there the buffer starts at the offset and its region
still ends at its last byte, so a read past it traps as ever.
"""
from __future__ import annotations

ALIGNMENT = 64          # the boundary offsets are counted from: a cache line, the widest vector (AVX-512, SME)
CANARY = 0xA5           # the byte a buffer's mapping holds around it (below it, its over-read, the slack)
_CANARIES = bytes([CANARY]) * 65536


def canaries(n: int) -> bytes:
    """n canary bytes: what an intact stretch of a mapping is compared with after a call (one memcmp; bytes.strip
    scans byte by byte, some 30 times slower) and what a fresh one is written with."""
    return _CANARIES[:n] if n <= len(_CANARIES) else bytes([CANARY]) * n


def check_alignment(align) -> dict[str, int]:
    """`align` as {name: offset}, every offset an int in [0, ALIGNMENT); None is {}. ValueError naming the buffer."""
    if align is None:
        return {}
    if not isinstance(align, dict):
        raise ValueError(f"align: expected {{buffer name: offset from a {ALIGNMENT}-byte boundary}}, got {align!r}")
    out = {}
    for name, offset in align.items():
        if isinstance(offset, bool) or not isinstance(offset, int) and not hasattr(offset, "__index__") \
                or not 0 <= int(offset) < ALIGNMENT:
            raise ValueError(f"align[{name!r}]: expected an offset from a {ALIGNMENT}-byte boundary in "
                             f"[0, {ALIGNMENT}), got {offset!r}")
        out[str(name)] = int(offset)
    return out


def slack(nbytes: int, after: int, offset: int | None) -> int:
    """Bytes between a buffer's allowed over-read and its mapping's end that make its start = `offset` (mod
    ALIGNMENT) when the mapping's end is a multiple of ALIGNMENT (a page's end); 0 for offset None (the buffer ends
    at the guard page, as always)."""
    if offset is None:
        return 0
    return (-(nbytes + after) - offset) % ALIGNMENT


def padded_after(name: str, nbytes: int, overread: dict, align: dict | None) -> int:
    """The canary bytes after buffer `name` on a page-granular executor: its allowed over-read plus the slack its
    alignment needs."""
    after = int((overread or {}).get(name, 0))
    return after + slack(nbytes, after, (align or {}).get(name))


def start_at(cursor: int, offset: int | None, default: int = 16) -> int:
    """The first address >= cursor at `offset` (mod ALIGNMENT), or `default`-aligned for offset None (a byte-exact
    executor's placement: wasm)."""
    if offset is None:
        return -(-cursor // default) * default
    return cursor + (offset - cursor) % ALIGNMENT


def shifted(align: dict | None, name: str, by: int) -> dict:
    """`align` for a call handed buffer `name` from byte `by` on (an ukernel's `a` at row m0): that pointer's
    offset is the buffer's plus `by`."""
    if not align or name not in align:
        return dict(align or {})
    return {**align, name: (align[name] + by) % ALIGNMENT}
