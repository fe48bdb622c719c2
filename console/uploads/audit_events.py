"""The audit events of the uploads wing: a log uploaded, its ingest ended, its raw files
deleted, an analysis asked for, ended or queued again. Each is recorded by the service
that makes the change, inside the change's transaction; these say what the event holds
(small JSON: names, sizes, counts, ids; never prompt text). The actor is the user who
asked, or None ("system") for what a worker or a scheduled command did."""

from __future__ import annotations

from pathlib import Path

from console.models import Analysis, Upload
from console.policies import audit

_REASON_CHARS = 500  # a failure's message as the event keeps it (the page shows it whole)


def _file_size(path: str) -> int | None:
    try:
        return Path(path).stat().st_size
    except OSError:  # (never while the row is written: the files were stored just before)
        return None


def upload_created(upload: Upload, user, *, sample: bool = False) -> None:
    """upload.create: the files as named and sized, and what was chosen for them."""
    files = [{"name": name, "bytes": _file_size(path)}
             for path, name in zip(upload.raw_paths, upload.raw_names, strict=False)]  # fmt: skip
    keep = upload.keep_raw_until
    audit.record(actor=user, action="upload.create", obj=upload, details={
        "name": upload.name, "files": files, "bytes": upload.raw_size,
        "format": upload.format, "block_sizes": list(upload.block_sizes),
        "previews": upload.previews, "tokenizer": upload.tokenizer_name or None,
        # the raw files: deleted once ingested (None), else kept until this day
        "keep_raw_until": keep.isoformat() if keep else None, "sample": sample,
    })  # fmt: skip


def ingest_done(upload: Upload, *, requests: int, skipped: int, sizes: list[int],
                analysis: Analysis) -> None:  # fmt: skip
    """ingest.done, by the worker: what was read, and the automatic first analysis."""
    audit.record(actor=None, action="ingest.done", obj=upload, details={
        "requests": requests, "lines_skipped": skipped, "block_sizes": sorted(sizes),
        "analysis": analysis.pk})  # fmt: skip


def ingest_failed(upload_id: int, reason: str, *, skipped: int | None = None) -> None:
    """ingest.fail, by the worker: why (as the upload's page says it, shortened)."""
    details: dict = {"reason": reason[:_REASON_CHARS]}
    if skipped is not None:
        details["lines_skipped"] = skipped
    audit.record(actor=None, action="ingest.fail", object_type="Upload", object_id=upload_id,
                 details=details)  # fmt: skip


def ingest_retried(upload: Upload, user, block_sizes: list[int] | None) -> None:
    details = {"block_sizes": block_sizes} if block_sizes is not None else {}
    audit.record(actor=user, action="ingest.retry", obj=upload, details=details)


def raw_deleted(upload: Upload, reason: str, user=None) -> None:
    """raw.delete: which files went (as uploaded) and why: "ingested", "unusable" (the
    ingest could not read them), "expired" (their keep-until day passed)."""
    details = {"reason": reason, "files": list(upload.raw_names),
               "tokenizer": upload.tokenizer_name or None}  # fmt: skip
    if reason == "expired" and upload.keep_raw_until is not None:
        details["keep_raw_until"] = upload.keep_raw_until.isoformat()
    audit.record(actor=user, action="raw.delete", obj=upload, details=details)


def orphans_deleted(count: int) -> None:
    """raw.purge_orphans: raw files no upload refers to (stored, then the process died
    before the upload's row was written), by the scheduled purge."""
    audit.record(actor=None, action="raw.purge_orphans", object_type="RawFolder",
                 object_id="raw", details={"files": count})  # fmt: skip


def _analysis_details(analysis: Analysis) -> dict:
    """Which stream it reads, and its parameters as the lists of analyses sum them up."""
    return {"upload": analysis.upload_id, "block_tokens": analysis.block_tokens,
            "summary": analysis.summary}  # fmt: skip


def analysis_created(analysis: Analysis, user, why: str) -> None:
    """analysis.create: asked for `why` ("asked": the analysis form; "policy re-run")."""
    audit.record(actor=user, action="analysis.create", obj=analysis,
                 details={**_analysis_details(analysis), "why": why})  # fmt: skip


def analysis_ended(analysis: Analysis, *, reason: str = "", auto: bool = False) -> None:
    """analysis.done (no `reason`) or analysis.fail, by the worker, with its parameters
    summed up; `auto`: the ingest's automatic first one."""
    details = _analysis_details(analysis)
    if auto:
        details["auto"] = True
    if reason:
        details["reason"] = reason[:_REASON_CHARS]
    action = "analysis.fail" if reason else "analysis.done"
    audit.record(actor=None, action=action, obj=analysis, details=details)


def analysis_retried(analysis: Analysis, user) -> None:
    audit.record(actor=user, action="analysis.retry", obj=analysis,
                 details={"upload": analysis.upload_id})  # fmt: skip
