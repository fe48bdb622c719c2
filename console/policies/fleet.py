"""The fleet a policy's sizes are for (metrics.md section 8): the replicas behind a router,
each with its own host-RAM tier, as the evidence's analysis modelled them.

With a fleet, the policy's RAM (and disk) tier is per replica — a total over that
replica's TP ranks — and the replicas are identical. The router is the one the author
picked (the body's `fleet_router`) or else the one with the highest fleet ceiling
(ties: the first the analysis reports). The evidence records the replica count, the
router and each router's figures, so they are signed with the body.

production-stack's router (`routerSpec.routingLogic`): `roundrobin`, `session` (with
`sessionKey`, the header carrying the session id) and `prefixaware`. A pooled store is
round robin for the GPU tier with one host store shared by every replica.
"""

from __future__ import annotations

from analysis.compare import router_name
from console.format import GIB

ROUTING_LOGIC = {
    "round_robin": "roundrobin",
    "session": "session",
    "prefix": "prefixaware",
    "pooled": "roundrobin",
}


def best_router(fleet_report: dict) -> dict | None:
    """The router entry with the highest fleet ceiling (ties: the first reported)."""
    routers = fleet_report.get("routers") or []
    return max(routers, key=lambda r: r["ceiling"], default=None)


def router_entry(fleet_report: dict, router: str | None) -> dict | None:
    """A router's entry in a report's fleet; with no router named, the best one."""
    if not router:
        return best_router(fleet_report)
    return next((r for r in fleet_report.get("routers") or [] if r["router"] == router), None)


def fleet_evidence(report: dict, picked: str | None = None) -> dict | None:
    """The evidence's fleet section (None without a fleet): the replica count, the
    router the sizes are for and why, and each router's ceiling and per-replica sizes."""
    fleet = report.get("fleet")
    if not fleet:
        return None
    chosen = router_entry(fleet, picked)
    if chosen is None:  # a router the analysis did not model: checks say so, best stands
        chosen = best_router(fleet)
    routers = [
        {
            "router": r["router"],
            "ceiling": r["ceiling"],
            "hit_ratio": r["recommendation"]["hit_ratio"],
            "ram_bytes": r["recommendation"]["ram_bytes"],
            "per_rank_bytes": r["recommendation"]["per_rank_bytes"],
        }
        for r in fleet.get("routers") or []
    ]
    return {
        "replicas": fleet["replicas"],
        "router": chosen["router"] if chosen else None,
        "picked": bool(picked) and chosen is not None and chosen["router"] == picked,
        "routers": routers,
    }


def policy_fleet(body: dict) -> dict | None:
    """The fleet of a policy body's evidence (None: the sizes are for one cache)."""
    fleet = (body.get("evidence") or {}).get("fleet")
    return fleet if fleet and fleet.get("router") else None


def fleet_lines(fleet: dict) -> list[str]:
    """What an export says of the fleet, in its comments."""
    router = fleet["router"]
    entry = next((r for r in fleet["routers"] if r["router"] == router), {})
    why = (
        "picked for export"
        if fleet.get("picked")
        else "the highest fleet ceiling of "
        + ", ".join(router_name(r["router"]).lower() for r in fleet["routers"])
    )
    lines = [
        f"fleet: {fleet['replicas']} replicas behind the {router_name(router).lower()} router "
        f"({why}; fleet ceiling {entry.get('ceiling', 0):.1%}); every size is per replica",
    ]
    if router == "pooled":
        lines.append(
            f"pooled store: the replicas share one host store of {fleet['replicas']} x the "
            "per-replica RAM (Mooncake Store, LMCache remote or P2P); size that store to match"
        )
    if router == "session":
        lines.append("session routing: set the router's sessionKey to the header carrying it")
    return lines


def prefill_ram_gib(report: dict) -> float:
    """The RAM a draft starts from: the best router's per-replica recommendation with a
    fleet, else the one cache's."""
    entry = best_router(report["fleet"]) if report.get("fleet") else None
    ram = entry["recommendation"]["ram_bytes"] if entry else report["recommendation"]["ram_bytes"]
    return round(ram / GIB, 2)
