"""The report's `fleet` and `admission` sections (metrics.md section 8): per router the
fleet curve against host RAM per replica, its ceiling, the recommendation per replica and
per TP rank, and the load each replica carries; and the single cache admitting a block
only at its second reference, beside the usual curve."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from analysis.cores import usable_cores
from analysis.metrics.at_budget import at_budgets
from analysis.metrics.curve import HitCurve, hit_share
from analysis.metrics.curve_steps import curve_steps
from analysis.metrics.fleet.curve import RouterCurve, replicas_of_requests, router_curve
from analysis.metrics.fleet.inputs import FleetInputs
from analysis.metrics.recommend import recommend
from analysis.mrc import curve_capacities
from analysis.params import AnalysisParams, FleetParams
from analysis.report import Recommendation

# the admission the single-cache comparison shows: vLLM's store_threshold 2, Dynamo KVBM's
# disk filter: a block is stored only once it has come back
ADMISSION_THRESHOLD = 2


def fleet_section(
    inputs: FleetInputs, params: AnalysisParams, block_tokens: int, slot_bytes: int,
    single: HitCurve, single_cache_ceiling: float,
) -> dict:  # fmt: skip
    """The `fleet` section of the report: every chosen router's curve and recommendation
    (`single`: the single cache's curve, which a fleet of one without tiers is)."""
    fleet = params.fleet if params.fleet is not None else FleetParams()
    gpu_slots = fleet.gpu_cache_bytes // gpu_block_bytes(params, block_tokens)
    routers = _router_entries(inputs, params, block_tokens, slot_bytes, gpu_slots, single)
    return {
        "replicas": fleet.replicas,
        "gpu_cache_bytes": fleet.gpu_cache_bytes,
        "gpu_cache_slots": gpu_slots,
        "store_threshold": fleet.store_threshold,
        "prefix_threshold": fleet.prefix_threshold,
        "exact": inputs.rate >= 1.0,
        "sampling_rate": inputs.rate,
        "single_cache_ceiling": single_cache_ceiling,
        "routers": routers,
    }


def gpu_block_bytes(params: AnalysisParams, block_tokens: int) -> int:
    """A block's bytes on a replica's GPUs, all TP ranks together: each rank keeps its
    share of the heads, or all of them when heads are replicated or latent (MLA), so the
    replica holds per-rank bytes x tp, as its host RAM does (section 8, per TP rank)."""
    rank = params.profile.kv_bytes_per_token_per_rank(params.tp, params.kv_dtype)
    return block_tokens * rank * params.tp


def _router_entries(
    inputs: FleetInputs, params: AnalysisParams, block_tokens: int, slot_bytes: int,
    gpu_slots: int, single: HitCurve,
) -> list[dict]:  # fmt: skip
    """Every chosen router's entry. A router that partitions the requests exactly as an
    earlier one (sessions on a log without session ids deal round robin) has its figures.
    The others' curves are computed one per core (their kernels release the GIL); only
    entries are kept: each curve's per-reference columns go once its entry is written."""
    fleet = params.fleet if params.fleet is not None else FleetParams()
    partitions = {router: replicas_of_requests(inputs, fleet, router)
                  for router in fleet.chosen_routers()}  # fmt: skip
    origin: dict[str, str] = {}  # router -> the first router partitioning as it does
    for router, partition in partitions.items():
        alike = (r for r in origin if origin[r] == r and r != "pooled"
                 and np.array_equal(partitions[r], partition))  # fmt: skip
        origin[router] = router if router == "pooled" else next(alike, router)

    def entry(router: str) -> dict:
        curve = router_curve(inputs, fleet, router, gpu_slots, partitions[router])
        if _is_the_single_cache(fleet, gpu_slots) and inputs.rate < 1.0:
            # a sampled curve is exact up to K slots where the single cache's is computed
            # (analysis.metrics.curve.sampled_curve); the tiers' passes are plain SHARDS
            curve = curve._replace(total=single.total)
        return _router_entry(curve, inputs, params, block_tokens, slot_bytes, fleet.replicas)

    own = [router for router in partitions if origin[router] == router]
    with ThreadPoolExecutor(max_workers=max(1, min(len(own), usable_cores()))) as pool:
        computed = dict(zip(own, pool.map(entry, own), strict=True))
    return [computed[router] if origin[router] == router else
            {**computed[origin[router]], "router": router, "same_partition_as": origin[router]}
            for router in partitions]  # fmt: skip


def _is_the_single_cache(fleet: FleetParams, gpu_slots: int) -> bool:
    """One replica, no GPU tier, every block stored at its first use: the single cache."""
    return fleet.replicas == 1 and gpu_slots == 0 and fleet.store_threshold <= 1


def admission_curve(inputs: FleetInputs) -> RouterCurve:
    """The curve of one cache that stores a block only at its second reference. It reads
    no distances of the stream's own (`inputs.whole`), so it may be computed beside them."""
    one = FleetParams(routers=("round_robin",), store_threshold=ADMISSION_THRESHOLD)
    one_replica = np.zeros(inputs.columns.req_session.size, dtype=np.int32)
    return router_curve(inputs, one, "round_robin", 0, one_replica)


def admission_section(
    curve: RouterCurve, inputs: FleetInputs, params: AnalysisParams, block_tokens: int,
    slot_bytes: int, single: HitCurve, single_slots: int,
) -> dict:  # fmt: skip
    """One cache that stores a block only at its second reference (`curve`, of
    admission_curve): the recommendation (section 4's rule) that admission buys, and both
    it and `single` (the cache storing every block) at each one's recommended capacity
    (`single_slots` is the single cache's): a lower ceiling has a lower target, so only
    equal sizes compare what admission buys."""
    rec = recommend(_as_hit_curve(curve), inputs.counted_tokens, block_tokens, params)
    points = _points(curve, inputs.counted_tokens, slot_bytes, rec.capacity_slots)
    return {
        "store_threshold": ADMISSION_THRESHOLD,
        "ceiling": rec.ceiling,
        "mrc": [_single_point(point) for point in points],
        "recommendation": {
            "capacity_bytes": rec.capacity_bytes,
            "capacity_slots": rec.capacity_slots,
            "ram_bytes": rec.ram_bytes,
            "per_rank_bytes": rec.per_rank_bytes,
            "hit_ratio": rec.hit_ratio,
        },
        "at_equal_size": [
            _both_at(slots, curve.total, single.total, inputs.counted_tokens, slot_bytes)
            for slots in sorted({rec.capacity_slots, single_slots})
        ],
    }


def _both_at(slots: int, admitted: np.ndarray, single: np.ndarray, total_tokens: int,
             slot_bytes: int) -> dict:  # fmt: skip
    """Both curves' hit ratios at one capacity."""
    return {
        "capacity_slots": slots,
        "capacity_bytes": slots * slot_bytes,
        "hit_ratio": hit_share(int(admitted[min(slots, admitted.size - 1)]), total_tokens),
        "store_every_block_hit_ratio": hit_share(
            int(single[min(slots, single.size - 1)]), total_tokens
        ),
    }


def _single_point(point: dict) -> dict:
    """A point of one cache's curve: no tiers to split it into."""
    return {key: point[key] for key in ("capacity_bytes", "capacity_slots", "hit_ratio")}


def _as_hit_curve(curve: RouterCurve) -> HitCurve:
    """The fleet curve in the shape section 4's recommendation reads (no session split)."""
    return HitCurve(curve.total, np.zeros(curve.total.size, dtype=np.int64))


def _router_entry(
    curve: RouterCurve, inputs: FleetInputs, params: AnalysisParams, block_tokens: int,
    slot_bytes: int, replicas: int,
) -> dict:  # fmt: skip
    rec = recommend(_as_hit_curve(curve), inputs.counted_tokens, block_tokens, params)
    gpu_ratio = hit_share(curve.gpu_tokens, inputs.counted_tokens)
    return {
        "router": curve.router,
        "same_partition_as": None,  # a later router that deals alike names this one
        "ceiling": rec.ceiling,
        "gpu_hit_ratio": gpu_ratio,
        "mrc": _points(curve, inputs.counted_tokens, slot_bytes, rec.capacity_slots),
        "curve_steps": curve_steps(curve.total, inputs.counted_tokens),
        # what each budget, and the host, buys per replica under this router (section 9)
        "at_budget": _at_budgets(curve, inputs, params, block_tokens),
        "recommendation": _recommendation(rec, gpu_ratio),
        "load": _load(curve, inputs, rec.capacity_slots, replicas),
    }


def _at_budgets(curve: RouterCurve, inputs: FleetInputs, params: AnalysisParams,
                block_tokens: int) -> list[dict]:  # fmt: skip
    """at_budget on the router's curve per replica, each entry's GPU share said apart (the
    GPU prefix cache hits the same at every host size)."""
    rank = params.profile.kv_bytes_per_token_per_rank(params.tp, params.kv_dtype)
    kv = params.profile.kv_bytes_per_token(params.kv_dtype)
    entries = at_budgets(_as_hit_curve(curve), inputs.counted_tokens, block_tokens, rank, kv,
                         params)  # fmt: skip
    gpu = hit_share(curve.gpu_tokens, inputs.counted_tokens)
    return [
        {
            key: e[key]
            for key in ("source", "ram_bytes", "capacity_slots", "capacity_bytes", "hit_ratio")
        }
        | {"gpu_hit_ratio": gpu, "ram_hit_ratio": max(e["hit_ratio"] - gpu, 0.0)}
        for e in entries
    ]


def _recommendation(rec: Recommendation, gpu_ratio: float) -> dict:
    return {
        "capacity_bytes": rec.capacity_bytes,
        "capacity_slots": rec.capacity_slots,
        "ram_bytes": rec.ram_bytes,
        "per_rank_bytes": rec.per_rank_bytes,
        "hit_ratio": rec.hit_ratio,
        "gpu_hit_ratio": gpu_ratio,
        "ram_hit_ratio": max(rec.hit_ratio - gpu_ratio, 0.0),
        "host_fits": rec.host.fits if rec.host is not None else None,
    }


def _points(curve: RouterCurve, total_tokens: int, slot_bytes: int, slots: int) -> list[dict]:
    """Hit ratio at log-spaced per-replica capacities and at the recommended one, split
    into the GPU prefix's hits (the same at every capacity) and host RAM's."""
    cum = curve.total
    points = []
    for c in curve_capacities(int(cum.size - 1), extra=(slots,)):
        hits = int(cum[min(int(c), cum.size - 1)])
        points.append({
            "capacity_bytes": int(c) * slot_bytes,
            "capacity_slots": int(c),
            "hit_ratio": hit_share(hits, total_tokens),
            "gpu_hit_ratio": hit_share(curve.gpu_tokens, total_tokens),
            "ram_hit_ratio": hit_share(hits - curve.gpu_tokens, total_tokens),
        })  # fmt: skip
    return points


def _load(curve: RouterCurve, inputs: FleetInputs, slots: int, replicas: int) -> dict:
    """What each replica serves past the warm-up: requests, prompt tokens, and the tokens
    it must still prefill at `slots` of host RAM (its prompt tokens less its hits)."""
    mine = curve.replica_of_req[inputs.warmup_requests :]
    requests = np.bincount(mine, minlength=replicas)
    prompt = np.bincount(mine, weights=inputs.columns.req_prompt_tokens[inputs.warmup_requests:],
                         minlength=replicas)  # fmt: skip
    if replicas == 1:  # its hits are the curve's at `slots` (a sample's count-adjusted)
        hits = np.array([curve.total[min(slots, curve.total.size - 1)]], dtype=np.float64)
    else:
        hit = curve.gpu_hit | ((curve.ram_slots > 0) & (curve.ram_slots <= slots))
        if inputs.view_counted is not None:
            hit &= inputs.view_counted
        hits = np.bincount(curve.view_replica[hit], weights=inputs.view_tokens[hit],
                           minlength=replicas) / inputs.rate  # fmt: skip
    prefill = np.maximum(np.rint(prompt - hits), 0)
    return {
        "requests_max_over_mean": _max_over_mean(requests),
        "prompt_tokens_max_over_mean": _max_over_mean(prompt),
        "prefill_tokens_max_over_mean": _max_over_mean(prefill),
        "per_replica": [
            {"requests": int(r), "prompt_tokens": int(p), "prefill_tokens": int(f)}
            for r, p, f in zip(requests, prompt, prefill, strict=True)
        ],
    }


def _max_over_mean(values: np.ndarray) -> float:
    """The busiest replica against the average one (1: even; 1 as well when all are 0)."""
    mean = float(values.mean()) if values.size else 0.0
    return float(values.max()) / mean if mean > 0 else 1.0
