"""What a cache size costs and saves (issue #16's cost view), from a report's curve and the
user's prices. Plain arithmetic, every assumption named and returned with the figures:

- the log's average prompt tokens per hour (analysis.offload) go on for a month of
  HOURS_PER_MONTH hours, and each size's hit ratio holds over it;
- a hit is a prompt token not prefilled again: 1 / `prefill_tokens_per_s` of GPU time,
  priced at `gpu_per_hour`;
- the RAM is the size's host RAM with headroom (per replica, times the replicas for a
  fleet router), priced at `ram_per_gib_month`;
- with a fleet router, only the hits host RAM adds count (`ram_hit_ratio`): the GPU prefix
  cache's hit as much with no host RAM at all;
- loading the hit's KV from RAM costs nothing here (see "Does offload pay?" for the time).

The size where one more GiB stops paying is the curve point with the largest net saving
(saved GPU cost less the RAM's): from it to the next point, the extra saving per extra GiB
is below the RAM's price."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from analysis.metrics.at_budget import router_of
from analysis.metrics.recommend import per_rank_ram
from analysis.offload import DEFAULT_PREFILL_TOKENS_PER_S, prompt_tokens_per_hour

GIB = 1 << 30
HOURS_PER_MONTH = 730.0  # 365 days x 24 hours / 12


@dataclass(frozen=True)
class Prices:
    ram_per_gib_month: float  # host RAM, per GiB and month
    gpu_per_hour: float  # one GPU (or the GPUs one prefill runs on), per hour
    prefill_tokens_per_s: float = DEFAULT_PREFILL_TOKENS_PER_S

    def validate(self) -> None:
        if not (self.ram_per_gib_month > 0 and self.gpu_per_hour > 0):
            raise ValueError("give both prices, RAM per GiB-month and GPU per hour, above 0")
        if not self.prefill_tokens_per_s > 0:
            raise ValueError("the prefill throughput must be above 0 tokens/s")


def cost_view(report: dict, prices: Prices, router: str | None = None) -> dict:
    """The cost of every point of the single cache's curve (or one fleet router's), the
    point where one more GiB stops paying ("best"), and the assumptions."""
    prices.validate()
    tokens_per_month = prompt_tokens_per_hour(report) * HOURS_PER_MONTH
    replicas, points = _curve(report, router)
    gpu = _gpu_hit_ratio(report, router)
    rows = [
        _row(report, prices, tokens_per_month, replicas, p["capacity_slots"], p["hit_ratio"], gpu)
        for p in points
    ]
    for before, row in pairwise(rows):
        extra_gib = (row["ram_bytes"] - before["ram_bytes"]) / GIB
        extra_saving = row["saved_per_month"] - before["saved_per_month"]
        row["saving_per_extra_gib"] = extra_saving / extra_gib if extra_gib > 0 else None
    if rows:
        rows[0]["saving_per_extra_gib"] = None
    best = max(rows, key=lambda row: row["net_per_month"]) if rows else None
    return {
        "router": router,
        "replicas": replicas,
        "prices": {
            "ram_per_gib_month": prices.ram_per_gib_month,
            "gpu_per_hour": prices.gpu_per_hour,
            "prefill_tokens_per_s": prices.prefill_tokens_per_s,
        },
        "prompt_tokens_per_month": tokens_per_month,
        "hours_per_month": HOURS_PER_MONTH,
        "points": rows,
        "best": best,
        "pays": best is not None and best["net_per_month"] > 0,
    }


def cost_at(report: dict, prices: Prices, capacity_slots: int, hit_ratio: float,
            router: str | None = None) -> dict:  # fmt: skip
    """One size's row, for a size the curve's points may not hold (a budget, the
    recommendation): the same arithmetic as every point of cost_view."""
    prices.validate()
    replicas, _ = _curve(report, router)
    tokens_per_month = prompt_tokens_per_hour(report) * HOURS_PER_MONTH
    gpu = _gpu_hit_ratio(report, router)
    return _row(report, prices, tokens_per_month, replicas, capacity_slots, hit_ratio, gpu)


def _gpu_hit_ratio(report: dict, router: str | None) -> float:
    """The hit ratio the router's GPU prefix caches reach without host RAM (0: one cache)."""
    if router is None:
        return 0.0
    return float(router_of(report, router).get("gpu_hit_ratio") or 0.0)


def _curve(report: dict, router: str | None) -> tuple[int, list[dict]]:
    """The replicas and the curve points (per replica) of the single cache or a router."""
    if router is None:
        return 1, report["mrc"]
    return int(report["fleet"]["replicas"]), router_of(report, router)["mrc"]


def _row(report: dict, prices: Prices, tokens_per_month: float, replicas: int,
         slots: int, hit_ratio: float, gpu_hit_ratio: float) -> dict:  # fmt: skip
    rec = report["recommendation"]
    rank_bytes_per_token = int(rec["per_rank_kv_bytes_per_token"])
    per_rank = per_rank_ram(slots, int(report["block_tokens"]), rank_bytes_per_token,
                            float(rec["headroom"]))  # fmt: skip
    ram_per_replica = per_rank * int(rec["tp"])
    ram = ram_per_replica * replicas
    ram_hit_ratio = max(hit_ratio - gpu_hit_ratio, 0.0)  # what host RAM adds
    gpu_hours = ram_hit_ratio * tokens_per_month / prices.prefill_tokens_per_s / 3600
    saved = gpu_hours * prices.gpu_per_hour
    ram_cost = ram / GIB * prices.ram_per_gib_month
    return {
        "capacity_slots": int(slots),
        "ram_per_replica_bytes": ram_per_replica,
        "ram_bytes": ram,
        "hit_ratio": hit_ratio,
        "ram_hit_ratio": ram_hit_ratio,
        "gpu_hours_saved_per_month": gpu_hours,
        "saved_per_month": saved,
        "ram_cost_per_month": ram_cost,
        "net_per_month": saved - ram_cost,
    }
