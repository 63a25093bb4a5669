"""The quantized signatures' adapters: from (A, B, the case's quantization parameters) to the buffers and calls of
one GEMM (an Invocation), for lowp's own driver ABI ('quant-gemm', kernels/include/lowp/quant.h) and XNNPACK's
ukernel ABI ('xnnpack-gemm', lowp.kernels.xnnpack). Both executors run what comes out; C (and the workspace) hold
poison(seed) first, as for the int32 `gemm` signature.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from lowp.kernels.invocation import Invocation, Ref, poison
from lowp.kernels.entry import XNNPACK_SIGNATURES, KeptForKernel, Kernel

REQUANT_HEADER = np.dtype([("a_zero_point", "<i4"), ("b_zero_point", "<i4"), ("output_zero_point", "<i4"),
                           ("output_min", "<i4"), ("output_max", "<i4"), ("n", "<i4"), ("reserved", "<i4", 2)])


def requant_blob(q: dict, N: int) -> np.ndarray:
    """struct lowp_requant and its arrays (bias, scale, multiplier, shift; N each), as bytes. Keys the case lacks
    are zeros: a kernel reads only what its output stage uses."""
    head = np.zeros(1, REQUANT_HEADER)
    for name in ("a_zero_point", "b_zero_point", "output_zero_point", "output_min", "output_max"):
        head[name] = int(np.asarray(q.get(name, 0)).reshape(-1)[0])
    head["n"] = N
    arrays = [np.broadcast_to(np.asarray(q.get(name, 0), dtype), (N,)).astype(dtype)
              for name, dtype in (("bias", "<i4"), ("scale", "<f4"), ("multiplier", "<i4"), ("shift", "<i4"))]
    return np.concatenate([head.view(np.uint8)] + [a.view(np.uint8) for a in arrays])


# The canonical parameter keys (lowp.isa_models.requant): what each holds, so a wrong one is named before a call.
# 'N' is one per output channel, 'M' one per row of A, () a scalar; the dtype kind: i(nt) or f(loat32).
PARAM_SHAPES = {"bias": ("N", "if"), "scale": ("N", "f"), "multiplier": ("N", "i"), "shift": ("N", "i"),
                "b_scale": ("N", "f"), "b_block_scale": ("N, blocks", "f"), "b_float_zero_point": ("N", "f"),
                "a_inv_scale": ("M", "f"),
                "a_zero_point": ("M?", "i"),
                "b_zero_point": ((), "i"), "output_zero_point": ((), "i"), "output_min": ((), "if"),
                "output_max": ((), "if")}


def check_params(kernel: Kernel, q, M: int, N: int, required=()) -> None:
    """ValueError naming the kernel and the key for a parameter set the kernel cannot be handed: not a dict, a
    required key missing, an unknown key, or a value of the wrong type or length."""
    if not isinstance(q, dict):
        raise ValueError(f"{kernel.name}: the quantization parameters are a dict (bias, scale, output_zero_point, "
                         f"...), got {type(q).__name__}")
    problems = [f"{key!r} missing" for key in required if key not in q]
    for key, value in q.items():
        if key not in PARAM_SHAPES:
            problems.append(f"unknown key {key!r} (known: {', '.join(PARAM_SHAPES)})")
            continue
        shape, kinds = PARAM_SHAPES[key]
        a = np.asarray(value)
        want = {"N": (N,), "M": (M,), "M?": (M,) if a.ndim else (),
                "N, blocks": (N, a.shape[1]) if a.ndim == 2 else (N, "blocks")}.get(shape, shape)
        if a.dtype.kind not in kinds or (a.dtype.kind == "f" and a.dtype != np.float32) or a.shape != want:
            kind = " or ".join({"i": "integers", "f": "float32"}[k] for k in kinds)
            problems.append(f"{key!r} must be {kind} of shape {want}, got {a.dtype} of shape {a.shape}")
    if problems:
        raise ValueError(f"{kernel.name}: bad quantization parameters: " + "; ".join(problems))


def invocation(kernel: Kernel, A: np.ndarray, B: np.ndarray, q: dict, *, seed: int, work_seed: int | None,
               workspace_bytes=None, strides=None, igemm=None) -> Invocation:
    """The buffers and calls of one quantized GEMM. strides ({"a", "cm", "cn"}: bytes) and igemm ({"ks",
    "a_offset", "zero"}) are a case's ABI options for XNNPACK ukernels (lowp.kernels.xnnpack.Strides,
    Indirection); C, A's gaps and the workspace hold poison(seed)."""
    M, K = A.shape
    N = B.shape[1]
    required = ()
    if kernel.signature in XNNPACK_SIGNATURES:
        from lowp.kernels.xnnpack import required_keys
        required = required_keys(kernel.xnnpack["datatype"], kernel.xnnpack["params"])
    check_params(kernel, q, M, N, required)
    if kernel.signature in XNNPACK_SIGNATURES:
        from lowp.kernels import xnnpack

        def build() -> Invocation:
            return xnnpack.invocation(A, B, q, ukernel(kernel), strides=strides, igemm=igemm,
                                      fill=lambda n, salt: poison(n, np.uint8, seed + salt))
        return _kept(kernel, (_array_key(A), _array_key(B), _params_key(q), seed, repr(strides), repr(igemm)), build)
    reject_abi_options(kernel, strides, igemm)
    if kernel.signature == "quant-gemm":
        size = max(int(workspace_bytes(M, N, K)), 1)
        buffers = {"A": np.ascontiguousarray(A), "B": np.ascontiguousarray(B),
                   "C": poison((M, N), kernel.c_dtype, seed),
                   "work": poison(size, np.uint8, seed + 1 if work_seed is None else work_seed),
                   "q": requant_blob(q, N)}
        args = [M, N, K, Ref("A"), Ref("B"), Ref("C"), Ref("work"), Ref("q"), *kernel.params.values()]
        names = ("M", "N", "K", "A", "B", "C", "work", "q", *kernel.params)
        return Invocation(buffers, [(kernel.symbol, args)], output="C", writable=("C", "work"), arg_names=names)
    raise ValueError(f"{kernel.name}: signature {kernel.signature!r} is not a quantized one")


# A kernel's checks run one after another in one process (lowp.conformance.run.pool.jobs_of), and its behaviour-model
# check and claimed contract's check make the same calls (their generated cases). An XNNPACK invocation (packed
# weights, indirection buffer, poisoned buffers: some 0.3 ms natively, 1 ms for an emulated target's) follows from
# the operands, parameters, seed and ABI options alone: built once, kept for the kernel entry last asked about, and
# handed out with buffers of its own.
_KEPT = KeptForKernel(256 << 20)     # a check's cases keep a few MB; `lowp fuzz`'s draws would keep on growing


def _kept(kernel: Kernel, key: tuple, build) -> Invocation:
    inv = _KEPT.get(kernel, key, build,
                    lambda inv: sum(a.nbytes for a in inv.buffers.values()) + len(key[0][2]) + len(key[1][2]))
    return dataclasses.replace(inv, buffers={name: a.copy() for name, a in inv.buffers.items()},
                               calls=list(inv.calls))


def _array_key(a) -> tuple:
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def _params_key(q: dict) -> tuple:
    return tuple(sorted((key, _array_key(value)) for key, value in q.items()))


def reject_abi_options(kernel: Kernel, strides, igemm) -> None:
    """ValueError naming the kernel when a case hands ABI options (strides, igemm) to a kernel that is not an XNNPACK
    ukernel: here, below both executors, which refuse them for the `gemm` signature with these same words."""
    if strides is not None or igemm is not None:
        raise ValueError(f"{kernel.name}: strides and igemm options are for XNNPACK ukernels (signature "
                         f"'xnnpack-gemm' or 'xnnpack-igemm'), not {kernel.signature!r}")


def caller_alignment(kernel: Kernel) -> dict[str, int]:
    """{buffer: the least alignment in bytes a caller may give it} of an XNNPACK ukernel's calls
    (lowp.kernels.xnnpack.caller_alignment); {} for lowp's own signatures, whose alignment no case varies."""
    if kernel.signature not in XNNPACK_SIGNATURES:
        return {}
    from lowp.kernels.xnnpack import caller_alignment as of_ukernel
    return of_ukernel(ukernel(kernel), np.dtype(kernel.a_dtype).itemsize, np.dtype(kernel.c_dtype).itemsize,
                      kernel.target)


def ukernel(kernel: Kernel):
    """The lowp.kernels.xnnpack.Ukernel of an XNNPACK-ABI kernel entry (its target's pointer size and
    XNN_EXTRA_BYTES: lowp.kernels.xnnpack.TARGET_ABI)."""
    from lowp.kernels.xnnpack import EXTRA_BYTES, TARGET_ABI, Ukernel
    x = kernel.xnnpack
    pointer_bytes, extra_bytes = TARGET_ABI.get(kernel.target, (8, EXTRA_BYTES))
    return Ukernel(kernel.symbol, x["datatype"], x["params"], kernel.tile.mr, kernel.tile.nr, kernel.tile.kr,
                   x.get("sr", 1), _a_shift(kernel), kernel.signature == "xnnpack-igemm", x.get("bl", 0),
                   x.get("kernel_zero_point", 8), x.get("nibbles", "signed") == "unsigned", pointer_bytes,
                   extra_bytes, pad_blocks=x.get("depth", "whole-blocks") == "padded",
                   non_planar=x.get("non_planar", 0))


def _a_shift(kernel: Kernel) -> int:
    shift = kernel.a_shift
    return int(kernel.params[shift]) if isinstance(shift, str) else int(shift)
