"""What every background job shares, whatever it computes: keyed by its model (Upload,
Analysis), never by the task that runs it.

Dispatch after commit, the claim (a conditional UPDATE: a second delivery does nothing),
progress on the row, failure, and the retry rule. The services queue a job by its task's
name: they never import a task module (the tasks import the services).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from celery import Task
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from analysis import Progress
from console.celery import app
from console.heartbeat import DB_LOST, abandoned, worker_name
from console.models import Analysis, JobStatus, Upload, stalled_q

log = logging.getLogger(__name__)
_PROGRESS_MIN_INTERVAL = 0.5  # seconds between progress writes to a job row

# A job's row: each has a status, a progress, a beat and a run mark (started_at).
JobModel = type[Upload] | type[Analysis]

# The task that runs each kind of job (the names are the messages' identity: a queued
# message, the beat schedule and a worker of another version all go by them).
TASK_OF: dict[JobModel, str] = {
    Upload: "kvscope.ingest_upload",
    Analysis: "kvscope.run_analysis",
}


class JobFailed(Exception):
    """A failure already worded for the job's page: its message is shown as it is."""


def task_named(name: str) -> Task:
    """The task registered under `name` (console.apps registers every task when Django is
    set up), so that no service has to import a task module."""
    return app.tasks[name]


def dispatch(model: JobModel, job_id: int, queue: str | None = None) -> None:
    """Send the job's task once the current transaction commits (the row must exist for it).

    With no broker (the embedded default) tasks run in-process; KVSCOPE_EAGER_IN_THREAD
    runs them in a background thread so the page can show live progress instead of
    waiting for the whole ingest inside the request.
    """
    task = task_named(TASK_OF[model])
    if settings.CELERY_TASK_ALWAYS_EAGER and settings.KVSCOPE_EAGER_IN_THREAD:

        def run() -> None:
            try:
                task.apply(args=(job_id,))
            except Exception as exc:
                # never leave the job "queued" with nobody working on it
                log.exception("background task %s(%s) failed", task.name, job_id)
                fail_any(model, job_id, f"internal error: {type(exc).__name__}: {exc}")
            finally:
                connection.close()  # this thread's own database connection

        transaction.on_commit(lambda: threading.Thread(target=run, daemon=True).start())
    else:
        transaction.on_commit(lambda: _send(model, task, job_id, queue))


def _send(model: JobModel, task: Task, job_id: int, queue: str | None = None) -> None:
    """Hand the task to the broker; if it cannot be reached, say so on the job and keep
    everything (raw files included) for a retry: automatic when a worker starts, or the
    Retry button."""
    try:
        task.apply_async((job_id,), **({"queue": queue} if queue else {}))
    except Exception as exc:  # kombu OperationalError and the socket errors under it
        log.warning("could not queue %s(%s): %s", task.name, job_id, exc)
        # raw files stay (only a retention date or a finished ingest deletes them)
        model.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            status=JobStatus.FAILED,
            dispatch_failed=True,
            finished_at=timezone.now(),
            message=(
                "The task queue (broker) could not be reached, so this job was not started "
                f"({type(exc).__name__}: {exc}). Nothing is lost: it is queued again when a "
                "worker starts, or press Retry."
            )[:2000],
        )


def retryable() -> Q:
    """Failed jobs, and running ones whose worker stopped beating (stalled). Conditional
    on the old beat, in the claiming UPDATE itself: a job that is alive is never retried."""
    return Q(status=JobStatus.FAILED) | stalled_q()


def requeue(model: JobModel, pk: int, **fields) -> bool:
    """Queue a failed or stalled job again, from a clean state (`fields`: more columns the
    model's run starts over). False if it was not retryable (alive, or done)."""
    claimed = model.objects.filter(retryable(), pk=pk).update(
        **fields,
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
        dispatch(model, pk)
    return bool(claimed)


def fail_any(model: JobModel, job_id: int, message: str) -> None:
    """Mark a job failed whichever run holds it, queued or running (its task crashed)."""
    try:
        model.objects.filter(pk=job_id, status__in=[JobStatus.PENDING, JobStatus.RUNNING]).update(
            status=JobStatus.FAILED, finished_at=timezone.now(), message=message[:2000]
        )
    except Exception:
        log.exception("could not mark %s %s failed", model.__name__, job_id)


def progress_writer(model: JobModel, pk: int, counters: bool = False) -> Callable[[Progress], None]:
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


def claim(model: JobModel, pk: int, redelivered: bool = False) -> bool:
    """Take a queued job. A redelivered task (its worker died mid-way) also takes over the
    job left running, if that run is over (`abandoned`); a job already finished, or still
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


def fail(
    model: JobModel,
    pk: int,
    message: str,
    run: dt.datetime | None = None,
    *,
    recorded: Callable[[], object] | None = None,
    **fields,
) -> bool:
    """Mark a job failed; if the database is away (a restart), reconnect and try again
    for about a minute rather than leave the job "running" with nobody on it. With `run`
    (the claim's started_at), only while that run still owns the job: a run that was
    taken over never overwrites its successor's outcome. `fields`: more columns to write
    with the failure; `recorded`: what else to write when the failure is (its audit
    event), in the same transaction. Returns whether it was written (False: another run
    owns the job)."""
    owned = {"status": JobStatus.RUNNING, "started_at": run} if run is not None else {}
    for attempt in range(8):
        try:
            with transaction.atomic():
                failed = model.objects.filter(pk=pk, **owned).update(
                    status=JobStatus.FAILED,
                    finished_at=timezone.now(),
                    message=message[:2000],
                    **fields,
                )
                if failed and recorded is not None:
                    recorded()
            return bool(failed)
        except DB_LOST:
            if attempt == 7:
                raise
            connection.close()
            time.sleep(min(2**attempt, 15))


def failure_message(exc: Exception) -> str:
    """What a job's page says about an unexpected failure, and what to do."""
    if isinstance(exc, DB_LOST):
        return (f"the database connection was lost during the work ({type(exc).__name__}: "
                f"{exc}); nothing was kept from this run: press Retry")  # fmt: skip
    if isinstance(exc, JobFailed):
        return str(exc)
    if isinstance(exc, OSError) and exc.filename:
        return (f"could not write {exc.filename}: {exc.strerror or exc} (is the data folder "
                "full or read-only?); nothing half-written was kept: press Retry")  # fmt: skip
    return f"internal error: {type(exc).__name__}: {exc}"
