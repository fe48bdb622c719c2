"""Reports of two uploads side by side (analysis.compare): the parameters that differ as
the first rows, and every figure's difference to a chosen baseline, worked out by hand.

Two logs (4-token blocks, one letter a block key, llama-3.1-8b bf16: 131,072 B per token,
a slot 524,288 B; 32 prompt tokens each, every reuse within every window):
- X: "ab" "ab" "ac" "ab". LRU, touched last to first: r1 hits a at distance 1 and b at 2,
  r2 a at 1, r3 a at 1 and b at 3 (c came between): ceiling 5 blocks = 20 / 32 = 0.625,
  0.9 of it (18 tokens) needs 3 slots (20 tokens). tp 1, headroom 0.1: RAM = per rank =
  ceil(3 x 4 x 131,072 x 1.1) = 1,730,151 B. Distinct blocks 3.
- Y: "ab" "cd" "ab" "cd": r2 hits a at distance 3 and b at 4, r3 c at 3 and d at 4:
  ceiling 16 / 32 = 0.5, 0.9 of it (14.4 tokens) needs 4 slots. tp 2 (65,536 B per token
  per rank: 8 KV heads split in two), headroom 0.2: per rank ceil(4 x 4 x 65,536 x 1.2) =
  1,258,292 B, RAM 2 x that = 2,516,584 B. Distinct blocks 4.
"""

from __future__ import annotations

import pytest

from analysis import AnalysisParams, analyze
from analysis.compare import differing_parameters, headline_rows
from analysis.profiles import preset
from tests.analysis.fleet_streams import stream_of

SLOT = 4 * 131_072


def _log(letters: list[str]):
    return stream_of([(t, blocks, None) for t, blocks in enumerate(letters)])


@pytest.fixture(scope="module")
def reports() -> list[dict]:
    x = analyze(_log(["ab", "ab", "ac", "ab"]), AnalysisParams()).to_dict()
    y = analyze(_log(["ab", "cd", "ab", "cd"]), AnalysisParams(tp=2, headroom=0.2)).to_dict()
    return [x, y]


def test_the_two_reports_as_worked_out(reports):
    x, y = (r["recommendation"] for r in reports)
    assert (x["ceiling"], x["capacity_bytes"], x["ram_bytes"]) == (0.625, 3 * SLOT, 1_730_151)
    assert (y["ceiling"], y["capacity_bytes"]) == (0.5, 4 * SLOT)
    assert (y["per_rank_bytes"], y["ram_bytes"]) == (1_258_292, 2_516_584)


def test_deltas_against_the_second_report_as_baseline(reports):
    rows = {r["key"]: r for r in headline_rows(reports, baseline=1, sources=["X", "Y"])}
    # the baseline has no difference of its own; X's is X - Y
    assert all(row["deltas"][1] is None for row in rows.values())
    assert rows["ram_bytes"]["values"] == [1_730_151, 2_516_584]
    assert rows["ram_bytes"]["deltas"][0] == 1_730_151 - 2_516_584  # -786,433 B
    assert rows["capacity_bytes"]["deltas"][0] == -SLOT
    assert rows["infinite_hit_ratio"]["deltas"][0] == pytest.approx(0.125)  # 20/32 - 16/32
    assert rows["recommended_hit_ratio"]["deltas"][0] == pytest.approx(0.125)
    assert rows["distinct_blocks"]["deltas"][0] == -1
    assert rows["requests"]["deltas"][0] == 0
    assert rows["per_rank_kv_bytes_per_token"]["deltas"][0] == 131_072 - 65_536
    # the parameters that differ, with their own differences (none for words)
    assert rows["param_tp"]["values"] == [1, 2] and rows["param_tp"]["deltas"] == [-1, None]
    assert rows["param_headroom"]["deltas"][0] == pytest.approx(-0.1)
    assert rows["param_source"]["values"] == ["X", "Y"]
    assert rows["param_source"]["deltas"] == [None, None]


def test_the_first_report_as_baseline_gives_the_opposite_signs(reports):
    first = {r["key"]: r["deltas"] for r in headline_rows(reports, baseline=0)}
    second = {r["key"]: r["deltas"] for r in headline_rows(reports, baseline=1)}
    assert first["ram_bytes"] == [None, 786_433] and second["ram_bytes"] == [-786_433, None]
    with pytest.raises(ValueError):
        headline_rows(reports, baseline=2)


def test_parameters_that_differ_lead_the_rows(reports):
    rows = headline_rows(reports, sources=["X", "Y"])
    assert [r["key"] for r in rows[:4]] == ["param_source", "param_headroom", "param_tp",
                                            "requests"]  # fmt: skip
    assert all(r["parameter"] and r["differs"] for r in rows[:3])
    assert differing_parameters(reports, ["X", "Y"]) == [
        "Upload (log)",
        "Headroom",
        "Tensor-parallel ranks",
    ]
    # without sources the log is not a row: the same upload's analyses
    assert differing_parameters(reports) == ["Headroom", "Tensor-parallel ranks"]
    # the same parameters: no parameter row
    same = headline_rows([reports[0], reports[0]])
    assert not [r for r in same if r["key"].startswith("param_")]


def test_block_size_and_model_of_two_uploads_differ(reports, ingest_rows, trace):
    # a pre-hashed trace at its own 512-token blocks, sized for another model
    other = ingest_rows([trace(0, [1], 512), trace(1000, [1], 512)])
    qwen = analyze(other, AnalysisParams(profile=preset("qwen2.5-7b"))).to_dict()
    pair = [reports[0], qwen]
    assert differing_parameters(pair, ["day.jsonl", "trace.jsonl"]) == [
        "Upload (log)",
        "Block size (tokens)",
        "Model",
    ]
    rows = {r["key"]: r for r in headline_rows(pair, sources=["day.jsonl", "trace.jsonl"])}
    assert rows["param_block_tokens"]["values"] == [4, 512]
    assert rows["param_block_tokens"]["deltas"] == [None, 508]
    assert rows["param_model"]["values"] == ["llama-3.1-8b", "qwen2.5-7b"]
    assert rows["kv_bytes_per_token"]["deltas"] == [None, 57_344 - 131_072]
