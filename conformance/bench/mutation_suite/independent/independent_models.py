"""Behaviour models of my kernels that are not plain exact GEMMs: what the author believes the code computes."""
import numpy as np


def acc16_flush_gemm(A, B, *, flush=512):
    """X2: per column, pair sums (k, k+1), k even, saturated to int16 (VPMADDUBSW), accumulated in int16 with
    wrap-around (VPADDW), the int16 total added (sign-extended) into int32 every `flush` k and at the end."""
    M, K = A.shape
    N = B.shape[1]
    Kp = K + (K & 1)
    a = np.zeros((M, Kp), np.int64); a[:, :K] = A
    b = np.zeros((Kp, N), np.int64); b[:K] = B
    pairs = a[:, 0::2, None] * b[None, 0::2, :] + a[:, 1::2, None] * b[None, 1::2, :]   # M x Kp/2 x N
    pairs = np.clip(pairs, -32768, 32767)
    out = np.zeros((M, N), np.int64)
    for q0 in range(0, Kp // 2, flush // 2):
        s = pairs[:, q0:q0 + flush // 2].sum(axis=1)
        out += ((s + 32768) % 65536) - 32768
    return (((out + 2**31) % 2**32) - 2**31).astype(np.int32)


def u16_flush_gemm(A, B, *, flush=512):
    """R2: u8 x u8 products accumulated per column in uint16 lanes (UMLAL, wrapping), widened into uint32
    every `flush` k and at the end; the uint32 total read as int32."""
    M, K = A.shape
    a = A.astype(np.int64)
    b = B.astype(np.int64)
    out = np.zeros((M, B.shape[1]), np.int64)
    for k0 in range(0, K, flush):
        out += (a[:, k0:k0 + flush] @ b[k0:k0 + flush]) % 65536
    return (((out + 2**31) % 2**32) - 2**31).astype(np.int32)
