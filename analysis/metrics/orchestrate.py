"""analyze(): a block stream and a parameter set -> Report. Every number of metrics.md is
computed from the stored stream, so re-analysis never re-reads or re-tokenizes."""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from analysis.budgets import memory_budgets
from analysis.metrics.at_budget import at_budgets
from analysis.metrics.curve import (
    HitCurve,
    SampledRefs,
    curve_points,
    exact_curve,
    hit_share,
    sampled_curve,
    sampling_rate,
)
from analysis.metrics.curve_steps import curve_steps
from analysis.metrics.fleet import (
    FleetInputs,
    ScopedRefs,
    StreamColumns,
    admission_curve,
    admission_section,
    fleet_inputs,
    fleet_section,
    gpu_block_bytes,
)
from analysis.metrics.fleet.curve import RouterCurve
from analysis.metrics.knee import knee
from analysis.metrics.logged_cache import has_usage, logged_cache_section
from analysis.metrics.recommend import per_rank_ram, recommend
from analysis.metrics.sessions import same_session_refs
from analysis.metrics.tables import reuse_histogram, routes, series, top_misplaced, top_segments
from analysis.metrics.traffic import cache_control_requests, session_share, tools_summary
from analysis.mrc import ShardsSample, sampled_looked_up, stack_distances
from analysis.params import AnalysisParams, FleetParams
from analysis.progress import Progress, ProgressFn
from analysis.report import Recommendation, Report, WindowReport
from analysis.reuse import (
    ReuseTimes,
    previous_refs,
    salt_codes,
    scoped_ids,
    to_us,
)
from analysis.segments import (
    Occurrences,
    misplaced_tokens,
    occurrences,
    segment_classes,
    segment_kinds,
)
from analysis.stream import BlockStream
from analysis.workingset import TimeGrid, ttl_occupancy, useful_working_set


class _Segments(NamedTuple):
    """The segment view of a chat log: scoped occurrences and each segment's kind."""

    occ: Occurrences
    kinds: np.ndarray


@dataclass(frozen=True)
class _Run:
    """One analysis of one stream: what every stage reads, computed once."""

    stream: BlockStream
    params: AnalysisParams
    kv_per_token: int
    slot_bytes: int
    total_tokens: int
    warmup_requests: int  # the leading requests left out of every hit ratio
    counted: np.ndarray | None  # the references hit ratios count (None: every one)
    counted_tokens: int  # the prompt tokens of the counted requests: every ratio's whole
    t_first: int  # us of the first and last request
    t_last: int
    lifetime_us: int | None  # only reuses within it can hit (None: any)
    rate: float  # the curve's SHARDS sampling rate (1: exact)
    # its sample, drawn once: the single cache and the admission cache read the same
    sample: ShardsSample | None
    ref_req: np.ndarray  # request of each block reference
    salts: np.ndarray  # scope salt code of each request
    ids: np.ndarray  # scoped key id of each reference
    prev: np.ndarray  # previous reference to the same scoped key (-1: none)
    reuse: ReuseTimes  # each reference's reuse time, from its previous one's request
    same_session: np.ndarray  # that previous reference was of the same session
    distinct: int  # distinct scoped keys
    grid: TimeGrid  # (a reference's grid index: grid.of_request[ref_req], never stored)
    segments: _Segments | None  # chat logs only


def analyze(
    stream: BlockStream,
    params: AnalysisParams,
    progress: ProgressFn | None = None,
    *,
    consume: bool = False,
) -> Report:
    """The report of `stream` under `params`. With `consume` the caller hands the stream
    over: its keys, read once for the scoped ids, are let go as soon as they are read
    (763 MiB at 100 M references), and the stream can no longer be saved."""
    params.validate()
    advance = _stepper(progress, len(params.windows_s) + 3)
    run = _scoped_run(stream, params, consume)
    advance()
    # Three parts on two cores: the windows' hits and working sets, and the cache that
    # admits at the second use, in helper threads while this one computes the single cache.
    # Their kernels release the GIL and none writes what another reads, so the report is the
    # one computed in turn (the golden tests say so).
    with ThreadPoolExecutor(max_workers=2) as helpers:
        pending_windows = helpers.submit(_windows, run)
        pending_admitted = helpers.submit(_admitted, run)
        report, curve, distances = _single_cache(run)
        _add_tiers(report, run, distances, curve, pending_admitted.result())
        advance()
        report.windows, misplaced_by_window = pending_windows.result()
    for _ in params.windows_s:  # reported here: the progress callback is this thread's
        advance()
    recommendation = report.recommendation
    report.at_budget = at_budgets(curve, run.counted_tokens, stream.block_tokens,
                                  recommendation.per_rank_kv_bytes_per_token, run.kv_per_token,
                                  params)  # fmt: skip
    if params.serving is not None:
        # the active sequences' KV on the GPUs is held the same way as host blocks: per rank
        # by section 8's rule, so a replica holds per-rank bytes * tp
        report.budgets = memory_budgets(
            params.serving,
            params.profile,
            recommendation.replica_kv_bytes_per_token,
            recommendation.ram_bytes,
        )
    if run.segments is not None:
        occ, kinds = run.segments
        report.top_segments = top_segments(stream, occ, kinds, params)
        largest = int(np.argmax(params.windows_s))
        report.top_misplaced = top_misplaced(
            stream, occ, kinds, misplaced_by_window[largest], params
        )
    advance()
    return report


def _single_cache(run: _Run) -> tuple[Report, HitCurve, np.ndarray | None]:
    """The report of one cache (its windows and tiers still to come), its hit curve, and
    its stack distances when the curve is exact (the fleet's single-cache tiers reuse
    them): the exact LRU curve (SHARDS-sampled past the limit; with a lifetime only reuses
    within it can hit), and the recommendation and knee read off it."""
    stream, params = run.stream, run.params
    distances = None
    if run.rate < 1.0:
        refs = SampledRefs(run.ids, run.ref_req, run.prev, stream.req_ref_start,
                           stream.ref_tokens, run.reuse, run.counted, run.same_session,
                           run.sample)  # fmt: skip
        curve = sampled_curve(refs, run.lifetime_us, run.rate, params.shards_exact_slots)
    else:
        distances = stack_distances(run.prev, stream.req_ref_start)
        curve = exact_curve(distances, stream.ref_tokens, run.reuse, run.lifetime_us,
                            run.counted, run.same_session)  # fmt: skip
    recommendation = recommend(curve, run.counted_tokens, stream.block_tokens, params)
    slots = recommendation.capacity_slots
    mrc = curve_points(curve, run.counted_tokens, run.slot_bytes, slots)
    report = _report(run, [], mrc, run.rate, recommendation)
    report.knee = _knee(run, curve, mrc, recommendation)
    report.curve_steps = curve_steps(curve.total, run.counted_tokens)
    return report, curve, distances


def _windows(run: _Run) -> tuple[list[WindowReport], list[np.ndarray]]:
    """Every reuse window's report, and (chat logs) each one's misplaced tokens."""
    windows: list[WindowReport] = []
    misplaced_by_window: list[np.ndarray] = []
    for window_s in run.params.windows_s:
        window, misplaced = _window_report(run, window_s)
        windows.append(window)
        if misplaced is not None:
            misplaced_by_window.append(misplaced)
    return windows, misplaced_by_window


def _knee(run: _Run, curve: HitCurve, mrc: list[dict], rec: Recommendation) -> dict | None:
    """The knee with its host RAM, as the recommendation's: per rank with headroom, * tp."""
    found = knee(curve, mrc, run.counted_tokens, run.params.knee_gain)
    if found is not None:
        rank_ram = per_rank_ram(found["capacity_slots"], run.stream.block_tokens,
                                rec.per_rank_kv_bytes_per_token, run.params.headroom)  # fmt: skip
        found["ram_bytes"] = rank_ram * run.params.tp
    return found


def _tier_inputs(run: _Run, distances: np.ndarray | None) -> FleetInputs:
    """The fleet's view of the scoped references (with the single cache's own distances
    when given: a tier that stores at the first reference reuses them)."""
    stream = run.stream
    columns = StreamColumns(stream.req_ref_start, stream.ref_tokens, stream.req_t_us,
                            stream.req_session, stream.req_prompt_tokens)  # fmt: skip
    refs = ScopedRefs(run.ids, run.distinct, run.ref_req, run.prev, run.reuse, distances,
                      run.sample)  # fmt: skip
    return fleet_inputs(refs, columns, run.warmup_requests, run.counted_tokens,
                        run.lifetime_us, run.rate)  # fmt: skip


def _admitted(run: _Run) -> tuple[FleetInputs, RouterCurve]:
    """The single cache admitting at the second use: its curve needs no distances of the
    single cache's, so it is computed beside them."""
    inputs = _tier_inputs(run, None)
    return inputs, admission_curve(inputs)


def _add_tiers(
    report: Report,
    run: _Run,
    distances: np.ndarray | None,
    single: HitCurve,
    admitted: tuple[FleetInputs, RouterCurve],
) -> None:
    """The single cache admitting at the second use, and the fleet when one is asked for."""
    stream, params = run.stream, run.params
    inputs, curve = admitted
    report.admission = admission_section(curve, inputs, params, stream.block_tokens,
                                         run.slot_bytes, single,
                                         report.recommendation.capacity_slots)  # fmt: skip
    if params.fleet is None and not has_usage(stream):
        return
    tiers = inputs if distances is None else _tier_inputs(run, distances)
    if params.fleet is not None:
        report.fleet = fleet_section(tiers, params, stream.block_tokens, run.slot_bytes,
                                     single, report.recommendation.ceiling)  # fmt: skip
    if has_usage(stream):
        fleet = params.fleet if params.fleet is not None else FleetParams()
        gpu_slots = fleet.gpu_cache_bytes // gpu_block_bytes(params, stream.block_tokens)
        report.logged_cache = logged_cache_section(stream, tiers, params, gpu_slots)


def _stepper(progress: ProgressFn | None, steps: int) -> Callable[[], None]:
    """A callable reporting one more of `steps` analysis steps done (or nothing)."""
    done = 0

    def advance() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(Progress("analyzing", done, steps))

    return advance


def _scoped_run(stream: BlockStream, params: AnalysisParams, consume: bool) -> _Run:
    """The stream's references under the analysis's scope, linked to their neighbours
    (the stream's keys let go once read, when it is `consume`d)."""
    kv_per_token = params.profile.kv_bytes_per_token(params.kv_dtype)
    # Over millions of references every column counts: indices are int32 while they fit,
    # per-reference times are never materialised, temporaries are dropped early.
    ref_req = stream.ref_request()
    salts = salt_codes(stream.req_tenant, stream.req_user, params.scope)
    ids, distinct = scoped_ids(stream.ref_key, salts[ref_req] if salts.any() else salts[:0])
    if consume:
        stream.let_keys_go()
    prev = previous_refs(ids, distinct)
    reuse = ReuseTimes.of(stream.req_t_us, ref_req, prev)
    grid = TimeGrid.of_requests(stream.req_t_us)
    segments = None
    if stream.source_format == "chat":
        segments = _Segments(
            occurrences(stream, salts), segment_kinds(stream, params.doc_min_tokens)
        )
    warm = math.floor(params.warmup * stream.requests)
    rate = sampling_rate(stream.block_refs, params)
    sample = None
    if rate < 1.0:
        sample = sampled_looked_up(ids, prev, stream.req_ref_start, stream.ref_tokens, rate)
    return _Run(
        warmup_requests=warm,
        counted=ref_req >= warm if warm else None,
        counted_tokens=int(stream.req_prompt_tokens[warm:].sum()),
        stream=stream,
        params=params,
        kv_per_token=kv_per_token,
        slot_bytes=stream.block_tokens * kv_per_token,
        total_tokens=int(stream.req_prompt_tokens.sum()),
        t_first=int(stream.req_t_us[0]),
        t_last=int(stream.req_t_us[-1]),
        lifetime_us=to_us(params.lifetime_s) if params.lifetime_s is not None else None,
        rate=rate,
        sample=sample,
        ref_req=ref_req,
        salts=salts,
        ids=ids,
        prev=prev,
        reuse=reuse,
        same_session=same_session_refs(stream, ref_req, reuse.prev_req),
        distinct=int(distinct),
        grid=grid,
        segments=segments,
    )


def _window_report(run: _Run, window_s: float) -> tuple[WindowReport, np.ndarray | None]:
    """One reuse window's hits and working sets; for chat logs also its segment classes
    and each occurrence's misplaced tokens (returned beside the report)."""
    stream, slot_bytes = run.stream, run.slot_bytes
    w_us = to_us(window_s)
    hit_tokens, same_tokens = run.reuse.tokens_within(
        w_us, stream.ref_tokens, run.warmup_requests, run.same_session
    )
    useful = useful_working_set(run.grid, run.reuse, w_us)
    ttl = ttl_occupancy(run.grid, run.reuse, w_us)
    p95, median = useful.time_weighted_quantiles(run.t_first, run.t_last, (0.95, 0.5))
    report = WindowReport(
        window_s=float(window_s),
        hit_ratio=hit_share(hit_tokens, run.counted_tokens),
        hit_tokens=hit_tokens,
        same_session_hit_ratio=hit_share(same_tokens, run.counted_tokens),
        cross_session_hit_ratio=hit_share(hit_tokens - same_tokens, run.counted_tokens),
        useful_ws_peak_bytes=useful.peak * slot_bytes,
        useful_ws_p95_bytes=p95 * slot_bytes,
        useful_ws_median_bytes=median * slot_bytes,
        ttl_occupancy_peak_bytes=ttl.peak * slot_bytes,
        series=series(useful, ttl, run.t_first, run.t_last, slot_bytes, run.params.series_buckets),
    )
    if run.segments is None:
        return report, None
    occ, kinds = run.segments
    hit_blocks = np.bincount(run.ref_req[run.reuse.within(w_us)], minlength=stream.requests)
    misplaced = misplaced_tokens(occ, hit_blocks * stream.block_tokens, w_us)
    report.misplaced_reuse_tokens = int(misplaced.sum())
    report.segments = segment_classes(occ, kinds, w_us, run.params.min_reuses)
    return report, misplaced


def _report(
    run: _Run,
    windows: list[WindowReport],
    mrc: list[dict],
    rate: float,
    recommendation: Recommendation,
) -> Report:
    stream, params = run.stream, run.params
    tokens = stream.ref_tokens
    reused = run.reuse.within(None)
    if run.counted is not None:
        reused &= run.counted
    infinite_hits = int(tokens.sum(where=reused, dtype=np.int64))
    infinite_same = int(tokens.sum(where=reused & run.same_session, dtype=np.int64))
    return Report(
        requests=stream.requests,
        prompt_tokens=run.total_tokens,
        block_refs=stream.block_refs,
        distinct_blocks=run.distinct,
        block_tokens=stream.block_tokens,
        kv_bytes_per_token=run.kv_per_token,
        slot_bytes=run.slot_bytes,
        span_s=(run.t_last - run.t_first) / 1e6,
        infinite_hit_ratio=hit_share(infinite_hits, run.counted_tokens),
        infinite_same_session_hit_ratio=hit_share(infinite_same, run.counted_tokens),
        infinite_cross_session_hit_ratio=hit_share(
            infinite_hits - infinite_same, run.counted_tokens
        ),
        windows=windows,
        mrc=mrc,
        mrc_exact=rate >= 1.0,
        mrc_sampling_rate=rate,
        recommendation=recommendation,
        errors=list(stream.errors),
        skipped_lines=stream.skipped_lines,
        warmup_requests=run.warmup_requests,
        session_share=session_share(stream),
        tools=tools_summary(stream),
        cache_control_requests=cache_control_requests(stream),
        source_format=stream.source_format,
        # chat bodies are "chat" whether they came as JSONL or gateway CSV (the stream
        # keeps which): the same requests give the same report
        log_format="chat" if stream.source_format == "chat" else stream.log_format,
        tokenizer=stream.tokenizer,
        tenants=sum(1 for t in stream.tenants if t),
        scope=params.scope,
        model=params.profile.to_dict(),
        kv_dtype=params.kv_dtype or params.profile.dtype,
        params=params.report_dict(),
        notes=list(stream.notes),
        reuse_histogram=reuse_histogram(run.reuse, tokens, params.windows_s),
        routes=routes(stream),
        ingest_stats=dict(stream.stats),
    )
