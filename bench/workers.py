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

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("KVSCOPE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")
BROKER = os.environ.get("KVSCOPE_BENCH_BROKER", "redis://127.0.0.1:6379/14")


def run(log: Path, work: Path, cases: list[tuple[int, int]]) -> None:
    env = {
        "DATABASE_URL": f"{PG}/kvscope_bench",
        "CELERY_BROKER_URL": BROKER,
        "KVSCOPE_DATA_DIR": str(work / "data"),
        "KVSCOPE_HASH_KEY": "bench-secret-0123456789",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    os.environ.update(env)
    _fresh_database()
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], check=True)
    import django

    django.setup()
    from analysis import BlockStream

    results = {}
    for workers, parts in cases:
        seconds, upload = _one_case(log, workers, parts, work)
        stream = BlockStream.load(upload.streams[min(upload.streams, key=int)])
        results[workers, parts] = (seconds, stream)
        print(f"  {workers} worker(s), {parts} part(s): ingest {seconds:.2f} s "
              f"({upload.requests:,} requests, {stream.block_refs:,} block refs)")  # fmt: skip
    base_s, base = results[cases[0]]
    for case, (seconds, stream) in list(results.items())[1:]:
        same = stream.requests == base.requests and bool((stream.ref_key == base.ref_key).all())
        print(f"  {case[0]} worker(s) / {cases[0][0]}: {base_s / seconds:.2f}x, "
              f"identical block stream: {same}")  # fmt: skip


def _fresh_database() -> None:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "kvscope_bench" WITH (FORCE)')
        conn.execute('CREATE DATABASE "kvscope_bench"')


def _one_case(log: Path, workers: int, parts: int, work: Path):
    from console.models import Upload
    from console.uploads import services

    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "-c",
                "1",
                "--prefetch-multiplier",
                "1",
                "-n",
                f"bench{i}@%h",
                "--without-gossip",
                "--without-mingle",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=open(work / f"worker{i}.log", "ab"),  # noqa: SIM115
        )
        for i in range(workers)
    ]
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
