"""Which policy versions rely on an analysis or a benchmark run: what may not be deleted
while the version exists (its evidence would disappear from under what was signed)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from console.policies.models import PolicyVersion


@dataclass(frozen=True)
class Citation:
    """One version relying on one object: `what` says which and how ("analysis #5")."""

    version: PolicyVersion
    what: str

    def __str__(self) -> str:
        state = self.version.get_state_display().lower()
        return (
            f"policy “{self.version.policy.name}” v{self.version.number} ({state}) on {self.what}"
        )


def citations(*, analyses: Collection[int] = (), runs: Collection[int] = ()) -> list[Citation]:
    """Every version citing one of the analyses (as its evidence: the linked analysis, the
    one its body's evidence names, or its re-run with the policy's lifetime and scope) or
    one of the benchmark runs (its body's evidence), in every state: a draft's link is
    protected in the database too, a signed version's is its sign-off's evidence."""
    analyses, runs = set(analyses), set(runs)
    found = []
    versions = PolicyVersion.objects.select_related("policy").order_by("policy__name", "number")
    for version in versions:
        evidence = version.body.get("evidence") or {}
        cited = {version.analysis_id, evidence.get("analysis_id")} & analyses
        found += [Citation(version, f"analysis #{pk}") for pk in sorted(cited)]
        if version.constrained_analysis_id in analyses - cited:
            rerun = version.constrained_analysis_id
            what = f"analysis #{rerun} (its re-run with the policy's lifetime and scope)"
            found.append(Citation(version, what))
        cited_runs = {run.get("id") for run in evidence.get("benchmark_runs", [])} & runs
        found += [Citation(version, f"benchmark run #{pk}") for pk in sorted(cited_runs)]
    return found
