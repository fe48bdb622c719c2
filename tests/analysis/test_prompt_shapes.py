"""metrics.md section 7 by hand: tool definitions, tool calls, Anthropic Messages and
OpenAI Responses bodies rendered to (role, text) messages; tools placement; a file
mixing the shapes; bad lines of each shape named with the shape assumed."""

from __future__ import annotations

import json

import pytest

from analysis import AnalysisParams, IngestOptions, analyze, ingest
from analysis.stream import ROLE_DOCUMENT_PART, ROLE_INSTRUCTION, ROLE_OTHER, ROLE_TOOLS

from .conftest import HASH_KEY

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Wetter",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CALLS = [{"id": "c1", "type": "function",
          "function": {"name": "get_weather", "arguments": '{"city":"Köln"}'}}]  # fmt: skip


def J(value) -> str:  # (metrics.md's name)
    """J(v) of metrics.md section 7, written out here from its definition."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _ingest(write_jsonl, rows, **options):
    return ingest([write_jsonl(rows)], IngestOptions(hash_key=HASH_KEY, previews=True, **options))


def _messages(stream, request: int) -> list[tuple[int, str]]:
    """The request's (role class, text) messages, from the segment previews (short texts)."""
    return [(int(stream.seg_role_class[seg]), stream.seg_preview[seg])
            for req, seg in zip(stream.occ_req, stream.occ_seg, strict=True)
            if req == request]  # fmt: skip


def _openai_agent(model: str, timestamp: float = 1) -> dict:
    return {
        "timestamp": timestamp,
        "model": model,
        "tools": [WEATHER],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Köln?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": CALLS},
            {"role": "tool", "tool_call_id": "c1", "content": "18 °C"},
            {"role": "user", "content": "Thanks"},
        ],
    }


# the agent's messages as metrics.md section 7 renders them, tools segment aside
SYSTEM = ("system", "Be brief.")
CONVERSATION = [("user", "Weather in Köln?"), ("assistant", "Checking." + J(CALLS)),
                ("tool", "18 °C")]  # fmt: skip
LAST_USER = ("user", "Thanks")
TOOLS = ("tools", J([WEATHER]))


@pytest.mark.parametrize(
    ("model", "position", "expected"),
    [
        # auto: by route (Llama and unknown routes after the system prompt)
        ("meta-llama/Llama-3.1-8B", "auto", [SYSTEM, TOOLS, *CONVERSATION, LAST_USER]),
        ("Mistral-Large-2411", "auto", [SYSTEM, *CONVERSATION, TOOLS, LAST_USER]),
        ("gpt-4o", "auto", [TOOLS, SYSTEM, *CONVERSATION, LAST_USER]),
        ("claude-sonnet-4", "auto", [TOOLS, SYSTEM, *CONVERSATION, LAST_USER]),
        ("qwen3-32b", "auto", [SYSTEM, TOOLS, *CONVERSATION, LAST_USER]),
        # chosen: the route does not matter
        ("gpt-4o", "after_system", [SYSTEM, TOOLS, *CONVERSATION, LAST_USER]),
        ("meta-llama/Llama-3.1-8B", "before_last_user", [SYSTEM, *CONVERSATION, TOOLS, LAST_USER]),
        ("Mistral-Large-2411", "first", [TOOLS, SYSTEM, *CONVERSATION, LAST_USER]),
    ],
)
def test_tools_and_tool_calls_render_where_the_placement_says(
    write_jsonl, render, enc, model, position, expected
):
    stream = _ingest(write_jsonl, [_openai_agent(model)], tools_position=position,
                     block_tokens=16)  # fmt: skip
    assert [text for _, text in _messages(stream, 0)] == [text for _, text in expected]
    assert stream.req_prompt_tokens.tolist() == [len(render(expected))]
    classes = {"system": ROLE_INSTRUCTION, "tools": ROLE_TOOLS}
    assert [c for c, _ in _messages(stream, 0)] == [classes.get(r, ROLE_OTHER) for r, _ in expected]
    tools_seg = stream.occ_seg[[r for r, _ in expected].index("tools")]
    assert stream.seg_label[tools_seg] == "tool definitions (1 tool)"
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    tool_tokens = len(enc(J([WEATHER])))
    assert report.tools == {"requests_with_tools": 1, "tool_tokens": tool_tokens,
                            "prompt_share": tool_tokens / len(render(expected)),
                            "position": position}  # fmt: skip
    # the tools segment is an instruction (metrics.md section 7)
    assert report.windows[0].segments["instruction"]["one_off"]["count"] == 2


def test_legacy_functions_and_function_call(write_jsonl, render):
    function = {"name": "lookup", "parameters": {"type": "object"}}
    call = {"name": "lookup", "arguments": "{}"}
    row = {"timestamp": 1, "model": "llama", "functions": [function], "messages": [
        {"role": "user", "content": "Find it"},
        {"role": "assistant", "content": None, "function_call": call},
        {"role": "function", "name": "lookup", "content": "found"}]}  # fmt: skip
    stream = _ingest(write_jsonl, [row])
    expected = [("tools", J([function])), ("user", "Find it"), ("assistant", J(call)),
                ("function", "found")]  # fmt: skip
    assert [t for _, t in _messages(stream, 0)] == [t for _, t in expected]
    assert stream.req_prompt_tokens.tolist() == [len(render(expected))]


def test_anthropic_messages_body(write_jsonl, render):
    tools = [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"},
              "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    row = {
        "timestamp": 1, "model": "claude-sonnet-4", "anthropic_version": "2023-06-01",
        "system": [{"type": "text", "text": "You are "}, {"type": "text", "text": "terse."}],
        "tools": tools,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                         {"type": "image", "source": {"type": "base64"}}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look. "},
                {"type": "tool_use", "id": "t1", "name": "get_weather",
                 "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1",
                 "content": [{"type": "text", "text": "-3 °C"}]},
                {"type": "tool_result", "tool_use_id": "t2", "content": "windy"}]},
            {"role": "user", "content": [{"type": "document", "title": "Manual",
                "source": {"type": "text", "media_type": "text/plain", "data": "Dress warmly."}}]},
        ],
    }  # fmt: skip
    stream = _ingest(write_jsonl, [row])
    expected = [
        ("tools", J(tools)),  # claude: first
        ("system", "You are terse."),
        ("user", "Weather?"),  # the image adds nothing
        ("assistant", "Let me look. " + J({"name": "get_weather", "input": {"city": "Oslo"}})),
        ("user", "-3 °Cwindy"),
        ("user", "Dress warmly."),
    ]
    got = _messages(stream, 0)
    assert [t for _, t in got] == [t for _, t in expected]
    assert got[-1][0] == ROLE_DOCUMENT_PART and stream.seg_label[stream.occ_seg[-1]] == "Manual"
    assert stream.req_prompt_tokens.tolist() == [len(render(expected))]
    assert stream.req_cache_control.tolist() == [1]  # a breakpoint on the tools
    assert not stream.errors and not stream.notes


def test_openai_responses_body(write_jsonl, render):
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    row = {
        "timestamp": 1, "model": "gpt-4.1", "instructions": "Be brief.", "tools": tools,
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c", "name": "get_weather",
             "arguments": '{"city":"Lima"}'},
            {"type": "function_call_output", "call_id": "c", "output": "22 °C"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "It is warm."}]},
        ],
    }  # fmt: skip
    plain = {"timestamp": 2, "model": "gpt-4.1", "input": "Hello there"}
    stream = _ingest(write_jsonl, [row, plain])
    expected = [
        ("tools", J(tools)),  # gpt-: first
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("assistant", J({"name": "get_weather", "arguments": '{"city":"Lima"}'})),
        ("tool", "22 °C"),
        ("assistant", "It is warm."),
    ]
    assert [t for _, t in _messages(stream, 0)] == [t for _, t in expected]
    assert [t for _, t in _messages(stream, 1)] == ["Hello there"]
    assert stream.req_prompt_tokens.tolist() == [
        len(render(expected)),
        len(render([("user", "Hello there")])),
    ]
    assert not stream.errors


def test_a_file_mixing_the_shapes_is_read_whole(write_jsonl):
    """The same conversation as OpenAI chat and as Anthropic Messages (top-level system):
    the same (role, text) messages, so the same block keys; a Responses line beside them."""
    chat = {"timestamp": 1, "messages": [{"role": "system", "content": "Rules."},
                                         {"role": "user", "content": "Question one?"}]}  # fmt: skip
    anthropic = {
        "timestamp": 2,
        "system": "Rules.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Question one?"}]}],
    }
    responses = {"timestamp": 3, "instructions": "Rules.", "input": "Question one?"}
    stream = _ingest(write_jsonl, [chat, anthropic, responses] * 2, block_tokens=4)
    assert stream.requests == 6 and not stream.errors
    start = stream.req_ref_start
    first = stream.ref_key[start[0] : start[1]].tolist()
    assert first and all(stream.ref_key[start[i] : start[i + 1]].tolist() == first
                         for i in range(6))  # fmt: skip


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"system": "S", "messages": [{"content": "x"}]},
         "Anthropic Messages body: message 0 has no role"),
        ({"messages": [{"role": "user", "content": 7}]},
         "OpenAI chat body: message 0 content is neither text nor a list of parts"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": {"name": "f"}},
         "OpenAI chat body: tools is not a list"),
        ({"messages": [{"role": "assistant", "content": "x", "tool_calls": "f()"}]},
         "OpenAI chat body: message 0 tool_calls is not a list"),
        ({"input": [{"role": "user", "content": "x"}, {"content": "y"}]},
         "OpenAI Responses body: input item 1 has no type or role"),
        ({"input": 5}, "OpenAI Responses body: input is neither text nor a list of items"),
        ({"instructions": "only"}, None),  # instructions alone: one system message, valid
        ({"input": [{"type": "reasoning"}]},
         "OpenAI Responses body: no input (and no instructions)"),
        ({"input": [{"role": "narrator", "content": "x"}]},
         "OpenAI Responses body: input item 0 has the unknown role 'narrator'"),
    ],
)  # fmt: skip
def test_bad_lines_name_the_shape_assumed(write_jsonl, row, reason):
    good = {"timestamp": 1, "messages": [{"role": "user", "content": "fine"}]}
    stream = _ingest(write_jsonl, [good, {"timestamp": 2, **row}, good])
    if reason is None:
        assert stream.requests == 3 and not stream.errors
        return
    assert stream.requests == 2  # the valid lines are kept
    assert [e["line"] for e in stream.errors] == [2]
    assert stream.errors[0]["reason"].startswith(reason)


def test_unknown_input_items_are_noted_once(write_jsonl):
    row = {"timestamp": 1, "input": [{"role": "user", "content": "x"}, {"type": "mystery"}]}
    stream = _ingest(write_jsonl, [row, {**row, "timestamp": 2}])
    assert stream.requests == 2 and not stream.errors
    assert [n for n in stream.notes if "mystery" in n] == [
        "content parts of unknown type 'input item mystery' were ignored (first on line 1)"
    ]


def _agent_log(sessions: int, turns: int) -> list[dict]:
    """A tools-heavy agent log: every session carries the same 24 tool definitions (most
    of each prompt), its conversation grows turn by turn."""
    tools = [{"type": "function", "function": {
        "name": f"tool_{i}", "description": f"Does step {i} of the deployment runbook.",
        "parameters": {"type": "object", "properties": {"target": {"type": "string"},
                                                        "dry_run": {"type": "boolean"}}}}}
        for i in range(24)]  # fmt: skip
    rows = []
    for turn in range(turns):
        for s in range(sessions):
            history = [{"role": "system", "content": "You operate the cluster."}]
            for k in range(turn):
                history += [{"role": "user", "content": f"Session {s} asks step {k}."},
                            {"role": "assistant", "content": f"Step {k} of {s} done."}]  # fmt: skip
            history.append({"role": "user", "content": f"Session {s} asks step {turn}."})
            rows.append({"timestamp": 1 + turn * sessions + s, "model": "llama-3.1-8b",
                         "session_id": f"s{s}", "tools": tools, "messages": history})  # fmt: skip
    return rows


def test_moving_tools_before_the_last_user_turn_loses_their_reuse(write_jsonl):
    """With the tools first, every request of every session reuses them (cross-session)
    and each next turn its history too; placed before the last user turn they follow
    the history, so a next turn's prompt departs from the last one's before them: the
    tools are recomputed every turn after the first, and the ceiling, the recommended
    hit ratio and the cross-session share fall while the tool tokens stay the same."""
    path = write_jsonl(_agent_log(sessions=6, turns=5))
    reports = {}
    for position in ("first", "before_last_user"):
        options = IngestOptions(hash_key=HASH_KEY, block_tokens=16, tools_position=position)
        reports[position] = analyze(ingest([path], options), AnalysisParams(windows_s=(3600,)))
    first, late = reports["first"], reports["before_last_user"]
    assert first.tools["tool_tokens"] == late.tools["tool_tokens"] > 0
    assert first.tools["requests_with_tools"] == late.tools["requests_with_tools"] == 30
    assert first.tools["prompt_share"] > 0.6  # tools are most of the prompt
    assert first.prompt_tokens == late.prompt_tokens  # the same tokens, elsewhere
    assert first.recommendation.ceiling > late.recommendation.ceiling + 0.3
    assert first.recommendation.hit_ratio > late.recommendation.hit_ratio
    assert first.windows[0].cross_session_hit_ratio > late.windows[0].cross_session_hit_ratio
    # first: one copy of the tools' blocks serves every request, so a few slots reach the
    # target; placed late, each session's copy behind its history must be kept to hit at all
    assert late.recommendation.capacity_bytes > 2 * first.recommendation.capacity_bytes


def test_a_deeply_nested_tool_result_skips_its_line_only(write_jsonl):
    """Valid JSON may nest tool_result blocks deeper than a reader recurses: the line is
    read with the nested results ignored (the API takes none there), never a crash."""
    # written out by hand: neither json nor orjson writes such depth (orjson reads it)
    opening = '[{"type":"tool_result","tool_use_id":"t","content":'
    inner = opening * 500 + '"deepest"' + "}]" * 500
    deep = '{"timestamp":2,"system":"S","messages":[{"role":"user","content":' + inner + "}]}"
    good = {"timestamp": 1, "messages": [{"role": "user", "content": "fine"}]}
    stream = _ingest(write_jsonl, [good, deep, {**good, "timestamp": 3}])
    assert stream.requests == 3 and not stream.errors
    # the outer result's content is the second one, whose only block is a nested result
    assert [t for _, t in _messages(stream, 1)] == ["S", ""]


def test_where_tools_and_sessions_are_looked_for(write_jsonl, render):
    tools = [{"name": "f"}]
    rows = [
        # tools on the line beside a wrapped body; the session in the body, an empty one
        # on the line is none
        {"timestamp": 1, "model": "llama", "tools": tools, "session_id": "",
         "request": {"messages": [{"role": "user", "content": "a"}], "session_id": "s1"}},
        # a top-level input key does not hide the wrapped messages
        {"timestamp": 2, "input": 5, "request": {"messages": [{"role": "user", "content": "b"}]},
         "conversation_id": "s1", "metadata": {"session_id": "s2"}},
        # gpt-oss routes place tools after the system prompt (not first, as other gpt-)
        {"timestamp": 3, "model": "openai/gpt-oss-120b", "tools": tools,
         "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "c"}]},
        # an empty Anthropic system prompt adds no message
        {"timestamp": 4, "system": "", "messages": [{"role": "user", "content": "d"}]},
    ]  # fmt: skip
    stream = _ingest(write_jsonl, rows)
    assert not stream.errors
    texts = [[t for _, t in _messages(stream, r)] for r in range(4)]
    assert texts == [[J(tools), "a"], ["b"], ["S", J(tools), "c"], ["d"]]
    assert stream.req_prompt_tokens[3] == len(render([("user", "d")]))
    sessions = stream.req_session.tolist()
    # session_id (in the body) first; then metadata.session_id ranks after conversation_id
    assert sessions[0] == sessions[1] != 0 and sessions[2] == sessions[3] == 0
