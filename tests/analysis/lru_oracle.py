"""The brute-force LRU an engine runs (metrics.md section 7), the oracle the curve's
tests compare with: a cache of whole blocks, request by request."""

from __future__ import annotations

from collections import OrderedDict

Block = tuple[int, int]  # (key, tokens)


def engine_order_lru_hits(
    timed: list[tuple[float, list[Block]]], capacity: int, lifetime: float | None = None
) -> int:
    """Brute force of an engine's LRU (metrics.md section 7): before each request, entries
    idle past `lifetime` expire; the request hits on the blocks cached before it (a key
    repeated within the request counts once, its first copy); then it touches its blocks
    last to first, evicting the least recently touched past `capacity`."""
    cache: OrderedDict = OrderedDict()  # key -> time of last touch, least recent first
    hits = 0
    for t, blocks in timed:
        if lifetime is not None:
            for old in [k for k, last in cache.items() if t - last > lifetime]:
                del cache[old]
        firsts: list = []
        for key, tokens in blocks:
            if key not in firsts:
                firsts.append(key)
                hits += tokens if key in cache else 0
        for key in reversed(firsts):
            cache[key] = t
            cache.move_to_end(key)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits
