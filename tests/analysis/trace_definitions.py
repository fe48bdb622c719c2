"""Two definitions of a pre-hashed trace's hit ratios, by brute force, request by request:
llmtrafficlens 0.13.4's (read from its source, see tests/analysis/test_llmtrafficlens.py)
and kvscope's (metrics.md section 7), both counting the requests past a warm-up of half."""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

WARMUP = 0.5  # both tools' steady state: the first floor(n / 2) requests only fill caches
BLOCK = {"mooncake": 512, "bailian": 16}  # tokens per hash id, by format


@dataclass(frozen=True)
class Line:
    """A request as both definitions need it, read from the trace's line here."""

    t_us: int
    keys: tuple[int, ...]
    tokens: tuple[int, ...]  # kvscope's: B each, the last input_length - B (n - 1)
    input_length: int
    session: object  # the root chat_id; without one, the line's own number


def read_lines(rows: list[dict], fmt: str) -> list[Line]:
    """A trace's lines (Mooncake's or Bailian's, parsed) as requests: times in us, tokens
    per block, the session of a Bailian line the root of its parent_chat_id chain."""
    block, unit, roots, lines = BLOCK[fmt], 1000 if fmt == "mooncake" else 1_000_000, {}, []
    for number, row in enumerate(rows):
        keys, n = tuple(row["hash_ids"]), row["input_length"]
        session: object = number
        if fmt == "bailian":
            parent = row["parent_chat_id"]
            session = roots[row["chat_id"]] = row["chat_id"] if parent == -1 else roots[parent]
        tokens = (block,) * (len(keys) - 1) + (n - block * (len(keys) - 1),)
        lines.append(Line(round(row["timestamp"] * unit), keys, tokens, n, session))
    # both tools replay these in file order: they are sorted by time (so by whole seconds
    # too, llmtrafficlens' order for Bailian)
    assert all(a.t_us <= b.t_us for a, b in itertools.pairwise(lines))
    return lines


def continuation_depths(lines: list[Line]) -> list[int]:
    """llmtrafficlens' continuation depth of each request: the longest d below its block count whose
    first d blocks are the whole block list of a request of the trace (0: none)."""
    wholes = {line.keys for line in lines}
    return [next((d for d in range(len(line.keys) - 1, 0, -1) if line.keys[:d] in wholes), 0)
            for line in lines]  # fmt: skip


def its_lru(lines: list[Line], block: int, capacity_tokens: int | None,
             our_weights: bool = False) -> tuple[int, int]:  # fmt: skip
    """Brute force of llmtrafficlens' LRU (test_llmtrafficlens.py's docstring): counted hit
    tokens, (same-conversation, across-requests), of an LRU of capacity // block blocks
    (None: unbounded) looked up and filled block by block, first to last, each hit weighing
    a block (`our_weights`: its tokens, as kvscope weighs it)."""
    capacity = None if capacity_tokens is None else max(1, capacity_tokens // block)
    warm = math.floor(WARMUP * len(lines))
    cache: OrderedDict[int, None] = OrderedDict()  # least recently used first
    same = across = 0
    for number, (line, depth) in enumerate(zip(lines, continuation_depths(lines), strict=True)):
        for index, key in enumerate(line.keys):
            if key in cache:
                cache.move_to_end(key)
                if number >= warm:
                    weight = line.tokens[index] if our_weights else block
                    if index < depth:
                        same += weight
                    else:
                        across += weight
            else:
                cache[key] = None
                if capacity is not None and len(cache) > capacity:
                    cache.popitem(last=False)
    return same, across


def our_lru(lines: list[Line], capacity: int) -> tuple[int, int]:
    """Brute force of metrics.md section 7: counted hit tokens, (all, same-session), of an
    LRU of `capacity` blocks; each request hits on the longest prefix cached before it, then
    touches its blocks last to first; a hit is same-session when the block's previous
    reference came from the request's session."""
    warm = math.floor(WARMUP * len(lines))
    cache: OrderedDict[int, None] = OrderedDict()
    last_session: dict[int, object] = {}
    hits = same = 0
    for number, line in enumerate(lines):
        cached = next((i for i, key in enumerate(line.keys) if key not in cache), len(line.keys))
        if number >= warm:
            hit = zip(line.keys[:cached], line.tokens[:cached], strict=True)
            hits += sum(line.tokens[:cached])
            same += sum(tokens for key, tokens in hit if last_session[key] == line.session)
        for key in reversed(line.keys):
            cache.pop(key, None)
            cache[key] = None
        while len(cache) > capacity:
            cache.popitem(last=False)
        last_session.update((key, line.session) for key in line.keys)
    return hits, same


@dataclass(frozen=True)
class Reuse:
    """A counted reference whose block was referenced before: an unbounded cache's hit."""

    request: int
    index: int  # the block's place in its request
    tokens: int  # kvscope's weight
    last: bool  # the request's last block
    after_us: int  # since that previous reference
    same_session: bool  # that previous reference was of this request's session


def unbounded_hits(lines: list[Line]) -> Iterator[Reuse]:
    """A cache that never evicts: every counted reference to a block referenced before,
    in both definitions (with chained keys such hits form a prefix of their request)."""
    warm = math.floor(WARMUP * len(lines))
    previous: dict[int, tuple[int, object]] = {}  # key -> (time, session) of its latest
    for number, line in enumerate(lines):
        for index, (key, tokens) in enumerate(zip(line.keys, line.tokens, strict=True)):
            if key in previous and number >= warm:
                t_us, session = previous[key]
                yield Reuse(number, index, tokens, index == len(line.keys) - 1,
                            line.t_us - t_us, session == line.session)  # fmt: skip
        previous.update((key, (line.t_us, line.session)) for key in line.keys)
