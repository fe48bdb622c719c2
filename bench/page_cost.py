"""`pagecost`: what each page costs the server for one client, on PostgreSQL with the
embedded (eager) task runner: the median of N views of each page through Django's test
client, then where the analysis page's time goes (cProfile, by own time).

    python -m bench pagecost [--views 20] [--uploads 0] [--workdir DIR]

The analysis is the default one of the load benchmark's 3,000-request log; --uploads adds
that many other uploads, each with a finished analysis, as a team's console holds them
(the analysis page's compare picker lists the newest 30)."""

from __future__ import annotations

import cProfile
import os
import pstats
import secrets
import statistics
import time
from pathlib import Path

from bench.generate import chat_requests, write_jsonl
from bench.harness import work_folder
from bench.servers import console_env, fresh_database

PASSWORD_ENV = "KVSCOPE_PAGECOST_PASSWORD"


def run(views: int, uploads: int, workdir: str | None) -> None:
    work = work_folder(workdir, prefix="kvscope-pagecost-")
    os.environ.update({
        **console_env(database_url=fresh_database("kvscope_pagecost"), data_dir=work / "data",
                      hash_key="load-secret-0123456789"),
        "DJANGO_DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50), "KVSCOPE_HTTPS": "0",
        PASSWORD_ENV: secrets.token_urlsafe(16),
    })  # fmt: skip
    os.environ.pop("CELERY_BROKER_URL", None)  # tasks run in this process
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    call_command("adduser", "pagecost", "--role", "analyst", "--password-env", PASSWORD_ENV,
                 verbosity=0)  # fmt: skip
    client = Client(HTTP_HOST="127.0.0.1")
    assert client.login(username="pagecost", password=os.environ[PASSWORD_ENV])
    upload_pk, analysis_pk = _seeded(work / "day.jsonl")
    _others(analysis_pk, uploads)
    pages = {
        "analysis page": f"/analyses/{analysis_pk}/",
        "analysis status.json": f"/analyses/{analysis_pk}/status.json",
        "upload page": f"/uploads/{upload_pk}/",
        "upload form": "/uploads/new/",
    }
    print(f"pagecost: one client, {views} views each, PostgreSQL (median, ms)")
    for name, url in pages.items():
        print(f"  {name:<22} {_median_ms(client, url, views):7.1f}")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(views):
        client.get(pages["analysis page"])
    profile.disable()
    print(f"  the analysis page, {views} views, by own time:")
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)


def _seeded(log: Path) -> tuple[int, int]:
    """The load benchmark's upload, ingested here, and its default analysis."""
    from console.models import Analysis
    from console.uploads.services import upload_create

    write_jsonl(chat_requests(3000, seed=4), log)
    upload = upload_create(name="day", sources=[log])
    for _ in range(600):  # (the embedded runner may hand the ingest to a thread)
        done = Analysis.objects.filter(upload=upload, status="done").first()
        if done is not None:
            return upload.pk, done.pk
        time.sleep(0.5)
    raise SystemExit("pagecost: the log's analysis did not finish in 5 minutes")


def _others(analysis_pk: int, uploads: int) -> None:
    """`uploads` other uploads, each with one finished analysis of the seeded one's
    parameters (rows only: the pages read of them what the picker shows)."""
    from console.models import Analysis, Upload

    seeded = Analysis.objects.get(pk=analysis_pk)
    for i in range(uploads):
        upload = Upload.objects.create(name=f"other {i}", status="done")
        Analysis.objects.create(upload=upload, block_tokens=seeded.block_tokens,
                                params=seeded.params, status="done")  # fmt: skip


def _median_ms(client, url: str, views: int) -> float:
    for _ in range(3):  # warm: templates compiled, caches filled
        assert client.get(url).status_code == 200, url
    times = []
    for _ in range(views):
        start = time.perf_counter()
        client.get(url)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
