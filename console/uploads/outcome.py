"""What both ways of ingesting an upload share (one pass, or parts then a merge): the
options they read it with, and how the ingest ends: the default analysis and the done
state written in one transaction, or the failure with what was read and skipped."""

from __future__ import annotations

import datetime as dt
import logging
from functools import partial
from pathlib import Path

from django.db import connection, transaction
from django.utils import timezone

from analysis import BlockStream, IngestOptions, UnusableInput, analyze
from analysis.stream import stream_meta
from console.engine import analysis_params, ingest_options
from console.heartbeat import DB_LOST, worker_name
from console.jobs import fail, failure_message
from console.models import Analysis, JobStatus, Upload
from console.uploads import audit_events
from console.uploads.analyses import DEFAULT_PARAMS, first_analysis_block_size
from console.uploads.figures import draw
from console.uploads.storage import RAW_DELETED, unlink_raw_files, upload_delete_raw

log = logging.getLogger(__name__)


def upload_ingest_options(upload: Upload) -> IngestOptions:
    sizes = list(upload.block_sizes)
    return ingest_options(
        format=upload.format,
        block_tokens=sizes[0] if sizes else None,
        extra_block_tokens=tuple(sizes[1:]),
        previews=upload.previews,
        trace_partial_cached=upload.trace_partial_cached,
        tools_position=upload.tools_position,
        tokenizer_file=upload.tokenizer_path or None,
        tokenizer_name=upload.tokenizer_name or None,
    )


def ingest_failed(upload: Upload, exc: Exception) -> None:
    """Record why the ingest stopped. Unusable input is the user's to fix (the raw files
    are kept a day when another block size may read them); anything else is re-raised,
    with the raw files kept a day for a retry."""
    if isinstance(exc, UnusableInput):
        _unusable(upload, exc)
        return
    log.error("ingest of upload %s failed", upload.pk, exc_info=exc)
    if isinstance(exc, DB_LOST):
        connection.close()
    # (temporary folders are cleaned by whoever wrote them, and by the next run's start)
    message = failure_message(exc)
    fail(Upload, upload.pk, message, upload.started_at,
         recorded=partial(audit_events.ingest_failed, upload.pk, message))  # fmt: skip
    if upload.keep_raw_until is None:  # kept a day for a retry, then purged
        Upload.objects.filter(pk=upload.pk).update(
            keep_raw_until=timezone.localdate() + dt.timedelta(days=1)
        )
    raise exc


def _unusable(upload: Upload, exc: UnusableInput) -> None:
    # with what was skipped, so the page's counts and its table of skipped lines say
    # what went wrong; the requests read before a budget stop as the engine counted
    # them (else requests_done keeps the last progress: a zip bomb's stop has none)
    fields = {"errors": exc.errors, "skipped_lines": exc.skipped_lines,
              "skipped_so_far": exc.skipped_lines}  # fmt: skip
    if exc.requests:
        fields["requests_done"] = exc.requests
    retry = bool(exc.advice) and upload.keep_raw_until is None
    if retry:  # another block size reads it: kept a day for Retry, then purged
        fields["keep_raw_until"] = timezone.localdate() + dt.timedelta(days=1)
    # one write: no page ever shows the failure without its counts or its Retry (nor the
    # trail without its event)
    failed = fail(Upload, upload.pk, str(exc), upload.started_at, **fields, recorded=partial(
        audit_events.ingest_failed, upload.pk, str(exc), skipped=exc.skipped_lines))  # fmt: skip
    # (a run taken over leaves the raw files to the run that owns the upload now)
    if failed and upload.keep_raw_until is None and not retry:  # the bytes stay unusable
        upload_delete_raw(upload_id=upload.pk, reason="unusable")


def finish_ingest(upload: Upload, folders: dict[int, Path]) -> None:
    """Run the default analysis (see first_analysis_block_size), mark the upload done."""
    upload_id = upload.pk
    try:
        paths = {str(size): str(folder) for size, folder in folders.items()}
        source_format = stream_meta(next(iter(folders.values())))["source_format"]
        first = BlockStream.load(folders[first_analysis_block_size(list(folders), source_format)])
        Upload.objects.filter(pk=upload_id).update(stage="analyzing")
        params = dict(DEFAULT_PARAMS)
        # (only the header of `first` is read afterwards)
        report = analyze(first, analysis_params(**params), progress=None, consume=True)
    except Exception as exc:
        ingest_failed(upload, exc)
        return
    try:
        finished = _record_ingest(upload, paths, first, params, report)
    except Exception as exc:
        ingest_failed(upload, exc)
        return
    if finished and upload.keep_raw_until is None:
        unlink_raw_files(upload)


def _record_ingest(upload: Upload, paths: dict, first: BlockStream, params: dict, report) -> bool:
    """One transaction: the default analysis and the upload's done state. False (and
    nothing written) if the upload is no longer running: a duplicate run finished first."""
    upload_id = upload.pk
    now = timezone.now()
    delete_raw = upload.keep_raw_until is None
    with transaction.atomic():
        # still this run's job? (not finished by, nor handed to, another run)
        mine = Upload.objects.select_for_update().filter(
            pk=upload_id, status=JobStatus.RUNNING, started_at=upload.started_at
        )
        if not mine.exists():
            return False
        first_analysis = Analysis.objects.create(
            upload=upload,
            created_by=upload.created_by,
            block_tokens=first.block_tokens,
            params=params,
            report=(report_dict := report.to_dict()),
            figures=draw(report_dict),
            status=JobStatus.DONE,
            stage="done",
            started_at=now,
            finished_at=now,
            processed_by=worker_name(),
        )
        Upload.objects.filter(pk=upload_id).update(
            status=JobStatus.PARTIAL if first.skipped_lines else JobStatus.DONE,
            stage="done",
            finished_at=now,
            source_format=first.source_format,
            log_format=first.log_format,
            streams=paths,
            requests=first.requests,
            requests_done=first.requests,
            skipped_lines=first.skipped_lines,
            skipped_so_far=first.skipped_lines,
            errors=first.errors,
            notes=first.notes,
            # cleared with the status, so no page ever shows "done" with the raw file kept
            **(RAW_DELETED if delete_raw else {}),
        )
        # its events: the ingest's, the first analysis's (asked for by nobody: it has no
        # analysis.create) and, unless they are kept, the raw files'
        sizes = [int(size) for size in paths]
        audit_events.ingest_done(upload, requests=first.requests, skipped=first.skipped_lines,
                                 sizes=sizes, analysis=first_analysis)  # fmt: skip
        audit_events.analysis_ended(first_analysis, auto=True)
        if delete_raw:
            audit_events.raw_deleted(upload, "ingested")
    return True
