"""The router of a fleet (metrics.md section 8): which replica serves each request, in
arrival order. Routing never depends on the cache sizes being planned, so each router's
partition is computed once and every capacity is read off the same replica streams."""

from __future__ import annotations

import numba
import numpy as np

from analysis.params import ROUTERS


def route(
    router: str,
    replicas: int,
    *,
    req_session: np.ndarray,
    starts: np.ndarray,
    ids: np.ndarray,
    distinct: int,
    tokens: np.ndarray,
    prompt_tokens: np.ndarray,
    prefix_threshold: float,
) -> np.ndarray:
    """The replica (int32) of every request. `starts`: each request's first reference and
    then the total; `ids`: the references' scoped key ids; `tokens`: each reference's."""
    requests = req_session.size
    if router in ("round_robin", "pooled"):  # pooled: round robin for the GPU tier
        return (np.arange(requests, dtype=np.int64) % replicas).astype(np.int32)
    if router == "session":
        return session_route(req_session, replicas)
    if router == "prefix":
        return _prefix_route(
            np.asarray(starts, dtype=np.int64), ids, tokens,
            np.asarray(prompt_tokens, dtype=np.int64), max(distinct, 1), replicas,
            float(prefix_threshold),
        )  # fmt: skip
    raise ValueError(f"router must be one of {', '.join(ROUTERS)}")


def session_route(req_session: np.ndarray, replicas: int) -> np.ndarray:
    """The s-th distinct session id (by first appearance) goes to replica s mod N; requests
    without one (id 0) are dealt round robin among themselves, with their own counter."""
    out = np.empty(req_session.size, dtype=np.int32)
    named = req_session != 0
    unnamed = np.flatnonzero(~named)
    out[unnamed] = np.arange(unnamed.size, dtype=np.int64) % replicas
    if named.any():
        uniques, first, inverse = np.unique(
            req_session[named], return_index=True, return_inverse=True
        )
        rank = np.empty(uniques.size, dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(uniques.size)
        out[named] = rank[inverse] % replicas
    return out


@numba.njit(cache=True, nogil=True)
def _prefix_route(starts, ids, tokens, prompt_tokens, distinct, replicas, threshold):
    """Prefix-aware routing: the replica whose index holds the longest run of the request's
    leading blocks (ties: fewest requests so far, then the lowest index), unless that run
    covers less than `threshold` of the prompt: then the least-loaded replica. The index
    never forgets: every block routed to a replica stays in its index."""
    # which replicas' indexes hold each key: one bit per replica
    seen = np.zeros((distinct, (replicas + 63) // 64), dtype=np.uint64)
    routed = np.zeros(replicas, dtype=np.int64)
    requests = starts.size - 1
    out = np.empty(requests, dtype=np.int32)
    one = np.uint64(1)
    for r in range(requests):
        s, e = starts[r], starts[r + 1]
        best, best_match = 0, -1
        for j in range(replicas):
            word, bit = j >> 6, one << np.uint64(j & 63)
            match = 0
            for i in range(s, e):
                if not seen[ids[i], word] & bit:
                    break
                match += tokens[i]
            if match > best_match or (match == best_match and routed[j] < routed[best]):
                best, best_match = j, match
        if best_match < threshold * prompt_tokens[r]:
            best = 0
            for j in range(1, replicas):
                if routed[j] < routed[best]:
                    best = j
        out[r] = best
        routed[best] += 1
        word, bit = best >> 6, one << np.uint64(best & 63)
        for i in range(s, e):
            seen[ids[i], word] |= bit
    return out
