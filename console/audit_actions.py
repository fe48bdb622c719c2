"""The audit trail's vocabulary: every action the code records, `<object>.<verb>`, with the
kind of object its events name (their object_type) and a short label for the audit page.
console.policies.audit.record refuses an action missing here, so the page can label every
event it shows.

Who acts: the signed-in user for what a user asked; "system" (no actor) for what a worker
or a scheduled command did (an ingest's end, an analysis's end, raw files deleted after an
ingest or at their expiry). An analysis has two events: analysis.create when it is asked
for (by a user, or by a policy's re-run), and analysis.done or analysis.fail when a worker
ends it, both with its parameters summed up (Analysis.summary); the automatic first analysis
of an ingest is asked for by nobody, so it has only its analysis.done (recorded with the
ingest.done of the same transaction)."""

from __future__ import annotations

from typing import NamedTuple


class Action(NamedTuple):
    kind: str  # the object_type its events record ("Upload", "User", ...)
    label: str  # what happened, as the audit page says it


ACTIONS: dict[str, Action] = {
    # uploads and their ingest
    "upload.create": Action("Upload", "uploaded a log"),
    "upload.rename": Action("Upload", "renamed an upload"),
    "upload.delete": Action("Upload", "deleted an upload (its raw files, streams, analyses)"),
    "ingest.done": Action("Upload", "ingest finished"),
    "ingest.fail": Action("Upload", "ingest failed"),
    "ingest.retry": Action("Upload", "queued an ingest again"),
    "raw.delete": Action("Upload", "deleted the raw files"),
    # raw files no upload row refers to (the process died between storing and the row)
    "raw.purge_orphans": Action("RawFolder", "deleted raw files no upload refers to"),
    # analyses
    "analysis.create": Action("Analysis", "asked for an analysis"),
    "analysis.done": Action("Analysis", "analysis finished"),
    "analysis.fail": Action("Analysis", "analysis failed"),
    "analysis.retry": Action("Analysis", "queued an analysis again"),
    "analysis.rename": Action("Analysis", "relabelled an analysis"),
    "analysis.delete": Action("Analysis", "deleted an analysis"),
    # downloads
    "download.report": Action("Analysis", "downloaded report.json"),
    "download.csv": Action("Analysis", "downloaded a CSV of an analysis"),
    "download.compare": Action("Comparison", "downloaded a comparison CSV"),
    "download.replay": Action("Upload", "downloaded a replay trace"),
    "download.benchmark_csv": Action("BenchModel", "downloaded a model's benchmark runs CSV"),
    "download.benchmark_raw": Action("BenchRun", "downloaded a benchmark result file"),
    # the audit trail's own export (its id: the file's format; details: the filter)
    "download.audit": Action("AuditTrail", "downloaded the audit trail"),
    # benchmark runs
    "benchmark.upload": Action("BenchRun", "uploaded a benchmark run"),
    "benchmark_run.rename": Action("BenchRun", "renamed a benchmark run"),
    "benchmark_run.delete": Action("BenchRun", "deleted a benchmark run"),
    # accounts
    "auth.sign_in": Action("User", "signed in"),
    "auth.refused": Action("User", "sign-in refused"),
    "auth.forbidden": Action("Page", "refused a page to a role"),
    # retention policies (console.policies.services)
    "policy.create": Action("PolicyVersion", "drafted a policy"),
    "policy.edit": Action("PolicyVersion", "edited a draft"),
    "policy.submit": Action("PolicyVersion", "submitted for review"),
    "policy.request_changes": Action("PolicyVersion", "asked for changes"),
    "policy.approve": Action("PolicyVersion", "signed off"),
    "policy.supersede": Action("PolicyVersion", "superseded by a newer sign-off"),
    # (recorded for each approved version it retires, then for the Policy itself)
    "policy.retire": Action("Policy", "retired"),
    "policy.new_version": Action("PolicyVersion", "started a new version"),
    "policy.delete_draft": Action("PolicyVersion", "deleted a draft"),
    "policy.delete": Action("Policy", "deleted a policy"),
    "policy.export": Action("PolicyVersion", "exported a signed version"),
    "policy.evidence_pack": Action("PolicyVersion", "downloaded an evidence pack"),
    "policy.drift_check": Action("DriftCheck", "checked a deployment for drift"),
}


def label_of(action: str) -> str:
    """The audit page's words for an action (the action itself if it is not listed: an
    event recorded by an older version of kvscope)."""
    known = ACTIONS.get(action)
    return known.label if known is not None else action
