"""lowp.kernels: real GEMM kernels (C sources under x86/ and aarch64/), their behaviour models, the registry
that declares them, and the executors that run them."""
from lowp.kernels.executors import KernelUnavailable, executor
from lowp.kernels.registry import Domain, Kernel, Tile, kernel, kernels, load_toml, register
from lowp.kernels.schema import KernelConfigError

__all__ = ["Domain", "Kernel", "KernelConfigError", "KernelUnavailable", "Tile", "executor", "kernel", "kernels",
           "load_toml", "register"]
