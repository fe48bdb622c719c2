"""A deterministic Bailian trace (metrics.md section 7's fields, 16-token blocks) shaped like
chat traffic: conversations of one to eight turns, each turn's prompt the previous one plus
its answer and a new user message, chained by parent_chat_id; three system prompts shared
across conversations; common first questions asked in several of them; some prompts sent
again unchanged (a regenerated answer); some requests that are a system prompt alone (a
cache warmer). Its blocks are keyed as the release's are: a chained hash of each 16-token
block and the blocks before it, the last block partial, ids numbered by first appearance."""

from __future__ import annotations

import hashlib
import random

BLOCK = 16
CONVERSATIONS = 70
# the system prompts' tokens; the last is block-aligned (6 blocks) and its warmers, the
# prompt alone, are a whole prefix of the turns that begin with it
SYSTEM_TOKENS = (200, 333, 96)


def bailian_lines(seed: int = 14) -> list[dict]:
    """The trace's lines in time order, chat_id 0, 1, ... in that order (so every parent
    comes before its turn)."""
    rng = random.Random(seed)
    systems = [_text(rng, n) for n in SYSTEM_TOKENS]
    questions = [_text(rng, rng.randint(20, 80)) for _ in range(4)]
    events: list[tuple[float, int, list[int], str, int]] = []  # (t, conversation, ...)
    for conversation in range(CONVERSATIONS):
        t = rng.uniform(0, 3000)
        prompt = list(systems[rng.choice((0, 0, 1, 1, 2))])
        kind = rng.choice(("text", "text", "search", "image", "file"))
        if rng.random() < 0.08:  # a warmer of the aligned system prompt
            events.append((t, conversation, list(systems[2]), kind, 1))
            continue
        for turn in range(1, rng.randint(1, 8) + 1):
            common = turn == 1 and rng.random() < 0.3
            prompt = prompt + (rng.choice(questions) if common else _text(rng, rng.randint(5, 300)))
            events.append((t, conversation, prompt, kind, turn))
            if rng.random() < 0.12:
                t += rng.uniform(1, 30)
                events.append((t, conversation, prompt, kind, turn))
            prompt = prompt + _text(rng, rng.randint(20, 400))  # the answer
            t += rng.uniform(5, 200)
    events.sort(key=lambda event: event[0])
    ids: dict[bytes, int] = {}
    last_chat: dict[int, int] = {}  # conversation -> its latest chat_id
    lines = []
    for chat, (t, conversation, prompt, kind, turn) in enumerate(events):
        lines.append({
            "chat_id": chat, "parent_chat_id": last_chat.get(conversation, -1),
            "timestamp": round(t, 3), "input_length": len(prompt), "output_length": 50,
            "type": kind, "turn": turn, "hash_ids": _hash_ids(prompt, ids),
        })  # fmt: skip
        last_chat[conversation] = chat
    return lines


def _text(rng: random.Random, tokens: int) -> list[int]:
    return [rng.randrange(1 << 20) for _ in range(tokens)]


def _hash_ids(prompt: list[int], ids: dict[bytes, int]) -> list[int]:
    """Each block's id: its chained hash (over the blocks before it too), numbered."""
    out, chain = [], b""
    for start in range(0, len(prompt), BLOCK):
        block = b"".join(token.to_bytes(4, "little") for token in prompt[start : start + BLOCK])
        chain = hashlib.blake2b(chain + block, digest_size=8).digest()
        out.append(ids.setdefault(chain, len(ids)))
    return out
