"""pytest-benchmark suites; run `pytest bench` (they are not in the default test run).

Each benchmark also checks its output, so `pytest bench --benchmark-disable`
is a quick correctness smoke test of everything the suites touch.
"""
