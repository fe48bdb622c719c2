"""Benchmarks and the deterministic log generator they (and the bundled sample) use."""
