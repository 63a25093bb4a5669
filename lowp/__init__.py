"""lowp: says, bit for bit, what low-precision integer GEMM kernels compute, and proves or refutes that real
kernels do it."""
__version__ = "0.1.0"
