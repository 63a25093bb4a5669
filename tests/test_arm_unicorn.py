"""Every AArch64 model against real execution: Unicorn for what Unicorn implements, qemu-aarch64 -cpu max (where
installed) for everything including FEAT_I8MM; the A64 decoder behind gap-filling and lockstep against capstone."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from lowp.emulator import build_text, disassemble
from lowp.emulator.aarch64.a64 import I8MM, decode
from lowp.emulator.aarch64.intrinsics import QemuBackend, UnicornBackend, qemu_path
from lowp.isa_models import intrinsics

pytestmark = pytest.mark.emulated
ARM = sorted((i for i in intrinsics("aarch64") if i.encoding == "a64"), key=lambda i: i.name)  # SVE/SME: test_sve_models
ON_UNICORN = [i for i in ARM if i.mnemonic not in I8MM]


@pytest.fixture(scope="module")
def unicorn():
    return UnicornBackend()


@pytest.fixture(scope="module")
def qemu():
    if qemu_path() is None:
        pytest.skip("qemu-aarch64 not installed (Debian: apt-get install qemu-user); I8MM has no independent check")
    return QemuBackend()


def edge_batch(p, n, rng):
    """n registers of random lanes, a third of the lanes replaced by the type's extremes."""
    info = np.iinfo(p.dtype)
    x = rng.integers(info.min, info.max, (n, p.lanes), dtype=p.dtype, endpoint=True)
    edges = np.array(sorted({info.min, info.min + 1, 0, 1, info.max - 1, info.max} | ({-1} if info.min else set())),
                     dtype=p.dtype)
    pick = rng.random((n, p.lanes)) < 0.35
    x[pick] = rng.choice(edges, pick.sum())
    return x


def args_for(intr, n, rng, imm=None):
    args = []
    for p in intr.params:
        args.append(edge_batch(p, n, rng) if p.kind == "vec" else (imm if imm is not None else int(rng.integers(p.lo, p.hi + 1))))
    return args


def model(intr, args):
    n = next(len(a) for a in args if isinstance(a, np.ndarray))
    return np.stack([intr(*[a[i] if isinstance(a, np.ndarray) else a for a in args]) for i in range(n)])


def imm_values(intr):
    p = next((p for p in intr.params if p.kind == "imm"), None)
    return [None] if p is None else sorted({p.lo, p.hi, (p.lo + p.hi) // 2})


@pytest.mark.parametrize("intr", ON_UNICORN, ids=lambda i: i.name)
def test_model_matches_unicorn(unicorn, intr):
    rng = np.random.default_rng(sum(map(ord, intr.name)))
    for imm in imm_values(intr):
        args = args_for(intr, 48, rng, imm)
        got = unicorn.run(intr, args)
        want = model(intr, args)
        bad = np.nonzero((got != want).any(axis=1))[0]
        assert not len(bad), (f"{intr.name} imm={imm}: register {bad[0]} inputs "
                              f"{[a[bad[0]].tolist() if isinstance(a, np.ndarray) else a for a in args]}: "
                              f"Unicorn {got[bad[0]].tolist()} model {want[bad[0]].tolist()}")


def test_i8mm_intrinsics_are_marked_modeled(unicorn):
    assert unicorn.modeled == {i.name for i in ARM if i.mnemonic in I8MM}
    assert {"vmmlaq_s32", "vusdotq_s32", "vsudotq_laneq_s32"} <= unicorn.modeled
    assert "models" in unicorn.describe()


HYPO = [i for i in ON_UNICORN if i.name in {"vmlal_s8", "vmlal_high_u8", "vdotq_laneq_s32", "vqrdmulhq_s32",
                                              "vrshlq_s32", "vqrshrn_high_n_s32", "vqrshrun_n_s16", "vpadalq_s16",
                                              "vqaddq_s16", "vrshrq_n_s64", "vmull_high_laneq_s32"}]


@pytest.mark.parametrize("intr", HYPO, ids=lambda i: i.name)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40))
def test_hypothesis_batches_against_unicorn(unicorn, intr, seed, n):
    rng = np.random.default_rng(seed)
    args = args_for(intr, n, rng)
    assert (unicorn.run(intr, args) == model(intr, args)).all()


def test_qemu_backend_unavailable_reason():
    b = QemuBackend(qemu=None)
    b.qemu = None
    assert b.unavailable(ARM[0]).startswith("qemu-aarch64 not installed")


@pytest.mark.parametrize("intr", [i for i in ARM if i.mnemonic in I8MM] +
                         [i for i in ARM if i.name in {"vmlal_s8", "vqrdmulhq_s32", "vrshlq_s32", "vdotq_s32", "vqshlq_s32",
                                                  "vshll_high_n_s16", "vpaddq_s32", "vmax_s8"}],
                         ids=lambda i: i.name)
def test_model_matches_qemu(qemu, intr):
    rng = np.random.default_rng(sum(map(ord, intr.name)) + 1)
    for imm in imm_values(intr):
        args = args_for(intr, 200, rng, imm)
        assert (qemu.run(intr, args) == model(intr, args)).all(), intr.name


# clang computes the "2" forms as the plain form on the upper half it loads alone, and SUDOT by element as USDOT
# with the operands swapped: the same arithmetic, another encoding. test_every_encoding_in_lockstep covers those.
EQUIVALENT = {"sudot": "usdot"}


def test_wrappers_execute_the_intended_instruction(unicorn):
    """The C compiler is free to pick instructions: check each wrapper contains its mnemonic (or the equivalent)."""
    binary = unicorn.binary
    missing = []
    for intr in ARM:
        addr, code = binary.code(f"lowp_w_{intr.name}")
        text = {disassemble(code[i:i + 4]).split()[0] for i in range(0, len(code), 4)}
        want = {intr.mnemonic, intr.mnemonic.rstrip("2"), EQUIVALENT.get(intr.mnemonic)}
        if not want & text:
            missing.append((intr.name, intr.mnemonic))
    assert not missing


FORMS = """
smlal v1.8h, v2.8b, v3.8b | smlal2 v4.4s, v5.8h, v6.8h | umlal v7.2d, v8.2s, v9.2s | umlal2 v10.8h, v11.16b, v12.16b
smull v0.8h, v1.8b, v2.8b | umull2 v3.2d, v4.4s, v5.4s | saddw v6.8h, v7.8h, v8.8b | uaddw2 v9.4s, v10.4s, v11.8h
sqadd v1.16b, v2.16b, v3.16b | uqadd v4.2d, v5.2d, v6.2d | srshl v7.4s, v8.4s, v9.4s | urshl v10.8b, v11.8b, v12.8b
sqdmulh v1.8h, v2.8h, v3.8h | sqrdmulh v4.2s, v5.2s, v6.2s | sdot v7.4s, v8.16b, v9.16b | udot v10.2s, v11.8b, v12.8b
usdot v13.4s, v14.16b, v15.16b | smmla v16.4s, v17.16b, v18.16b | ummla v19.4s, v20.16b, v21.16b
usmmla v22.4s, v23.16b, v24.16b | sadalp v1.4s, v2.8h | uadalp v3.1d, v4.2s | sqxtn v5.8b, v6.8h
sqxtn2 v7.8h, v8.4s | uqxtn v9.2s, v10.2d | sqxtun2 v11.16b, v12.8h | srshr v13.4s, v14.4s, #32
urshr v15.2d, v16.2d, #1 | sqrshrn v17.8b, v18.8h, #8 | sqrshrn2 v19.8h, v20.4s, #3 | uqrshrn v21.2s, v22.2d, #17
sqrshrun v23.4h, v24.4s, #16 | sqrshrun2 v25.16b, v26.8h, #1 | smlal v1.4s, v2.4h, v3.h[5] | umlal2 v4.2d, v5.4s, v31.s[3]
smull2 v6.4s, v7.8h, v15.h[7] | sqrdmulh v8.4s, v9.4s, v30.s[2] | sqdmulh v10.4h, v11.4h, v12.h[1]
sdot v13.4s, v14.16b, v29.4b[3] | udot v15.2s, v16.8b, v17.4b[1] | usdot v18.4s, v19.16b, v20.4b[2]
sudot v21.2s, v22.8b, v23.4b[0] | add v1.4s, v2.4s, v3.4s | sqrdmlah v1.4s, v2.4s, v3.s[1] | xtn v1.8b, v2.8h
sshll v1.8h, v2.8b, #0 | sshll2 v3.4s, v4.8h, #15 | ushll v5.2d, v6.2s, #31 | ushll2 v7.8h, v8.16b, #3
addp v9.4s, v10.4s, v11.4s | addp v12.8b, v13.8b, v14.8b | addp v15.2d, v16.2d, v17.2d
sqshl v18.4s, v19.4s, v20.4s | uqshl v21.8h, v22.8h, v23.8h | sshl v24.2d, v25.2d, v26.2d | ushl v27.8b, v28.8b, v29.8b
smax v1.8b, v2.8b, v3.8b | smin v4.4s, v5.4s, v6.4s | umax v7.8h, v8.8h, v9.8h | umin v10.16b, v11.16b, v12.16b
"""


LINES = [f.strip() for row in FORMS.strip().splitlines() for f in row.split("|")]


def forms_binary():
    """forms(regs): load V0..V31 from regs (512 bytes), then run every line of FORMS once."""
    load = "\n".join(f"ld1 {{v{r}.16b, v{r + 1}.16b, v{r + 2}.16b, v{r + 3}.16b}}, [x0], #64" for r in range(0, 32, 4))
    source = (".text\n.globl forms\n.type forms, %function\nforms:\n" + load + "\n" + "\n".join(LINES)
              + "\nret\n.size forms, .-forms\n")
    return build_text(source, suffix=".S", name="forms")


def registers(rng):
    """32 V registers: random bytes, whole-register extremes (INT_MIN / INT_MAX / -1 / 0 of every lane width)
    and random bytes with extremes mixed in."""
    patterns = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x80", b"\xff\x7f", b"\x00\x00\x00\x80",
                b"\xff\xff\xff\x7f", b"\x00" * 7 + b"\x80", b"\x01", b"\x01\x01"]
    regs = []
    for _ in range(32):
        kind = rng.integers(0, 3)
        if kind == 0:
            regs.append(rng.integers(0, 256, 16, dtype=np.uint8).tobytes())
        elif kind == 1:
            pat = patterns[rng.integers(len(patterns))]
            regs.append((pat * 16)[:16])
        else:
            x = rng.integers(0, 256, 16, dtype=np.uint8)
            pick = rng.random(16) < 0.4
            x[pick] = rng.choice(np.array([0, 0x7F, 0x80, 0xFF], np.uint8), pick.sum())
            regs.append(x.tobytes())
    return np.frombuffer(b"".join(regs), np.uint8).copy()


def test_every_encoding_in_lockstep():
    """Each modeled encoding (incl. the "2" and by-element forms), run by Unicorn with extreme register contents,
    compared with the model instruction by instruction; I8MM lines run on the models (gap-filling)."""
    from lowp.emulator import Machine
    machine = Machine(forms_binary())
    modeled = [line for line in LINES if line.split()[0] not in ("add", "sqrdmlah", "xtn")]
    i8mm = [line for line in modeled if line.split()[0] in I8MM]
    rng = np.random.default_rng(2024)
    for _ in range(40):
        r = machine.call("forms", registers(rng), lockstep=True, count=True)
        assert r.lockstep_checked == len(modeled) - len(i8mm)
        assert sum(r.modeled.values()) == len(i8mm)


def test_decoder_agrees_with_capstone_on_every_form():
    lines = LINES
    _, code = forms_binary().code("forms")
    code = code[4 * 8:]                                   # skip the eight register loads
    for k, line in enumerate(lines):
        word = int.from_bytes(code[4 * k:4 * k + 4], "little")
        text = disassemble(code[4 * k:4 * k + 4])
        op = decode(word)
        mnemonic = line.split()[0]
        if mnemonic in ("add", "sqrdmlah", "xtn"):
            assert op is None, f"{line} is not modeled but decoded as {op}"
            continue
        assert op is not None, f"{line} ({text}) not decoded"
        assert op.mnemonic == mnemonic == text.split()[0], (line, text, op.mnemonic)
        regs = [int(t.split(".")[0][1:]) for t in line.split(None, 1)[1].split(", ") if t.startswith("v")]
        assert op.rd == regs[0], line
        used = {o.reg for o in op.operands}
        assert set(regs[1:]) <= used, (line, used)
