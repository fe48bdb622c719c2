"""The parts of metrics.md section 7 every chat-body reader shares: the JSON text of tool
definitions and tool calls, and where the tools segment goes in a prompt."""

from __future__ import annotations

import json

from analysis.readers.records import Message

TOOLS_ROLE = "tools"
TOOLS_POSITIONS = ("auto", "first", "after_system", "before_last_user")
# `auto` by model route, case-insensitively (metrics.md section 7): the chat templates of
# these families put tool definitions just before the last user turn, or first
_BEFORE_LAST_USER_ROUTES = ("mistral", "mixtral", "ministral", "codestral")
_FIRST_ROUTES = ("claude", "gpt-", "o1", "o3", "o4")
_LEADING_ROLES = frozenset({"system", "developer"})


def json_text(value: object) -> str:
    """J(v) of metrics.md: compact JSON, non-ASCII as is, the log's own key order (the
    definition itself: orjson writes some floats differently, 1e16 for 1e+16)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def position_for(route: str, tools_position: str) -> str:
    """The placement for a request of this model route (`auto` decided by the route)."""
    if tools_position != "auto":
        return tools_position
    route = route.lower()
    if any(name in route for name in _BEFORE_LAST_USER_ROUTES):
        return "before_last_user"
    if any(name in route for name in _FIRST_ROUTES):
        return "first"
    return "after_system"


def place_tools(messages: list[Message], tools: object, route: str, tools_position: str) -> None:
    """Insert the tools segment (role `tools`, text J(tools)) where the placement says; a
    prompt without a user message keeps before_last_user's tools at its end."""
    segment = Message(role=TOOLS_ROLE, text=json_text(tools))
    position = position_for(route, tools_position)
    at = 0
    if position == "after_system":
        while at < len(messages) and messages[at].role in _LEADING_ROLES:
            at += 1
    elif position == "before_last_user":
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        at = users[-1] if users else len(messages)
    messages.insert(at, segment)
