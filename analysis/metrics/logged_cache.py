"""What the engine that served a log reports it reused, beside kvscope's prediction (#18).

A log whose responses carry their usage (analysis.readers.usage) says, per request, how many
prompt tokens the engine served from its prefix cache. Measured share = the cached tokens
over the engine's own count of the prompt tokens, over the requests that report both (past
the warm-up). Predicted share = the hit tokens kvscope's model gives those same requests, on
the configuration the user states the engine ran with (the analysis's fleet: replicas, its
first router, its GPU prefix cache; and the host RAM per replica, `logged_ram_gib`), over
kvscope's own count of their prompt tokens. Both overall, per model route and over time, and
a sample of requests for a scatter of predicted against measured hit tokens.
"""

from __future__ import annotations

import numpy as np

from analysis.metrics.at_budget import GIB, budget_slots
from analysis.metrics.fleet.curve import replicas_of_requests, router_curve
from analysis.metrics.fleet.inputs import FleetInputs
from analysis.params import AnalysisParams, FleetParams
from analysis.stream import BlockStream

SERIES_BUCKETS = 48  # the over-time view's buckets, from the first request to the last
SAMPLE_REQUESTS = 1000  # requests in the scatter (every one when there are fewer)


def has_usage(stream: BlockStream) -> bool:
    """Whether any request reports both its prompt and its cached tokens."""
    return bool(np.any((stream.req_cached_tokens >= 0) & (stream.req_reported_prompt_tokens >= 0)))


def logged_cache_section(
    stream: BlockStream, inputs: FleetInputs, params: AnalysisParams, gpu_slots: int
) -> dict:
    """The `logged_cache` section (call when has_usage(stream))."""
    reported = (stream.req_cached_tokens >= 0) & (stream.req_reported_prompt_tokens >= 0)
    counted = reported.copy()
    counted[: inputs.warmup_requests] = False
    fleet = params.fleet if params.fleet is not None else FleetParams()
    stated = params.logged_ram_gib is not None or gpu_slots > 0
    # a sampled curve has no per-request hits: the prediction needs the exact one
    why_not = None if stated and inputs.rate >= 1.0 else (
        "sampled" if stated else "no_configuration")  # fmt: skip
    hits, slots = (None, None) if why_not else _predicted_hits(stream, inputs, params, fleet,
                                                               gpu_slots)  # fmt: skip
    return {
        "requests": int(counted.sum()),
        "requests_share": float(reported.sum()) / stream.requests,
        "configuration": {
            "replicas": fleet.replicas,
            "router": fleet.chosen_routers()[0],
            "gpu_cache_bytes": fleet.gpu_cache_bytes,
            "ram_bytes": round((params.logged_ram_gib or 0.0) * GIB),
            "ram_slots": slots,
        },
        "predicted": hits is not None,
        "unpredicted_reason": why_not,  # None, "no_configuration" or "sampled"
        **_shares(stream, counted, hits),
        "by_route": _by_route(stream, counted, hits),
        "series": _series(stream, counted, hits),
        "sample": _sample(stream, counted, hits),
    }


def _predicted_hits(
    stream: BlockStream, inputs: FleetInputs, params: AnalysisParams, fleet: FleetParams,
    gpu_slots: int,
) -> tuple[np.ndarray | None, int | None]:  # fmt: skip
    """kvscope's hit tokens of every request on the stated configuration, and the host RAM
    slots per replica: the fleet's own lookup (GPU prefix, then RAM contiguously) at the
    capacity the RAM holds with no headroom (the engine had exactly that)."""
    router = fleet.chosen_routers()[0]
    partition = replicas_of_requests(inputs, fleet, router)
    curve = router_curve(inputs, fleet, router, gpu_slots, partition)
    rank = params.profile.kv_bytes_per_token_per_rank(params.tp, params.kv_dtype)
    ram = round((params.logged_ram_gib or 0.0) * GIB)
    slots = budget_slots(ram, stream.block_tokens, rank, params.tp, 0.0)
    hit = curve.gpu_hit | ((curve.ram_slots > 0) & (curve.ram_slots <= slots))
    hits = np.bincount(inputs.view_req[hit], weights=inputs.view_tokens[hit],
                       minlength=stream.requests)  # fmt: skip
    return np.rint(hits).astype(np.int64), slots


def _shares(stream: BlockStream, counted: np.ndarray, predicted: np.ndarray | None) -> dict:
    measured = _share(stream.req_cached_tokens, stream.req_reported_prompt_tokens, counted)
    guess = (_share(predicted, stream.req_prompt_tokens, counted)
             if predicted is not None else None)  # fmt: skip
    return {
        "measured_hit_ratio": measured,
        "predicted_hit_ratio": guess,
        "difference": _difference(measured, guess),
        "cached_tokens": int(stream.req_cached_tokens[counted].sum()),
        "reported_prompt_tokens": int(stream.req_reported_prompt_tokens[counted].sum()),
        "predicted_hit_tokens": int(predicted[counted].sum()) if predicted is not None else None,
        "prompt_tokens": int(stream.req_prompt_tokens[counted].sum()),
    }


def _share(hits: np.ndarray, whole: np.ndarray, where: np.ndarray) -> float | None:
    total = int(whole[where].sum())
    return int(hits[where].sum()) / total if total else None


def _difference(measured: float | None, predicted: float | None) -> float | None:
    """Measured minus predicted (None when either is missing)."""
    return None if measured is None or predicted is None else measured - predicted


def _by_route(stream: BlockStream, counted: np.ndarray, predicted: np.ndarray | None) -> list:
    rows = []
    for code in np.unique(stream.req_route[counted]).tolist():
        mine = counted & (stream.req_route == code)
        measured = _share(stream.req_cached_tokens, stream.req_reported_prompt_tokens, mine)
        guess = (_share(predicted, stream.req_prompt_tokens, mine)
                 if predicted is not None else None)  # fmt: skip
        rows.append({"route": stream.routes[code], "requests": int(mine.sum()),
                     "measured_hit_ratio": measured, "predicted_hit_ratio": guess,
                     "difference": _difference(measured, guess)})  # fmt: skip
    return rows


def _series(stream: BlockStream, counted: np.ndarray, predicted: np.ndarray | None) -> dict:
    """Both shares in equal time buckets from the first counted request to the last (None
    where a bucket holds none)."""
    t = stream.req_t_us[counted]
    if not t.size:
        return {"t_s": [], "measured": [], "predicted": []}
    t0, span = int(t.min()), max(int(t.max() - t.min()), 1)
    buckets = min(SERIES_BUCKETS, int(counted.sum()))
    bucket = np.minimum((stream.req_t_us - t0) * buckets // span, buckets - 1)
    starts = [(t0 + span * b / buckets - int(stream.req_t_us.min())) / 1e6
              for b in range(buckets)]  # fmt: skip
    measured, guessed = [], []
    for b in range(buckets):
        mine = counted & (bucket == b)
        measured.append(_share(stream.req_cached_tokens, stream.req_reported_prompt_tokens, mine))
        guessed.append(_share(predicted, stream.req_prompt_tokens, mine)
                       if predicted is not None else None)  # fmt: skip
    return {"t_s": starts, "measured": measured, "predicted": guessed}


def _sample(stream: BlockStream, counted: np.ndarray, predicted: np.ndarray | None) -> dict:
    """Up to SAMPLE_REQUESTS counted requests, evenly spread in arrival order: their index,
    cached tokens (measured) and predicted hit tokens."""
    index = np.flatnonzero(counted)
    if index.size > SAMPLE_REQUESTS:
        index = index[np.linspace(0, index.size - 1, SAMPLE_REQUESTS).astype(np.int64)]
    return {
        "request": index.tolist(),
        "measured_tokens": stream.req_cached_tokens[index].tolist(),
        "predicted_tokens": predicted[index].tolist() if predicted is not None else None,
    }
