"""pytest-benchmark tests of lowp's speed (the `bench` extra): `pytest --pyargs lowp.conformance.bench.timings`, or
`pytest conformance/bench/timings` in a checkout. Each module skips without pytest-benchmark."""
