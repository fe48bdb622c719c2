"""The engine's tests (no Django): readers, ingest, metrics, benchmarks, golden reports."""
