"""Split ingest through real Celery workers: one worker (one pass) vs two (two parts, a
chord), on PostgreSQL and Redis, timed from the upload's dispatch to its streams.

    python -m bench workers --requests 150000

Needs PostgreSQL and Redis (the machine's, or compose's); uses its own database
(`kvscope_bench`) and Redis db 14, and starts and stops its workers itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from analysis import BlockStream
from bench.harness import HASH_KEY, MANAGE, ROOT, chat_log, work_folder
from bench.servers import broker_url, console_env, fresh_database

if TYPE_CHECKING:
    from console.models import Upload


# (workers, parts): one worker in one pass, one worker in two parts, two workers
CASES = [(1, 1), (1, 2), (2, 2)]


def run(requests: int, workdir: str | None) -> None:
    work = work_folder(workdir)
    log = chat_log(work, requests)
    print(f"workers: {log.stat().st_size / 1e6:.0f} MB chat log through Celery "
          "(Redis, PostgreSQL)")  # fmt: skip
    _setup_console(work)
    results = {}
    for workers, parts in CASES:
        seconds, upload = _one_case(log, workers, parts, work)
        stream = BlockStream.load(upload.streams[min(upload.streams, key=int)])
        results[workers, parts] = (seconds, stream)
        print(f"  {workers} worker(s), {parts} part(s): ingest {seconds:.2f} s "
              f"({upload.requests:,} requests, {stream.block_refs:,} block refs)")  # fmt: skip
    base_s, base = results[CASES[0]]
    for case, (seconds, stream) in list(results.items())[1:]:
        same = stream.requests == base.requests and bool((stream.ref_key == base.ref_key).all())
        print(f"  {case[0]} worker(s) / {CASES[0][0]}: {base_s / seconds:.2f}x, "
              f"identical block stream: {same}")  # fmt: skip


def _setup_console(work: Path) -> None:
    """A fresh, migrated database, and Django set up in this process on it."""
    # this process dispatches the uploads itself, so it takes the console's settings too
    os.environ.update(console_env(database_url=fresh_database("kvscope_bench"),
                                  data_dir=work / "data", hash_key=HASH_KEY.decode(),
                                  broker=broker_url(14)))  # fmt: skip
    subprocess.run([*MANAGE, "migrate", "-v0"], check=True)
    # Django loads only once the environment above is set (the settings read it at
    # import), and the console's modules only after django.setup()
    import django

    django.setup()


def _one_case(log: Path, workers: int, parts: int, work: Path) -> tuple[float, Upload]:
    """Seconds from dispatching `log` in `parts` to its streams written, on `workers`
    fresh Celery workers; and the upload row once its default analysis is done."""
    from console.models import Upload
    from console.uploads import services

    procs = []
    for i in range(workers):
        worker = [sys.executable, "-m", "celery", "-A", "console", "worker", "-c", "1",
                  "--prefetch-multiplier", "1", "-n", f"bench{i}@%h", "--without-gossip",
                  "--without-mingle"]  # fmt: skip
        errors = open(work / f"worker{i}.log", "ab")  # noqa: SIM115
        procs.append(subprocess.Popen(worker, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors))
    try:
        _wait_for_workers(workers)
        upload = services.upload_create(name=log.name, sources=[log], parts=parts)
        start = time.perf_counter()
        while True:
            upload.refresh_from_db()
            if upload.stage in ("analyzing", "done") or upload.status in ("failed",):
                seconds = time.perf_counter() - start
                break
            time.sleep(0.05)
        while upload.status not in ("done", "partial", "failed"):
            time.sleep(0.2)
            upload.refresh_from_db()
        if upload.status == "failed":
            raise SystemExit(f"ingest failed: {upload.message}")
        return seconds, Upload.objects.get(pk=upload.pk)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


def _wait_for_workers(count: int) -> None:
    from console.celery import app

    for _ in range(120):
        replies = app.control.ping(timeout=1.0) or []
        if len(replies) >= count:
            return
    raise SystemExit("the Celery workers did not answer")
