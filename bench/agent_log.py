"""A deterministic agent log: tools-heavy sessions in the three chat-body shapes.

    python -m bench.agent_log --requests 20000 --out /tmp/agent.jsonl

Each session belongs to one of a few agent products, each with its own set of tool
definitions (thousands of tokens, identical on every request: most of a prompt); a
session grows turn by turn with tool calls, tool results (mostly one-off file contents)
and answers. Sessions interleave in time. 60 % of the sessions are logged as OpenAI chat
bodies, 25 % as Anthropic Messages (with cache_control on the tools), 15 % as OpenAI
Responses bodies. Same seed, same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.generate import _text, write_jsonl

_SHAPES = (("openai", 0.60), ("anthropic", 0.25), ("responses", 0.15))
_MODELS = {"openai": "qwen2.5-72b-instruct", "anthropic": "claude-sonnet-4",
           "responses": "gpt-4.1"}  # fmt: skip


def _tool(rng: random.Random, product: int, index: int) -> dict:
    params = {f"arg_{k}": {"type": rng.choice(("string", "integer", "boolean")),
                           "description": _text(rng, rng.randint(6, 16))}
              for k in range(rng.randint(2, 6))}  # fmt: skip
    return {"name": f"p{product}_tool_{index}", "description": _text(rng, rng.randint(30, 90)),
            "parameters": {"type": "object", "properties": params,
                           "required": sorted(params)[:1]}}  # fmt: skip


@dataclass
class _Session:
    id: str
    shape: str
    product: int
    system: str
    turns_left: int
    # (kind, text or call): "user" / "call" (name, args) / "result" / "answer"
    events: list[tuple[str, object]] = field(default_factory=list)


def _openai(s: _Session, tools: list[dict]) -> dict:
    messages: list[dict] = [{"role": "system", "content": s.system}]
    for n, (kind, value) in enumerate(s.events):
        if kind == "user":
            messages.append({"role": "user", "content": value})
        elif kind == "call":
            name, args = value  # type: ignore[misc]
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function",
                 "function": {"name": name, "arguments": args}}]})  # fmt: skip
        elif kind == "result":
            messages.append({"role": "tool", "tool_call_id": f"call_{n - 1}", "content": value})
        else:
            messages.append({"role": "assistant", "content": value})
    return {"tools": [{"type": "function", "function": t} for t in tools], "messages": messages}


def _anthropic(s: _Session, tools: list[dict]) -> dict:
    messages: list[dict] = []
    for n, (kind, value) in enumerate(s.events):
        if kind == "user":
            messages.append({"role": "user", "content": [{"type": "text", "text": value}]})
        elif kind == "call":
            name, args = value  # type: ignore[misc]
            use = {"type": "tool_use", "id": f"tu_{n}", "name": name, "input": {"raw": args}}
            messages.append({"role": "assistant", "content": [use]})
        elif kind == "result":
            result = {"type": "tool_result", "tool_use_id": f"tu_{n - 1}", "content": value}
            messages.append({"role": "user", "content": [result]})
        else:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": value}]})
    marked = [{"name": t["name"], "description": t["description"],
               "input_schema": t["parameters"]} for t in tools]  # fmt: skip
    marked[-1]["cache_control"] = {"type": "ephemeral"}
    return {"system": s.system, "tools": marked, "messages": messages, "max_tokens": 1024}


def _responses(s: _Session, tools: list[dict]) -> dict:
    items: list[dict] = []
    for n, (kind, value) in enumerate(s.events):
        if kind == "user":
            items.append({"role": "user", "content": [{"type": "input_text", "text": value}]})
        elif kind == "call":
            name, args = value  # type: ignore[misc]
            items.append({"type": "function_call", "call_id": f"fc_{n}", "name": name,
                          "arguments": args})  # fmt: skip
        elif kind == "result":
            items.append({"type": "function_call_output", "call_id": f"fc_{n - 1}",
                          "output": value})  # fmt: skip
        else:
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": value}]})  # fmt: skip
    return {"instructions": s.system, "tools": [{"type": "function", **t} for t in tools],
            "input": items}  # fmt: skip


_BODY = {"openai": _openai, "anthropic": _anthropic, "responses": _responses}


def agent_requests(requests: int, *, seed: int = 11, products: int = 6,
                   live_sessions: int = 40) -> Iterator[dict]:  # fmt: skip
    """Requests in time order, `live_sessions` agent sessions open at any moment."""
    rng = random.Random(seed)
    toolsets = [[_tool(rng, p, i) for i in range(rng.randint(24, 40))] for p in range(products)]
    systems = [f"You are agent product {p}. " + _text(rng, rng.randint(60, 160))
               for p in range(products)]  # fmt: skip
    shapes, weights = zip(*_SHAPES, strict=True)
    now = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    opened = 0
    live: list[_Session] = []
    for i in range(requests):
        while len(live) < live_sessions:
            product = rng.randrange(products)
            live.append(_Session(f"sess-{opened:06d}", rng.choices(shapes, weights)[0], product,
                                 systems[product], rng.randint(3, 15)))  # fmt: skip
            opened += 1
        s = live[rng.randrange(len(live))]
        tools = toolsets[s.product]
        if s.events:  # the last turn's call, its result and the answer, then a new ask
            call = (rng.choice(tools)["name"], json.dumps({"arg_0": _text(rng, 3)}))
            s.events += [("call", call), ("result", _text(rng, rng.randint(80, 700))),
                         ("answer", _text(rng, rng.randint(15, 60)))]  # fmt: skip
        s.events.append(("user", _text(rng, rng.randint(8, 40))))
        now += timedelta(seconds=rng.expovariate(1 / 1.5))
        body = _BODY[s.shape](s, tools)
        yield {"id": f"agent-{i:07d}", "timestamp": now.isoformat().replace("+00:00", "Z"),
               "model": _MODELS[s.shape], "session_id": s.id, **body,
               "usage": {"completion_tokens": rng.randint(20, 300)}}  # fmt: skip
        s.turns_left -= 1
        if s.turns_left <= 0:
            live.remove(s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    count = write_jsonl(agent_requests(args.requests, seed=args.seed), args.out)
    print(f"wrote {count} requests to {args.out}")


if __name__ == "__main__":
    main()
