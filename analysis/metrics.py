"""analyze(): a block stream and a parameter set -> Report. Every number of metrics.md is
computed here from the stored stream, so re-analysis never re-reads or re-tokenizes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numba
import numpy as np

from analysis.budgets import ServingShape, memory_budgets
from analysis.ingest import Progress, ProgressFn
from analysis.mrc import (
    curve_capacities,
    hit_tokens_by_capacity,
    sampled,
    shards_hit_tokens,
    stack_distances,
)
from analysis.profiles import DEFAULT_PROFILE, KVProfile, preset
from analysis.report import HostBudgetCheck, Recommendation, Report, WindowReport
from analysis.reuse import (
    SCOPES,
    dense_ids,
    hits_within,
    prev_next,
    ref_reuse_times,
    salt_codes,
    scoped_ids,
    to_us,
)
from analysis.segments import (
    CLASSES,
    KINDS,
    misplaced_tokens,
    occurrences,
    segment_classes,
    segment_kinds,
)
from analysis.stream import BlockStream
from analysis.workingset import StepFunction, TimeGrid, ttl_occupancy, useful_working_set

DEFAULT_WINDOWS = (300.0, 3600.0, 86400.0)
_MAX_SECONDS = 1e11  # ~3,000 years: past it a window is meaningless and overflows microseconds
HOST_RESERVES = (
    "os",
    "page_cache",
    "tokenizers",
    "request_buffers",
    "serving_process",
    "cache_process",
)


@dataclass(frozen=True)
class HostBudget:
    """Host RAM and what else must live in it (bytes)."""

    host_ram_bytes: int
    reserves_bytes: dict[str, int] = field(default_factory=dict)

    def available(self) -> int:
        return self.host_ram_bytes - sum(self.reserves_bytes.values())


@dataclass(frozen=True)
class AnalysisParams:
    windows_s: tuple[float, ...] = DEFAULT_WINDOWS
    profile: KVProfile = field(default_factory=lambda: preset(DEFAULT_PROFILE))
    kv_dtype: str | None = None  # None: the model's own
    scope: str = "global"
    lifetime_s: float | None = None
    target: float = 0.9
    headroom: float = 0.1
    tp: int = 1
    min_reuses: int = 2
    doc_min_tokens: int = 512
    host: HostBudget | None = None
    # the curve is exact up to this many block references, SHARDS-sampled beyond
    mrc_exact_limit: int = 20_000_000
    shards_rate: float | None = None  # None: enough for ~4 M sampled references
    serving: ServingShape | None = None  # for the weights / active KV / host RAM budgets
    series_buckets: int = 240
    top_n: int = 50

    def validate(self) -> None:
        if not self.windows_s or any(not 0 < w < _MAX_SECONDS for w in self.windows_s):
            raise ValueError("windows must be positive, finite numbers of seconds")
        if self.scope not in SCOPES:
            raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
        if self.lifetime_s is not None and not 0 < self.lifetime_s < _MAX_SECONDS:
            raise ValueError("lifetime must be a positive, finite number of seconds")
        if not 0 < self.target <= 1:
            raise ValueError("target must be in (0, 1]")
        if not self.headroom >= 0:
            raise ValueError("headroom must be >= 0")
        if self.tp < 1:
            raise ValueError("tp must be at least 1")
        self.profile.check_tp(self.tp)
        if self.shards_rate is not None and not 0 < self.shards_rate <= 1:
            raise ValueError("the SHARDS sampling rate must be in (0, 1]")
        if self.min_reuses < 1:
            raise ValueError("min_reuses must be at least 1")
        if self.doc_min_tokens < 1:
            raise ValueError("doc_min_tokens must be at least 1")
        if self.serving is not None:
            self.serving.validate()


def analyze(
    stream: BlockStream, params: AnalysisParams, progress: ProgressFn | None = None
) -> Report:
    params.validate()
    steps = len(params.windows_s) + 3
    step = 0

    def advance() -> None:
        nonlocal step
        step += 1
        if progress is not None:
            progress(Progress("analyzing", step, steps))

    kv_per_token = params.profile.kv_bytes_per_token(params.kv_dtype)
    slot_bytes = stream.block_tokens * kv_per_token
    total_tokens = int(stream.req_prompt_tokens.sum())
    t_first, t_last = int(stream.req_t_us[0]), int(stream.req_t_us[-1])
    span_us = t_last - t_first

    # Over millions of references every column counts: indices are int32 while they fit,
    # per-reference times are never materialised, temporaries are dropped early.
    ref_req = stream.ref_request()
    tokens = stream.ref_tokens
    salts = salt_codes(stream.req_tenant, stream.req_user, params.scope)
    ids, distinct = scoped_ids(stream.ref_key, salts[ref_req] if salts.any() else salts[:0])
    prev, nxt = prev_next(ids, distinct)
    del ids
    reuse = ref_reuse_times(stream.req_t_us, ref_req, prev)
    grid = TimeGrid.of_requests(stream.req_t_us)
    ref_grid = grid.of_request[ref_req]
    advance()

    def ratio(hit_tokens: int) -> float:
        return hit_tokens / total_tokens if total_tokens else 0.0

    infinite_hits = int(tokens.sum(where=reuse >= 0, dtype=np.int64))
    occ = occurrences(stream, salts) if stream.source_format == "chat" else None
    kinds = segment_kinds(stream, params.doc_min_tokens) if occ is not None else None

    windows: list[WindowReport] = []
    misplaced_by_window: list[np.ndarray] = []
    for window_s in params.windows_s:
        w_us = to_us(window_s)
        hit = hits_within(reuse, w_us)
        hit_tokens = int(tokens.sum(where=hit, dtype=np.int64))
        useful = useful_working_set(grid, ref_grid, prev, reuse, w_us)
        ttl = ttl_occupancy(grid, stream.req_t_us, ref_req, ref_grid, nxt, w_us)
        p95, median = useful.time_weighted_quantiles(t_first, t_last, (0.95, 0.5))
        report = WindowReport(
            window_s=float(window_s),
            hit_ratio=ratio(hit_tokens),
            hit_tokens=hit_tokens,
            useful_ws_peak_bytes=useful.peak * slot_bytes,
            useful_ws_p95_bytes=p95 * slot_bytes,
            useful_ws_median_bytes=median * slot_bytes,
            ttl_occupancy_peak_bytes=ttl.peak * slot_bytes,
            series=_series(useful, ttl, t_first, t_last, slot_bytes, params.series_buckets),
        )
        if occ is not None and kinds is not None:
            hit_blocks = np.bincount(ref_req[hit], minlength=stream.requests)
            misplaced = misplaced_tokens(occ, hit_blocks * stream.block_tokens, w_us)
            misplaced_by_window.append(misplaced)
            report.misplaced_reuse_tokens = int(misplaced.sum())
            report.segments = segment_classes(occ, kinds, w_us, params.min_reuses)
        windows.append(report)
        advance()

    # the exact LRU curve (SHARDS-sampled past the limit), and with a lifetime only
    # reuses within it can hit
    lifetime_us = to_us(params.lifetime_s) if params.lifetime_s is not None else None
    rate = _sampling_rate(stream.block_refs, params)
    if rate < 1.0:
        cum = _sampled_curve(stream, salts, ref_req, reuse, lifetime_us, rate)
    else:
        dist = stack_distances(prev)
        eligible = hits_within(reuse, lifetime_us) if lifetime_us is not None else None
        cum = hit_tokens_by_capacity(dist, tokens, eligible)
        del dist
    advance()
    recommendation = _recommend(cum, total_tokens, stream.block_tokens, params)
    capacities = curve_capacities(int(cum.size - 1), extra=(recommendation.capacity_slots,))
    mrc = [
        {
            "capacity_bytes": int(c) * slot_bytes,
            "capacity_slots": int(c),
            "hit_ratio": ratio(int(cum[min(int(c), cum.size - 1)])),
        }
        for c in capacities
    ]
    if rate < 1.0:  # below 100 / rate slots a sampled curve is noise: say so
        for point in mrc:
            point["resolved"] = point["capacity_slots"] >= 100 / rate
    advance()

    report = Report(
        requests=stream.requests,
        prompt_tokens=total_tokens,
        block_refs=stream.block_refs,
        distinct_blocks=int(distinct),
        block_tokens=stream.block_tokens,
        kv_bytes_per_token=kv_per_token,
        slot_bytes=slot_bytes,
        span_s=span_us / 1e6,
        infinite_hit_ratio=ratio(infinite_hits),
        windows=windows,
        mrc=mrc,
        mrc_exact=rate >= 1.0,
        mrc_sampling_rate=rate,
        recommendation=recommendation,
        errors=list(stream.errors),
        skipped_lines=stream.skipped_lines,
        source_format=stream.source_format,
        tenants=sum(1 for t in stream.tenants if t),
        scope=params.scope,
        model=params.profile.to_dict(),
        kv_dtype=params.kv_dtype or params.profile.dtype,
        params=_params_dict(params),
        notes=list(stream.notes),
        reuse_histogram=_reuse_histogram(reuse, tokens, params.windows_s),
        routes=_routes(stream),
        ingest_stats=dict(stream.stats),
    )
    if params.serving is not None:
        # the active sequences' KV on the GPUs is held the same way as host blocks: per rank
        # by section 8's rule, so a replica holds per-rank bytes * tp
        report.budgets = memory_budgets(
            params.serving,
            params.profile,
            recommendation.replica_kv_bytes_per_token,
            recommendation.ram_bytes,
        )
    if occ is not None and kinds is not None:
        report.top_segments = _top_segments(stream, occ, kinds, params)
        largest = int(np.argmax(params.windows_s))
        report.top_misplaced = _top_misplaced(
            stream, occ, kinds, misplaced_by_window[largest], params.top_n
        )
    return report


def _sampling_rate(block_refs: int, params: AnalysisParams) -> float:
    if params.shards_rate is not None:
        return params.shards_rate
    if block_refs <= params.mrc_exact_limit:
        return 1.0
    return min(1.0, 4_000_000 / block_refs)


def _sampled_curve(
    stream: BlockStream,
    salts: np.ndarray,
    ref_req: np.ndarray,
    reuse: np.ndarray,
    lifetime_us: int | None,
    rate: float,
) -> np.ndarray:
    """The curve from the SHARDS sample of scoped keys: distances on the sampled stream."""
    ids, _ = scoped_ids(stream.ref_key, salts[ref_req] if salts.any() else salts[:0])
    keep = sampled(ids, rate)
    sub_ids, sub_distinct = dense_ids(ids[keep])
    del ids
    sub_prev, _ = prev_next(sub_ids, sub_distinct)
    dist = stack_distances(sub_prev)
    sub_reuse = reuse[keep]
    eligible = hits_within(sub_reuse, lifetime_us) if lifetime_us is not None else None
    return shards_hit_tokens(dist, stream.ref_tokens[keep], rate, _ref_tokens(stream),
                             eligible)  # fmt: skip


def _ref_tokens(stream: BlockStream) -> int:
    return int(stream.ref_tokens.sum(dtype=np.int64))


def _recommend(
    cum: np.ndarray, total_tokens: int, block_tokens: int, params: AnalysisParams
) -> Recommendation:
    """Smallest capacity reaching `target` of the ceiling (section 4), plus headroom, held
    per tensor-parallel rank by section 8's rule: a rank keeps max(1, kv_heads // tp) heads
    (MLA: the whole latent) of each of those slots, and the replica tp times that."""
    ceiling_tokens = int(cum[-1])
    need = params.target * ceiling_tokens
    # relative tolerance: target * ceiling is a float, token sums are exact
    slots = int(np.searchsorted(cum, need * (1 - 1e-12), side="left"))
    slots = min(slots, cum.size - 1)
    capacity = slots * block_tokens * params.profile.kv_bytes_per_token(params.kv_dtype)
    rank_per_token = params.profile.kv_bytes_per_token_per_rank(params.tp, params.kv_dtype)
    # exact decimal arithmetic: 200 * (1 + 0.1) in floats is 220.00000000000003, and the
    # ceiling of that would ask for a byte more than capacity * (1 + headroom)
    per_rank = math.ceil(
        slots * block_tokens * rank_per_token * (1 + Fraction(str(params.headroom)))
    )
    # the replica total is exactly per rank * tp (exports divide it back by tp)
    ram = per_rank * params.tp
    host = None
    if params.host is not None:
        available = params.host.available()
        host = HostBudgetCheck(
            host_ram_bytes=params.host.host_ram_bytes,
            reserves_bytes=dict(params.host.reserves_bytes),
            available_bytes=available,
            fits=ram <= available,
            spare_bytes=available - ram,
        )
    return Recommendation(
        capacity_bytes=capacity,
        capacity_slots=slots,
        ram_bytes=ram,
        per_rank_bytes=per_rank,
        per_rank_kv_bytes_per_token=rank_per_token,
        replica_kv_bytes_per_token=rank_per_token * params.tp,
        hit_ratio=int(cum[slots]) / total_tokens if total_tokens else 0.0,
        ceiling=ceiling_tokens / total_tokens if total_tokens else 0.0,
        target=params.target,
        headroom=params.headroom,
        tp=params.tp,
        lifetime_s=params.lifetime_s,
        host=host,
    )


def _series(
    useful: StepFunction, ttl: StepFunction, start: int, end: int, slot_bytes: int, buckets: int
) -> dict:
    times, useful_max = useful.bucket_max(start, end, buckets)
    _, ttl_max = ttl.bucket_max(start, end, buckets)
    return {
        "t_s": ((times - start) / 1e6).round(3).tolist(),
        "useful_ws_bytes": (useful_max * slot_bytes).tolist(),
        "ttl_occupancy_bytes": (ttl_max * slot_bytes).tolist(),
    }


def _reuse_histogram(reuse_us: np.ndarray, tokens: np.ndarray, windows: tuple[float, ...]) -> dict:
    """Token-weighted reuse-time distribution on log-spaced bins (seconds)."""
    top = max(float(reuse_us.max(initial=0)) / 1e6, max(windows), 1.0)
    edges = np.geomspace(1e-3, top * 1.0001, 61)
    counts, first = _log_histogram(reuse_us, tokens, np.log(edges[0]),
                                   np.log(edges[-1] / edges[0]) / (edges.size - 1),
                                   edges.size - 1)  # fmt: skip
    return {
        "edges_s": edges.round(6).tolist(),
        "tokens": counts.tolist(),
        "first_reference_tokens": int(first),
    }


@numba.njit(cache=True, nogil=True)
def _log_histogram(reuse_us, tokens, log_low, log_step, bins):  # pragma: no cover
    """Token-weighted counts on log-spaced bins of reuse time (seconds, at least 1 ms),
    in one pass; the tokens of first references are summed apart."""
    counts = np.zeros(bins, dtype=np.int64)
    first = 0
    for i in range(reuse_us.size):
        r = reuse_us[i]
        if r < 0:
            first += tokens[i]
            continue
        seconds = max(r / 1e6, 1e-3)
        b = int((np.log(seconds) - log_low) / log_step)
        counts[min(max(b, 0), bins - 1)] += tokens[i]
    return counts, first


def _routes(stream: BlockStream) -> list[dict]:
    """Prompt and output length distribution per model route."""
    out = []
    for code, route in enumerate(stream.routes):
        sel = stream.req_route == code
        prompt = stream.req_prompt_tokens[sel]
        output = stream.req_output_tokens[sel]
        output = output[output >= 0]
        out.append(
            {
                "route": route,
                "requests": int(sel.sum()),
                "prompt_tokens": _quantiles(prompt),
                "output_tokens": _quantiles(output),
            }
        )
    return out


def _quantiles(values: np.ndarray) -> dict:
    if not values.size:
        return {"count": 0}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "count": int(values.size),
        "mean": float(values.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(values.max()),
    }


def _segment_rows(
    stream: BlockStream, occ, kinds: np.ndarray, order: np.ndarray, extra: dict[str, np.ndarray]
) -> list[dict]:
    """Rows of the segment tables for the scoped segments in `order`."""
    first_occ = np.full(occ.distinct, -1, dtype=np.int64)
    last_occ = np.zeros(occ.distinct, dtype=np.int64)
    positions = np.arange(occ.scoped.size)
    np.maximum.at(last_occ, occ.scoped, positions)
    first_occ[occ.scoped[::-1]] = positions[::-1]
    count = np.bincount(occ.scoped, minlength=occ.distinct)
    t0 = int(stream.req_t_us[0])
    rows = []
    for s in order:
        seg = int(occ.segment[first_occ[s]])
        row = {
            "key": f"{int(stream.seg_id[seg]):016x}"[:12],
            "kind": KINDS[int(kinds[seg])],
            "tokens": int(stream.seg_tokens[seg]),
            "occurrences": int(count[s]),
            "first_seen_s": (int(stream.req_t_us[occ.req[first_occ[s]]]) - t0) / 1e6,
            "last_seen_s": (int(stream.req_t_us[occ.req[last_occ[s]]]) - t0) / 1e6,
            "label": stream.seg_label[seg],
        }
        for name, values in extra.items():
            row[name] = int(values[s])
        if stream.seg_preview is not None:
            row["preview"] = stream.seg_preview[seg]
        rows.append(row)
    return rows


def _top_segments(
    stream: BlockStream, occ, kinds: np.ndarray, params: AnalysisParams
) -> list[dict]:
    """The most reused segments: ranked by tokens reused within the largest window."""
    extra = {}
    for window_s in params.windows_s:
        w_us = to_us(window_s)
        reused = (occ.reuse_us >= 0) & (occ.reuse_us <= w_us)
        extra[f"reuses_{window_s:g}s"] = np.bincount(
            occ.scoped, weights=reused, minlength=occ.distinct
        ).astype(np.int64)
    score = extra[f"reuses_{max(params.windows_s):g}s"] * np.bincount(
        occ.scoped, weights=occ.tokens, minlength=occ.distinct
    )
    order = np.argsort(-score, kind="stable")[: params.top_n]
    order = order[score[order] > 0]
    return _segment_rows(stream, occ, kinds, order, extra)


def _top_misplaced(
    stream: BlockStream, occ, kinds: np.ndarray, misplaced: np.ndarray, top_n: int
) -> list[dict]:
    per_segment = np.bincount(occ.scoped, weights=misplaced, minlength=occ.distinct)
    per_segment = per_segment.astype(np.int64)
    order = np.argsort(-per_segment, kind="stable")[:top_n]
    order = order[per_segment[order] > 0]
    return _segment_rows(stream, occ, kinds, order, {"misplaced_tokens": per_segment})


def _params_dict(params: AnalysisParams) -> dict:
    return {
        "windows_s": list(params.windows_s),
        "scope": params.scope,
        "lifetime_s": params.lifetime_s,
        "target": params.target,
        "headroom": params.headroom,
        "tp": params.tp,
        "min_reuses": params.min_reuses,
        "doc_min_tokens": params.doc_min_tokens,
        "model": params.profile.name,
        "kv_dtype": params.kv_dtype or params.profile.dtype,
    }


__all__ = ["CLASSES", "KINDS", "AnalysisParams", "HostBudget", "analyze"]
