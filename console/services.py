"""Writes: uploads, their ingest, and analyses. Views, tasks and commands call these.

Every state change claims its row with a conditional UPDATE, so a second click, a
redelivered task or a concurrent request does nothing harmful.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from analysis import BlockStream, Progress, UnusableInput, analyze, ingest_to_folders
from analysis.errors import TooManyBadLines
from analysis.ingest import DEFAULT_BLOCK_TOKENS, merge_parts
from analysis.readers import GZIP_MAGIC, ByteRange, TraceFit, split_lines
from analysis.stream import stream_meta
from console.engine import analysis_params, ingest_options
from console.heartbeat import DB_LOST, abandoned, heartbeat, worker_name
from console.leftovers import raw_folder
from console.models import Analysis, JobStatus, Upload, stalled_q
from console.uploads import charts

log = logging.getLogger(__name__)
_PROGRESS_MIN_INTERVAL = 0.5  # seconds between progress writes to a job row
DEFAULT_PARAMS = {
    "windows": [300.0, 3600.0, 86400.0],
    "model": "llama-3.1-8b",
    "scope": "global",
    "target": 0.9,
    "headroom": 0.1,
    "tp": 1,
    "min_reuses": 2,
    "doc_min_tokens": 512,
}
# The block size the automatic first analysis runs on (and the analysis form's default)
# when several were ingested: the chat default, LMCache's 256-token chunk, if it is among
# them; else the format's own if it is (a trace's 512); else the smallest.
FIRST_ANALYSIS_BLOCK_TOKENS = DEFAULT_BLOCK_TOKENS["chat"]


def first_analysis_block_size(sizes: Sequence[int], source_format: str) -> int:
    """Which of an upload's stored block sizes the default analysis uses."""
    if FIRST_ANALYSIS_BLOCK_TOKENS in sizes:
        return FIRST_ANALYSIS_BLOCK_TOKENS
    own = DEFAULT_BLOCK_TOKENS.get(source_format)
    return own if own in sizes else min(sizes)


class RetryRefused(Exception):
    pass


def _store_raw(source: UploadedFile | Path) -> tuple[Path, str]:
    """Move or copy one file under a generated name; returns (path, name as uploaded)."""
    target = raw_folder() / f"{uuid.uuid4().hex}.log"
    tmp = target.with_suffix(".part")  # a crash never leaves a half file under a real name
    try:
        if isinstance(source, Path):
            shutil.copyfile(source, tmp)
            name = source.name
        else:
            temp_path = getattr(source, "temporary_file_path", None)
            if temp_path is not None:
                shutil.copyfile(temp_path(), tmp)
            else:
                with open(tmp, "wb") as out:
                    for chunk in source.chunks():
                        out.write(chunk)
            name = source.name or "upload"
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target, name[:300]


class StorageError(Exception):
    """The raw files could not be stored (disk full, folder read-only): nothing was kept."""


def upload_create(
    *,
    name: str,
    sources: Sequence[UploadedFile | Path],
    user=None,
    format: str = "auto",
    block_sizes: Sequence[int] = (),
    previews: bool = False,
    trace_partial_cached: bool = True,
    keep_raw_until=None,
    parts: int | None = None,
    queue: str | None = None,
) -> Upload:
    """Store the raw files under generated names and queue the ingest (after commit).
    `parts` > 1 splits one plain log over that many tasks (default: by settings); `queue`
    sends it to the workers of that Celery queue (default: the default queue)."""
    stored: list[tuple[Path, str]] = []
    try:
        for source in sources:
            stored.append(_store_raw(source))
    except OSError as exc:
        for path, _ in stored:  # all files or none
            path.unlink(missing_ok=True)
        raise StorageError(
            f"Could not store the upload: {exc.strerror or exc} (is the data folder full or "
            "read-only?). Nothing was kept; try again once there is room."
        ) from exc
    upload = Upload.objects.create(
        ingest_parts=parts or _parts_for([path for path, _ in stored]),
        name=name,
        created_by=user,
        format=format,
        block_sizes=sorted(set(block_sizes)),
        previews=previews,
        trace_partial_cached=trace_partial_cached,
        keep_raw_until=keep_raw_until,
        raw_paths=[str(path) for path, _ in stored],
        raw_names=[original for _, original in stored],
        raw_size=sum(path.stat().st_size for path, _ in stored),
    )
    _enqueue_ingest(upload.pk, queue)
    return upload


def _dispatch(task, job_id: int, queue: str | None = None) -> None:
    """Send a task once the current transaction commits (the row must exist for it).

    With no broker (the embedded default) tasks run in-process; KVSCOPE_EAGER_IN_THREAD
    runs them in a background thread so the page can show live progress instead of
    waiting for the whole ingest inside the request.
    """
    if settings.CELERY_TASK_ALWAYS_EAGER and settings.KVSCOPE_EAGER_IN_THREAD:

        def run() -> None:
            try:
                task.apply(args=(job_id,))
            except Exception as exc:
                # never leave the job "queued" with nobody working on it
                log.exception("background task %s(%s) failed", task.name, job_id)
                _fail_any(job_id, task, f"internal error: {type(exc).__name__}: {exc}")
            finally:
                connection.close()  # this thread's own database connection

        transaction.on_commit(lambda: threading.Thread(target=run, daemon=True).start())
    else:
        transaction.on_commit(lambda: _send(task, job_id, queue))


def _send(task, job_id: int, queue: str | None = None) -> None:
    """Hand the task to the broker; if it cannot be reached, say so on the job and keep
    everything (raw files included) for a retry: automatic when a worker starts, or the
    Retry button."""
    try:
        task.apply_async((job_id,), **({"queue": queue} if queue else {}))
    except Exception as exc:  # kombu OperationalError and the socket errors under it
        log.warning("could not queue %s(%s): %s", task.name, job_id, exc)
        # raw files stay (only a retention date or a finished ingest deletes them)
        _model_of(task).objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            status=JobStatus.FAILED,
            dispatch_failed=True,
            finished_at=timezone.now(),
            message=(
                "The task queue (broker) could not be reached, so this job was not started "
                f"({type(exc).__name__}: {exc}). Nothing is lost: it is queued again when a "
                "worker starts, or press Retry."
            )[:2000],
        )


def _model_of(task):
    from console.tasks import ingest_upload_task

    return Upload if task is ingest_upload_task else Analysis


def _retryable() -> Q:
    """Failed jobs, and running ones whose worker stopped beating (stalled). Conditional
    on the old beat, in the claiming UPDATE itself: a job that is alive is never retried."""
    return Q(status=JobStatus.FAILED) | stalled_q()


def analysis_retry(*, analysis: Analysis) -> Analysis:
    """Queue a failed or stalled analysis again (its stream is still stored)."""
    from console.tasks import run_analysis_task

    claimed = Analysis.objects.filter(_retryable(), pk=analysis.pk).update(
        status=JobStatus.PENDING,
        heartbeat_at=None,
        dispatch_failed=False,
        stage="",
        message="",
        progress_done=0,
        progress_total=0,
        started_at=None,
        finished_at=None,
    )
    if claimed:
        _dispatch(run_analysis_task, analysis.pk)
    analysis.refresh_from_db()
    return analysis


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


def _fail_any(job_id: int, task, message: str) -> None:
    model = _model_of(task)
    try:
        model.objects.filter(pk=job_id, status__in=[JobStatus.PENDING, JobStatus.RUNNING]).update(
            status=JobStatus.FAILED, finished_at=timezone.now(), message=message[:2000]
        )
    except Exception:
        log.exception("could not mark %s %s failed", model.__name__, job_id)


def _enqueue_ingest(upload_id: int, queue: str | None = None) -> None:
    from console.tasks import ingest_upload_task

    _dispatch(ingest_upload_task, upload_id, queue)


def upload_retry(*, upload: Upload, block_sizes: Sequence[int] | None = None) -> Upload:
    """Queue a failed or stalled ingest again, if its raw files are still there. `block_sizes`
    replaces the sizes chosen at upload ([]: the format's own; None: keep them)."""
    if not upload.raw_paths or not all(Path(p).exists() for p in upload.raw_paths):
        raise RetryRefused("The raw files are gone; upload the log again.")
    if block_sizes is not None and any(size < 1 for size in block_sizes):
        raise ValueError(f"block sizes must be positive: {list(block_sizes)}")
    new_sizes = {} if block_sizes is None else {"block_sizes": sorted(set(block_sizes))}
    claimed = Upload.objects.filter(_retryable(), pk=upload.pk).update(
        **new_sizes,
        # what the failed run read (kept on the failed row for its page) starts over
        errors=[],
        skipped_lines=0,
        status=JobStatus.PENDING,
        heartbeat_at=None,
        dispatch_failed=False,
        stage="",
        message="",
        progress_done=0,
        progress_total=0,
        requests_done=0,
        skipped_so_far=0,
        started_at=None,
        finished_at=None,
    )
    if claimed:
        _enqueue_ingest(upload.pk)
    upload.refresh_from_db()
    return upload


def _progress_writer(model, pk: int, counters: bool = False) -> Callable[[Progress], None]:
    """A progress callback that writes to the job row at most twice a second."""
    last = 0.0

    def write(p: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < _PROGRESS_MIN_INTERVAL and p.done < p.total:
            return
        last = now
        fields = {"stage": p.stage, "progress_done": p.done, "progress_total": p.total}
        if counters:
            fields |= {"requests_done": p.requests, "skipped_so_far": p.skipped}
        try:
            model.objects.filter(pk=pk).update(**fields)
        except DB_LOST:
            # the database went away (a restart): progress can wait, the work goes on;
            # the next write reconnects
            connection.close()

    return write


def _claim(model, pk: int, redelivered: bool = False) -> bool:
    """Take a queued job. A redelivered task (its worker died mid-way) also takes over the
    job left running, if that run is over (`_abandoned`); a job already finished, or still
    beating, is never run twice. The new started_at marks the run: what a run writes at
    its end is conditional on still owning it."""
    claimable = Q(status=JobStatus.PENDING)
    if redelivered:
        claimable |= abandoned(model, pk)
    now = timezone.now()
    return bool(
        model.objects.filter(claimable, pk=pk).update(
            status=JobStatus.RUNNING, started_at=now, heartbeat_at=now,
            processed_by=worker_name(),
        )
    )  # fmt: skip


def _clear_leftovers(upload_id: int) -> None:
    """What a killed run may have left: its spill and half-written (temporary) folders."""
    folder = _upload_folder(upload_id)
    if folder.is_dir():
        for entry in folder.iterdir():
            # (a split ingest's parts: "parts-<run>", and "parts" before runs were marked)
            if entry.name.startswith(".") or entry.name.startswith("parts"):
                shutil.rmtree(entry, ignore_errors=True)


def _fail(model, pk: int, message: str, run=None, **fields) -> bool:
    """Mark a job failed; if the database is away (a restart), reconnect and try again
    for about a minute rather than leave the job "running" with nobody on it. With `run`
    (the claim's started_at), only while that run still owns the job: a run that was
    taken over never overwrites its successor's outcome. `fields`: more columns to write
    with the failure. Returns whether it was written (False: another run owns the job)."""
    owned = {"status": JobStatus.RUNNING, "started_at": run} if run is not None else {}
    for attempt in range(8):
        try:
            return bool(
                model.objects.filter(pk=pk, **owned).update(
                    status=JobStatus.FAILED,
                    finished_at=timezone.now(),
                    message=message[:2000],
                    **fields,
                )
            )
        except DB_LOST:
            if attempt == 7:
                raise
            connection.close()
            time.sleep(min(2**attempt, 15))


def _failure_message(exc: Exception) -> str:
    if isinstance(exc, DB_LOST):
        return (f"the database connection was lost during the work ({type(exc).__name__}: "
                f"{exc}); nothing was kept from this run: press Retry")  # fmt: skip
    if isinstance(exc, PartFailed):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return (f"could not write {exc.filename}: {exc.strerror or exc} (is the data folder "
                "full or read-only?); nothing half-written was kept: press Retry")  # fmt: skip
    return f"internal error: {type(exc).__name__}: {exc}"


def _parts_for(paths: list[Path]) -> int:
    """Split one big plain log over the workers; gzip and multi-file uploads stay whole."""
    if len(paths) != 1 or settings.KVSCOPE_INGEST_PARTS < 2:
        return 1
    with open(paths[0], "rb") as fh:
        if fh.read(2) == GZIP_MAGIC:
            return 1
    big = paths[0].stat().st_size >= settings.KVSCOPE_PARALLEL_MIN_BYTES
    return settings.KVSCOPE_INGEST_PARTS if big else 1


def _upload_ingest_options(upload: Upload):
    sizes = list(upload.block_sizes)
    return ingest_options(
        format=upload.format,
        block_tokens=sizes[0] if sizes else None,
        extra_block_tokens=tuple(sizes[1:]),
        previews=upload.previews,
        trace_partial_cached=upload.trace_partial_cached,
    )


def _raw_names(upload: Upload) -> list[str] | None:
    """The files' names as uploaded, for every message of the engine: the stored files
    have generated names the user never saw."""
    names = list(upload.raw_names)
    return names if len(names) == len(upload.raw_paths) else None


def _upload_folder(upload_id: int) -> Path:
    return Path(settings.ARTIFACT_ROOT) / f"upload-{upload_id}"


def _parts_folder(upload_id: int, run: str) -> Path:
    """Where the parts of one run of a split ingest write (`run`: its run mark): a run
    taken over (stalled, then Retry) never writes into its successor's parts."""
    return _upload_folder(upload_id) / f"parts-{re.sub(r'[^0-9A-Za-z]', '', run)}"


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


def upload_ingest(*, upload_id: int, redelivered: bool = False) -> None:
    """Ingest an upload into one block stream per block size, then run the default
    analysis on the first. Claims the row first: a second delivery does nothing, unless it
    is a redelivery after a worker died (then it starts over, from a clean folder).
    A split upload fans out to one task per part and merges in a chord's callback."""
    if not _claim(Upload, upload_id, redelivered):
        return
    _clear_leftovers(upload_id)
    upload = Upload.objects.get(pk=upload_id)
    if upload.ingest_parts > 1 and len(upload.raw_paths) == 1:
        _ingest_in_parts(upload)  # (each part task beats for the upload)
        return
    with heartbeat(Upload, upload_id, upload.started_at):
        try:
            # written straight to the artifact folder: the ingest's memory follows the
            # distinct content of the log, not its length
            folders = ingest_to_folders(
                upload.raw_paths,
                _upload_ingest_options(upload),
                _upload_folder(upload_id),
                progress=_progress_writer(Upload, upload_id, counters=True),
                names=_raw_names(upload),
            )
        except Exception as exc:
            _ingest_failed(upload, exc)
            return
        _finish_ingest(upload, folders)


def _ingest_in_parts(upload: Upload) -> None:
    from celery import chord

    from console.tasks import ingest_merge_task, ingest_part_task

    ranges = split_lines(upload.raw_paths[0], upload.ingest_parts)
    run = _run_mark(upload)  # every task of the chord carries it: see _owned
    shutil.rmtree(_parts_folder(upload.pk, run), ignore_errors=True)  # a redelivered run
    Upload.objects.filter(pk=upload.pk, started_at=upload.started_at).update(
        stage="reading", progress_done=0, progress_total=upload.raw_size
    )
    header = [ingest_part_task.s(upload.pk, i, r.start, r.end, r.first_line, run)
              for i, r in enumerate(ranges)]  # fmt: skip
    chord(header)(ingest_merge_task.si(upload.pk, len(ranges), run))


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
    folder = _parts_folder(upload_id, run) / f"p{index:04d}"
    try:
        with heartbeat(Upload, upload_id, started):
            ingest_to_folders(
                upload.raw_paths,
                _upload_ingest_options(upload),
                folder,
                byte_range=ByteRange(start, end, first_line),
                names=_raw_names(upload),
            )
    except UnusableInput as exc:
        # the advice as data too: the merge words it once for all the parts
        note = {"reason": str(exc), "errors": exc.errors, "skipped_lines": exc.skipped_lines,
                "budget": isinstance(exc, TooManyBadLines), "advice": exc.advice,
                "fit": exc.fit.to_dict() if exc.fit is not None else None,
                "requests": exc.requests}  # fmt: skip
        _write_note(folder, note)
    except Exception as exc:  # the chord must still reach its callback, which says it
        log.exception("part %s of upload %s failed", index, upload_id)
        _write_note(folder, {"failed": _failure_message(exc)})
    Upload.objects.filter(pk=upload_id, started_at=started).update(
        progress_done=F("progress_done") + (end - start)
    )


def _write_note(folder: Path, note: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / ".part-note.json"
    tmp.write_bytes(orjson.dumps(note))
    os.replace(tmp, folder / "part-note.json")


def _read_parts(upload_id: int, parts: int, run: str) -> tuple[dict[int, list[BlockStream]], list]:
    """Each part's streams (by block size) or what stopped it. Raises PartFailed when a
    part failed or left nothing at all."""
    by_size: dict[int, list[BlockStream]] = {}
    unusable: list[UnusableInput] = []
    for i in range(parts):
        folder = _parts_folder(upload_id, run) / f"p{i:04d}"
        note_file = folder / "part-note.json"
        if note_file.exists():
            note = orjson.loads(note_file.read_bytes())
            if "failed" in note:
                raise PartFailed(f"part {i + 1} of {parts}: {note['failed']}")
            kind = TooManyBadLines if note.get("budget") else UnusableInput
            unusable.append(kind(note["reason"], note["errors"], note["skipped_lines"],
                                 advice=note.get("advice", ""),
                                 fit=TraceFit.from_dict(note.get("fit")),
                                 requests=note.get("requests", 0)))  # fmt: skip
            continue
        streams = sorted(folder.glob("b*"))
        if not streams:
            raise PartFailed(f"part {i + 1} of {parts} left no result; press Retry")
        for sub in streams:
            by_size.setdefault(int(sub.name[1:]), []).append(BlockStream.load(sub))
    return by_size, unusable


class PartFailed(Exception):
    """A part of a split ingest failed (not for its input): the whole ingest fails."""


def upload_ingest_merge(*, upload_id: int, parts: int, run: str = "") -> None:
    """The chord's callback: merge the parts' streams in file order, then finish. A merge
    whose run no longer owns the upload (see _owned) only removes its run's parts: it
    never merges, finishes or fails the run that took over."""
    upload = _owned(upload_id, run)
    if upload is None:
        log.warning("merge of upload %s: its run (%r) is over; nothing done", upload_id, run)
        if run:
            shutil.rmtree(_parts_folder(upload_id, run), ignore_errors=True)
        return
    with heartbeat(Upload, upload_id, upload.started_at):
        _merge_and_finish(upload, parts, run)
    shutil.rmtree(_parts_folder(upload_id, run), ignore_errors=True)


def _merge_and_finish(upload: Upload, parts: int, run: str) -> None:
    upload_id = upload.pk
    budget = settings.KVSCOPE_MAX_BAD_LINES or None
    try:
        by_size, unusable = _read_parts(upload_id, parts, run)
        if not by_size:
            merge_parts([], unusable)  # raises: no part had a usable line
        # smallest size first, as one pass orders them (block_sizes are stored sorted)
        folders = {
            size: merge_parts(by_size[size], unusable, budget).save(
                _upload_folder(upload_id) / f"b{size}"
            )
            for size in sorted(by_size)
        }
    except Exception as exc:
        _ingest_failed(upload, exc)
        return
    _finish_ingest(upload, folders)


def _ingest_failed(upload: Upload, exc: Exception) -> None:
    if isinstance(exc, UnusableInput):
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
        # one write: no page ever shows the failure without its counts or its Retry
        failed = _fail(Upload, upload.pk, str(exc), upload.started_at, **fields)
        # (a run taken over leaves the raw files to the run that owns the upload now)
        if failed and upload.keep_raw_until is None and not retry:  # the bytes stay unusable
            upload_delete_raw(upload_id=upload.pk)
        return
    log.error("ingest of upload %s failed", upload.pk, exc_info=exc)
    if isinstance(exc, DB_LOST):
        connection.close()
    # (temporary folders are cleaned by whoever wrote them, and by the next run's start)
    _fail(Upload, upload.pk, _failure_message(exc), upload.started_at)
    if upload.keep_raw_until is None:  # kept a day for a retry, then purged
        Upload.objects.filter(pk=upload.pk).update(
            keep_raw_until=timezone.localdate() + dt.timedelta(days=1)
        )
    raise exc


def _finish_ingest(upload: Upload, folders: dict[int, Path]) -> None:
    """Run the default analysis (see first_analysis_block_size), mark the upload done."""
    upload_id = upload.pk
    try:
        paths = {str(size): str(folder) for size, folder in folders.items()}
        source_format = stream_meta(next(iter(folders.values())))["source_format"]
        first = BlockStream.load(folders[first_analysis_block_size(list(folders), source_format)])
        Upload.objects.filter(pk=upload_id).update(stage="analyzing")
        params = dict(DEFAULT_PARAMS)
        report = analyze(first, analysis_params(**params), progress=None)
    except Exception as exc:
        _ingest_failed(upload, exc)
        return
    try:
        finished = _record_ingest(upload, paths, first, params, report)
    except Exception as exc:
        _ingest_failed(upload, exc)
        return
    if finished and upload.keep_raw_until is None:
        for path in upload.raw_paths:
            Path(path).unlink(missing_ok=True)


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
        Analysis.objects.create(
            upload=upload,
            created_by=upload.created_by,
            block_tokens=first.block_tokens,
            params=params,
            report=(report_dict := report.to_dict()),
            figures=_figure_pairs(report_dict),
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
            streams=paths,
            requests=first.requests,
            requests_done=first.requests,
            skipped_lines=first.skipped_lines,
            skipped_so_far=first.skipped_lines,
            errors=first.errors,
            notes=first.notes,
            # cleared with the status, so no page ever shows "done" with the raw file kept
            **({"raw_paths": []} if delete_raw else {}),
        )
    return True


def upload_delete_raw(*, upload_id: int) -> None:
    upload = Upload.objects.get(pk=upload_id)
    for path in upload.raw_paths:
        Path(path).unlink(missing_ok=True)
    Upload.objects.filter(pk=upload_id).update(raw_paths=[])


def purge_expired_raw() -> int:
    """Delete raw files kept past their date; returns how many uploads were purged."""
    expired = Upload.objects.filter(keep_raw_until__lt=timezone.localdate()).exclude(raw_paths=[])
    count = 0
    for upload in expired:
        upload_delete_raw(upload_id=upload.pk)
        count += 1
    return count


def default_block_size(upload: Upload) -> int:
    """The analysis form's block size when no analysis is done yet: as the first one's."""
    sizes = upload.available_block_sizes
    if sizes:
        return first_analysis_block_size(sizes, upload.source_format)
    return DEFAULT_BLOCK_TOKENS.get(upload.source_format, FIRST_ANALYSIS_BLOCK_TOKENS)


def _figure_pairs(report: dict) -> list:
    """[name, figure] pairs in drawing order (PostgreSQL's jsonb does not keep key order)."""
    return [[name, figure] for name, figure in charts.report_figures(report).items()]


def analysis_figures(analysis: Analysis) -> dict:
    """The stored figures of a finished analysis, in drawing order (drawn and stored now
    for rows written before figures were stored)."""
    if not analysis.report:
        return {}
    if analysis.figures is None:
        analysis.figures = _figure_pairs(analysis.report)
        Analysis.objects.filter(pk=analysis.pk, figures__isnull=True).update(
            figures=analysis.figures
        )
    return dict((name, figure) for name, figure in analysis.figures)


def analysis_create(*, upload: Upload, block_tokens: int, params: dict, user=None) -> Analysis:
    """Queue an analysis of an upload's stored block stream with new parameters."""
    if str(block_tokens) not in upload.streams:
        raise ValueError(f"this upload has no {block_tokens}-token block stream")
    analysis_params(**params).validate()  # refuse bad parameters before queueing
    analysis = Analysis.objects.create(
        upload=upload, created_by=user, block_tokens=block_tokens, params=params
    )
    from console.tasks import run_analysis_task

    _dispatch(run_analysis_task, analysis.pk)
    return analysis


def analysis_run(*, analysis_id: int, redelivered: bool = False) -> None:
    """Run a queued analysis from the block stream (never the raw file)."""
    if not _claim(Analysis, analysis_id, redelivered):
        return
    analysis = Analysis.objects.select_related("upload").get(pk=analysis_id)
    run = analysis.started_at  # this claim's mark: a run taken over writes nothing
    progress = _progress_writer(Analysis, analysis_id)
    try:
        with heartbeat(Analysis, analysis_id, run):
            progress(Progress("loading", 0, 1))
            stream = BlockStream.load(analysis.upload.streams[str(analysis.block_tokens)])
            report = analyze(stream, analysis_params(**analysis.params), progress=progress)
    except (ValueError, KeyError, OSError) as exc:
        _fail(Analysis, analysis_id, f"{type(exc).__name__}: {exc}", run)
        return
    except Exception as exc:
        log.exception("analysis %s failed", analysis_id)
        _fail(Analysis, analysis_id, f"internal error: {type(exc).__name__}: {exc}", run)
        raise
    Analysis.objects.filter(pk=analysis_id, status=JobStatus.RUNNING, started_at=run).update(
        report=(report_dict := report.to_dict()),
        figures=_figure_pairs(report_dict),
        status=JobStatus.DONE,
        stage="done",
        finished_at=timezone.now(),
    )
