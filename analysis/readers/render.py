"""The parts of metrics.md section 7 every chat-body reader shares: the JSON text of tool
definitions and tool calls, and where the tools segment goes in a prompt."""

from __future__ import annotations

import json
import re

import orjson

from analysis.errors import LineError
from analysis.readers.records import Message

TOOLS_ROLE = "tools"
TOOLS_POSITIONS = ("auto", "first", "after_system", "before_last_user")
# `auto` by model route, case-insensitively (metrics.md section 7): the chat templates of
# these families put tool definitions just before the last user turn, or first
_BEFORE_LAST_USER_ROUTES = ("mistral", "mixtral", "ministral", "codestral")
_FIRST_ROUTES = ("claude", "gpt-", "o1", "o3", "o4")
# ...but gpt-oss (open weights, the Harmony template: tools in the developer message after
# the system one) is one of the "anything else" of metrics.md section 7
_AFTER_SYSTEM_ROUTES = ("gpt-oss",)
_LEADING_ROLES = frozenset({"system", "developer"})
# orjson writes floats below 1e-4 its own way (0.00001, 1.23e-7 for json's 1e-05,
# 1.23e-07); everything else it writes as json.dumps does. Output that may hold such a
# float (a digit, e-, a digit; or 0.0000 and a digit, anywhere, strings too) is made again
# the slow, exact way.
_MAYBE_SMALL_FLOAT = re.compile(rb"\de-\d|0\.0000\d")


def json_text(value: object) -> str:
    """J(v) of metrics.md: json.dumps(v, ensure_ascii=False, separators=(",", ":")), the
    log's own key order; through orjson (ten times faster: tool definitions are most of
    an agent log) wherever its bytes are the same."""
    try:
        out = orjson.dumps(value)
    except orjson.JSONEncodeError:  # integers past 64 bits, lone surrogates, deep nesting
        return _exact_json_text(value)
    if _MAYBE_SMALL_FLOAT.search(out):
        return _exact_json_text(value)
    return out.decode("utf-8")


def _exact_json_text(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise LineError("tool definitions or calls nested too deeply") from None


def position_for(route: str, tools_position: str) -> str:
    """The placement for a request of this model route (`auto` decided by the route)."""
    if tools_position != "auto":
        return tools_position
    route = route.lower()
    if any(name in route for name in _BEFORE_LAST_USER_ROUTES):
        return "before_last_user"
    if any(name in route for name in _AFTER_SYSTEM_ROUTES):
        return "after_system"
    if any(name in route for name in _FIRST_ROUTES):
        return "first"
    return "after_system"


def place_tools(messages: list[Message], tools: list, route: str, tools_position: str) -> None:
    """Insert the tools segment (role `tools`, text J(tools)) where the placement says; a
    prompt without a user message keeps before_last_user's tools at its end."""
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''}"  # (names the segment in tables)
    segment = Message(role=TOOLS_ROLE, text=json_text(tools), label=f"tool definitions ({count})")
    position = position_for(route, tools_position)
    at = 0
    if position == "after_system":
        while at < len(messages) and messages[at].role in _LEADING_ROLES:
            at += 1
    elif position == "before_last_user":
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        at = users[-1] if users else len(messages)
    messages.insert(at, segment)
