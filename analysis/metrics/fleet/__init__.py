"""Fleets (metrics.md section 8): replicas behind a router, a GPU prefix cache in front of
each replica's host RAM, admission at the k-th reference, and a pooled store."""

from analysis.metrics.fleet.inputs import (
    FleetInputs,
    ScopedRefs,
    StreamColumns,
    fleet_inputs,
)
from analysis.metrics.fleet.report import (
    admission_curve,
    admission_section,
    fleet_section,
    gpu_block_bytes,
)

__all__ = [
    "FleetInputs",
    "ScopedRefs",
    "StreamColumns",
    "admission_curve",
    "admission_section",
    "fleet_inputs",
    "fleet_section",
    "gpu_block_bytes",
]
