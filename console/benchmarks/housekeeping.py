"""Renaming and deleting benchmark runs (console.housekeeping carries it out). A run's
result file is kept whole in its row (BenchRun.raw), so deleting the row deletes the file:
nothing of it is on disk. A run a policy version cites as evidence is not deleted."""

from __future__ import annotations

from django.urls import reverse

from console.benchmarks.models import BenchRun
from console.housekeeping import Deletion, Kind, evidence_refusal
from console.policies.citations import citations


def _run_words(run: BenchRun) -> str:
    return f"benchmark run #{run.pk} “{run.name}” ({run})"


def run_deletion(run: BenchRun) -> Deletion:
    name = _run_words(run)
    details = {"name": run.name, "model": run.model_name, "tiers": run.tier_label}
    return Deletion(
        rows=[name, "its result file as uploaded (kept in its row, not on disk)"],
        paths=[],
        events=[("benchmark_run.delete", run, details)],
        refusal=evidence_refusal(name, citations(runs=[run.pk])),
    )


BENCH_RUN = Kind(
    model=BenchRun, noun="benchmark run", action="benchmark_run", field="name",
    field_label="Name", page="evidence_run", urls="evidence_run", describe=_run_words,
    plan=run_deletion,
    gone_to=lambda run: reverse("evidence_list"),
)  # fmt: skip
