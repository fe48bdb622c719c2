"""A four-request agent log whose every share is known by construction (metrics.md
section 7), for the analysis page's "What the prompts carry", its split hit ratios and
the curve's band: two turns of one session (conv-1) with an OpenAI tool, an Anthropic
Messages body with a tool and a cache_control mark, and a request with neither a session
nor tools. Read at 16 tokens per block, the shared system prompt spans whole blocks.

The counts are worked out here from metrics.md's rendering, with tiktoken, not read from
the engine: the tests compare the engine's report and the page with them."""

from __future__ import annotations

import json
from pathlib import Path

from analysis.tokens import load_encoding

BLOCK = 16
SYSTEM = (
    "You are the travel desk of a railway company. Answer questions about trains, "
    "tickets, luggage and stations in Norway briefly and politely, in English."
)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}  # fmt: skip
PACKING = {"name": "packing_list", "description": "What to pack",
           "input_schema": {"type": "object"}}  # fmt: skip
FIRST_TURN = [{"role": "system", "content": SYSTEM},
              {"role": "user", "content": "Weather in Oslo?"}]  # fmt: skip
ROWS = [
    {"timestamp": 0, "model": "llama-3.1-8b", "session_id": "conv-1", "tools": [WEATHER],
     "messages": FIRST_TURN},
    {"timestamp": 10, "model": "llama-3.1-8b", "session_id": "conv-1", "tools": [WEATHER],
     "messages": [*FIRST_TURN, {"role": "assistant", "content": "Cold, minus three."},
                  {"role": "user", "content": "And in Bergen?"}]},
    {"timestamp": 20, "model": "claude-sonnet-4", "anthropic_version": "2023-06-01",
     "max_tokens": 100,
     "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
     "tools": [PACKING], "messages": [{"role": "user", "content": "What should I pack?"}]},
    {"timestamp": 30, "model": "llama-3.1-8b",
     "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hello"}]},
]  # fmt: skip
REQUESTS = 4
WITH_SESSION = 2  # the two turns of conv-1
WITH_TOOLS = 3
WITH_CACHE_CONTROL = 1  # the Anthropic body's system block


def J(value) -> str:  # (metrics.md's name)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def write(path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def _tokens(text: str) -> int:
    return len(load_encoding("cl100k_base").encode_ordinary(text))


def _rendered(messages: list[tuple[str, str]]) -> int:
    """Prompt tokens of metrics.md section 1: enc(role + "\\n") + enc(text) + enc("\\n")."""
    return sum(_tokens(role + "\n") + _tokens(text) + _tokens("\n") for role, text in messages)


# each request as the engine renders it with tools placed "auto": after the system prompt
# for the Llama route, first for the Claude one
_SYS, _TOOLS = ("system", SYSTEM), ("tools", J([WEATHER]))
RENDERED = [
    [_SYS, _TOOLS, ("user", "Weather in Oslo?")],
    [_SYS, _TOOLS, ("user", "Weather in Oslo?"), ("assistant", "Cold, minus three."),
     ("user", "And in Bergen?")],
    [("tools", J([PACKING])), _SYS, ("user", "What should I pack?")],
    [_SYS, ("user", "Hello")],
]  # fmt: skip
PROMPT_TOKENS = sum(_rendered(messages) for messages in RENDERED)
TOOL_TOKENS = 2 * _tokens(J([WEATHER])) + _tokens(J([PACKING]))
# the hits, with every block kept (the infinite cache; every window holds the 30 s log):
# the second turn hits the first turn's whole blocks (its prompt is a prefix of the
# second's), same-session; the last request hits the blocks of the system prompt alone
# (the first turn's, touched last by the second), cross-session; the Claude body starts
# with its tools and shares no block
SAME_SESSION_HIT_TOKENS = BLOCK * (_rendered(RENDERED[0]) // BLOCK)
CROSS_SESSION_HIT_TOKENS = BLOCK * (_rendered([_SYS]) // BLOCK)


def pct(ratio: float) -> str:
    """A ratio as the page writes it (one decimal), for the values worked out here."""
    return f"{ratio * 100:.1f} %"
