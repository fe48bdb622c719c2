"""Benchmarks (`python -m bench NAME`: one module per family over the shared harness.py) and
the deterministic log generator they, the tests and the bundled sample use."""
