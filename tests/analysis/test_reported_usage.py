"""What a logged response says the engine reused (#18): each API's usage read by hand into
the stream's reported prompt and cached tokens (numbers only), kept through storage; a
usage that contradicts itself, or holds a count that is no count, is left out with a note
and its request kept."""

from __future__ import annotations

import numpy as np

from analysis.stream import BlockStream

BODY = {"model": "m", "messages": [{"role": "user", "content": "Hello there"}]}


def rows() -> list[dict]:
    return [
        # OpenAI chat (vLLM with --enable-prompt-tokens-details): cached among prompt_tokens
        {**BODY, "timestamp": 1, "usage": {"prompt_tokens": 1200, "completion_tokens": 9,
                                           "prompt_tokens_details": {"cached_tokens": 1024}}},
        # Anthropic: input_tokens only after the breakpoint; reads and writes beside it
        {**BODY, "timestamp": 2, "response": {"usage": {
            "input_tokens": 50, "cache_read_input_tokens": 2000,
            "cache_creation_input_tokens": 300, "output_tokens": 7}}},
        # OpenAI Responses: cached among input_tokens
        {**BODY, "timestamp": 3, "usage": {"input_tokens": 900, "output_tokens": 3,
                                           "input_tokens_details": {"cached_tokens": 512}}},
        # usage without a cached count says nothing of the cache
        {**BODY, "timestamp": 4, "usage": {"prompt_tokens": 700, "completion_tokens": 2}},
        {**BODY, "timestamp": 5},  # no usage at all
        # more cached than prompt: left out, the request kept
        {**BODY, "timestamp": 6, "usage": {"prompt_tokens": 10,
                                           "prompt_tokens_details": {"cached_tokens": 64}}},
        # a count that is no count: left out too, the request kept
        {**BODY, "timestamp": 7, "usage": {"prompt_tokens": "many"}},
    ]  # fmt: skip


def test_each_apis_usage_is_read_by_hand(ingest_rows):
    stream = ingest_rows(rows())
    assert stream.requests == 7 and stream.errors == []  # every request kept
    assert stream.req_reported_prompt_tokens.tolist() == [1200, 2350, 900, 700, -1, -1, -1]
    assert stream.req_cached_tokens.tolist() == [1024, 2000, 512, -1, -1, -1, -1]
    assert stream.notes.count(
        "2 line(s) report a usage kvscope cannot use (first, line 6: more cached tokens than "
        "prompt tokens); their usage is left out, the requests kept") == 1  # fmt: skip


def test_the_numbers_are_stored_and_a_stream_stored_before_them_reads_as_unknown(
    ingest_rows, tmp_path
):
    stream = ingest_rows(rows()[:3])
    stream.save(tmp_path / "s")
    again = BlockStream.load(tmp_path / "s")
    assert again.req_cached_tokens.tolist() == [1024, 2000, 512]
    # an older stream (no such columns): every request unknown
    columns = {k: v for k, v in stream.request_columns().items()
               if k not in ("cached_tokens", "reported_prompt_tokens")}  # fmt: skip
    refs = {"key": stream.ref_key, "tokens": stream.ref_tokens}
    tables = (refs, stream.segment_columns(), stream.occurrence_columns())
    old = BlockStream.from_columns(stream, columns, *tables)
    assert np.array_equal(old.req_cached_tokens, np.full(3, -1))


def test_a_trace_carries_no_usage(ingest_rows):
    trace = [{"timestamp": 1000 * i, "input_length": 512, "output_length": 1, "hash_ids": [1]}
             for i in range(3)]  # fmt: skip
    stream = ingest_rows(trace)
    assert stream.req_cached_tokens.tolist() == [-1, -1, -1]
    assert stream.req_reported_prompt_tokens.tolist() == [-1, -1, -1]
