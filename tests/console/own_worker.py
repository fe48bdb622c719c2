"""A Celery worker of a test's own, on a private queue: for the tests that kill workers or
look at their processes (never the machine's shared one)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from console.celery import app
from tests.console.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def own_worker(
    name: str, queue: str, tmp_path: Path, pool: str = "solo", **env: str
) -> Iterator[subprocess.Popen]:
    """A worker of our own on a private queue, solo pool by default (SIGKILL kills the
    task too); "prefork" is the production shape (two pool processes)."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    log = open(tmp_path / f"{name}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", "--pool", pool,
         *(["-c", "2"] if pool == "prefork" else []), "-Q", queue, "-n", f"{name}@%h",
         "--without-gossip", "--without-mingle"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": url, **env},
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    node = f"{name}@{socket.gethostname()}"
    try:
        wait_for(lambda: app.control.ping(destination=[node], timeout=0.5), timeout=60)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
        log.close()
