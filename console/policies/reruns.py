"""Which analyses are a policy's re-run (the linked analysis analysed again with the
policy's own lifetime and scope, console.policies.services), said on every list of
analyses: "policy re-run: chat EU v1, v2".

One query for a whole list; an analysis that is also the version's own evidence (the
policy's lifetime and scope were the analysis's already, so the re-run is the analysis
itself) is not called a re-run of it."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from django.db.models import F, QuerySet

from console.models import Analysis, PolicyVersion


@dataclass(frozen=True)
class RerunFor:
    """A policy version an analysis is the re-run of."""

    version_pk: int
    policy: str
    number: int


def rerun_versions(analysis_ids: Collection[int] | QuerySet) -> dict[int, list[RerunFor]]:
    """The policy versions each of these analyses (ids, or a query of them) is the re-run
    of, by analysis id (none: not in the mapping), by policy name and version number."""
    rows = (
        PolicyVersion.objects.filter(constrained_analysis_id__in=analysis_ids)
        .exclude(analysis_id=F("constrained_analysis_id"))
        .order_by("policy__name", "number")
        .values_list("constrained_analysis_id", "pk", "policy__name", "number")
    )
    found: dict[int, list[RerunFor]] = {}
    for analysis_id, version_pk, policy, number in rows:
        found.setdefault(analysis_id, []).append(RerunFor(version_pk, policy, number))
    return found


def rerun_text(versions: list[RerunFor]) -> str:
    """The versions in words, each policy named once: "chat EU v1, v2 · EU batch v3"."""
    by_policy: dict[str, list[str]] = {}
    for version in versions:
        by_policy.setdefault(version.policy, []).append(f"v{version.number}")
    return " · ".join(f"{policy} {', '.join(numbers)}" for policy, numbers in by_policy.items())


def label_reruns(analyses: list[Analysis]) -> list[Analysis]:
    """The analyses, each with `policy_reruns` (the versions it is the re-run of, [] for
    none) and `policy_rerun` (them in words, "" for none) for the lists to show."""
    found = rerun_versions([a.pk for a in analyses])
    for analysis in analyses:
        analysis.policy_reruns = found.get(analysis.pk, [])
        analysis.policy_rerun = rerun_text(analysis.policy_reruns)
    return analyses
