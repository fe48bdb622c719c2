"""What a policy version takes from the analysis and the benchmark runs it relies on:
the draft prefilled from the analysis, and the body's evidence section (signed with it)."""

from __future__ import annotations

from console.models import Analysis, BenchRun
from console.policies.body import empty_body
from console.policies.fleet import fleet_evidence, prefill_ram_gib


def body_from_analysis(analysis: Analysis | None) -> dict:
    """A draft prefilled from the evidence: routes seen, scope and lifetime analyzed, the
    recommended RAM (with a fleet, per replica: the best router's)."""
    body = empty_body()
    if analysis is None or not analysis.report:
        return body
    report = analysis.report
    body["routes"] = [r["route"] for r in report.get("routes", []) if r["route"]]
    body["scope"] = report["scope"]
    lifetime = report["recommendation"].get("lifetime_s")
    body["lifetime_s"] = lifetime or max(w["window_s"] for w in report["windows"])
    body["tiers"]["cpu_ram"]["size_gib"] = prefill_ram_gib(report)
    return body


def analysis_evidence(analysis: Analysis | None, fleet_router: str | None = None) -> dict:
    """The body's evidence section: the analysis relied on and what it recommended, and
    with a fleet its replicas, the router the sizes are for (`fleet_router` when the
    author picked one) and each router's figures."""
    if analysis is None or not analysis.report:
        return {}
    rec = analysis.report["recommendation"]
    evidence = {
        "analysis_id": analysis.pk,
        "upload": analysis.upload.name,
        "params": analysis.params,
        "block_tokens": analysis.block_tokens,
        "recommended_ram_bytes": rec["ram_bytes"],
        "per_rank_bytes": rec["per_rank_bytes"],
        "hit_ratio": rec["hit_ratio"],
        "ceiling": rec["ceiling"],
    }
    fleet = fleet_evidence(analysis.report, fleet_router)
    if fleet is not None:  # absent without one: evidence of one cache stays as it was
        evidence["fleet"] = fleet
    return evidence


def run_evidence(run: BenchRun) -> dict:
    """What a cited benchmark run showed, as the sign-off will record it."""
    result = run.result
    return {
        "id": run.pk,
        "file": run.name,
        "model": run.model_name,
        "tier": run.tier_label + (" · warm" if run.warm else ""),
        "context_tokens": run.context_tokens,
        "concurrency": run.concurrency,
        "p99_ttft_ms": result.p99("ttft"),
        "p99_itl_ms": result.p99("itl"),
        "completed": result.completed,
        "failed": result.failed,
    }
