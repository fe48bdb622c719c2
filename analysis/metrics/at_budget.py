"""What a budget buys (metrics.md section 9): the hit ratio of the curve at the capacity a
given amount of host RAM per replica holds once headroom is set aside, for every budget
asked for and for the host's own (its RAM less its reserves)."""

from __future__ import annotations

import math
from fractions import Fraction

from analysis.metrics.curve import HitCurve, hit_share
from analysis.metrics.curve_steps import hit_at_slots
from analysis.params import AnalysisParams

GIB = 1 << 30


def budget_slots(ram_bytes: int, block_tokens: int, rank_bytes_per_token: int, tp: int,
                 headroom: float) -> int:  # fmt: skip
    """The blocks `ram_bytes` per replica holds: each of its tp ranks gets an equal share
    of it, which holds share / (1 + headroom) over a block's bytes on one rank (exact:
    the recommendation's own rule, per rank * tp, inverted)."""
    if ram_bytes <= 0:
        return 0
    block_bytes = block_tokens * rank_bytes_per_token * (1 + Fraction(str(headroom)))
    return math.floor(Fraction(ram_bytes // tp) / block_bytes)


def at_budgets(
    curve: HitCurve,
    total_tokens: int,
    block_tokens: int,
    rank_bytes_per_token: int,
    kv_bytes_per_token: int,
    params: AnalysisParams,
) -> list[dict]:
    """One entry per budget asked for (params.budgets_gib), then the host's when host RAM
    is given: the RAM, the capacity it holds and the hit ratio there (split by session)."""
    budgets = [(round(gib * GIB), "budget") for gib in params.budgets_gib]
    if params.host is not None:
        budgets.append((params.host.available(), "host"))
    entries = []
    for ram, source in budgets:
        slots = budget_slots(ram, block_tokens, rank_bytes_per_token, params.tp, params.headroom)
        at = min(slots, curve.total.size - 1)
        hits, same = int(curve.total[at]), int(curve.same_session[at])
        entries.append({
            "source": source,
            "ram_bytes": ram,
            "capacity_slots": slots,
            "capacity_bytes": slots * block_tokens * kv_bytes_per_token,
            "hit_ratio": hit_share(hits, total_tokens),
            "same_session_hit_ratio": hit_share(same, total_tokens),
            "cross_session_hit_ratio": hit_share(hits - same, total_tokens),
        })  # fmt: skip
    return entries


def buys(report: dict, ram_bytes: int, router: str | None = None) -> dict:
    """What `ram_bytes` of host RAM per replica buys, read off a finished report's stored
    curve steps (curve_steps: within half a tenth of a point of the exact curve), for the
    single cache or one fleet router's curve per replica: the capacity it holds once
    headroom is set aside, the hit ratio there, the ceiling, and whether it fits the host."""
    rec = report["recommendation"]
    curve = report if router is None else router_of(report, router)
    slots = budget_slots(ram_bytes, int(report["block_tokens"]),
                         int(rec["per_rank_kv_bytes_per_token"]), int(rec["tp"]),
                         float(rec["headroom"]))  # fmt: skip
    host = rec.get("host")
    return {
        "router": router,
        "ram_bytes": ram_bytes,
        "capacity_slots": slots,
        "capacity_bytes": slots * int(report["slot_bytes"]),
        "hit_ratio": hit_at_slots(curve["curve_steps"], slots),
        "ceiling": float(curve["ceiling"] if router is not None else rec["ceiling"]),
        "within": float(curve["curve_steps"]["step"]),
        "host_fits": ram_bytes <= host["available_bytes"] if host else None,
    }


def router_of(report: dict, router: str) -> dict:
    """A fleet router's entry in a report (ValueError: the analysis did not model it)."""
    for entry in (report.get("fleet") or {}).get("routers", []):
        if entry["router"] == router:
            return entry
    raise ValueError(f"this analysis has no {router!r} router")
