"""analyze(consume=True): a caller that reads nothing of a stream after its analysis hands
it over, and the stream's keys (8 bytes a reference, the largest column) are let go as
soon as the scoped ids are drawn from them; the report is the one analyze gives
otherwise."""

from __future__ import annotations

import weakref

import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.stream import BlockStream
from tests.golden.cases import shared_trace


@pytest.fixture(scope="module")
def stored(hash_key, tmp_path_factory):
    path = shared_trace()
    assert path is not None, "the shared Mooncake trace is part of the checkout's neighbours"
    return ingest([path], IngestOptions(hash_key=hash_key)).save(
        tmp_path_factory.mktemp("handover") / "stream"
    )


# exact and sampled, with a lifetime: every column the keys' ids feed is read
@pytest.mark.parametrize("params", [AnalysisParams(lifetime_s=600.0),
                                    AnalysisParams(shards_rate=0.5, lifetime_s=600.0)],
                         ids=["exact", "sampled"])  # fmt: skip
def test_a_handed_over_stream_gives_the_same_report_and_lets_its_keys_go(stored, params, tmp_path):
    kept = analyze(BlockStream.load(stored), params)
    handed = BlockStream.load(stored)
    refs = handed.block_refs
    keys = weakref.ref(handed.ref_key)
    report = analyze(handed, params, consume=True)
    assert report.to_json() == kept.to_json()
    assert keys() is None  # nothing holds the keys any more
    assert handed.block_refs == refs == report.block_refs  # (read from the request bounds)
    with pytest.raises(ValueError, match="keys were let go"):
        handed.save(tmp_path / "again")


def test_without_consume_the_stream_is_the_caller_s_still(stored):
    stream = BlockStream.load(stored)
    keys = stream.ref_key
    analyze(stream, AnalysisParams())
    assert stream.ref_key is keys and keys.size == stream.block_refs > 0
