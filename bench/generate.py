"""Deterministic synthetic request logs with a realistic mix of reuse.

    python -m bench.generate chat --requests 2000 --out sample/chat-sample.jsonl.gz
    python -m bench.generate mooncake --requests 500000 --out /tmp/trace.jsonl
    python -m bench.generate mooncake --conversations 0.4 --out /tmp/bailian.jsonl

Chat logs mix: a few system prompts (one per tenant product), a Zipf-popular set of
reference documents sent as document parts, one-off uploads, and multi-turn sessions
that resend their history. Pre-hashed traces mix shared system prefixes, Zipf-popular
documents and one-off tails, and with --conversations sessions whose turns resend their
history (as Bailian lines). Same seed, same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import io
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

_WORDS = """
cache block prefix token request tenant model latency memory host budget policy
window reuse document system prompt answer question retrieve context layer head
throughput schedule replica shard index vector table report metric engine server
storage eviction lifetime ratio capacity network kernel batch queue stream value
""".split()  # noqa: SIM905


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def chat_requests(
    requests: int,
    *,
    seed: int = 7,
    tenants: int = 3,
    documents: int = 40,
    start: datetime | None = None,
    mean_gap_s: float = 2.0,
    doc_words: tuple[int, int] = (400, 1600),
) -> Iterator[dict]:
    """Requests in time order. Shares: 45% document Q&A, 25% sessions, 15% one-off
    uploads, 15% short questions on the system prompt alone."""
    rng = random.Random(seed)
    start = start or datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    systems = [
        f"You are the assistant of tenant-{t}. " + _text(rng, rng.randint(150, 300))
        for t in range(tenants)
    ]
    docs = [(f"doc-{d:03d}", _text(rng, rng.randint(*doc_words))) for d in range(documents)]
    weights = [1 / (rank + 1) ** 1.1 for rank in range(documents)]  # Zipf-like popularity
    sessions: dict[str, list[dict]] = {}
    now = start
    for i in range(requests):
        now += timedelta(seconds=rng.expovariate(1 / mean_gap_s))
        tenant = rng.randrange(tenants)
        user = f"user-{tenant}-{rng.randrange(12)}"
        system = {"role": "system", "content": systems[tenant]}
        roll = rng.random()
        question = {"role": "user", "content": _text(rng, rng.randint(8, 40))}
        if roll < 0.45:
            title, body = rng.choices(docs, weights)[0]
            document = {"type": "document", "title": title, "text": body}
            messages = [system, {"role": "user", "content": [document]}, question]
        elif roll < 0.70:
            history = sessions.setdefault(user, [system])
            history.append(question)
            messages = list(history)
            history.append({"role": "assistant", "content": _text(rng, rng.randint(20, 80))})
            if len(history) > 12:
                sessions.pop(user)
        elif roll < 0.85:
            upload = {"type": "text", "text": _text(rng, rng.randint(300, 900))}
            messages = [system, {"role": "user", "content": [upload]}, question]
        else:
            messages = [system, question]
        yield {
            "id": f"req-{i:07d}",
            "timestamp": now.isoformat().replace("+00:00", "Z"),
            "model": "llama-3.1-8b" if tenant else "qwen2.5-7b",
            "metadata": {"tenant": f"tenant-{tenant}", "user": user},
            "messages": messages,
            "usage": {"completion_tokens": rng.randint(16, 400)},
        }


def chat_copies(requests: int, copies: int, **kwargs) -> Iterator[dict]:
    """The same `requests` chat requests `copies` times over, one after another in time:
    a longer log with exactly the same distinct content (only ids and times differ)."""
    start = kwargs.pop("start", None) or datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    for copy in range(copies):
        last = start
        for row in chat_requests(requests, start=start, **kwargs):
            row["id"] = f"c{copy}-{row['id']}"
            last = datetime.fromisoformat(row["timestamp"])
            yield row
        start = last + timedelta(minutes=1)


def mooncake_requests(
    requests: int,
    *,
    seed: int = 11,
    prefixes: int = 4,
    documents: int = 2000,
    mean_gap_ms: float = 20.0,
    conversations: float = 0.0,
    open_conversations: int = 1000,
    chat_ids: bool = True,
) -> Iterator[dict]:
    """Pre-hashed trace: shared system prefixes, Zipf-popular documents, unique tails.

    With `conversations` > 0 that share of the requests are later turns of a conversation
    still open (at most `open_conversations` at once, each of one to eight turns): the
    previous turn's full blocks, then new blocks for the answer and the next question. With
    `chat_ids` the lines are then Bailian's (metrics.md section 7): chat_id and
    parent_chat_id chain the turns into sessions, timestamps are seconds, blocks hold 16
    tokens; without, they stay Mooncake's, the conversations seen only in the history their
    turns share."""
    rng = random.Random(seed)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    system = [fresh(rng.randint(2, 6)) for _ in range(prefixes)]
    docs = [fresh(rng.randint(3, 18)) for _ in range(documents)]
    # (random.choices draws the same with the running sum given as with the weights)
    cum_weights = list(itertools.accumulate(1 / (rank + 1) ** 1.05 for rank in range(documents)))
    bailian = conversations > 0 and chat_ids
    block = BAILIAN_BLOCK if bailian else MOONCAKE_BLOCK
    chats = _OpenChats(rng, open_conversations)
    t = 0.0
    for i in range(requests):
        t += rng.expovariate(1 / mean_gap_ms)
        chat = chats.next_turn() if conversations and rng.random() < conversations else None
        if chat is not None:  # the history's full blocks, the answer, the next question
            ids = chat.ids[:-1] + fresh(rng.randint(1, 4)) + fresh(rng.randint(1, 6))
        else:
            p = rng.randrange(prefixes)
            ids = list(system[p])
            if rng.random() < 0.7:
                doc = rng.choices(docs, cum_weights=cum_weights)[0]
                ids += [hash((p, h)) & 0x7FFFFFFF | 1 << 40 for h in doc]
            ids += fresh(rng.randint(1, 6))
        row = _trace_row(rng, t, ids, block)
        parent = chats.record(chat, i, ids) if conversations else -1
        if bailian:
            row["timestamp"] = round(t / 1000, 3)
            row["chat_id"], row["parent_chat_id"] = i, parent
        yield row


def _trace_row(rng: random.Random, t_ms: float, ids: list[int], block: int) -> dict:
    """A Mooncake line: the last block holds 1 to `block` tokens of the prompt."""
    tail = rng.randint(1, block)
    return {
        "timestamp": int(t_ms),
        "input_length": block * (len(ids) - 1) + tail,
        "output_length": rng.randint(1, 500),
        "hash_ids": ids,
    }


MOONCAKE_BLOCK = 512  # tokens a block of each trace format holds
BAILIAN_BLOCK = 16


@dataclass(eq=False)
class _Chat:
    last_chat_id: int
    ids: list[int]  # the hash_ids of its latest turn
    turns_left: int


class _OpenChats:
    """The conversations a generated trace has open: a random one takes the next turn."""

    def __init__(self, rng: random.Random, limit: int):
        self._rng = rng
        self._limit = limit
        self._open: list[_Chat] = []
        self._picked = 0  # where next_turn's conversation is in _open

    def next_turn(self) -> _Chat | None:
        """An open conversation, picked at random (None when none is open)."""
        if not self._open:
            return None
        self._picked = self._rng.randrange(len(self._open))
        return self._open[self._picked]

    def record(self, chat: _Chat | None, chat_id: int, ids: list[int]) -> int:
        """The parent_chat_id of the turn `chat_id` (-1: it starts a conversation of one to
        eight turns, open for the later ones while fewer than the limit are)."""
        if chat is None:
            turns = self._rng.randint(1, 8)
            if turns > 1 and len(self._open) < self._limit:
                self._open.append(_Chat(chat_id, ids, turns - 1))
            return -1
        parent = chat.last_chat_id
        chat.last_chat_id, chat.ids = chat_id, ids
        chat.turns_left -= 1
        if chat.turns_left == 0:  # closed: the last open one takes its place
            last = self._open.pop()
            if last is not chat:
                self._open[self._picked] = last
        return parent


def long_line(kind: str, size: int) -> bytes:
    """The worst line of about `size` bytes of each kind (then a newline):
    letters  - one message of random letters, no space (one 'word' for the tokenizer);
    tokens   - "1 1 1 ...": one token per byte, the most tokens a byte can give (past the
               10 M-token context: refused once tokenized);
    prose    - ordinary words up to just under 10 M tokens: the largest prompt accepted;
    messages - MAX_MESSAGES distinct messages of ~95 tokens (~57 MB; more are refused unread);
    hash_ids - a Mooncake line of as many small distinct hash ids as fit (refused unread
               past a context's worth of blocks)."""
    from analysis.readers import MAX_MESSAGES

    rng = np.random.default_rng(1)
    if kind == "hash_ids":
        head, tail = b'{"timestamp":0,"input_length":1,"output_length":1,"hash_ids":[', b"]}"
        ids = np.arange(1000, 1000 + size // 5, dtype=np.int64)  # "1000," is 5 bytes
        body = b",".join(str(i).encode() for i in ids.tolist())[: size - len(head) - 2]
        return head + body[: body.rfind(b",")] + tail + b"\n"
    head = b'{"timestamp":1700000000,"messages":['
    if kind == "messages":  # as many messages as a line may hold, distinct, filling it
        count = MAX_MESSAGES
        room = (size - len(head) - 3) // count - len(b'{"role":"user","content":""},') - 8
        # ~95 tokens a message, so the prompt stays under the 10 M-token context
        words = b" ".join(b"cache block prefix token".split() * 23)[:room]
        body = b",".join(b'{"role":"user","content":"%d %s"}' % (i, words) for i in range(count))
        return head + body + b"]}\n"
    start, end = b'{"role":"user","content":"', b'"}]}'
    room = size - len(head) - len(start) - len(end) - 1
    if kind == "letters":
        text = (rng.integers(0, 52, room, dtype=np.uint8) + 65).astype(np.uint8)
        text[text > 90] += 6  # A-Z then a-z
        return head + start + text.tobytes() + end + b"\n"
    if kind == "prose":  # ordinary words, as many as fit, up to just under 10 M tokens
        rnd = random.Random(1)
        words = [w.encode() for w in _WORDS]
        out, used, count = [], 0, 0
        while count < 9_900_000:  # (each of these words is one token, its space included)
            word = rnd.choice(words)
            if used + len(word) + 1 > room:
                break
            out.append(word)
            used += len(word) + 1
            count += 1
        return head + start + b" ".join(out) + end + b"\n"
    return head + start + b"1 " * (room // 2) + end + b"\n"


def write_jsonl(rows: Iterator[dict], out: Path | str) -> int:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    # mtime=0: the gzip header carries no date, so the same seed gives the same bytes
    raw_file = gzip.GzipFile(out, "wb", mtime=0) if out.suffix == ".gz" else open(out, "wb")  # noqa: SIM115
    with raw_file as raw, io.BufferedWriter(raw, 1 << 20) as fh:  # type: ignore[arg-type]
        for row in rows:
            fh.write(orjson.dumps(row) + b"\n")
            written += 1
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kind", choices=("chat", "mooncake"))
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--conversations",
        type=float,
        default=0.0,
        help="mooncake: share of later turns of a session (Bailian lines)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    extra: dict = {"seed": args.seed} if args.seed is not None else {}
    if args.kind == "mooncake" and args.conversations:
        extra["conversations"] = args.conversations
    rows = (chat_requests if args.kind == "chat" else mooncake_requests)(args.requests, **extra)
    count = write_jsonl(rows, args.out)
    print(f"wrote {count} requests to {args.out}")


if __name__ == "__main__":
    main()
