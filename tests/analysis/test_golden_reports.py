"""The engine alone reproduces the golden reports byte for byte (tests/golden).

It builds its options the way a caller without Django would: IngestOptions with the key,
AnalysisParams with the defaults, or the same values the re-analysis case passes on the
command line. A moved default, a renamed field or a reordered key shows here as a diff.
"""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, HostBudget, IngestOptions, analyze, ingest, preset
from analysis.params import FleetParams
from tests.golden.cases import CASES, HASH_KEY

GIB = 1 << 30
BY_NAME = {case.name: case for case in CASES}


def _params(name: str) -> AnalysisParams:
    if name == "mooncake-fleet":
        return AnalysisParams(tp=2, fleet=FleetParams(replicas=4, gpu_cache_bytes=8 * GIB))
    if name != "sample-reanalysis":
        return AnalysisParams()
    reserves = dict.fromkeys(
        ("os", "page_cache", "tokenizers", "request_buffers", "serving_process", "cache_process"),
        0,
    )
    reserves.update(os=4 * GIB, serving_process=6 * GIB)
    return AnalysisParams(
        profile=preset("llama-3.1-8b"),
        scope="tenant",
        lifetime_s=1800.0,
        tp=2,
        host=HostBudget(host_ram_bytes=64 * GIB, reserves_bytes=reserves),
    )


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_the_engine_writes_the_golden_report(name):
    case = BY_NAME[name]
    assert case.log is not None, f"{name}: the shared trace is not on this machine"
    stream = ingest([case.log], IngestOptions(hash_key=HASH_KEY.encode()))
    report = analyze(stream, _params(name))
    assert report.to_json() == case.golden.read_bytes()
