"""Replay traces: a block stream written back as a Mooncake-format trace that replay
tools read (vLLM `bench serve --dataset-name timed_trace`, AIPerf `mooncake_trace`, SGLang's
`mooncake` dataset), holding nothing of the content and nothing of our keyed hashes.

Each line: `timestamp` (ms from the first exported request, times `time_scale`),
`input_length`, `output_length`, `hash_ids`. Block keys become small integers in order of
first appearance, so equal prefixes keep equal ids and nothing else survives. A prompt's
tail (the tokens after its last full block, never cached) gets a fresh id of its own, so
`input_length` stays the real prompt length; read back with partial last blocks as
uncached tails (IngestOptions.trace_partial_cached=False) the trace gives the stream's
own numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from analysis.reuse import dense_ids
from analysis.stream import BlockStream

DEFAULT_OUTPUT_TOKENS = 128  # for requests whose log did not say (replay tools need one)


@dataclass(frozen=True)
class ReplayOptions:
    start_s: float | None = None  # seconds after the log's first request
    end_s: float | None = None
    tenants: Sequence[str] | None = None  # None: every tenant
    time_scale: float = 1.0  # 0.5: the same schedule twice as fast
    labels: bool = False  # write each request's tenant and user too


@dataclass(frozen=True)
class ReplaySummary:
    requests: int
    block_tokens: int
    distinct_ids: int
    span_ms: int

    @property
    def span_s(self) -> float:
        return self.span_ms / 1000


def replay_lines(stream: BlockStream, options: ReplayOptions) -> Iterator[bytes]:
    """The trace, one JSON line at a time."""
    picked = select(stream, options)
    if not picked.size:
        return
    ids, tails = _ids(stream, picked)
    t0 = int(stream.req_t_us[picked[0]])
    start = stream.req_ref_start
    cursor = 0
    output = stream.req_output_tokens
    known = output[output >= 0]
    fallback = int(np.median(known)) if known.size else DEFAULT_OUTPUT_TOKENS
    for n, i in enumerate(picked.tolist()):
        count = int(start[i + 1] - start[i])
        hash_ids = ids[cursor : cursor + count].tolist()
        cursor += count
        if tails[n] >= 0:
            hash_ids.append(int(tails[n]))
        line = {
            "timestamp": round((int(stream.req_t_us[i]) - t0) / 1000 * options.time_scale),
            "input_length": int(stream.req_prompt_tokens[i]),
            "output_length": int(output[i]) if output[i] >= 0 else fallback,
            "hash_ids": hash_ids,
        }
        if options.labels:
            line["tenant"] = stream.tenants[stream.req_tenant[i]]
            line["user"] = stream.users[stream.req_user[i]]
        yield orjson.dumps(line) + b"\n"


def summary(stream: BlockStream, options: ReplayOptions) -> ReplaySummary:
    picked = select(stream, options)
    if not picked.size:
        return ReplaySummary(0, stream.block_tokens, 0, 0)
    # counted, not numbered: the page shows this on every view
    distinct = dense_ids(_picked_keys(stream, picked))[1] + int(_has_tail(stream, picked).sum())
    span_us = int(stream.req_t_us[picked[-1]] - stream.req_t_us[picked[0]])
    return ReplaySummary(picked.size, stream.block_tokens, distinct,
                         round(span_us / 1000 * options.time_scale))  # fmt: skip


def select(stream: BlockStream, options: ReplayOptions) -> np.ndarray:
    """Indices of the requests to export (in time order)."""
    if options.time_scale <= 0:
        raise ValueError("the time scale must be positive")
    keep = np.ones(stream.requests, dtype=bool)
    if stream.requests:
        first = int(stream.req_t_us[0])
        if options.start_s is not None:
            keep &= stream.req_t_us >= first + round(options.start_s * 1e6)
        if options.end_s is not None:
            keep &= stream.req_t_us < first + round(options.end_s * 1e6)
    if options.tenants is not None:
        wanted = [c for c, name in enumerate(stream.tenants) if name in set(options.tenants)]
        keep &= np.isin(stream.req_tenant, wanted)
    return np.flatnonzero(keep)


def _ids(stream: BlockStream, picked: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ids of the picked requests' block keys, in order; per picked request the fresh id
    of its uncached tail, or -1). Ids are 0, 1, 2... in order of first appearance, tails
    included, so a reader sees only small integers that repeat where prefixes repeat."""
    start = stream.req_ref_start
    counts = start[picked + 1] - start[picked]
    keys = _picked_keys(stream, picked)
    key_ids, distinct = dense_ids(keys)
    has_tail = _has_tail(stream, picked)
    # where each block and each tail sits in the exported sequence (a tail follows its
    # request's blocks), to number everything by first appearance
    tails_before = np.concatenate(([0], np.cumsum(has_tail)[:-1]))
    request_of_ref = np.repeat(np.arange(picked.size), counts)
    ref_pos = np.arange(keys.size) + tails_before[request_of_ref]
    tail_pos = (np.cumsum(counts) + tails_before)[has_tail]
    _, first_ref = np.unique(key_ids, return_index=True)  # first block of each key id
    first_pos = np.concatenate((ref_pos[first_ref], tail_pos))
    rank = np.empty(first_pos.size, dtype=np.int64)
    rank[np.argsort(first_pos, kind="stable")] = np.arange(first_pos.size)
    tails = np.full(picked.size, -1, dtype=np.int64)
    tails[has_tail] = rank[distinct:]
    return rank[:distinct][key_ids], tails


def _picked_keys(stream: BlockStream, picked: np.ndarray) -> np.ndarray:
    """The block keys of the picked requests (ascending indices), in order."""
    if picked.size == stream.requests:
        return stream.ref_key
    keep = np.zeros(stream.requests, dtype=bool)
    keep[picked] = True
    return stream.ref_key[np.repeat(keep, np.diff(stream.req_ref_start))]


def _has_tail(stream: BlockStream, picked: np.ndarray) -> np.ndarray:
    """Per picked request: whether tokens follow its last full block (its uncached tail)."""
    return (stream.req_prompt_tokens[picked] - _ref_tokens(stream, picked)) > 0


def _ref_tokens(stream: BlockStream, picked: np.ndarray) -> np.ndarray:
    """Tokens in each picked request's blocks."""
    totals = np.zeros(stream.block_refs + 1, dtype=np.int64)
    np.cumsum(stream.ref_tokens, out=totals[1:])
    per_request = totals[stream.req_ref_start[1:]] - totals[stream.req_ref_start[:-1]]
    return per_request[picked]
