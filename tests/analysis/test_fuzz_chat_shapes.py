"""Fuzzing the chat shapes of metrics.md section 7 (tools, tool calls, Anthropic Messages,
OpenAI Responses, sessions, cache_control): random JSON in any of their fields is either
a request or a LineError with a reason, never another exception, through the reader and
through a whole ingest (rendering, tokenizing, keying) that keeps the valid lines."""

from __future__ import annotations

import copy
import json
import os

import orjson
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from analysis import IngestOptions, UnusableInput, ingest
from analysis.errors import ErrorLog, LineError
from analysis.readers import TOOLS_POSITIONS, ChatReader, ReadLimits
from analysis.readers.render import json_text

KEY = b"test-secret-0123456789"
FUZZ = settings(max_examples=int(os.environ.get("KVSCOPE_FUZZ_EXAMPLES", 150)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip

OPENAI = {"timestamp": 1, "model": "mistral-small", "session_id": "s",
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
          "messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": "Go"},
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": "c", "type": "function",
                            "function": {"name": "f", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "c", "content": "ok"},
                       {"role": "user", "content": "Next"}]}  # fmt: skip
ANTHROPIC = {
    "timestamp": 1,
    "model": "claude",
    "metadata": {"session_id": "s"},
    "system": [{"type": "text", "text": "Rules", "cache_control": {"type": "x"}}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Go"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "ok"},
                {"type": "document", "source": {"type": "text", "data": "D"}},
            ],
        },
    ],
}
RESPONSES = {
    "timestamp": 1,
    "model": "gpt-4.1",
    "prompt_cache_key": "s",
    "instructions": "Be brief.",
    "tools": [{"type": "function", "name": "f"}],
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Go"}]},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ],
}
BODIES = {"openai": OPENAI, "anthropic": ANTHROPIC, "responses": RESPONSES}

# where random JSON goes, per shape: paths into the body (an int indexes a list)
FIELDS = {
    "openai": [("tools",), ("tools", 0), ("functions",), ("messages", 2, "tool_calls"),
               ("messages", 2, "function_call"), ("messages", 3, "content"), ("session_id",),
               ("messages", 1, "cache_control"), ("messages",), ("model",)],
    "anthropic": [("system",), ("system", 0), ("tools",), ("messages", 0, "content"),
                  ("messages", 1, "content", 0), ("messages", 1, "content", 0, "input"),
                  ("messages", 2, "content", 0, "content"), ("messages", 2, "content", 1),
                  ("messages", 2, "content", 1, "source"), ("metadata",), ("cache_control",)],
    "responses": [("instructions",), ("input",), ("input", 0), ("input", 0, "content"),
                  ("input", 1), ("input", 1, "arguments"), ("input", 2, "output"),
                  ("input", 2, "type"), ("prompt_cache_key",), ("tools",)],
}  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
    max_leaves=12,
)  # fmt: skip
shape_fields = st.sampled_from(sorted(BODIES)).flatmap(
    lambda shape: st.tuples(st.just(shape), st.sampled_from(FIELDS[shape]))
)


def _with(body: dict, path: tuple, value: object) -> dict:
    obj = copy.deepcopy(body)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@FUZZ
@given(where=shape_fields, value=json_values, position=st.sampled_from(TOOLS_POSITIONS))
def test_random_json_in_the_shapes_fields(tmp_path_factory, where, value, position):
    shape, path = where
    obj = _with(BODIES[shape], path, value)
    try:
        ChatReader(ErrorLog(), position).parse(obj, 1)
        readable = True
    except LineError as exc:
        assert str(exc)
        readable = False
    # the whole ingest: the fuzzed line between two valid ones of the same shape
    log = tmp_path_factory.mktemp("fuzz") / "log.jsonl"
    lines = [BODIES[shape], {**obj, "timestamp": 2}, {**BODIES[shape], "timestamp": 3}]
    log.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    options = IngestOptions(hash_key=KEY, tools_position=position,
                            limits=ReadLimits(max_line_bytes=1 << 16))  # fmt: skip
    try:
        stream = ingest([log], options)
    except UnusableInput as exc:  # pragma: no cover (two valid lines are always there)
        raise AssertionError(str(exc)) from None
    assert stream.requests == 2 + readable  # the valid lines are never lost
    assert stream.skipped_lines == len(stream.errors) == 1 - readable
    if not readable:
        assert stream.errors[0]["line"] == 2


@FUZZ
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4),
        max_leaves=16,
    )
)  # fmt: skip
def test_tool_json_text_is_metrics_md_definition(value):
    """J(v) is json.dumps(v, ensure_ascii=False, separators=(",", ":")) byte for byte,
    whichever way it is made (floats of every size, integers past 64 bits, any text)."""
    assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.parametrize("value", [1e-05, -1.23e-07, 0.00001, [{"x": 5e-324}], 2**64, "\ud800"])
def test_tool_json_text_where_orjson_differs_or_refuses(value):
    assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
