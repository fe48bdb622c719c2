"""Waiting for a task's outcome: on the embedded default it ran already, on a real worker
(CELERY_BROKER_URL set, the second run of .ci/run) the test polls until it is there."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.db import models

from console.models import Analysis, JobStatus, Upload, stalled_q

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
    """No job is in a real worker's hands: none queued, none running that a worker
    claimed (it names itself in processed_by) and still beats for. Rows a test set to
    "running" by hand, or a dead worker's stalled ones, are nobody's: not waited for."""
    for model in (Upload, Analysis):
        queued = model.objects.filter(status=JobStatus.PENDING)
        claimed = model.objects.filter(status=JobStatus.RUNNING).exclude(processed_by="")
        if queued.exists() or claimed.exclude(stalled_q()).exists():
            return False
    return True


def until_worker_idle(timeout: float) -> bool:
    """Wait (at most `timeout` seconds) for worker_idle(); False if it never came."""
    deadline = time.monotonic() + timeout
    while not worker_idle():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
