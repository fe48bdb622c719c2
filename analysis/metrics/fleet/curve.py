"""One router's fleet curve (metrics.md section 8): hit tokens of all replicas against the
host RAM of each replica, GPU prefix hits included, from one routing of the stream and one
pass per tier over each replica's own references."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from analysis.metrics.fleet.inputs import FleetInputs
from analysis.metrics.fleet.routing import route
from analysis.metrics.fleet.tiers import TierDistances, request_hits, tier_distances
from analysis.mrc import hit_tokens_by_capacity, request_starts
from analysis.params import FleetParams
from analysis.reuse import hits_within


class RouterCurve(NamedTuple):
    router: str
    replica_of_req: np.ndarray  # int32 replica of every request
    view_replica: np.ndarray  # replica of every reference of the view
    gpu_hit: np.ndarray  # per reference of the view: inside its request's GPU prefix
    ram_slots: np.ndarray  # smallest per-replica host capacity (slots) it hits at, 0: none
    gpu_tokens: int  # counted GPU hit tokens (every capacity)
    total: np.ndarray  # counted hit tokens (GPU + RAM) by per-replica capacity in slots


def replicas_of_requests(inputs: FleetInputs, fleet: FleetParams, router: str) -> np.ndarray:
    """The replica of every request under `router`."""
    columns = inputs.columns
    return route(
        router, fleet.replicas, req_session=columns.req_session, starts=columns.starts,
        ids=inputs.ids, distinct=inputs.distinct, tokens=columns.tokens,
        prompt_tokens=columns.req_prompt_tokens, prefix_threshold=fleet.prefix_threshold,
    )  # fmt: skip


def router_curve(
    inputs: FleetInputs, fleet: FleetParams, router: str, gpu_slots: int,
    replica_of_req: np.ndarray,
) -> RouterCurve:  # fmt: skip
    """The fleet curve under one router, from its partition of the requests."""
    replicas = fleet.replicas
    view_replica = replica_of_req[inputs.view_req]
    pooled = router == "pooled"
    # a pooled store admits and evicts over the whole stream; each replica's GPU tier and
    # every other router's host tier over the replica's own references
    if pooled and gpu_slots == 0:  # no GPU tier: the replicas' own streams play no part
        own = _no_tier(inputs.view_ids.size)
    else:
        own = _per_replica(inputs, view_replica, replicas, 1 if pooled else fleet.store_threshold,
                           gpu_only=pooled, gpu_tier=gpu_slots > 0)  # fmt: skip
    host = _pooled_store(inputs, fleet.store_threshold) if pooled else own
    life = inputs.lifetime_us
    hits = request_hits(
        request_starts(inputs.view_req), own.gpu, gpu_slots, host.ram,
        hits_within(own.reuse_us, life) if life is not None else None,
        hits_within(host.reuse_us, life) if life is not None else None,
    )  # fmt: skip
    ram_slots = hits.ram_slots
    if pooled:  # N replicas' RAM of C each is one store of N * C: hit there iff ram <= N * C
        ram_slots = -(-ram_slots // replicas)
    gpu_tokens, total = _hit_tokens(inputs, hits.gpu_hit, ram_slots)
    return RouterCurve(router, replica_of_req, view_replica, hits.gpu_hit, ram_slots,
                       gpu_tokens, total)  # fmt: skip


def _hit_tokens(
    inputs: FleetInputs, gpu_hit: np.ndarray, ram_slots: np.ndarray
) -> tuple[int, np.ndarray]:
    """Counted GPU hit tokens, and counted hit tokens (GPU + RAM) by capacity. From a
    sample, each sampled token stands for 1 / rate, and SHARDS' count adjustment goes to
    the smallest distances: the GPU prefix's when it hits, else host RAM's first."""
    counted = gpu_hit if inputs.view_counted is None else gpu_hit & inputs.view_counted
    gpu = int(inputs.view_tokens.sum(where=counted, dtype=np.int64))
    ram_cum = hit_tokens_by_capacity(ram_slots, inputs.view_tokens, inputs.view_counted)
    if inputs.rate >= 1.0:
        return gpu, gpu + ram_cum
    gpu_f, ram_f = gpu / inputs.rate, ram_cum / inputs.rate
    if gpu:
        gpu_f += inputs.adjustment
    elif ram_cum[-1]:
        ram_f[int(np.argmax(ram_cum > 0)) :] += inputs.adjustment
    gpu_tokens = max(round(gpu_f), 0)
    return gpu_tokens, np.maximum(np.rint(gpu_f + ram_f), 0).astype(np.int64)


def _per_replica(
    inputs: FleetInputs, view_replica: np.ndarray, replicas: int, store_threshold: int,
    gpu_only: bool, gpu_tier: bool,
) -> TierDistances:  # fmt: skip
    """Both tiers' distances of every replica's own references, in the view's order (the
    GPU tier's left at 0 when there is none and nothing else reads them)."""
    if replicas == 1 and store_threshold <= 1 and inputs.whole is not None:
        return inputs.whole  # the single cache's own: measured already
    if replicas == 1:  # one replica's stream is the whole view: no copies
        whole = tier_distances(inputs.view_ids, inputs.view_req, inputs.distinct,
                               _times(inputs), store_threshold, gpu_tier)  # fmt: skip
        return _scaled(whole, inputs.rate)
    size = inputs.view_ids.size
    gpu = np.zeros(size, dtype=np.int64)
    # with k = 1 (or a GPU tier alone) the RAM distances are the stream's own
    shared = gpu_only or store_threshold <= 1
    ram = gpu if shared else np.zeros(size, dtype=np.int64)
    times = _times(inputs)
    reuse = np.full(size if times is not None else 0, -1, dtype=np.int64)
    # each replica's references in stream order: one stable sort, then a slice each
    order = np.argsort(view_replica, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(view_replica, minlength=replicas))))
    for replica in range(replicas):
        mine = order[bounds[replica] : bounds[replica + 1]]
        if not mine.size:
            continue
        tiers = tier_distances(inputs.view_ids[mine], inputs.view_req[mine], inputs.distinct,
                               times, store_threshold, gpu_tier)  # fmt: skip
        gpu[mine] = tiers.gpu
        if not shared:
            ram[mine] = tiers.ram
        if times is not None:
            reuse[mine] = tiers.reuse_us
    return _scaled(TierDistances(gpu, ram, reuse), inputs.rate)


def _pooled_store(inputs: FleetInputs, store_threshold: int) -> TierDistances:
    """The tiers of one store over the whole stream (its RAM distances are the pool's; the
    replicas' GPU tiers are their own, so this one's are never read)."""
    if store_threshold <= 1 and inputs.whole is not None:
        return inputs.whole  # the single cache's own: measured already
    tiers = tier_distances(inputs.view_ids, inputs.view_req, inputs.distinct,
                           _times(inputs), store_threshold, gpu_tier=False)  # fmt: skip
    return _scaled(tiers, inputs.rate)


def _times(inputs: FleetInputs) -> np.ndarray | None:
    """The requests' times, for the tiers' reuse times: only a block lifetime reads them."""
    return inputs.columns.req_t_us if inputs.lifetime_us is not None else None


def _no_tier(size: int) -> TierDistances:
    never = np.zeros(size, dtype=np.int64)
    return TierDistances(never, never, np.full(size, -1, dtype=np.int64))


def _scaled(tiers: TierDistances, rate: float) -> TierDistances:
    """A sampled distance d stands for d / rate in the whole stream (SHARDS)."""
    if rate >= 1.0:
        return tiers
    gpu = np.ceil(tiers.gpu / rate).astype(np.int64)
    ram = gpu if tiers.ram is tiers.gpu else np.ceil(tiers.ram / rate).astype(np.int64)
    return TierDistances(gpu, ram, tiers.reuse_us)
