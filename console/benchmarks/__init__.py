"""The benchmarks wing: uploaded `vllm bench serve` and AIPerf results with their tier tags,
the matrix page where p99 latency breaks the SLO, runs side by side, and their downloads."""
