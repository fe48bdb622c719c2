"""A running job's sign of life: the worker that runs it beats on its row; a run whose
beat stopped (its worker killed, its machine gone) is over, and may be taken over."""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Q
from django.utils import timezone

from console.models import JobStatus, stalled_q

# the database went away (a restart): what was being written can wait or be retried
DB_LOST = (OperationalError, InterfaceError)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def abandoned(model, pk: int) -> Q:
    """The job's run is over: stalled (no beat for KVSCOPE_STALL_SECONDS), or its process
    was on this machine and is gone (a worker killed here: no need to wait for the beat).
    A redelivery can also be a copy of a task still running (the broker restored it when
    the connection dropped): that run beats, so it is left alone."""
    abandoned = stalled_q()
    owner = (
        model.objects.filter(pk=pk, status=JobStatus.RUNNING)
        .values_list("processed_by", flat=True)
        .first()
    )
    if owner and process_gone(owner):
        abandoned |= Q(status=JobStatus.RUNNING, processed_by=owner)
    return abandoned


def process_gone(worker: str) -> bool:
    """True if `worker` (host:pid, as worker_name writes it) was a process on this
    machine that no longer runs (a zombie, killed but not yet reaped, counts as gone)."""
    host, _, pid_text = worker.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine's: only its beat can tell
    try:
        stat = Path(f"/proc/{pid_text}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "Z"


def heartbeat_interval() -> float:
    return min(30.0, settings.KVSCOPE_STALL_SECONDS / 6)


@contextmanager
def heartbeat(model, pk: int, run: dt.datetime | None) -> Iterator[None]:
    """While the body runs, a background thread writes the job's sign of life (its beat
    and this worker's name) every few seconds, so a long step with no progress callback
    (tokenizing, the analysis after an ingest) still beats, and a job whose worker died
    stops beating: it shows stalled, with Retry. Only while `run` still owns the job."""
    stop = threading.Event()
    beater = threading.Thread(
        target=beat, args=(model, pk, run, stop), name=f"beat-{pk}", daemon=True
    )
    beater.start()
    try:
        yield
    finally:
        stop.set()
        beater.join(timeout=10)  # a beat stuck on a lost database must not hold the task


def beat(model, pk: int, run: dt.datetime | None, stop: threading.Event) -> None:
    owned = {"started_at": run} if run is not None else {}
    try:
        while not stop.wait(heartbeat_interval()):
            try:
                model.objects.filter(pk=pk, status=JobStatus.RUNNING, **owned).update(
                    heartbeat_at=timezone.now(), processed_by=worker_name()
                )
            except DB_LOST:
                connection.close()  # a database restart: the next beat reconnects
    finally:
        connection.close()  # this thread's own database connection
