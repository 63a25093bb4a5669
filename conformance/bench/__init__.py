"""lowp's own benchmarks, one module per `lowp bench` target, all of them inside the installed package so every
target runs from a `pip install lowp` as from a checkout:

- `gemm`: seed 004's GEMM grid, numpy float32, the x86 kernels and FBGEMM side by side (`lowp bench gemm`);
- `isa`: each instruction model's throughput beside the native instruction's (`lowp bench isa`);
- `emulator`: the AArch64 executors' per-call cost, Unicorn against qemu-user (`lowp bench emulator`);
- `mutants`: the mutation suite (`mutation_suite/`, shipped as package data) and its kill rate
  (`lowp bench mutants`, tests/test_mutants.py);
- `conformance`: `lowp conformance` over many real kernels against issue 11's targets (`lowp bench conformance`);
- `timings/`: the same measurements as pytest-benchmark tests, for history and comparison across runs. They need
  the `bench` extra (`pip install 'lowp[bench]'`) and skip without it, so the `test` extra leaves pytest-benchmark
  out of its users' own pytest runs: `pytest --pyargs lowp.conformance.bench.timings` (add `--benchmark-disable` to run each
  once, as a smoke test).

Data flows into this package, never out of it: it uses isa_models, kernels, emulator and the rest of conformance,
and nothing below it imports it (only the seed studies beside it reuse the GEMM grid).
"""
