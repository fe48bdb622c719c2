"""The hit-ratio curve over cache capacity: exact LRU stack distances up to a size, a
SHARDS sample of the scoped keys beyond it, and the points the report lists."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from analysis.mrc import (
    ShardsSample,
    curve_capacities,
    hit_tokens_by_capacity,
    request_starts,
    sampled_looked_up,
    shards_hit_tokens,
    stack_distances,
)
from analysis.params import AnalysisParams
from analysis.reuse import ReuseTimes, dense_ids, previous_refs


def sampling_rate(block_refs: int, params: AnalysisParams) -> float:
    if params.shards_rate is not None:
        return params.shards_rate
    if block_refs <= params.mrc_exact_limit:
        return 1.0
    return min(1.0, 4_000_000 / block_refs)


class HitCurve(NamedTuple):
    """Hit tokens by capacity in slots (cum[C], C = 0..), and of them the same-session
    hits (metrics.md section 7), as long as `total` (the rest are cross-session)."""

    total: np.ndarray
    same_session: np.ndarray


def exact_curve(
    dist: np.ndarray,
    tokens: np.ndarray,
    reuse: ReuseTimes,
    lifetime_us: int | None,
    counted: np.ndarray | None,
    same_session: np.ndarray,
) -> HitCurve:
    """Hit tokens by capacity from the stack distances in the order engines evict
    (analysis.mrc.stack_distances with each request's first reference); with a lifetime
    only reuses within it can hit, and only `counted` references (past the warm-up) count;
    `same_session` marks the references whose previous one was of their session."""
    eligible = _eligible(reuse, lifetime_us, counted)
    total = hit_tokens_by_capacity(dist, tokens, eligible)
    same = same_session if eligible is None else same_session & eligible
    return HitCurve(total, _as_long(hit_tokens_by_capacity(dist, tokens, same), total.size))


def _as_long(cum: np.ndarray, size: int) -> np.ndarray:
    """A cumulative curve cut or carried flat to `size` capacities."""
    if cum.size >= size:
        return cum[:size]
    return np.concatenate([cum, np.full(size - cum.size, cum[-1] if cum.size else 0)])


def _eligible(
    reuse: ReuseTimes | None, lifetime_us: int | None, counted: np.ndarray | None
) -> np.ndarray | None:
    """The references that may count as hits: reused within the lifetime, past the
    warm-up (None: every one). `reuse` is read with a lifetime only."""
    eligible = None
    if lifetime_us is not None:
        if reuse is None:
            raise ValueError("a lifetime needs the references' reuse times")
        eligible = reuse.within(lifetime_us)
    if counted is None:
        return eligible
    return counted if eligible is None else eligible & counted


class SampledRefs(NamedTuple):
    """The per-reference columns a SHARDS curve reads: the analysis's scoped references."""

    ids: np.ndarray  # dense scoped key id
    ref_req: np.ndarray  # request of each reference
    prev: np.ndarray  # previous reference to the same id (-1: none)
    starts: np.ndarray  # each request's first reference, then the total
    tokens: np.ndarray
    reuse: ReuseTimes | None  # (read with a lifetime only)
    counted: np.ndarray | None  # past the warm-up (None: every reference)
    same_session: np.ndarray
    sample: ShardsSample | None = None  # drawn already (None: drawn here)


def sampled_curve(refs: SampledRefs, lifetime_us: int | None, rate: float) -> HitCurve:
    """The curve from the SHARDS sample of the scoped keys' dense `ids` (the analysis's
    own: factorizing 100 M keys again cost 8 s): distances on the sampled stream, split by
    session (_sampled_same_session).

    A key's later copies within one request are known never to hit without sampling
    anything (`prev` says which they are), so they stay out of the sample and out of the
    tokens it stands for: counted in the sample's count adjustment, which adds what the
    sample lacks as hits, they made the ceiling too high by their share (2.7 % of a Zipf
    stream's references)."""
    sample = refs.sample
    if sample is None:
        sample = sampled_looked_up(refs.ids, refs.prev, refs.starts, refs.tokens, rate)
    keep, looked_up_tokens = sample
    sub_ids, sub_distinct = dense_ids(refs.ids[keep])
    sub_prev = previous_refs(sub_ids, sub_distinct)
    dist = stack_distances(sub_prev, request_starts(refs.ref_req[keep]))
    reuse = refs.reuse.take(keep) if lifetime_us is not None and refs.reuse is not None else None
    eligible = _eligible(reuse, lifetime_us,
                         refs.counted[keep] if refs.counted is not None else None)  # fmt: skip
    tokens = refs.tokens[keep]
    total = shards_hit_tokens(dist, tokens, rate, looked_up_tokens, eligible)
    same = refs.same_session[keep] if eligible is None else refs.same_session[keep] & eligible
    # the count adjustment shards_hit_tokens adds from the smallest hit distance on
    adjustment = (rate * looked_up_tokens - float(tokens.sum())) / rate
    return HitCurve(total, _sampled_same_session(dist, tokens, eligible, same, rate,
                                                 adjustment, total))  # fmt: skip


def _sampled_same_session(
    dist: np.ndarray,
    tokens: np.ndarray,
    eligible: np.ndarray | None,
    same: np.ndarray,
    rate: float,
    adjustment: float,
    total: np.ndarray,
) -> np.ndarray:
    """Same-session hit tokens by capacity from the sample: its same-session hits scaled
    by 1 / rate, plus the share of the count adjustment the ceiling's split gives them (a
    constant from the smallest hit distance on, as the whole curve's adjustment is), so
    both parts grow with capacity. Clipped to the whole curve."""
    scaled = np.where(dist > 0, np.ceil(dist / rate), 0).astype(np.int64)
    raw_all = _as_long(hit_tokens_by_capacity(scaled, tokens, eligible), total.size)
    raw_same = _as_long(hit_tokens_by_capacity(scaled, tokens, same), total.size)
    if not raw_all[-1]:
        return np.zeros(total.size, dtype=np.int64)
    first = int(np.argmax(raw_all > 0))  # the smallest hit distance
    shifted = raw_same / rate
    shifted[first:] += adjustment * (raw_same[-1] / raw_all[-1])
    return np.clip(np.rint(shifted), 0, total).astype(np.int64)


def curve_points(
    curve: HitCurve, total_tokens: int, slot_bytes: int, rate: float, recommended_slots: int
) -> list[dict]:
    """The report's `mrc`: hit ratio at log-spaced capacities and at the recommended one,
    each split into same-session and cross-session hits."""
    cum = curve.total
    capacities = curve_capacities(int(cum.size - 1), extra=(recommended_slots,))
    points = []
    for c in capacities:
        at = min(int(c), cum.size - 1)
        hits, same = int(cum[at]), int(curve.same_session[at])
        points.append({
            "capacity_bytes": int(c) * slot_bytes,
            "capacity_slots": int(c),
            "hit_ratio": hit_share(hits, total_tokens),
            "same_session_hit_ratio": hit_share(same, total_tokens),
            "cross_session_hit_ratio": hit_share(hits - same, total_tokens),
        })  # fmt: skip
    if rate < 1.0:  # below 100 / rate slots a sampled curve is noise: say so
        for point in points:
            point["resolved"] = point["capacity_slots"] >= 100 / rate
    return points


def hit_share(hit_tokens: int, total_tokens: int) -> float:
    """Hit tokens as a share of all prompt tokens (0 for an empty stream)."""
    return hit_tokens / total_tokens if total_tokens else 0.0
