"""Waiting for a task's outcome: on the embedded default it ran already, on a real worker
(CELERY_BROKER_URL set, the second run of .ci/run) the test polls until it is there."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import models

from console.benchmarks.predictions import PENDING as PREDICTION_PENDING
from console.models import Analysis, BenchRun, JobStatus, Upload, stalled_q

BROKER_MODE = not settings.CELERY_TASK_ALWAYS_EAGER
T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 120.0, interval: float = 0.2) -> T:
    """Poll until predicate() returns a truthy value (a task on a real worker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate.__doc__ or predicate}")


def finished(model: type[models.Model], pk: int) -> Callable[[], Any]:
    """A predicate for wait_for: the job (an Upload or an Analysis) once it has finished."""

    def check():
        row = model.objects.get(pk=pk)
        return row if row.finished else None

    check.__doc__ = f"the {model.__name__.lower()} to finish"
    return check


def settled() -> bool:
    """No upload or analysis is queued or running (on a real worker they run meanwhile):
    every event their ends record is in the audit trail."""
    busy = (JobStatus.PENDING, JobStatus.RUNNING)
    return not (Upload.objects.filter(status__in=busy).exists()
                or Analysis.objects.filter(status__in=busy).exists())  # fmt: skip


def worker_idle() -> bool:
    """No job is in a real worker's hands. The rows say so at once when nothing is queued
    or running (uploads, analyses, a run's prediction); rows that look busy may be a test's
    own (set by hand, or left by a worker it killed), so then the broker's queue and the
    workers themselves are asked."""
    busy_rows = BenchRun.objects.filter(prediction_note=PREDICTION_PENDING).exists() or any(
        model.objects.filter(status=JobStatus.PENDING).exists()
        or model.objects.filter(status=JobStatus.RUNNING).exclude(stalled_q()).exists()
        for model in (Upload, Analysis)
    )
    return not busy_rows or not _worker_busy()


def _worker_busy() -> bool:
    """A task waits in the default queue, or a worker runs or holds one. A worker too busy
    to answer in time counts as busy (asked again); a broker that is away (a test stopped
    its own) has nothing in flight for this test."""
    from console.celery import app

    try:
        with app.connection_for_read() as connection:
            queue = app.conf.task_default_queue
            if connection.default_channel.queue_declare(queue=queue, passive=True).message_count:
                return True
        inspect = app.control.inspect(timeout=1.0)
        active, reserved = inspect.active(), inspect.reserved()
    except Exception:
        return False
    if active is None or reserved is None:  # no answer in time
        return True
    return any(active.values()) or any(reserved.values())


def until_worker_idle(timeout: float) -> bool:
    """Wait (at most `timeout` seconds) for worker_idle(); False if it never came."""
    deadline = time.monotonic() + timeout
    while not worker_idle():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
