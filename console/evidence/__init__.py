"""Benchmark evidence: uploaded `vllm bench serve` results with their tier tags, and the
matrix page that shows where p99 latency breaks the service-level objectives."""
