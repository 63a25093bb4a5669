"""SMLAL's lane operation, Elem[acc, e, 16] + (SInt(Vn.B[e]) * SInt(Vm.B[e]))<15:0>, over all 2^32 inputs
(acc16 x s8 x s8): the model against Unicorn executing the real instruction (an inline-assembly SMLAL)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from lowp.emulator import Machine, build
from lowp.isa_models import arm
from lowp.isa_models.verify.proof import in_chunks

KERNEL = Path(__file__).parent / "aarch64" / "smlal_sweep.c"
B_AT_A_TIME = 8     # values of b a call: 1 MB of output (32 MB, all of b, was a fresh mapping at every call)


@pytest.mark.slow
@pytest.mark.emulated
def test_smlal_lane_exhaustive():
    machine = Machine(build(KERNEL))
    out = np.zeros(B_AT_A_TIME * 65536, np.int16)
    got = np.zeros((256, 8192, 8), np.int16)
    acc = np.arange(-32768, 32768, dtype=np.int16).reshape(-1, 8)       # every accumulator value, 8 per register
    acc = np.ascontiguousarray(np.broadcast_to(acc, (256,) + acc.shape))  # for every b
    b = np.ascontiguousarray(np.broadcast_to(np.arange(-128, 128, dtype=np.int8)[:, None, None], acc.shape))
    checked = 0

    def model(a_value):
        # one value of b at a time: 65,536 lanes whose int64 intermediates stay in the cache (the whole 2^24 at
        # once spent 1-1.7 s a value of a in memory traffic, 30x this; the model is elementwise either way)
        return in_chunks(arm.smlal, [acc, np.full(acc.shape, a_value, np.int8), b], rows=1)

    # The model for one value of a runs in a worker thread while Unicorn runs the kernel for it: both release
    # the GIL (ctypes, numpy), so the two cores overlap.
    with ThreadPoolExecutor(1) as pool:
        for a_value in range(-128, 128):
            want = pool.submit(model, a_value)
            for first in range(0, 256, B_AT_A_TIME):
                result = machine.call("smlal_sweep", out, a_value, first - 128, B_AT_A_TIME, count=False)[0]
                got[first:first + B_AT_A_TIME] = result.reshape(B_AT_A_TIME, 8192, 8)
            want = want.result()
            if not (got == want).all():
                k = tuple(np.argwhere(got != want)[0])
                pytest.fail(f"SMLAL lane a={a_value} b={b[k]} acc={acc[k]}: Unicorn {got[k]}, model {want[k]}")
            checked += got.size
    assert checked == 2 ** 32
