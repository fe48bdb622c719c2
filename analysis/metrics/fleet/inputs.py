"""What every router's fleet curve reads (metrics.md section 8), computed once per
analysis: the scoped references, the view the curves are computed on, and what the single
cache's curve already measured of it."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from analysis.metrics.fleet.tiers import TierDistances
from analysis.mrc import ShardsSample, sampled_looked_up
from analysis.reuse import ReuseTimes, repeated_in_request


class StreamColumns(NamedTuple):
    """The stream's columns a fleet reads."""

    starts: np.ndarray  # each request's first reference, then the total (req_ref_start)
    tokens: np.ndarray  # tokens of every reference
    req_t_us: np.ndarray
    req_session: np.ndarray
    req_prompt_tokens: np.ndarray


class ScopedRefs(NamedTuple):
    """The references under the analysis's scope, as the single cache's curve saw them."""

    ids: np.ndarray  # scoped key id of every reference
    distinct: int
    ref_req: np.ndarray  # request of every reference
    prev: np.ndarray  # previous reference to the same scoped key (-1: none)
    reuse: ReuseTimes  # each reference's reuse time
    # the single curve's engine-order stack distances (exact curves only, else None)
    distances: np.ndarray | None
    sample: ShardsSample | None = None  # the single curve's SHARDS sample, when it drew one


class FleetInputs(NamedTuple):
    """The `view_` columns are the references the curves are computed on: every reference
    but the later copies of a key repeated within one request (engines neither look those
    up nor store them again; chained keys never repeat), or past the exact limit a SHARDS
    sample of the keys, their repeats left out too."""

    ids: np.ndarray  # scoped key id of every reference (for the prefix router's index)
    distinct: int
    columns: StreamColumns
    warmup_requests: int  # the leading requests that fill caches but are not counted
    counted_tokens: int  # prompt tokens of the counted requests: every ratio's whole
    lifetime_us: int | None
    rate: float  # the SHARDS sampling rate (1: exact)
    # SHARDS' count adjustment (tokens the sample should have held less those it holds,
    # over the rate), added to the hits of the smallest distances as the single curve does
    adjustment: float
    view_ids: np.ndarray
    view_req: np.ndarray  # request of each reference of the view
    view_tokens: np.ndarray
    view_counted: np.ndarray | None  # past the warm-up (None: every reference)
    # the single cache's tiers over the whole view (k = 1), when its curve was exact
    whole: TierDistances | None


def fleet_inputs(
    refs: ScopedRefs,
    columns: StreamColumns,
    warmup_requests: int,
    counted_tokens: int,
    lifetime_us: int | None,
    rate: float,
) -> FleetInputs:
    starts = np.asarray(columns.starts, dtype=np.int64)
    columns = columns._replace(starts=starts)
    tokens = columns.tokens
    adjustment = 0.0
    keep: np.ndarray | None
    if rate < 1.0:  # as analysis.metrics.curve's sampled curve samples and counts it
        sample = refs.sample
        if sample is None:
            sample = sampled_looked_up(refs.ids, refs.prev, starts, tokens, rate)
        keep, looked_up_tokens = sample
        adjustment = rate * looked_up_tokens - float(tokens[keep].sum(dtype=np.int64))
        adjustment /= rate
    else:
        repeat = repeated_in_request(refs.prev, starts)
        keep = ~repeat if repeat.any() else None
    view_req = refs.ref_req if keep is None else refs.ref_req[keep]
    whole = None
    if refs.distances is not None:
        dist = refs.distances if keep is None else refs.distances[keep]
        times = np.zeros(0, dtype=np.int64)
        if lifetime_us is not None:  # (only a lifetime reads them, as the tiers' own)
            times = (refs.reuse if keep is None else refs.reuse.take(keep)).times_us()
        whole = TierDistances(dist, dist, times)
    return FleetInputs(
        ids=refs.ids, distinct=refs.distinct, columns=columns,
        warmup_requests=warmup_requests, counted_tokens=counted_tokens,
        lifetime_us=lifetime_us, rate=rate, adjustment=adjustment,
        view_ids=refs.ids if keep is None else refs.ids[keep],
        view_req=view_req,
        view_tokens=tokens if keep is None else tokens[keep],
        view_counted=view_req >= warmup_requests if warmup_requests else None,
        whole=whole,
    )  # fmt: skip
