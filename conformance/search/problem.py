"""A failing call written as one self-contained id, the way benchdnn prints a problem as a line that reruns it:

    KERNEL:CHECK:DOMAIN:MxNxK:A=<values>:B=<values>:seed=<poison seed>[:abi=<ABI options>][:q=<parameters as JSON>]

<values> are A's (M x K) and B's (K x N) elements in row-major order, run-length encoded: `255*274` is 274 times
255, `0*3,-128,0*4` is eight values. A shrunk counterexample has few distinct runs, so its id is short; any call
can be written, however. `lowp conformance replay ID` runs it with no journal or report: the id carries
everything but the kernel, which `--kernels FILE` registers when it is not built in. <ABI options> are an XNNPACK
ukernel's strides and indirection (lowp.conformance.search.cases.abi_options) as key=value pairs without colons:
`abi=a=17,cm=13` (strides in bytes), `abi=align_A=1,align_params=4` (buffers' offsets from a 64-byte boundary:
docs/alignment.md), `abi=ks=3,a_offset=11,zero=auto` (an IGEMM's taps; listed zero taps as
`zero=p.m/p.m`).
"""
from __future__ import annotations

import json
import re

import numpy as np

_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def is_problem(text: str) -> bool:
    return ":A=" in text and ":B=" in text


def encode(kernel: str, check: str, domain: str, A, B, seed: int, quant: dict | None = None,
           options: dict | None = None) -> str:
    A, B = np.asarray(A), np.asarray(B)
    m, k = A.shape
    n = B.shape[1]
    text = f"{kernel}:{check}:{domain}:{m}x{n}x{k}:A={runs(A)}:B={runs(B)}:seed={int(seed)}"
    if options:
        text += ":abi=" + abi_text(options)
    if quant is not None:
        text += ":q=" + json.dumps(quant, separators=(",", ":"), sort_keys=True)
    return text


def decode(text: str) -> dict:
    """{kernel, check, domain, A, B (int64 arrays of their shapes), seed, quant (the JSON form, or None), options
    (the ABI options, or None)}; ValueError naming what is wrong."""
    head, _, quant = text.partition(":q=")      # the parameters' JSON may hold colons: it comes last
    parts = head.split(":")
    options = abi_options(parts.pop()[4:]) if len(parts) == 8 and parts[-1].startswith("abi=") else None
    if len(parts) != 7:
        raise ValueError(f"not a problem id: {text!r} (expected KERNEL:CHECK:DOMAIN:MxNxK:A=...:B=...:seed=N"
                         "[:abi=OPTIONS][:q=JSON])")
    kernel, check, domain, shape, a, b, seed = parts
    match = _SHAPE.match(shape)
    if not match:
        raise ValueError(f"{text!r}: the shape {shape!r} is not MxNxK")
    m, n, k = (int(x) for x in match.groups())
    for field, prefix in ((a, "A="), (b, "B="), (seed, "seed=")):
        if not field.startswith(prefix):
            raise ValueError(f"{text!r}: expected {prefix}... where it says {field!r}")
    try:
        q = json.loads(quant) if quant else None
    except json.JSONDecodeError as e:
        raise ValueError(f"{text!r}: the parameters after q= are not JSON ({e})") from None
    return {"kernel": kernel, "check": check, "domain": domain, "A": unruns(a[2:], (m, k), "A"),
            "B": unruns(b[2:], (k, n), "B"), "seed": int(seed[5:]), "quant": q, "options": options}


def runs(x: np.ndarray) -> str:
    """Row-major elements as runs: 'v' once, 'v*count' repeated."""
    flat = np.asarray(x).ravel()
    if flat.size == 0:
        return ""
    starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
    counts = np.diff(np.r_[starts, flat.size])
    return ",".join(f"{flat[s]}" if c == 1 else f"{flat[s]}*{c}" for s, c in zip(starts, counts))


def unruns(text: str, shape: tuple[int, int], name: str) -> np.ndarray:
    values = []
    for item in filter(None, text.split(",")):
        value, _, count = item.partition("*")
        try:
            values += [int(value)] * (int(count) if count else 1)
        except ValueError:
            raise ValueError(f"{name}: {item!r} is not VALUE or VALUE*COUNT") from None
    if len(values) != shape[0] * shape[1]:
        raise ValueError(f"{name} has {len(values)} elements; its shape {shape[0]}x{shape[1]} needs "
                         f"{shape[0] * shape[1]}")
    return np.array(values, np.int64).reshape(shape)


# The ABI options' keys, by the executor argument that takes them (lowp.kernels.xnnpack Strides, Indirection).
ABI_KEYS = {"strides": ("a", "cm", "cn"), "igemm": ("ks", "a_offset", "zero")}


ALIGN_KEY = "align_"     # `align_A=1`: buffer A's start 1 byte past a 64-byte boundary (the `align` option)


def abi_text(options: dict) -> str:
    """{"strides": {"a": 17}, "igemm": {"ks": 3, "zero": "auto"}, "align": {"A": 1}} as
    `a=17,ks=3,zero=auto,align_A=1`."""
    items = []
    for group, keys in ABI_KEYS.items():
        for key, value in (options.get(group) or {}).items():
            if key not in keys:
                raise ValueError(f"ABI option {group}[{key!r}]: not one of {', '.join(keys)}")
            if key == "zero" and value != "auto":
                value = "/".join(f"{int(p)}.{int(m)}" for p, m in value)
            items.append(f"{key}={value}")
    items += [f"{ALIGN_KEY}{buffer}={int(offset)}" for buffer, offset in (options.get("align") or {}).items()]
    return ",".join(items)


def abi_options(text: str) -> dict:
    """abi_text's inverse; ValueError naming a pair that is not KEY=VALUE of a known key."""
    out: dict = {}
    group_of = {key: group for group, keys in ABI_KEYS.items() for key in keys}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key.startswith(ALIGN_KEY) and key != ALIGN_KEY and value.isdigit():
            out.setdefault("align", {})[key.removeprefix(ALIGN_KEY)] = int(value)
            continue
        if key not in group_of or not value:
            raise ValueError(f"abi={text}: {item!r} is not KEY=VALUE with KEY one of {', '.join(group_of)}")
        if key == "zero":
            parsed = value if value == "auto" else [tuple(int(x) for x in pm.split(".")) for pm in value.split("/")]
        else:
            try:
                parsed = int(value)
            except ValueError:
                raise ValueError(f"abi={text}: {key}={value!r} is not an integer") from None
        out.setdefault(group_of[key], {})[key] = parsed
    return out
