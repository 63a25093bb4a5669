"""pytest-benchmark tests of lowp's speed (the `bench` extra): `pytest --pyargs lowp.bench.timings`, or
`pytest bench/timings` in a checkout. Each module skips without pytest-benchmark."""
