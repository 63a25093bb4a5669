"""Quantized cases: the parameters of a requantizing kernel's case (zero points, bias, scales or fixed-point
multipliers, the clamp) and its verdict against an output-stage contract.

A case's parameters are drawn from the output-stage contract's documented domain (lowp.conformance.contracts.output)
by a generator seeded with the case's seed, in a style chosen by the case's value class: 'typical' (XNNPACK's tester:
outputs spanning the type), 'ends' (the domain's ends: the largest scale accepted, zero points at both ends) and
'limits' (biases that drive the accumulator to int32's limits), so a case id still regenerates everything. The
accumulator the output stage receives is the accumulation contract's (its accepted variants: exact for most) with the
zero-point terms added as the libraries add them; a kernel passes when its output equals the output stage of any
accepted accumulator under any accepted output variant.
"""
from __future__ import annotations

import functools
import hashlib

import numpy as np


from lowp.conformance.contracts.int32 import contract as accumulation_contract
from lowp.conformance.contracts.output import accumulators, exact_accumulators  # noqa: F401 - public here too
from lowp.conformance.search.names import END_CLASSES, abi_name
from lowp.kernels.entry import KeptForKernel


def output_contract(name: str):
    # Imported here: the output-stage contracts pull in the float and fixed-point arithmetic, which an int32 run
    # never needs.
    from lowp.conformance.contracts.output import output_contract as lookup
    return lookup(name)

# Quantization arrays indexed by the rows of A (the dynamically quantized qd8 kind); every other 1-d array is per
# output channel (a column of B and C).
ROW_KEYS = ("a_zero_point", "a_inv_scale")
COLUMN_BLOCK_KEYS = ("b_block_scale",)        # (N, blocks): one row per output channel
STYLE_OF_VALUES = {"uniform": "typical", "realistic": "typical", "extremes": "ends", "adversarial": "limits"}


def per_row(key: str, value) -> bool:
    return key in ROW_KEYS and np.ndim(value) == 1


def case_style(values: str) -> str:
    """The parameter style of a value class; the depth ladder's every-element-at-an-end classes take 'limits'."""
    return STYLE_OF_VALUES.get(values, "limits" if values in END_CLASSES else "ends")


def input_zero_points(kern, rng, M: int, style: str) -> dict:
    """The zero points the kernel's ABI takes: XNNPACK's qs8 kinds an input zero point (the weights have none),
    qd8 one per row, XNNPACK's qu8 and lowp's driver ABI both; at the type's ends in the 'ends' style."""
    def one(type_name, shape=()):
        lo, hi = _ends(kern.a_dtype if type_name == "a" else kern.b_dtype)
        if style == "ends":
            return rng.choice([lo, hi, 0, -1 if lo < 0 else 1], size=shape).astype(np.int64) if shape else \
                int(rng.choice([lo, hi, 0, -1 if lo < 0 else 1]))
        v = rng.integers(lo, hi, size=shape, endpoint=True)
        return v if shape else int(v)
    datatype = (kern.xnnpack or {}).get("datatype", "")
    if datatype.startswith(("qd8", "qdu8")):            # one per row; an IGEMM takes its batch's one for all rows
        zp = np.asarray(one("a", (M,)), np.int32)
        return {"a_zero_point": np.full_like(zp, zp[0]) if kern.signature == "xnnpack-igemm" else zp}
    if kern.xnnpack is not None and datatype != "qu8":
        return {"a_zero_point": one("a"), "b_zero_point": 0}
    return {"a_zero_point": one("a"), "b_zero_point": one("b")}


def pinned(kern, q: dict) -> dict:
    """q with the kernel's pinned parameters (its entry's `quant` table) in place: a per-channel or per-row key
    takes the value everywhere; float keys are float32, as the kernel is handed them."""
    return _with(q, kern.quant)


def _with(q: dict, values: dict) -> dict:
    """q with `values` in place (pinned's rule: arrays take a value everywhere, floats are float32)."""
    for key, value in values.items():
        old = q.get(key)
        if np.ndim(old):
            q[key] = np.full_like(old, value)
        elif isinstance(value, float) or isinstance(old, (float, np.floating)):
            q[key] = np.float32(value)
        else:
            q[key] = int(value)
    return q


def per_tensor(kern) -> bool:
    """XNNPACK's per-tensor kinds (qs8, qu8) take one scale: a case repeats one value over the channels; a qd8
    IGEMM takes one row of quantization parameters (its batch's) for all rows."""
    return kern.xnnpack is not None and (kern.xnnpack["datatype"] in ("qs8", "qu8") or (
        kern.signature == "xnnpack-igemm" and kern.xnnpack["datatype"].startswith(("qd8", "qdu8"))))


def _tensorwise(q: dict) -> dict:
    for key in ("scale", "multiplier", "shift", *ROW_KEYS):
        if key in q and np.ndim(q[key]) == 1 and len(q[key]):
            q[key] = np.full_like(q[key], q[key][0])
    return q


def draw_params(kern, A: np.ndarray, B: np.ndarray, seed: int, style: str, domain: str = "claimed",
                pins: dict | None = None, edge: str | None = None) -> dict:
    """The quantization parameters of one case, from `seed`: zero points, then the output contract's draw given the
    accumulators' range (or its `outside` draw for the not-claimed probe beyond the documented domain). pins: what
    the case's name fixes (`case_pins`): its input zero points before the accumulators are formed (the draw fits
    the scale to them), the rest over the draw; the kernel's own pins win. The `outside` probe takes none. edge: an
    output-stage edge (search/stage_edges.py STAGE_EDGES) the parameters and biases are solved for, over the draw."""
    rng = np.random.default_rng([seed, 0x0A7])
    M, N = A.shape[0], B.shape[1]
    pins = {} if domain == "outside" else pins or {}
    zps = _with(input_zero_points(kern, rng, M, style), {k: v for k, v in pins.items() if k in INPUT_ZERO_POINTS})
    acc = exact_accumulators(A, B, zps)
    lo, hi = (int(acc.min()), int(acc.max())) if acc.size else (0, 0)
    contract = output_contract(kern.output)
    if domain == "outside":
        return _outside(kern, contract, rng, acc, zps, A)
    drawn = contract.draw(rng, M, N, kern.c_type, style, lo, hi)
    if edge is not None:
        from lowp.conformance.search.stage_edges import aim
        drawn = aim(kern, contract, drawn, acc, rng, edge, kern.c_type)
    drawn = _with(drawn, {k: v for k, v in pins.items() if k not in INPUT_ZERO_POINTS})
    q = pinned(kern, {**drawn, **zps})
    return _tensorwise(q) if per_tensor(kern) else q


# ---- parameters a case's name fixes ---------------------------------------------------------------------------------
# XNNPACK's tester pins some parameters by test name (tools/generate-gemm-test.py @75db3c0: qmin, qmax, min, max,
# no_zero_point) and never draws others (test/gemm-microkernel-tester.cc: weights in [-127, 127], a_zero_point and
# b_zero_point 127 unless a test sets them, output zero point -1 (qs8) or centred (qu8), the scale from the data);
# lowp's draws reach those ends at random ('ends', 'limits'), these names reach them every run.
INPUT_ZERO_POINTS = ("a_zero_point", "b_zero_point")
PIN_NAMES = ("qmin", "qmax", "min", "max", "no_zero_point", "zero_points_min", "zero_points_max", "scale_max")
TESTER_QMIN_QMAX = 128      # the tester's qmin(128) / qmax(128), on a uint8 scale (qs8 subtracts 0x80)


def case_pins(kern, name: str) -> dict:
    """The parameters a case named `name` fixes for an XNNPACK ukernel ({} where the name fixes nothing for it):
    - qmin / qmax (int8 or uint8 output): output_min (or output_max) at the middle of the type, the tester's 128 on
      a uint8 scale (0 for int8), the other end open: with outputs drawn to span the type, about half are clamped;
    - min / max (float output: XNNPACK's names there): output_min (or output_max) 0.0, the other end infinite;
    - no_zero_point (qu8): input and kernel zero points 0 (the tester's a_zero_point(0).b_zero_point(0));
    - zero_points_min / zero_points_max: every zero point the ABI takes (the input's, per row for qd8; qu8's
      kernel zero point; the output's) at the low / high end of its type;
    - scale_max: every channel's scale the largest the output contract documents (just below 256 for XNNPACK's
      fp32, rndnu and rndnu16; none for a float output, whose scales are documented as finite only);
    - every name but qmin, qmax, min and max, and the ABI cases' (strided_*, small_kernel*, a_offset,
      zero_index_*): the clamp open (the output type's ends, or infinite), so what the case is about shows in C: a
      drawn clamp as narrow as one value would hide a read of the wrong bytes."""
    if kern.xnnpack is None or not kern.quantized:
        return {}
    pins = _named_pins(kern, name)
    if name in ("qmin", "qmax", "min", "max") or not (pins or abi_name(name)):
        return pins
    return {**_open_clamp(kern), **pins}


def _open_clamp(kern) -> dict:
    if kern.float_output:
        return {"output_min": np.float32(-np.inf), "output_max": np.float32(np.inf)}
    lo, hi = _ends(kern.c_dtype)
    return {"output_min": lo, "output_max": hi}


def _named_pins(kern, name: str) -> dict:
    """case_pins of PIN_NAMES, before the clamp is opened."""
    datatype = kern.xnnpack["datatype"]
    if name in ("qmin", "qmax") and not kern.float_output:
        lo, hi = (int(x) for x in (np.iinfo(kern.c_dtype).min, np.iinfo(kern.c_dtype).max))
        middle = lo + TESTER_QMIN_QMAX
        return {"output_min": middle, "output_max": hi} if name == "qmin" else {"output_min": lo, "output_max": middle}
    if name in ("min", "max") and kern.float_output:
        return {"output_min": np.float32(0), "output_max": np.float32(np.inf)} if name == "min" else \
            {"output_min": np.float32(-np.inf), "output_max": np.float32(0)}
    if name == "no_zero_point" and datatype == "qu8":
        return {"a_zero_point": 0, "b_zero_point": 0}
    if name in ("zero_points_min", "zero_points_max"):
        end = 0 if name.endswith("min") else 1
        pins = {"a_zero_point": _ends(kern.a_dtype)[end]}
        if datatype == "qu8":
            pins["b_zero_point"] = _ends(kern.b_dtype)[end]
        if not kern.float_output:
            pins["output_zero_point"] = _ends(kern.c_dtype)[end]
        return pins
    if name == "scale_max":
        hi = getattr(output_contract(kern.output).domain, "scale_hi", None)
        return {} if hi is None else {"scale": np.nextafter(np.float32(hi), np.float32(0))}
    return {}


@functools.lru_cache(maxsize=None)
def _ends(dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def pinned_names(kern) -> list[str]:
    """The names of PIN_NAMES that fix something for this kernel: the cases conformance/search/cases.py generates."""
    return [name for name in PIN_NAMES if kern.xnnpack is not None and kern.quantized and _named_pins(kern, name)]


OUTSIDE_TRIES = 50


def _outside(kern, contract, rng, acc, zps, A) -> dict:
    """Parameters beyond the documented domain that the kernel can still be handed and the library's arithmetic
    still defines (a scale the params initialisation cannot encode, a shift the library asserts against, have no
    result to compare with: they are drawn again)."""
    M, N = acc.shape
    for _ in range(OUTSIDE_TRIES):
        q = pinned(kern, {**contract.outside(rng, M, N, kern.c_type), **zps})
        q = _tensorwise(q) if per_tensor(kern) else q
        if _defined(kern, contract, acc, q, A):
            return q
    return q


def _defined(kern, contract, acc, q, A) -> bool:
    from lowp.isa_models.requant import OUTPUT_STAGES
    try:
        if blockwise(contract):
            from lowp.kernels.xnnpack import check_bf16
            check_bf16(np.asarray(q["b_block_scale"]))
        else:
            OUTPUT_STAGES[contract.accepted[0]].compute(acc, with_rows(kern, A, q), kern.c_type)
        if kern.xnnpack is not None:
            from lowp.kernels.xnnpack import params_blob
            params_blob(kern.xnnpack["datatype"], kern.xnnpack["params"], q)
    except (ArithmeticError, ValueError):
        return False
    return True


def quant_strategy(kern, domain: str):
    """Hypothesis strategy of a case's parameters for the search, given its (M, N): the contract's own draw from a
    drawn style and seed, the zero points at their ends or anywhere in their type. Built once per check and
    called per example (a composite strategy built per example costs hypothesis more than the kernel call)."""
    from hypothesis import strategies as st
    from lowp.conformance.contracts.output import STYLES
    seeds, styles, zp_styles = st.integers(0, 2 ** 32 - 1), st.sampled_from(STYLES), st.sampled_from(ZP_STYLES)

    def params(draw, M: int, N: int) -> dict:
        style, seed = draw(styles), draw(seeds)
        zp_seed = draw(seeds)
        return search_params(kern, M, N, style, seed, draw(zp_styles), zp_seed)
    return params


ZP_STYLES = ("ends", "typical")


def search_params(kern, M: int, N: int, style: str, seed: int, zp_style: str, zp_seed: int) -> dict:
    """The search's parameters of an M x N case: the output contract's draw in `style` from `seed`, the input zero
    points in `zp_style` from `zp_seed` (quant_strategy draws these; `lowp fuzz`'s draws too, batch.draw_case)."""
    q = dict(output_contract(kern.output).draw(np.random.default_rng(seed), M, N, kern.c_type, style))
    zps = input_zero_points(kern, np.random.default_rng(zp_seed), M, zp_style)
    q = pinned(kern, {**q, **zps})
    return _tensorwise(q) if per_tensor(kern) else q


# ---- verdicts -----------------------------------------------------------------------------------------------------
def same(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit for bit (a float output's -0.0 and NaN payloads included)."""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


def blockwise(contract) -> bool:
    """A contract on A and B themselves (XNNPACK's qb4w kernels: lowp.conformance.contracts.output.BlockwiseContract),
    not on an int32 accumulator."""
    return hasattr(contract, "judge_blocks")


def block_geometry(kern):
    """The qb4w kernel's block size, kr and sr (what a blockwise contract's stages need of it)."""
    from lowp.conformance.contracts.output import BlockGeometry
    x = kern.xnnpack or {}
    return BlockGeometry(int(x.get("bl", 0)), int(kern.tile.kr), int(x.get("sr", 1)))


def with_rows(kern, A, q: dict) -> dict:
    """q with what a qd8-qc2w output stage reads beside the accumulator: the sums of A's rows and the depth as the
    ukernel is handed them (lowp.kernels.xnnpack.row_terms); q itself for every other kernel."""
    if not kern.xnnpack:
        return q
    from lowp.kernels.xnnpack import row_terms
    terms = row_terms(kern.xnnpack["datatype"], A, q)
    return {**q, **terms} if terms else q


def judge(check_name: str, kern, A, B, q, C) -> tuple[bool, str | None, np.ndarray]:
    """(ok, matched, expected) of a quantized kernel's output C: against its behaviour model ('model'), or against
    its output-stage contract applied to every accepted accumulator of its accumulation contract (a blockwise
    contract: to A and B)."""
    q = with_rows(kern, A, q)
    if check_name == "model":
        expected = kern.predict(A, B, q)
        ok = same(C, expected)
        return ok, "behaviour model" if ok else None, expected
    out = output_contract(check_name)
    if blockwise(out):                 # its known variants are named by judge_blocks itself
        return out.judge_blocks(C, A, B, q, kern.c_type, block_geometry(kern))
    acc_contract = accumulation_contract(kern.contract)
    first = None
    for variant in acc_contract.accepted:
        ok, matched, expected = out.judge(C, accumulators(variant, A, B, q), q, kern.c_type)
        first = first if first is not None else expected
        if ok:
            return True, matched if variant is acc_contract.accepted[0] else f"{variant.name} + {matched}", expected
    return False, next(_readings(check_name, kern, A, B, q, C), None), first


def expected(check_name: str, kern, A, B, q) -> np.ndarray:
    """What the check compares a kernel's output with: its model's prediction, or the output contract's first
    accepted stage on the accumulation contract's first accepted accumulator."""
    q = with_rows(kern, A, q)
    if check_name == "model":
        return kern.predict(A, B, q)
    if blockwise(output_contract(check_name)):
        return output_contract(check_name).expected_blocks(A, B, q, kern.c_type, block_geometry(kern))
    from lowp.isa_models.requant import OUTPUT_STAGES
    acc = accumulators(accumulation_contract(kern.contract).accepted[0], A, B, q)
    return OUTPUT_STAGES[output_contract(check_name).accepted[0]].compute(acc, q, kern.c_type)


def readings(check_name: str, kern, A, B, q, C) -> list[str]:
    """The known variants C equals: the output contract's known stages on the exact accumulator, then the
    accumulation contract's known variants through the output contract's first accepted stage."""
    return list(_readings(check_name, kern, A, B, q, C))


def _readings(check_name: str, kern, A, B, q, C):
    """readings() one at a time, in its order: a failing case's judge takes the first and computes no more (a
    failing datatype's claimed check judges dozens of failing cases, each reading a stage over the case)."""
    from lowp.isa_models.requant import OUTPUT_STAGES
    q = with_rows(kern, A, q)
    out = output_contract(kern.output if check_name == "model" else check_name)
    if blockwise(out):
        yield from (f"output stage {name}" for name, accepted, r in
                    out.results(A, B, q, kern.c_type, block_geometry(kern)) if not accepted and same(C, r))
        return
    exact = exact_accumulators(A, B, q)
    for name in out.known:
        try:
            if same(C, OUTPUT_STAGES[name].compute(exact, q, kern.c_type)):
                yield f"output stage {name}"
        except (ArithmeticError, ValueError):   # a variant undefined on this input (a corner, a scale its params
            continue                             # initialisation cannot encode) is not a reading
    stage, on_exact = OUTPUT_STAGES[out.accepted[0]], None
    for variant in accumulation_contract("exact").known:
        acc = accumulators(variant, A, B, q)
        if acc.dtype == exact.dtype and acc.shape == exact.shape and np.array_equal(acc, exact):
            # a variant that changes nothing here (no pair saturates, no lane overflows): the stage on the exact
            # accumulator, computed once for all such variants
            on_exact = stage.compute(exact, q, kern.c_type) if on_exact is None else on_exact
            result = on_exact
        else:
            result = stage.compute(acc, q, kern.c_type)
        if same(C, result):
            yield f"accumulation {variant.name}"


ISA_OF_TARGET = {"x86-64": "x86", "aarch64": "arm"}


def kernel_isa(kern) -> str:
    """The instructions a kernel's output stage is named in: its target's SIMD where it declares CPU features, C
    where it declares none (a scalar kernel)."""
    return ISA_OF_TARGET.get(kern.target, "c") if kern.features else "c"


# A failure's explanation reads the same cases more than once: the found case and its witnesses, to choose where the
# shrink starts (checks._most_read), then again as the evidence that narrows the shrunk case's names (checks._variants);
# each full reading tries every stage family and accumulation variant (some 10 ms). Kept for the kernel last asked
# about, by the case's contents.
_NAMED = KeptForKernel(16 << 20)


def named_readings(check_name: str, kern, A, B, q, C, keys=None) -> list[tuple[str, str]]:
    """(key, name) of everything C reads as: the known variants (`readings`; the key is the name), then the members
    of the output-stage families (conformance/diagnosis/stage_families.py) of the claimed contract's stage, e.g. "xnnpack-fp32
    with the float->int conversion truncating (cvttps2dq for cvtps2dq)", named in the kernel's ISA's instructions;
    the key is the family and its parameter, so another case's reading of the same bug shares it. keys: only
    these readings."""
    if keys is not None or C is None:
        return _named_readings(check_name, kern, A, B, q, C, keys)
    key = (check_name, contents_key(A, B, q, C))
    return list(_NAMED.get(kern, key, lambda: _named_readings(check_name, kern, A, B, q, C, None),
                           lambda named: 200 * (len(named) + 1)))


def contents_key(*arrays_or_dicts) -> bytes:
    """A digest of arrays and parameter dicts (nested ones too): each value's name, type, shape and bytes."""
    h = hashlib.blake2b(digest_size=16)
    for x in arrays_or_dicts:
        _digest_into(h, "", x)
        h.update(b"|")
    return h.digest()


def seeded_contents_keys(As: np.ndarray, Bs: np.ndarray, seeds) -> list[bytes]:
    """contents_key(As[i], Bs[i], {"seed": int(seeds[i])}) of each case of a batch (a draw's calls), the same
    digests: the operands' shape and type are hashed once and each case goes on from a copy of that state (a fuzz
    round digests a million calls: 5.8 us each one by one, a fifth of its time)."""
    As, Bs = np.ascontiguousarray(As), np.ascontiguousarray(Bs)
    head = hashlib.blake2b(digest_size=16)
    head.update(f":{As.dtype.str}:{As.shape[1:]};".encode())
    between = f"|:{Bs.dtype.str}:{Bs.shape[1:]};".encode()
    keys = []
    for A, B, seed in zip(As, Bs, seeds):
        h = head.copy()
        h.update(A)             # a C-contiguous array's buffer: its tobytes()
        h.update(between)
        h.update(B)
        h.update(b"|{seed:int:%d;}|" % int(seed))
        keys.append(h.digest())
    return keys


def _digest_into(h, name: str, value) -> None:
    if isinstance(value, dict):
        h.update(f"{name}{{".encode())
        for key in sorted(value):
            _digest_into(h, str(key), value[key])
        h.update(b"}")
        return
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):      # a scalar: its type and exact repr (a float32's round-trips)
        h.update(f"{name}:{type(value).__name__}:{value!r};".encode())
        return
    h.update(f"{name}:{value.dtype.str}:{value.shape};".encode())
    h.update(value.tobytes() if value.dtype != object else repr(value.tolist()).encode())


def _named_readings(check_name: str, kern, A, B, q, C, keys) -> list[tuple[str, str]]:
    from lowp.conformance.diagnosis.stage_families import accepted_outputs, matches
    q = with_rows(kern, A, q)
    named = [(name, name) for name in readings(check_name, kern, A, B, q, C) if keys is None or name in keys]
    contract = kern.output if check_name == "model" else check_name
    if not blockwise(output_contract(contract)):  # the stage families and accumulation bugs are int32 readings
        accepted = accumulation_contract(kern.contract).accepted
        rights = accepted_outputs(output_contract(contract).accepted, [accumulators(v, A, B, q) for v in accepted],
                                  q, kern.c_type)       # what both readings below tell C from
        named += matches(contract, A, B, q, C, kern.c_type, acc_variants=accepted, isa=kernel_isa(kern), keys=keys,
                         blocks=(kern.tile.mr, kern.tile.nr) if kern.signature == "xnnpack-gemm" else None,
                         rights=rights)
        named += accumulation_readings(contract, kern, A, B, q, C, accepted, keys=keys, rights=rights)
    # readings of C itself (a clamp bound everywhere, a store of the wrong columns): a blockwise kernel's too
    observed = bound_readings(kern, A, B, q, C, check_name) + shifted_readings(kern, A, B, q, C, check_name)
    return named + [(key, name) for key, name in observed if keys is None or key in keys]


SHIFTS_SEEN = 16


def shifted_readings(kern, A, B, q, C, check_name) -> list[tuple[str, str]]:
    """(key, name) of C whose every wrong element holds the right value of the element d columns to its left
    (d = 1 .. 16): a store of the wrong part of a vector (the low half stored twice), whatever the stage did."""
    C = np.asarray(C)
    if C.ndim != 2 or C.shape[1] < 2:
        return []
    right = expected(check_name, kern, A, B, q)
    wrong = np.argwhere(C.view(f"u{C.itemsize}") != np.asarray(right, C.dtype).view(f"u{C.itemsize}"))
    if not len(wrong):
        return []
    out = []
    for d in range(1, min(C.shape[1], SHIFTS_SEEN + 1)):
        if (wrong[:, 1] >= d).all() and same(C[wrong[:, 0], wrong[:, 1]], right[wrong[:, 0], wrong[:, 1] - d]):
            out.append((f"store:columns-{d}", f"each wrong element holding the right value of the element {d} "
                                              f"column{'s' if d > 1 else ''} to its left (a store of the wrong part "
                                              f"of a vector)"))
    return out


BOUND_WORDS = ("every output at {bound} ({value}) whatever the inputs, as anything driving the value past {bound} "
               "gives (a clamp to {bound} alone, an accumulator or scale far out of range such as bytes read past "
               "the operands)")


def bound_readings(kern, A, B, q, C, check_name) -> list[tuple[str, str]]:
    """(key, name) of C held at one clamp bound everywhere (output_min or output_max, every element) where the
    contract gives something else: a reading of its own, beside the bugs that give it (output_min and output_max
    swapped gives a constant too), since nothing in such a C tells which of them it was. None for a float output."""
    C = np.asarray(C)
    if kern.float_output or not C.size or C.dtype.kind not in "iu" or "output_min" not in (q or {}):
        return []
    out = []
    for bound in ("output_min", "output_max"):
        value = int(q[bound])
        if (C == value).all() and not same(C, expected(check_name, kern, A, B, q)):
            out.append((f"bound:{bound}", BOUND_WORDS.format(bound=bound, value=value)))
    return out[:1]


def undetermined_readings(check_name: str, kern, A, B, q, keys) -> set[str]:
    """The keys of `keys` this case cannot show, whatever the kernel gives (stage_families.undetermined): a
    per-channel reading on a case of one column."""
    from lowp.conformance.diagnosis.stage_families import undetermined
    contract = kern.output if check_name == "model" else check_name
    return undetermined(contract, B, q, set(keys),
                        blocks=(kern.tile.mr, kern.tile.nr) if kern.signature == "xnnpack-gemm" else None)


def accumulation_readings(contract_name: str, kern, A, B, q, C, accepted, keys=None,
                          rights=None) -> list[tuple[str, str]]:
    """(key, name) of the accumulation bugs C reads as through the contract's own stages: a requantizing kernel
    whose remainder loop drops the last k shows it only after the stage (variants.py solves an int32 C, not this);
    named only where it differs from every accepted accumulator's output (rights: those outputs, if the caller
    has them: stage_families.accepted_outputs)."""
    from lowp.isa_models.requant import OUTPUT_STAGES

    from lowp.conformance.diagnosis.stage_families import accepted_outputs
    from lowp.conformance.diagnosis.variants import listed_variants
    names = output_contract(contract_name).accepted
    stages = [OUTPUT_STAGES[s] for s in names]
    if rights is None:
        rights = accepted_outputs(names, [accumulators(v, A, B, q) for v in accepted], q, kern.c_type)
    listed = [variant for variant in listed_variants(A, B) if keys is None or variant.key in keys]
    named = []
    for variant, outs in zip(listed, _listed_outputs(listed, A, B, q, stages, kern.c_type)):
        if variant.key not in dict(named):
            if any(same(out, C) and not any(same(out, r) for r in rights) for out in outs):
                named.append((variant.key, f"{contract_name} on an accumulator with {variant.name}"))
    return named


def _outputs(acc, stages, q, out_type) -> list[np.ndarray]:
    """Each stage's output on acc, in order, leaving out a stage undefined there."""
    return list(_each_output(lambda: acc, stages, [None] * len(stages), q, out_type))


def _each_output(make_acc, stages, ready, q, out_type):
    """Each stage's output, in order, leaving out a stage undefined there: ready[s] where a stage's output is
    computed already, else the stage run on make_acc()'s accumulator when the caller gets that far (a reading is
    named at its first matching output: the stages after it never run)."""
    acc = None
    for stage, done in zip(stages, ready):
        if done is not None:
            yield done
            continue
        acc = make_acc() if acc is None else acc
        try:
            out = stage.compute(acc, q, out_type)
        except (ArithmeticError, ValueError):
            continue
        yield out


# The listed variants' accumulators are prefix sums of one product (the first or last r k values dropped): up to 32
# of them a case, each through the contract's stages, some 0.4 ms a variant one at a time and most of a failure's
# reading. At most this many elements of the (M, K, N) products are formed at once.
PREFIX_ELEMENTS = 1 << 22


def _listed_outputs(listed, A, B, q, stages, out_type) -> list:
    """_each_output of each listed (dropped-k) variant's accumulator: the accumulators as one stack of the product's
    prefix sums (zero points corrected as accumulators() corrects them), each stage that computes a batch of cases
    (isa_models.requant.BATCHED_STAGES) run once on the stack, its first variant's output checked against the
    stage run on that variant alone; the other stages (and one the stack does not suit: undefined on some variant)
    variant by variant, when asked, as every stage is for a case too large for the products."""
    from lowp.isa_models.requant import BATCHED_STAGES, Batch
    from lowp.kernels.models.quant import zero_point_corrected
    M, K = A.shape
    N = B.shape[1]
    none = [None] * len(stages)
    batched = [stage.name in BATCHED_STAGES and not stage.reads_rows for stage in stages]
    if len(listed) < 2 or M * K * N > PREFIX_ELEMENTS or not any(batched) or \
            any(v.family.name != "dropped-k" for v in listed):
        return [_each_output(lambda v=v: accumulators(v, A, B, q), stages, none, q, out_type) for v in listed]
    prefix = np.zeros((M, K + 1, N), np.int64)
    np.cumsum(A.astype(np.int64)[:, :, None] * B.astype(np.int64)[None, :, :], axis=1, out=prefix[:, 1:])
    raws = np.stack([prefix[:, K - r] if end == "last" else prefix[:, K] - prefix[:, r]
                     for end, r in (v.param for v in listed)])
    acc3 = zero_point_corrected(raws, A, B, q)      # its int32 wrap is exact()'s (mod 2^32 either way)
    if not np.array_equal(acc3[0], accumulators(listed[0], A, B, q)):
        return [_each_output(lambda v=v: accumulators(v, A, B, q), stages, none, q, out_type) for v in listed]
    q3 = Batch({key: np.stack([np.asarray(value)] * len(listed)) for key, value in q.items()})
    columns = []          # per stage: every variant's output at once, or None (computed variant by variant)
    for stage, whole in zip(stages, batched):
        out3 = None
        if whole:
            try:
                out3 = stage.compute(acc3, q3, out_type)
            except (ArithmeticError, ValueError):
                out3 = None
            alone = _outputs(acc3[0], [stage], q, out_type)
            out3 = out3 if out3 is not None and alone and same(out3[0], alone[0]) else None
        columns.append(out3)
    return [_each_output(lambda i=i: acc3[i], stages, [None if c is None else c[i] for c in columns], q, out_type)
            for i in range(len(listed))]


def domain_problems(kern, q: dict, M: int, N: int) -> list[str]:
    return output_contract(kern.output).domain_problems(q, M, N, kern.c_type)


def pin_problems(kern) -> list[tuple[str, str]]:
    """(field, message) for each pinned parameter the kernel's output contract does not take, or whose value is
    outside the contract's documented domain (checked on a typical draw with the pin applied)."""
    contract = output_contract(kern.output)
    takes = set(contract.keys) | {"a_zero_point", "b_zero_point"}
    out = [(f"quant.{key}", f"{key!r} is not a parameter of {kern.output!r} (it takes {', '.join(sorted(takes))})")
           for key in kern.quant if key not in takes]
    if out:
        return out
    A = np.zeros((2, 3), kern.a_dtype)
    B = np.zeros((3, 2), kern.b_dtype)
    q = draw_params(kern, A, B, 0, "typical")
    for problem in domain_problems(kern, q, 2, 2):
        key = next((k for k in kern.quant if problem.startswith(k)), None)
        out.append((f"quant.{key}" if key else "quant", f"outside the documented domain: {problem}"))
    return out


# ---- shrinking and the counterexample ------------------------------------------------------------------------------
def take(q: dict | None, axis: int, index) -> dict | None:
    """q with its per-row (axis 0) or per-channel (axis 1) arrays indexed by `index` (a slice or index array)."""
    if q is None or axis == 2:
        return q
    out = {}
    for key, value in q.items():
        rows = per_row(key, value)
        if np.ndim(value) == 1 and rows == (axis == 0) or key in COLUMN_BLOCK_KEYS and axis == 1:
            out[key] = np.asarray(value)[index]
        else:
            out[key] = value
    return out


def simplifications(kern, q: dict):
    """Plainer parameter sets: the zero points at 0 (per row too), then the contract's own simplifications."""
    for key in ("a_zero_point", "b_zero_point"):
        if key in q and key not in kern.quant and np.any(np.asarray(q[key]) != 0):
            yield {**q, key: np.zeros_like(q[key]) if np.ndim(q[key]) else 0}
    contract = output_contract(kern.output)
    for simpler in contract.simplifications(q, kern.c_type):
        simpler = pinned(kern, dict(simpler))       # a pin can undo the simplification: then it is no step
        if repr(to_json(simpler)) != repr(to_json(q)):
            yield _tensorwise(simpler) if per_tensor(kern) else simpler


def to_json(q: dict | None) -> dict | None:
    """q as JSON values: ints, and float32 values as the float64 that holds them exactly (with dtype tags so
    from_json restores the same bits)."""
    if q is None:
        return None
    out = {}
    for key, value in q.items():
        a = np.asarray(value)
        out[key] = {"dtype": a.dtype.str, "value": a.tolist()}
    return out


def from_json(data: dict | None) -> dict | None:
    if data is None:
        return None
    out = {}
    for key, item in data.items():
        a = np.asarray(item["value"], dtype=np.dtype(item["dtype"]))
        out[key] = a if a.ndim else (a.item() if a.dtype.kind in "iu" else a[()])
    return out


def describe(q: dict | None, limit: int = 6) -> str:
    """One line: every parameter, arrays shown in full when short."""
    if not q:
        return ""
    parts = []
    for key, value in q.items():
        a = np.asarray(value)
        if a.ndim == 0:
            parts.append(f"{key}={a.item()!r}")
        else:
            shown = ", ".join(repr(v) for v in a.tolist()[:limit]) + (", ..." if a.size > limit else "")
            parts.append(f"{key}=[{shown}]")
    return ", ".join(parts)
