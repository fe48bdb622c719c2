"""A split ingest: one big plain log read by one task per line-aligned part, then the
parts' streams merged in file order by a chord's callback, which finishes the upload.

Every task of the chord carries the run mark of the ingest that split the upload: a part
or merge of a run taken over (stalled, then Retry) does nothing to its successor."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path

import orjson
from celery import chord
from django.conf import settings
from django.db.models import F

from analysis.ingest import (
    PART_NOTE,
    PartResult,
    ingest_part_to_folder,
    load_part,
    merged_by_size,
    plan_parts,
)
from analysis.readers import ByteRange
from console.heartbeat import heartbeat
from console.jobs import JobFailed, failure_message, task_named
from console.models import JobStatus, Upload
from console.uploads.outcome import finish_ingest, ingest_failed, upload_ingest_options
from console.uploads.storage import parts_folder, raw_names, upload_folder

log = logging.getLogger(__name__)
PART_TASK = "kvscope.ingest_part"
MERGE_TASK = "kvscope.ingest_merge"
FAILED_NOTE = "part-failed.json"  # in a part's folder: the part failed, not its input


class PartFailed(JobFailed):
    """A part of a split ingest failed (not for its input): the whole ingest fails."""


def ingest_in_parts(upload: Upload) -> None:
    """Fan the claimed upload out to one task per part, merged by the chord's callback."""
    ranges = plan_parts(upload.raw_paths[0], upload.ingest_parts)
    run = _run_mark(upload)  # every task of the chord carries it: see _owned
    shutil.rmtree(parts_folder(upload.pk, run), ignore_errors=True)  # a redelivered run
    Upload.objects.filter(pk=upload.pk, started_at=upload.started_at).update(
        stage="reading", progress_done=0, progress_total=upload.raw_size
    )
    part, merge = task_named(PART_TASK), task_named(MERGE_TASK)
    header = [part.s(upload.pk, i, r.start, r.end, r.first_line, run)
              for i, r in enumerate(ranges)]  # fmt: skip
    chord(header)(merge.si(upload.pk, len(ranges), run))


def _run_mark(upload: Upload) -> str:
    """The claim's started_at, as the split ingest's tasks carry it."""
    return upload.started_at.isoformat()


def _owned(upload_id: int, run: str) -> Upload | None:
    """The upload, if the run marked `run` still owns it (running, not re-claimed since);
    else None. A part or merge queued before runs were marked carries "": it cannot say
    whose it is, so it does nothing (the upload shows stalled, and Retry runs it again).
    What the run then writes is conditional on its started_at too (a Retry may re-claim
    the upload at any moment)."""
    if not run:
        return None
    return Upload.objects.filter(
        pk=upload_id, status=JobStatus.RUNNING, started_at=dt.datetime.fromisoformat(run)
    ).first()


def upload_ingest_part(
    *, upload_id: int, index: int, start: int, end: int, first_line: int, run: str = ""
) -> None:
    """One line-aligned part: its block streams (or its errors) under its run's parts
    folder. Does nothing if that run no longer owns the upload (see _owned)."""
    upload = _owned(upload_id, run)
    if upload is None:
        log.warning("part %s of upload %s: its run (%r) is over; nothing done", index,
                    upload_id, run)  # fmt: skip
        return
    started = upload.started_at
    folder = parts_folder(upload_id, run) / f"p{index:04d}"
    try:
        with heartbeat(Upload, upload_id, started):
            byte_range = ByteRange(start, end, first_line)
            options = upload_ingest_options(upload)
            ingest_part_to_folder(upload.raw_paths, options, byte_range, folder, raw_names(upload))
    except Exception as exc:  # the chord must still reach its callback, which says it
        log.exception("part %s of upload %s failed", index, upload_id)
        _write_failure(folder, failure_message(exc))
    Upload.objects.filter(pk=upload_id, started_at=started).update(
        progress_done=F("progress_done") + (end - start)
    )


def _write_failure(folder: Path, message: str) -> None:
    """Why a part failed (not for its input), beside what the engine writes."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{FAILED_NOTE}"
    tmp.write_bytes(orjson.dumps({"failed": message}))
    os.replace(tmp, folder / FAILED_NOTE)


def _failure_of(folder: Path) -> str | None:
    """Why the part in `folder` failed, or None. A part run by the previous version of
    this code (a chord in flight across an upgrade) wrote it into the engine's note."""
    for name in (FAILED_NOTE, PART_NOTE):
        note = folder / name
        if note.exists() and "failed" in (stored := orjson.loads(note.read_bytes())):
            return str(stored["failed"])
    return None


def _read_parts(upload_id: int, parts: int, run: str) -> list[PartResult]:
    """Each part's streams or what stopped it, in file order. Raises PartFailed when a
    part failed or left nothing at all."""
    results = []
    for i in range(parts):
        folder = parts_folder(upload_id, run) / f"p{i:04d}"
        message = _failure_of(folder)
        if message is not None:
            raise PartFailed(f"part {i + 1} of {parts}: {message}")
        result = load_part(folder)
        if result is None:
            raise PartFailed(f"part {i + 1} of {parts} left no result; press Retry")
        results.append(result)
    return results


def upload_ingest_merge(*, upload_id: int, parts: int, run: str = "") -> None:
    """The chord's callback: merge the parts' streams in file order, then finish. A merge
    whose run no longer owns the upload (see _owned) only removes its run's parts: it
    never merges, finishes or fails the run that took over."""
    upload = _owned(upload_id, run)
    if upload is None:
        log.warning("merge of upload %s: its run (%r) is over; nothing done", upload_id, run)
        if run:
            shutil.rmtree(parts_folder(upload_id, run), ignore_errors=True)
        return
    with heartbeat(Upload, upload_id, upload.started_at):
        _merge_and_finish(upload, parts, run)
    shutil.rmtree(parts_folder(upload_id, run), ignore_errors=True)


def _merge_and_finish(upload: Upload, parts: int, run: str) -> None:
    upload_id = upload.pk
    budget = settings.KVSCOPE_MAX_BAD_LINES or None
    try:
        # one size merged, saved and let go at a time: a single merged stream in memory
        merged = merged_by_size(_read_parts(upload_id, parts, run), budget)
        folders = {size: stream.save(upload_folder(upload_id) / f"b{size}")
                   for size, stream in merged}  # fmt: skip
    except Exception as exc:
        ingest_failed(upload, exc)
        return
    finish_ingest(upload, folders)
