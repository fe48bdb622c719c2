"""Tests of the benchmarks wing: result files uploaded as evidence and their pages."""
