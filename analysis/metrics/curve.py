"""The hit-ratio curve over cache capacity: exact LRU stack distances up to a size, a
SHARDS sample of the scoped keys beyond it, and the points the report lists."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from analysis.mrc import (
    ShardsSample,
    curve_capacities,
    hit_tokens_by_capacity,
    request_starts,
    sampled_looked_up,
    stack_distances,
)
from analysis.near_stack import near_hits
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


# the near stack's depth as a multiple of 1 / R: SHARDS estimates capacity C from about
# R x C sampled keys, so beyond K = NEAR_KEYS / R every estimate rests on NEAR_KEYS or more
NEAR_KEYS = 1000


def exact_slots(rate: float) -> int:
    """The capacities up to which a sampled curve is exact (analysis.near_stack)."""
    return math.ceil(NEAR_KEYS / rate)


def sampled_curve(
    refs: SampledRefs, lifetime_us: int | None, rate: float, exact_up_to: int | None = None
) -> HitCurve:
    """The curve of a stream too long for the exact one: exact up to `exact_up_to` slots
    (exact_slots(rate) by default) from the top of the stack, which every reference is
    measured against (analysis.near_stack), and beyond it SHARDS on the sample of the
    scoped keys' dense `ids` (the analysis's own: factorizing 100 M keys again cost 8 s).

    The top of the stack counts exactly the tokens reused from deeper than K as well, so
    the sample only says where between K and the ceiling they hit: the ceiling is exact,
    and where plain SHARDS missed by up to 3 points just above 100 / R slots (its estimate
    there rests on ~100 keys) the curve is now exact. A key's later copies within one
    request are never looked up: neither counted nor sampled (`prev` says which they are)."""
    sample = refs.sample
    if sample is None:
        sample = sampled_looked_up(refs.ids, refs.prev, refs.starts, refs.tokens, rate)
    keep = sample.keep
    limit = exact_slots(rate) if exact_up_to is None else exact_up_to
    eligible = _eligible(refs.reuse, lifetime_us, refs.counted)
    near = near_hits(refs.ids, refs.prev, refs.starts, refs.tokens, eligible,
                     refs.same_session, keep, limit)  # fmt: skip
    sub_ids, sub_distinct = dense_ids(refs.ids[keep])
    dist = stack_distances(previous_refs(sub_ids, sub_distinct), request_starts(refs.ref_req[keep]))
    far = (dist > 0) & ~near.sampled_near
    if eligible is not None:
        far &= eligible[keep]
    far_at = np.maximum(np.ceil(dist[far] / rate), limit + 1).astype(np.int64)
    tokens = refs.tokens[keep][far]
    same = refs.same_session[keep][far]
    # each part on its own (both grow with capacity), the curve their sum
    same_cum = _near_and_far(near.same_session, near.far_same_session, far_at[same],
                             tokens[same])  # fmt: skip
    cross_cum = _near_and_far(near.tokens - near.same_session,
                              near.far_tokens - near.far_same_session, far_at[~same],
                              tokens[~same])  # fmt: skip
    size = max(same_cum.size, cross_cum.size)
    same_cum = _as_long(same_cum, size)
    return HitCurve(same_cum + _as_long(cross_cum, size), same_cum)


def _near_and_far(
    near: np.ndarray, far_tokens: int, far_at: np.ndarray, sampled_tokens: np.ndarray
) -> np.ndarray:
    """cum[C]: the exact hits by distance up to K (`near`, indexed by distance), then the
    `far_tokens` reused from deeper, spread over capacities past K as the sample's far
    references are (each at its scaled distance `far_at`, weighing its tokens)."""
    limit = near.size - 1
    top = int(far_at.max()) if far_at.size else limit + 1
    hist = np.zeros(max(top, limit + 1) + 1, dtype=np.float64)
    hist[: limit + 1] = near
    if far_tokens:
        far = np.bincount(far_at, weights=sampled_tokens.astype(np.float64))
        if far.sum() > 0:
            hist[: far.size] += far * (far_tokens / far.sum())
        else:  # no far reference was sampled: nothing says where past K they hit
            hist[limit + 1] += far_tokens
    # trailing capacities that add no hit are left off, as the exact curve's are
    end = int(np.flatnonzero(hist)[-1]) + 1 if hist.any() else 1
    cum = np.cumsum(hist[:end])
    return np.rint(cum, out=cum).astype(np.int64)


def curve_points(
    curve: HitCurve, total_tokens: int, slot_bytes: int, recommended_slots: int
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
    return points


def hit_share(hit_tokens: int, total_tokens: int) -> float:
    """Hit tokens as a share of all prompt tokens (0 for an empty stream)."""
    return hit_tokens / total_tokens if total_tokens else 0.0
