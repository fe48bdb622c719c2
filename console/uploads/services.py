"""Writes on uploads: create (store the raw files, queue the ingest), ingest in one pass
or split in parts, retry, and queue again what the broker never took.

Every state change claims its row with a conditional UPDATE (console.jobs), so a second
click, a redelivered task or a concurrent request does nothing harmful.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from analysis import ingest_to_folders
from analysis.ingest import splittable
from analysis.ingest.split import part_count
from console.heartbeat import heartbeat
from console.jobs import claim, dispatch, progress_writer, requeue
from console.models import Analysis, JobStatus, Upload
from console.uploads import audit_events
from console.uploads.analyses import analysis_retry
from console.uploads.outcome import finish_ingest, ingest_failed, upload_ingest_options
from console.uploads.parts import ingest_in_parts
from console.uploads.storage import clear_leftovers, raw_names, store_raw_files, upload_folder


class RetryRefused(Exception):
    pass


def upload_create(
    *,
    name: str,
    sources: Sequence[UploadedFile | Path],
    user=None,
    format: str = "auto",
    block_sizes: Sequence[int] = (),
    previews: bool = False,
    trace_partial_cached: bool = True,
    tools_position: str = "auto",
    tokenizer: UploadedFile | Path | None = None,
    keep_raw_until=None,
    parts: int | None = None,
    queue: str | None = None,
    sample: bool = False,
) -> Upload:
    """Store the raw files (and the tokenizer.json, if any) under generated names and
    queue the ingest (after commit), the upload recorded in the audit trail with its row
    (`sample`: the bundled sample log; files stored without their row, the process dying
    between the two, are purge_unreferenced_raw's). `parts` > 1 splits one plain log over
    that many tasks (default: by settings; never a log that cannot be split, see
    _parts_for); `queue` sends it to the workers of that Celery queue (default: the
    default queue)."""
    stored, kept_tokenizer = store_raw_files(sources, tokenizer)
    tokenizer_path, tokenizer_name = kept_tokenizer or ("", "")
    with transaction.atomic():
        upload = Upload.objects.create(
            ingest_parts=_parts_for([path for path, _ in stored], format, parts),
            name=name,
            created_by=user,
            format=format,
            block_sizes=sorted(set(block_sizes)),
            previews=previews,
            trace_partial_cached=trace_partial_cached,
            tools_position=tools_position,
            tokenizer_path=str(tokenizer_path),
            tokenizer_name=tokenizer_name,
            keep_raw_until=keep_raw_until,
            raw_paths=[str(path) for path, _ in stored],
            raw_names=[original for _, original in stored],
            raw_size=sum(path.stat().st_size for path, _ in stored),
        )
        audit_events.upload_created(upload, user, sample=sample)
        dispatch(Upload, upload.pk, queue)
    return upload


def _parts_for(paths: list[Path], log_format: str, asked: int | None) -> int:
    """Split one big plain log over the workers (`asked` parts, default by settings);
    multi-file uploads and logs that cannot be cut at line boundaries (gzip, gateway CSV,
    Bailian traces: analysis.ingest.splittable) stay whole, even when parts are asked."""
    if len(paths) != 1 or not splittable(paths[0], log_format):
        return 1
    if asked:
        return asked
    # (as manage.py analyze splits: no part under half the threshold)
    return part_count(paths[0].stat().st_size, settings.KVSCOPE_INGEST_PARTS,
                      settings.KVSCOPE_PARALLEL_MIN_BYTES)  # fmt: skip


def upload_retry(*, upload: Upload, block_sizes: Sequence[int] | None = None, user=None) -> Upload:
    """Queue a failed or stalled ingest again, if its raw files are still there. `block_sizes`
    replaces the sizes chosen at upload ([]: the format's own; None: keep them); every other
    choice (format, tool placement, tokenizer) is the upload's, as read the first time.
    Recorded (ingest.retry, by `user`; None: the system) when it was queued again."""
    if not upload.raw_paths or not all(Path(p).exists() for p in upload.raw_paths):
        raise RetryRefused("The raw files are gone; upload the log again.")
    if upload.tokenizer_path and not Path(upload.tokenizer_path).exists():
        # (read with another tokenizer, the retry would count other tokens than asked)
        raise RetryRefused("The tokenizer.json is gone; upload the log and it again.")
    if block_sizes is not None and any(size < 1 for size in block_sizes):
        raise ValueError(f"block sizes must be positive: {list(block_sizes)}")
    new_sizes = {} if block_sizes is None else {"block_sizes": sorted(set(block_sizes))}
    with transaction.atomic():
        queued = requeue(
            Upload,
            upload.pk,
            **new_sizes,
            # what the failed run read (kept on the failed row for its page) starts over
            errors=[],
            skipped_lines=0,
            requests_done=0,
            skipped_so_far=0,
        )
        if queued:
            audit_events.ingest_retried(upload, user, new_sizes.get("block_sizes"))
    upload.refresh_from_db()
    return upload


def requeue_undispatched() -> int:
    """Queue again the jobs whose dispatch failed (a worker runs this when it starts)."""
    count = 0
    for upload in Upload.objects.filter(dispatch_failed=True, status=JobStatus.FAILED):
        try:
            upload_retry(upload=upload)
            count += 1
        except RetryRefused:
            continue
    for analysis in Analysis.objects.filter(dispatch_failed=True, status=JobStatus.FAILED):
        analysis_retry(analysis=analysis)
        count += 1
    return count


def upload_ingest(*, upload_id: int, redelivered: bool = False) -> None:
    """Ingest an upload into one block stream per block size, then run the default
    analysis on the first. Claims the row first: a second delivery does nothing, unless it
    is a redelivery after a worker died (then it starts over, from a clean folder).
    A split upload fans out to one task per part and merges in a chord's callback."""
    if not claim(Upload, upload_id, redelivered):
        return
    clear_leftovers(upload_id)
    upload = Upload.objects.get(pk=upload_id)
    if upload.ingest_parts > 1 and len(upload.raw_paths) == 1:
        ingest_in_parts(upload)  # (each part task beats for the upload)
        return
    with heartbeat(Upload, upload_id, upload.started_at):
        try:
            # written straight to the artifact folder: the ingest's memory follows the
            # distinct content of the log, not its length
            folders = ingest_to_folders(
                upload.raw_paths,
                upload_ingest_options(upload),
                upload_folder(upload_id),
                progress=progress_writer(Upload, upload_id, counters=True),
                names=raw_names(upload),
            )
        except Exception as exc:
            ingest_failed(upload, exc)
            return
        finish_ingest(upload, folders)
