"""A pre-hashed trace read at another block size than its hash_ids were made with: every
contradiction that fits one other size names it (line reader, column-wise reader, error
budget, no usable line, a split ingest's parts put together) and makes the ingest unusable
at the size asked for, even when some lines also fit it (they are a biased sample: the
short prompts); contradictions no single size mends are skipped lines of a partial read.
A trace keeps its own size unless overridden."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from analysis import IngestOptions, UnusableInput, ingest, ingest_streams
from analysis.errors import TooManyBadLines
from analysis.ingest import ingest_in_parts
from analysis.readers import TraceFit, blocks_fit, read_trace, split_lines
from bench.generate import mooncake_requests, write_jsonl

KEY = b"test-secret-0123456789"
FIT_512 = "they fit 512: retry with 512, or leave the block size to the format"


def _trace(tmp_path, rows: list[dict], name: str = "trace.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


@pytest.fixture
def mooncake(tmp_path):
    """A generated trace of 512-token blocks (bench.generate), 300 requests; every third is
    a short prompt of one block, which also fits 256 (as in Mooncake's own traces)."""
    rows = list(mooncake_requests(300, seed=4))
    for i in range(0, len(rows), 3):
        rows[i] |= {"input_length": 50 + i % 200, "hash_ids": rows[i]["hash_ids"][:1]}
    path = tmp_path / "moon.jsonl"
    write_jsonl(iter(rows), path)
    return path


def _at_256(path) -> tuple[int, int]:
    """(lines that contradict at 256, lines read) of a trace, counted directly."""
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    bad = sum(
        not (len(r["hash_ids"]) - 1) * 256 < r["input_length"] <= len(r["hash_ids"]) * 256
        for r in rows
    )
    return bad, len(rows)


def _made_at_512(name: str, requests: int, bad: int) -> str:
    return (f"{name} was made at another block size than 256 tokens: an analysis of the "
            f"{requests:,} requests that also fit 256 would be biased; hash_ids contradict "
            f"input_length on {bad:,} lines at 256 tokens per block; {FIT_512}")  # fmt: skip


def test_a_trace_partly_readable_at_256_is_unusable_naming_512(mooncake):
    bad, total = _at_256(mooncake)
    assert 0 < bad < total  # some lines also fit 256: once a partial read, now refused
    with pytest.raises(UnusableInput) as refused:
        ingest([mooncake], IngestOptions(hash_key=KEY, block_tokens=256))
    assert not isinstance(refused.value, TooManyBadLines)
    assert str(refused.value) == _made_at_512("moon.jsonl", total - bad, bad)
    assert refused.value.advice == (
        f"hash_ids contradict input_length on {bad:,} lines at 256 tokens per block; {FIT_512}"
    )  # for the console to keep the file and offer Retry
    assert refused.value.fit == TraceFit(256, (512,), bad)
    assert refused.value.skipped_lines == len(refused.value.errors) == bad
    assert refused.value.requests == total - bad
    # read with its own size the same file is clean, and says nothing
    own = ingest([mooncake], IngestOptions(hash_key=KEY))
    assert own.block_tokens == 512 and own.skipped_lines == 0 and own.notes == []


def test_the_error_budget_stop_carries_the_size_that_fits(mooncake):
    with pytest.raises(TooManyBadLines) as stop:
        ingest([mooncake], IngestOptions(hash_key=KEY, block_tokens=256, max_bad_lines=20))
    message = str(stop.value)
    assert message.startswith("stopped after 21 bad lines, past the budget of 20")
    assert message.endswith(
        f"a report from the rest would mislead; hash_ids contradict input_length on 21 lines "
        f"at 256 tokens per block; {FIT_512}"
    )
    assert stop.value.skipped_lines == 21 and len(stop.value.errors) == 21
    assert stop.value.advice == message.rsplit("mislead; ", 1)[1]  # for the console to keep it
    # the requests read before the stop, for the page to show what its progress showed
    rows = [orjson.loads(line) for line in mooncake.read_bytes().splitlines()]
    fits = [(len(r["hash_ids"]) - 1) * 256 < r["input_length"] <= len(r["hash_ids"]) * 256
            for r in rows]  # fmt: skip
    before_stop = fits[: [i for i, ok in enumerate(fits) if not ok][20]]
    assert stop.value.requests == sum(before_stop) > 0


def test_no_usable_line_names_the_size_that_fits(tmp_path):
    # 1000 tokens in 2 blocks: 512-token blocks, never 256 (that would take 4)
    rows = [{"timestamp": i, "input_length": 1000, "hash_ids": [i, i + 1]} for i in range(5)]
    path = _trace(tmp_path, rows)
    with pytest.raises(UnusableInput) as refused:
        ingest([path], IngestOptions(hash_key=KEY, block_tokens=256))
    assert str(refused.value) == (
        "no usable request in trace.jsonl (line 1: 2 hash_ids contradict input_length 1000 at "
        f"256 tokens per block); hash_ids contradict input_length on 5 lines at 256 tokens "
        f"per block; {FIT_512}"
    )
    assert refused.value.skipped_lines == 5


def test_another_fitting_size_is_named_without_the_format_advice(tmp_path):
    # vLLM-style 16-token blocks read at the trace default (512): 100 tokens in 7 blocks
    rows = [{"timestamp": i, "input_length": 100, "hash_ids": list(range(7))} for i in range(3)]
    with pytest.raises(UnusableInput) as refused:
        ingest([_trace(tmp_path, rows)], IngestOptions(hash_key=KEY))
    assert str(refused.value).endswith(
        "hash_ids contradict input_length on 3 lines at 512 tokens per block; they fit 16: "
        "retry with 16"
    )


def test_no_advice_when_no_single_size_fits_every_line(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 1000, "hash_ids": [1, 2]},  # 512 (or 1000..) only
        {"timestamp": 1, "input_length": 100, "hash_ids": list(range(7))},  # 16 only
        {"timestamp": 2, "input_length": 200, "hash_ids": [9]},  # fine at 256
    ]
    stream = ingest([_trace(tmp_path, rows)], IngestOptions(hash_key=KEY, block_tokens=256))
    assert stream.requests == 1 and stream.skipped_lines == 2
    assert stream.notes == []  # no size is named: none would mend both lines


def test_a_good_line_that_would_break_at_the_other_size_vetoes_it(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 1000, "hash_ids": [1, 2]},  # fits 512, not 256
        {"timestamp": 1, "input_length": 700, "hash_ids": [3, 4, 5]},  # 256 only: 512 takes 2
    ]
    stream = ingest([_trace(tmp_path, rows)], IngestOptions(hash_key=KEY, block_tokens=256))
    assert stream.requests == 1 and stream.skipped_lines == 1
    assert stream.notes == []


def test_line_reader_and_column_reader_share_one_rule(mooncake):
    rows = [orjson.loads(line) for line in mooncake.read_bytes().splitlines()]
    inputs = np.array([r["input_length"] for r in rows], dtype=np.int64)
    nblocks = np.array([len(r["hash_ids"]) for r in rows], dtype=np.int64)
    pairs = list(zip(inputs.tolist(), nblocks.tolist(), strict=True))
    for size in (16, 256, 512, 1024):
        vector = blocks_fit(inputs, nblocks, size)
        scalar = [bool(blocks_fit(n, b, size)) for n, b in pairs]
        assert vector.tolist() == scalar
        assert scalar == [(b - 1) * size < n <= b * size for n, b in pairs]
    # the column-wise reader takes the file only where the rule holds for every line
    assert read_trace(mooncake, 512) is not None
    assert read_trace(mooncake, 256) is None
    assert read_trace(mooncake, 512).nblocks.tolist() == nblocks.tolist()


def test_a_trace_keeps_its_own_size_when_it_is_among_those_chosen(mooncake):
    streams = ingest_streams(
        [mooncake], IngestOptions(hash_key=KEY, block_tokens=256, extra_block_tokens=(512,))
    )
    assert list(streams) == [512]
    assert streams[512].skipped_lines == 0
    # chosen alone, another size still overrides the trace's own (and is refused here,
    # since every contradicting line fits 512)
    with pytest.raises(UnusableInput) as alone:
        ingest_streams([mooncake], IngestOptions(hash_key=KEY, block_tokens=256))
    assert alone.value.fit is not None and alone.value.fit.block_tokens == 256


def _lines_per_part(path, parts: int) -> list[int]:
    data = path.read_bytes()
    return [data[r.start : r.end].count(b"\n") for r in split_lines(path, parts)]


def test_a_split_ingest_with_no_usable_line_names_512_with_every_parts_count(tmp_path):
    # 1000 tokens in 2 blocks: 512-token blocks, never 256; the parts hold different
    # numbers of lines, so each part's own advice counts differently
    rows = [{"timestamp": i, "input_length": 1000, "hash_ids": [i, i + 1]} for i in range(50)]
    path = _trace(tmp_path, rows)
    assert len(set(_lines_per_part(path, 3))) > 1
    options = IngestOptions(hash_key=KEY, block_tokens=256)
    with pytest.raises(UnusableInput) as whole:
        ingest([path], options)
    with pytest.raises(UnusableInput) as split:
        ingest_in_parts(path, options, 3)
    advice = f"hash_ids contradict input_length on 50 lines at 256 tokens per block; {FIT_512}"
    assert split.value.advice == whole.value.advice == advice  # for the console to keep it
    assert str(split.value) == str(whole.value)  # worded once, as one pass words it
    assert str(split.value).count("they fit") == 1
    assert split.value.fit == TraceFit(256, (512,), 50)
    assert split.value.skipped_lines == 50


def test_a_split_trace_partly_readable_at_256_is_unusable_once_with_the_summed_count(mooncake):
    bad, total = _at_256(mooncake)
    options = IngestOptions(hash_key=KEY, block_tokens=256)
    assert len(set(_lines_per_part(mooncake, 3))) > 1
    # every part has lines that also fit 256: none stops on its own, the merge refuses
    assert all(_at_256_part(mooncake, r) for r in split_lines(mooncake, 3))
    with pytest.raises(UnusableInput) as whole:
        ingest([mooncake], options)
    with pytest.raises(UnusableInput) as split:
        ingest_in_parts(mooncake, options, 3)
    assert str(split.value) == str(whole.value) == _made_at_512("moon.jsonl", total - bad, bad)
    assert str(split.value).count("they fit") == 1
    assert split.value.advice == whole.value.advice
    assert split.value.fit == whole.value.fit == TraceFit(256, (512,), bad)
    assert split.value.skipped_lines == whole.value.skipped_lines == bad
    assert split.value.errors == whole.value.errors
    assert split.value.requests == whole.value.requests == total - bad


def test_a_clean_file_read_column_wise_still_vetoes_the_size_another_file_fits(tmp_path):
    # a.jsonl fits 256 and never 512 (700 tokens in 3 blocks): read column-wise, clean;
    # b.jsonl contradicts 256 and fits 512: no size mends both, so a partial read
    clean = _trace(tmp_path, [{"timestamp": i, "input_length": 700, "hash_ids": [1, 2, 3]}
                              for i in range(5)], "a.jsonl")  # fmt: skip
    other = _trace(tmp_path, [{"timestamp": 5 + i, "input_length": 1000, "hash_ids": [i, i + 1]}
                              for i in range(5)], "b.jsonl")  # fmt: skip
    assert read_trace(clean, 256) is not None
    stream = ingest([clean, other], IngestOptions(hash_key=KEY, block_tokens=256))
    assert stream.requests == 5 and stream.skipped_lines == 5
    assert stream.notes == []


def test_the_merged_error_budget_stop_of_a_split_ingest_names_512(mooncake):
    bad, _ = _at_256(mooncake)
    # no part alone goes past the budget; all of them together do
    options = IngestOptions(hash_key=KEY, block_tokens=256, max_bad_lines=bad - 1)
    assert max(_at_256_part(mooncake, r) for r in split_lines(mooncake, 3)) < bad - 1
    with pytest.raises(TooManyBadLines) as stop:
        ingest_in_parts(mooncake, options, 3)
    advice = f"hash_ids contradict input_length on {bad:,} lines at 256 tokens per block; {FIT_512}"
    assert stop.value.advice == advice
    assert str(stop.value).startswith(f"stopped after {bad:,} bad lines, past the budget of ")
    assert str(stop.value).endswith(f"a report from the rest would mislead; {advice}")


def _at_256_part(path, byte_range) -> int:
    rows = [orjson.loads(line) for line in
            path.read_bytes()[byte_range.start : byte_range.end].splitlines()]  # fmt: skip
    return sum(not (len(r["hash_ids"]) - 1) * 256 < r["input_length"]
               <= len(r["hash_ids"]) * 256 for r in rows)  # fmt: skip


def test_a_part_whose_lines_all_fit_still_vetoes_the_size_for_the_whole_log(tmp_path):
    rows = [{"timestamp": i, "input_length": 1000, "hash_ids": [i, i + 1]} for i in range(20)]
    # the second half fits 256 and never 512 (700 tokens in 3 blocks): no size mends all
    rows += [{"timestamp": 20 + i, "input_length": 700, "hash_ids": [1, 2, 3]} for i in range(20)]
    path = _trace(tmp_path, rows)
    options = IngestOptions(hash_key=KEY, block_tokens=256)
    whole = ingest([path], options)
    merged = ingest_in_parts(path, options, 2)
    assert merged.requests == whole.requests == 20 and merged.skipped_lines == 20
    assert merged.notes == whole.notes == []


def test_fits_combine_in_the_formats_order_and_sum_their_counts():
    parts = [TraceFit(256, (16, 32, 512), 2), None, TraceFit(256, (512, 16), 0),
             TraceFit(256, (512, 16, 1024), 3)]  # fmt: skip
    assert TraceFit.combine(parts) == TraceFit(256, (512, 16), 5)
    assert TraceFit.combine(parts).advice().endswith("on 5 lines at 256 tokens per block; "
                                                     f"{FIT_512}")  # fmt: skip
    assert TraceFit.combine([None]) is None
    assert TraceFit.from_dict(TraceFit(256, (512,), 4).to_dict()) == TraceFit(256, (512,), 4)
