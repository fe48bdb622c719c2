"""Consistency checks run before a version may be submitted for review.

Errors block the submission; warnings are shown to the author and the approver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analysis.compare import router_name
from console.format import GIB
from console.policies.body import (
    END_OF_LIFE_EVENTS,
    FAILURES,
    encrypted_at_rest,
    persistent_tier_enabled,
)
from console.policies.fleet import best_router, policy_fleet, router_entry
from console.policies.serving import differences, engine_problems, sizing


@dataclass(frozen=True)
class Finding:
    level: str  # "error" | "warning"
    field: str
    message: str


AddFinding = Callable[[str, str], None]  # adds a finding: (field, message)


def check_body(
    body: dict,
    evidence_report: dict | None = None,
    tenants_in_traffic: int = 0,
    constrained_report: dict | None = None,
) -> list[Finding]:
    """Every problem of a policy body, errors first."""
    out: list[Finding] = []

    def error(field: str, message: str) -> None:
        out.append(Finding("error", field, message))

    def warning(field: str, message: str) -> None:
        out.append(Finding("warning", field, message))

    _check_routes_and_deadlines(body, error)
    _check_tiers(body, error)
    _check_encryption(body, error, warning)
    _check_failure_and_disk(body, error)
    access = body["access"]
    if not access["readers"]:
        error("access", "Name the services or processes that may read the blocks.")
    if not access["classification"]:
        error("access", "Give the data classification of the traffic.")
    if not access["justification"].strip():
        error("access", "Justify the policy in a sentence or two.")

    if evidence_report is None:
        warning("evidence", "No analysis is linked: the policy's sizes have no evidence.")
    else:
        _check_against_evidence(body, evidence_report, tenants_in_traffic, error, warning)
        for message in differences(body, sizing(evidence_report.get("params"))):
            warning("routes", message)
    size = sizing(evidence_report.get("params")) if evidence_report is not None else None
    for level, message in engine_problems(body, size):
        (error if level == "error" else warning)("serving", message)
    if constrained_report is not None:
        _check_against_rerun(body, constrained_report, warning)
    out.sort(key=lambda f: f.level != "error")
    return out


def _check_routes_and_deadlines(body: dict, error: AddFinding) -> None:
    """What the policy governs, for how long, and how soon each end of life purges."""
    if not body["routes"]:
        error("routes", "Name at least one model route the policy governs.")
    if not body["lifetime_s"] or body["lifetime_s"] <= 0:
        error("lifetime_s", "Set the block lifetime (seconds after last use).")
    if not body["purge_deadline_s"] or body["purge_deadline_s"] <= 0:
        error("purge_deadline_s", "Set the maximum time to purge after an end-of-life event.")
    events = body["end_of_life"]
    if not events:
        error("end_of_life", "Choose the end-of-life events that must remove blocks.")
    for item in events:
        name = END_OF_LIFE_EVENTS.get(item["event"], item["event"])
        if item["event"] not in END_OF_LIFE_EVENTS:
            error("end_of_life", f"Unknown end-of-life event {item['event']!r}.")
        elif not item.get("deadline_s") or item["deadline_s"] <= 0:
            error("end_of_life", f"“{name}” has no purge deadline.")
    if len({item["event"] for item in events}) != len(events):
        error("end_of_life", "Each end-of-life event may appear once.")
    purge = body["purge_deadline_s"]
    if purge and purge > 0:
        # the overall deadline bounds every event's: a longer one promises what it breaks
        for item in events:
            deadline = item.get("deadline_s")
            if item["event"] in END_OF_LIFE_EVENTS and deadline and deadline > purge:
                error(
                    "end_of_life",
                    f"“{END_OF_LIFE_EVENTS[item['event']]}” may take {_duration(deadline)}, "
                    f"longer than the maximum time to purge ({_duration(purge)}).",
                )


def _check_tiers(body: dict, error: AddFinding) -> None:
    tiers = body["tiers"]
    ram = tiers["cpu_ram"]
    if ram["enabled"] and not (ram["size_gib"] and ram["size_gib"] > 0):
        error("tiers", "The CPU RAM tier is enabled but has no size.")
    for name, label in (("local_disk", "local disk"), ("remote", "remote store")):
        tier = tiers[name]
        if not tier["enabled"] and tier["size_gib"]:
            error("tiers", f"The {label} tier is disabled but sized ({tier['size_gib']} GiB).")
        if tier["enabled"] and not (tier["size_gib"] and tier["size_gib"] > 0):
            error("tiers", f"The {label} tier is enabled but has no size.")
    if tiers["remote"]["enabled"] and not tiers["remote"]["kind"]:
        error("tiers", "Say which remote store is used.")


# classifications whose blocks may not sit in plaintext on storage that outlives the process
ENCRYPTION_REQUIRED = ("confidential", "restricted")


def _check_encryption(body: dict, error: AddFinding, warning: AddFinding) -> None:
    """A disk or remote tier keeps prompts' KV where it outlives the process and others
    may read it: unencrypted, a warning (not every engine offers encryption, and a host's
    encrypted volume may stand in for it, which the justification can say), an error for
    confidential or restricted traffic."""
    tiers = body["tiers"]
    names = {"local_disk": "local disk", "remote": "remote store"}
    stored = [label for name, label in names.items() if tiers[name]["enabled"]]
    if not stored or encrypted_at_rest(body):
        return
    where = " and ".join(stored) + (" tiers" if len(stored) > 1 else " tier")
    stores, them = ("store", "them") if len(stored) > 1 else ("stores", "it")
    fix = "encrypt the blocks at rest (LMCache's per-salt AES-GCM serde)"
    classification = body["access"].get("classification")
    if classification in ENCRYPTION_REQUIRED:
        error(
            "tiers",
            f"{classification.capitalize()} traffic is stored unencrypted on the {where}: "
            f"{fix}, or turn {them} off.",
        )
    else:
        warning(
            "tiers",
            f"The {where} {stores} blocks unencrypted, where they outlive the process and "
            f"others may read them: {fix}, or justify why not.",
        )


def _check_failure_and_disk(body: dict, error: AddFinding) -> None:
    """A choice for every failure; with a disk or remote tier, its whole contract."""
    failure = body["failure"]
    for key, (what, choices) in FAILURES.items():
        if failure.get(key) not in choices:
            error("failure", f"State what happens {what}.")
    if persistent_tier_enabled(body):
        contract = body.get("disk_contract") or {}
        for key, what in (
            ("allowed_data", "which data may go to disk or remote storage"),
            ("cold_after_s", "when a block counts as cold"),
            ("deleted_by", "who deletes the files"),
            ("delete_when", "when the files are deleted"),
            ("on_disk_full", "what happens when the disk is full"),
            ("on_restart", "what happens to stored blocks on a restart"),
        ):
            if not contract.get(key):
                error("disk_contract", f"The disk tier contract must say {what}.")


def _check_fleet_router(body: dict, report: dict, error: AddFinding, warning: AddFinding) -> None:
    """A router picked for the sizes must be one the linked analysis modelled; with none
    picked, a fleet of a pooled store alone has no router the sizes default to."""
    picked = body.get("fleet_router")
    fleet = report.get("fleet")
    if not picked:
        if fleet and fleet.get("routers") and best_router(fleet) is None:
            warning(
                "tiers",
                "The linked analysis modelled only a pooled store, which is never the "
                "default: the sizes are for one cache unless you pick the pooled store "
                "router (then each replica's RAM is its share of one shared store).",
            )
        return
    if not fleet:
        error("tiers", f"The router “{picked}” is picked, but the linked analysis has no fleet.")
    elif router_entry(fleet, picked) is None:
        modelled = ", ".join(r["router"] for r in fleet.get("routers") or [])
        error("tiers", f"The linked analysis did not model the router “{picked}” ({modelled}).")


def _check_against_evidence(
    body: dict, report: dict, tenants_in_traffic: int, error: AddFinding, warning: AddFinding
) -> None:
    # the host budget is one node's: with a fleet each replica's RAM tier is on its own node
    host = report["recommendation"].get("host")
    ram = body["tiers"]["cpu_ram"]
    per_replica = " per replica" if policy_fleet(body) else ""
    if (
        host
        and ram["enabled"]
        and ram["size_gib"]
        and ram["size_gib"] * GIB > host["available_bytes"]
    ):
        error(
            "tiers",
            f"CPU RAM {ram['size_gib']:g} GiB{per_replica} is above the host budget "
            f"{'per node ' if per_replica else ''}of the linked analysis "
            f"({host['available_bytes'] / GIB:.1f} GiB after reserves).",
        )
    _check_fleet_router(body, report, error, warning)
    measured = max((w["window_s"] for w in report["windows"]), default=0)
    if body["lifetime_s"] and body["lifetime_s"] > measured:
        warning(
            "lifetime_s",
            f"The lifetime ({body['lifetime_s']:g} s) is longer than the longest window the "
            f"analysis measured ({measured:g} s): reuse beyond it is unmeasured.",
        )
    if body["scope"] == "global" and tenants_in_traffic > 1:
        warning(
            "scope",
            f"Scope “global” on traffic from {tenants_in_traffic} tenants: their prompts "
            "would share blocks, and a shared prefix cache lets one tenant infer another's "
            "prompts from how fast its own are answered (the cross-tenant timing side "
            "channel, CVE-2025-46570). Use scope tenant or user: a per-tenant vLLM "
            "`cache_salt` on every request is the mitigation.",
        )


def _check_against_rerun(body: dict, report: dict, warning: AddFinding) -> None:
    """The RAM tier against the analysis re-run with the policy's own lifetime and scope
    (what the policy needs): off by more than that recommendation's headroom is flagged."""
    ram = body["tiers"]["cpu_ram"]
    if not (ram["enabled"] and ram["size_gib"]):
        return
    rec = report["recommendation"]
    need, headroom = rec["ram_bytes"], rec["headroom"]
    fleet, per_replica = policy_fleet(body), ""
    if fleet is not None:
        # the policy's RAM is per replica: against the re-run's same router, per replica
        entry = router_entry(report.get("fleet") or {}, fleet["router"])
        if entry is None:  # nothing to compare with: said, not passed over
            warning("tiers", _rerun_lacks(fleet, report))
            return
        need, per_replica = entry["recommendation"]["ram_bytes"], " per replica"
    size = ram["size_gib"] * GIB
    lifetime = rec.get("lifetime_s")
    what = (
        f"the re-run with the policy's lifetime ({lifetime:g} s) and scope ({report['scope']})"
        if lifetime
        else f"the re-run with the policy's scope ({report['scope']})"
    )
    if need <= 0:
        warning(
            "tiers",
            f"CPU RAM {ram['size_gib']:g} GiB{per_replica}, but {what} finds nothing to keep.",
        )
    elif abs(size - need) > headroom * need:
        warning(
            "tiers",
            f"CPU RAM {ram['size_gib']:g} GiB{per_replica} is {abs(size - need) / need:.0%} "
            f"{'above' if size > need else 'below'} the {need / GIB:.2f} GiB{per_replica} "
            f"{what} recommends: more than its headroom of {headroom:.0%}.",
        )


def _rerun_lacks(fleet: dict, report: dict) -> str:
    """Why the RAM per replica could not be checked against the re-run, in words."""
    router = router_name(fleet["router"]).lower()
    rerun_fleet = report.get("fleet")
    if not rerun_fleet:
        has = "has no fleet"
    else:
        modelled = ", ".join(router_name(r["router"]).lower() for r in rerun_fleet["routers"])
        has = f"did not model the {router} router ({modelled or 'no router'})"
    return (
        f"The RAM per replica is for the {router} router, but the re-run with the policy's "
        f"lifetime and scope {has}: the size is not checked against what the policy needs."
    )


def _duration(seconds: float) -> str:
    """Seconds as people say them: 900 -> "15 min", 86400 -> "24 h"."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
