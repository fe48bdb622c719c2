"""Load test on loopback: gunicorn (gthread) on PostgreSQL with Redis and one Celery
worker, driven by Locust at 1, 8 and 32 concurrent users, each level bounded in time.

    python -m bench load --seconds 30

Reports p50/p95/p99 latency (ms), requests and failures per endpoint and level. The
analysis pages read the stored report: nothing is recomputed per view (the report row is
written once by the task), which the run checks by counting analyses before and after.
"""

from __future__ import annotations

import csv
import os
import secrets
import subprocess
import sys
from pathlib import Path

from bench.generate import chat_requests, write_jsonl
from bench.harness import MANAGE, ROOT, work_folder
from bench.servers import broker_url, console_env, django_shell, fresh_database, wait_http

PORT = 8077


def run(seconds: int, levels: list[int], workdir: str | None) -> None:
    work = work_folder(workdir, prefix="kvscope-load-")
    password = secrets.token_urlsafe(16)
    env = {
        **os.environ,
        **console_env(database_url=fresh_database("kvscope_load"), data_dir=work / "data",
                      hash_key="load-secret-0123456789", broker=broker_url(13)),
        "DJANGO_DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "KVSCOPE_HTTPS": "0",  # loopback, plain HTTP
        "KVSCOPE_LOAD_PASSWORD": password,
    }  # fmt: skip
    subprocess.run([*MANAGE, "migrate", "-v0"], env=env, check=True)
    subprocess.run([*MANAGE, "collectstatic", "--noinput", "-v0"], env=env, check=True)
    adduser = [*MANAGE, "adduser", "loadtest", "--role", "analyst", "--password-env",
               "KVSCOPE_LOAD_PASSWORD"]  # fmt: skip
    subprocess.run(adduser, env=env, check=True, stdout=subprocess.DEVNULL)
    day = work / "day.jsonl"
    write_jsonl(chat_requests(3000, seed=4), day)
    small = work / "small.jsonl"
    write_jsonl(chat_requests(20, seed=5, documents=4, doc_words=(50, 120)), small)
    logs = [open(work / name, "ab") for name in ("worker.log", "gunicorn.log")]  # noqa: SIM115
    procs = [
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "console", "worker", "-c", "1",
                          "--without-gossip", "--without-mingle"], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=logs[0]),
        subprocess.Popen([sys.executable, "-m", "gunicorn", "console.wsgi:application", "-b",
                          f"127.0.0.1:{PORT}", "-k", "gthread", "-w", "2", "--threads", "8"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=logs[1]),
    ]  # fmt: skip
    try:
        wait_http(f"http://127.0.0.1:{PORT}/healthz")
        upload_id, analysis_id = _seed(env, day)
        before = _count(env)
        print(f"load: gunicorn gthread 2x8 on PostgreSQL, Redis + 1 Celery worker; "
              f"{seconds} s per level; analysis {analysis_id} of a 3,000-request log")  # fmt: skip
        print(f"  {'users':>5} {'endpoint':<22} {'requests':>8} {'fail':>5} {'p50':>6} "
              f"{'p95':>6} {'p99':>6}  (ms)")  # fmt: skip
        user_env = {**env, "KVSCOPE_LOAD_ANALYSIS": str(analysis_id),
                    "KVSCOPE_LOAD_UPLOAD": str(upload_id),
                    "KVSCOPE_LOAD_LOG": str(small)}  # fmt: skip
        for users in levels:
            _one_level(users, seconds, work / f"load-{users}", user_env)
        after = _count(env, drained=True)
        print(f"  after the worker drained its queue: analyses {before[0]} -> {after[0]}, "
              f"uploads {before[1]} -> {after[1]} (one default analysis per upload; page "
              "views created none)")  # fmt: skip
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
        for fh in logs:
            fh.close()


def _one_level(users: int, seconds: int, prefix: Path, env: dict[str, str]) -> None:
    """Locust with `users` concurrent users for `seconds`; prints its per-endpoint rows."""
    subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "bench" / "locustfile.py"),
         "--headless", "-u", str(users), "-r", str(users), "--run-time", f"{seconds}s",
         "--host", f"http://127.0.0.1:{PORT}", "--csv", str(prefix), "--only-summary",
         "--stop-timeout", "10"],
        cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    with open(f"{prefix}_stats.csv") as fh:
        for row in csv.DictReader(fh):
            print(f"  {users:>5} {row['Name']:<22} {row['Request Count']:>8} "
                  f"{row['Failure Count']:>5} {row['50%']:>6} {row['95%']:>6} "
                  f"{row['99%']:>6}")  # fmt: skip


def _seed(env: dict[str, str], log: Path) -> tuple[int, int]:
    """One ingested upload with its default analysis (through the worker)."""
    out = django_shell(env, f"""
import time
from pathlib import Path
from console.models import Analysis
from console.uploads.services import upload_create
u = upload_create(name="day", sources=[Path({str(log)!r})])
for _ in range(600):
    a = Analysis.objects.filter(upload=u, status="done").first()
    if a: break
    time.sleep(0.5)
print(u.pk, a.pk)
""")  # fmt: skip
    upload_id, analysis_id = out.split()[-2:]
    return int(upload_id), int(analysis_id)


def _count(env: dict[str, str], drained: bool = False) -> tuple[int, int]:
    """(analyses, uploads); drained: once no upload is queued or running (up to 5 min)."""
    wait = ("import time\nfor _ in range(600):\n"
            "    if not Upload.objects.filter(status__in=['pending', 'running']).exists(): break\n"
            "    time.sleep(0.5)\n") if drained else ""  # fmt: skip
    out = django_shell(env, "from console.models import Analysis, Upload\n" + wait
                        + "print(Analysis.objects.count(), Upload.objects.count())")  # fmt: skip
    a, u = out.split()[-2:]
    return int(a), int(u)
