"""Writes: creating uploads and running their ingest. Views, tasks and commands call these."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from analysis import Progress, UnusableInput, analyze, ingest
from console.engine import analysis_params, ingest_options
from console.models import Analysis, Upload

log = logging.getLogger(__name__)
_PROGRESS_MIN_INTERVAL = 0.5  # seconds between progress writes to the job row


def _raw_folder() -> Path:
    folder = Path(settings.MEDIA_ROOT) / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def upload_create(
    *,
    name: str,
    source: UploadedFile | Path,
    user=None,
    format: str = "auto",
    block_tokens: int | None = None,
    previews: bool = False,
    keep_raw_until=None,
) -> Upload:
    """Store the raw file under a generated name and queue its ingest (after commit)."""
    target = _raw_folder() / f"{uuid.uuid4().hex}.log"
    tmp = target.with_suffix(".part")
    if isinstance(source, Path):
        shutil.copyfile(source, tmp)
        original = source.name
    else:
        with open(tmp, "wb") as out:
            for chunk in source.chunks():
                out.write(chunk)
        original = source.name or ""
    os.replace(tmp, target)
    upload = Upload.objects.create(
        name=name,
        created_by=user,
        format=format,
        block_tokens=block_tokens,
        previews=previews,
        keep_raw_until=keep_raw_until,
        raw_path=str(target),
        raw_size=target.stat().st_size,
        original_name=original[:300],
    )
    from console.tasks import ingest_upload_task

    transaction.on_commit(lambda: ingest_upload_task.delay(upload.pk))
    return upload


def upload_ingest(*, upload_id: int) -> None:
    """Run an upload's ingest and default analysis. Claims the row first, so a second
    delivery of the same task does nothing."""
    claimed = Upload.objects.filter(pk=upload_id, status=Upload.Status.PENDING).update(
        status=Upload.Status.RUNNING,
        started_at=timezone.now(),
        stage="reading",
        processed_by=f"{socket.gethostname()}:{os.getpid()}",
    )
    if not claimed:
        return
    upload = Upload.objects.get(pk=upload_id)
    last_write = 0.0

    def progress(p: Progress) -> None:
        nonlocal last_write
        now = time.monotonic()
        if now - last_write >= _PROGRESS_MIN_INTERVAL or p.done >= p.total:
            last_write = now
            Upload.objects.filter(pk=upload_id).update(
                stage=p.stage, progress_done=p.done, progress_total=p.total
            )

    try:
        stream = ingest(
            [upload.raw_path],
            ingest_options(
                format=upload.format, block_tokens=upload.block_tokens, previews=upload.previews
            ),
            progress=progress,
        )
        folder = Path(settings.ARTIFACT_ROOT) / f"upload-{upload.pk}" / f"b{stream.block_tokens}"
        stream.save(folder)
        report = analyze(stream, analysis_params(), progress=progress)
    except UnusableInput as exc:
        _fail(upload, str(exc))
        return
    except Exception as exc:
        log.exception("ingest of upload %s failed", upload_id)
        _fail(upload, f"internal error: {type(exc).__name__}: {exc}")
        raise
    with transaction.atomic():
        Analysis.objects.create(upload=upload, params=report.params, report=report.to_dict())
        Upload.objects.filter(pk=upload_id).update(
            status=Upload.Status.PARTIAL if stream.skipped_lines else Upload.Status.DONE,
            stage="done",
            finished_at=timezone.now(),
            source_format=stream.source_format,
            artifact_path=str(folder),
            requests=stream.requests,
            skipped_lines=stream.skipped_lines,
            errors=stream.errors,
            message="; ".join(stream.notes),
        )
    if upload.keep_raw_until is None:
        _delete_raw(upload)


def _fail(upload: Upload, message: str) -> None:
    Upload.objects.filter(pk=upload.pk).update(
        status=Upload.Status.FAILED, finished_at=timezone.now(), message=message
    )


def _delete_raw(upload: Upload) -> None:
    if upload.raw_path:
        Path(upload.raw_path).unlink(missing_ok=True)
        Upload.objects.filter(pk=upload.pk).update(raw_path="")
