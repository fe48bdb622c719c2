"""The report's tables and distributions beside the headline numbers: the working-set
series of the charts, the reuse-time histogram, the per-route length distributions and
the top segments (most reused, most misplaced)."""

from __future__ import annotations

import numba
import numpy as np

from analysis.params import AnalysisParams
from analysis.reuse import ReuseTimes, to_us
from analysis.segments import KINDS, Occurrences
from analysis.stream import BlockStream
from analysis.workingset import StepFunction


def series(
    useful: StepFunction, ttl: StepFunction, start: int, end: int, slot_bytes: int, buckets: int
) -> dict:
    times, useful_max = useful.bucket_max(start, end, buckets)
    _, ttl_max = ttl.bucket_max(start, end, buckets)
    return {
        "t_s": ((times - start) / 1e6).round(3).tolist(),
        "useful_ws_bytes": (useful_max * slot_bytes).tolist(),
        "ttl_occupancy_bytes": (ttl_max * slot_bytes).tolist(),
    }


def reuse_histogram(reuse: ReuseTimes, tokens: np.ndarray, windows: tuple[float, ...]) -> dict:
    """Token-weighted reuse-time distribution on log-spaced bins (seconds)."""
    rt = (reuse.req_t_us, reuse.ref_req, reuse.prev_req)
    top = max(_longest_reuse_us(*rt) / 1e6, max(windows), 1.0)
    edges = np.geomspace(1e-3, top * 1.0001, 61)
    counts, first = _log_histogram(*rt, tokens, np.log(edges[0]),
                                   np.log(edges[-1] / edges[0]) / (edges.size - 1),
                                   edges.size - 1)  # fmt: skip
    return {
        "edges_s": edges.round(6).tolist(),
        "tokens": counts.tolist(),
        "first_reference_tokens": int(first),
    }


@numba.njit(cache=True, nogil=True)
def _longest_reuse_us(req_t_us, ref_req, prev_req):  # pragma: no cover (compiled)
    top = 0
    for i in range(prev_req.size):
        p = prev_req[i]
        if p >= 0:
            top = max(top, req_t_us[ref_req[i]] - req_t_us[p])
    return top


@numba.njit(cache=True, nogil=True)
def _log_histogram(
    req_t_us, ref_req, prev_req, tokens, log_low, log_step, bins
):  # pragma: no cover (compiled)
    """Token-weighted counts on log-spaced bins of reuse time (seconds, at least 1 ms),
    in one pass; the tokens of first references are summed apart."""
    counts = np.zeros(bins, dtype=np.int64)
    first = 0
    for i in range(prev_req.size):
        p = prev_req[i]
        if p < 0:
            first += tokens[i]
            continue
        r = req_t_us[ref_req[i]] - req_t_us[p]
        seconds = max(r / 1e6, 1e-3)
        b = int((np.log(seconds) - log_low) / log_step)
        counts[min(max(b, 0), bins - 1)] += tokens[i]
    return counts, first


def routes(stream: BlockStream) -> list[dict]:
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
    stream: BlockStream,
    occ: Occurrences,
    kinds: np.ndarray,
    order: np.ndarray,
    extra: dict[str, np.ndarray],
    scope: str,
) -> list[dict]:
    """Rows of the segment tables for the scoped segments in `order`. Under tenant scope a
    segment shared within two tenants is two scoped segments, so each row names its
    tenant (as the stream keeps it: the name, "" for requests without one)."""
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
        if scope == "tenant":
            row["tenant"] = stream.tenants[int(stream.req_tenant[occ.req[first_occ[s]]])]
        for name, values in extra.items():
            row[name] = int(values[s])
        if stream.seg_preview is not None:
            row["preview"] = stream.seg_preview[seg]
        rows.append(row)
    return rows


def top_segments(
    stream: BlockStream, occ: Occurrences, kinds: np.ndarray, params: AnalysisParams
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
    return _segment_rows(stream, occ, kinds, order, extra, params.scope)


def top_misplaced(
    stream: BlockStream,
    occ: Occurrences,
    kinds: np.ndarray,
    misplaced: np.ndarray,
    params: AnalysisParams,
) -> list[dict]:
    """The segments ranked by their misplaced tokens (per occurrence, in `misplaced`)."""
    per_segment = np.bincount(occ.scoped, weights=misplaced, minlength=occ.distinct)
    per_segment = per_segment.astype(np.int64)
    order = np.argsort(-per_segment, kind="stable")[: params.top_n]
    order = order[per_segment[order] > 0]
    return _segment_rows(stream, occ, kinds, order, {"misplaced_tokens": per_segment},
                         params.scope)  # fmt: skip
