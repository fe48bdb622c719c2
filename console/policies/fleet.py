"""The fleet a policy's sizes are for (metrics.md section 8): the replicas behind a router,
each with its own host-RAM tier, as the evidence's analysis modelled them.

With a fleet, the policy's RAM (and disk) tier is per replica — a total over that
replica's TP ranks — and the replicas are identical. The router is the one the author
picked (the body's `fleet_router`) or else the one with the highest fleet ceiling among
the routers a local cache per replica deploys (round robin, session, prefix-aware; ties:
the first the analysis reports). A pooled store is never the default: its ceiling always
equals the single cache's, but its per-replica size is a share of one store all replicas
share, and exported as a local cache per replica it deploys a round-robin fleet, whose
ceiling is far lower. The evidence records the replica count, the router and each
router's figures, so they are signed with the body.

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
# the routers whose fleet a local host-RAM tier on each replica deploys
LOCAL_ROUTERS = ("round_robin", "session", "prefix")


def best_router(fleet_report: dict) -> dict | None:
    """The router entry with the highest fleet ceiling among those a local cache per
    replica deploys (ties: the first reported); None when the analysis modelled none."""
    routers = [r for r in fleet_report.get("routers") or [] if r["router"] in LOCAL_ROUTERS]
    return max(routers, key=lambda r: r["ceiling"], default=None)


def router_entry(fleet_report: dict, router: str | None) -> dict | None:
    """A router's entry in a report's fleet; with no router named, the best one."""
    if not router:
        return best_router(fleet_report)
    return next((r for r in fleet_report.get("routers") or [] if r["router"] == router), None)


def fleet_evidence(report: dict, picked: str | None = None) -> dict | None:
    """The evidence's fleet section (None without a fleet): the replica count, the
    router the sizes are for and why (None: no router a default can take, the sizes are
    one cache's), and each router's ceiling and per-replica sizes."""
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


def _ceiling(fleet: dict, router: str) -> float | None:
    return next((r["ceiling"] for r in fleet["routers"] if r["router"] == router), None)


def pooled_warning(fleet: dict) -> list[str]:
    """What an export says first when its sizes are a pooled store's: each is a replica's
    share of one shared store, which a local cache per replica does not deploy."""
    if fleet["router"] != "pooled":
        return []
    n = fleet["replicas"]
    lines = [
        f"WARNING: pooled store: every RAM size in this file is ONE replica's share of a "
        f"single host store shared by all {n} replicas ({n} x that size in all)",
        "WARNING: deploy that shared store (Mooncake Store, LMCache remote or P2P, Dynamo "
        "KVBM); set as a local cache on each replica, these sizes give a round-robin fleet",
    ]
    pooled, local = _ceiling(fleet, "pooled"), _ceiling(fleet, "round_robin")
    if pooled is not None and local is not None:
        lines.append(
            f"WARNING: that round-robin fleet's ceiling is {local:.1%}, not the pooled "
            f"store's {pooled:.1%}"
        )
    return lines


def fleet_lines(fleet: dict) -> list[str]:
    """What an export says of the fleet, in its comments (after `pooled_warning`)."""
    router = fleet["router"]
    local = [r["router"] for r in fleet["routers"] if r["router"] in LOCAL_ROUTERS]
    why = (
        "picked for export"
        if fleet.get("picked")
        # evidence signed before a pooled store stopped being a default
        else "signed as the highest fleet ceiling: pick a router for export now"
        if router not in LOCAL_ROUTERS
        else "the highest fleet ceiling of "
        + ", ".join(router_name(r).lower() for r in local)
        + ("; a pooled store only when picked" if len(local) < len(fleet["routers"]) else "")
    )
    lines = [
        f"fleet: {fleet['replicas']} replicas behind the {router_name(router).lower()} router "
        f"({why}; fleet ceiling {_ceiling(fleet, router) or 0:.1%}); every size is per replica",
    ]
    if router == "session":
        lines.append("session routing: set the router's sessionKey to the header carrying it")
    return lines


def prefill_ram_gib(report: dict) -> float:
    """The RAM a draft starts from: with a fleet, the per-replica recommendation of the
    router the sizes default to (`best_router`), else (no fleet, or a pooled store
    alone) the one cache's."""
    entry = best_router(report["fleet"]) if report.get("fleet") else None
    ram = entry["recommendation"]["ram_bytes"] if entry else report["recommendation"]["ram_bytes"]
    return round(ram / GIB, 2)
