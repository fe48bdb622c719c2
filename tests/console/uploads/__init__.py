"""Tests of the uploads wing: ingest, analyses, pages, charts and exports, limits, faults."""
