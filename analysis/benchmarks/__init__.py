"""The engine's side of benchmark runs: result files read into numbers (results, files),
judged against service-level objectives (slo) and compared run against run (comparison)."""
