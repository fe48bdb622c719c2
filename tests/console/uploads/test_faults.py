"""Faults: a worker killed mid-ingest, the broker down at submit, database connections
cut mid-ingest, an unwritable data folder, two re-analyses of one upload at once.

The first three need the production shape (the second CI run: PostgreSQL, Redis, a real
worker); they start and kill their own workers on a private queue."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse
from kombu import pools as kombu_pools

from analysis import analyze, ingest
from bench.generate import chat_requests, write_jsonl
from console import jobs
from console.celery import app
from console.engine import analysis_params, ingest_options
from console.models import Analysis, JobStatus, Upload
from console.uploads.analyses import analysis_create
from console.uploads.services import upload_create, upload_retry
from console.uploads.storage import StorageError
from console.uploads.tasks import requeue_undispatched_task
from tests.console.factories import PASSWORD
from tests.console.own_worker import own_worker
from tests.console.waiting import BROKER_MODE, finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
needs_broker = pytest.mark.skipif(not BROKER_MODE, reason="needs a real broker and workers")
ROOT = Path(__file__).resolve().parents[3]


def _direct_report(log: Path, **params) -> dict:
    return analyze(ingest([log], ingest_options()), analysis_params(**params)).to_dict()


@pytest.fixture
def big_log(tmp_path) -> Path:
    """A log that takes a worker a few seconds: long enough to be interrupted."""
    path = tmp_path / "big.jsonl"
    write_jsonl(chat_requests(20_000, seed=8, documents=30), path)
    return path


@needs_broker
def test_a_worker_killed_mid_ingest_is_rerun_to_the_same_report(big_log, tmp_path):
    queue = "kvscope-faults"
    with own_worker("doomed", queue, tmp_path) as doomed:
        upload = upload_create(name="big", sources=[big_log], queue=queue)

        def reading():
            """the ingest to be under way"""
            row = Upload.objects.get(pk=upload.pk)
            return row.status == JobStatus.RUNNING and row.progress_done > 0

        wait_for(reading, timeout=60, interval=0.05)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(10)
    stuck = Upload.objects.get(pk=upload.pk)
    assert stuck.status == JobStatus.RUNNING and str(doomed.pid) in stuck.processed_by
    # a new worker gets the unacknowledged task back (marked redelivered) and takes over
    with own_worker("rescuer", queue, tmp_path, KVSCOPE_BROKER_VISIBILITY_TIMEOUT="2",
                 KVSCOPE_BROKER_RESTORE_EVERY="1") as rescuer:  # fmt: skip
        done = wait_for(finished(Upload, upload.pk), timeout=240)
        assert done.status == JobStatus.DONE, done.message
        assert str(rescuer.pid) in done.processed_by
    # the same report as an uninterrupted run, one analysis row, no leftovers
    (analysis,) = Analysis.objects.filter(upload=done)
    assert done.requests == 20_000
    assert analysis.report == _direct_report(big_log)
    folder = Path(done.streams["256"]).parent
    assert sorted(p.name for p in folder.iterdir()) == ["b256"]
    assert done.raw_paths == [] and not list((Path(settings.MEDIA_ROOT) / "raw").glob(
        f"*{Path(stuck.raw_paths[0]).name}"))  # fmt: skip


@needs_broker
def test_a_job_whose_worker_was_killed_is_stalled_soon_and_retry_completes_it(
    big_log, tmp_path, client, analyst, settings
):
    # 10 s (a beat every 1.7 s): wide enough that the "too early" Retry below lands before
    # the stall time on a loaded machine, short enough to wait for
    settings.KVSCOPE_STALL_SECONDS = 10  # this process judges the beat (the page, Retry)
    client.force_login(analyst)  # no password hashing between the kill and the first Retry
    queue = "kvscope-stall"  # nobody else consumes it: the task is never redelivered
    with own_worker("killed", queue, tmp_path, KVSCOPE_STALL_SECONDS="10") as killed:
        upload = upload_create(name="big", sources=[big_log], queue=queue)
        wait_for(_ingesting(upload.pk), timeout=60, interval=0.05)
        first = Upload.objects.get(pk=upload.pk)

        def beat_again():
            """the running ingest to beat again"""
            row = Upload.objects.get(pk=upload.pk)
            return row if row.heartbeat_at > first.heartbeat_at else None

        beating = wait_for(beat_again, timeout=20, interval=0.05)
        assert not beating.stalled and str(killed.pid) in beating.processed_by
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
    refused = client.post(reverse("upload_retry", args=[upload.pk]))  # too early: still fresh
    assert refused.status_code == 302
    assert Upload.objects.get(pk=upload.pk).started_at == beating.started_at

    def stalled():
        """the killed worker's job to show stalled"""
        row = Upload.objects.get(pk=upload.pk)
        return row if row.stalled else None

    stuck = wait_for(stalled, timeout=60)
    assert stuck.status == JobStatus.RUNNING and stuck.progress_done > 0  # "running 20 %"
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "The ingest stalled." in page and reverse("upload_retry", args=[upload.pk]) in page
    client.post(reverse("upload_retry", args=[upload.pk]))  # to the default queue's worker
    done = wait_for(finished(Upload, upload.pk), timeout=240)
    assert done.status == JobStatus.DONE, done.message
    assert str(killed.pid) not in done.processed_by
    assert done.requests == 20_000
    assert Analysis.objects.get(upload=done).report == _direct_report(big_log)


@contextmanager
def _broker_at(url: str):
    """Point this process's Celery app at another broker URL (pools rebuilt on use)."""
    saved = app.conf.broker_url, app.conf.broker_write_url
    app.conf.broker_url = app.conf.broker_write_url = url
    _reset_broker_pools()
    try:
        yield
    finally:
        app.conf.broker_url, app.conf.broker_write_url = saved
        _reset_broker_pools()


def _reset_broker_pools() -> None:
    kombu_pools.reset()  # closes and forgets every producer pool, keyed by connection
    app._pool = None
    app.amqp._producer_pool = None


@needs_broker
def test_broker_down_at_submit_keeps_the_upload_and_queues_it_later(client, analyst, chat_log):
    assert client.login(username=analyst.username, password=PASSWORD)
    with _broker_at("redis://127.0.0.1:9/0"), open(chat_log, "rb") as fh:  # nothing listens
        form = {"name": "while down", "files": [fh], "format": "auto", "block_sizes": ["256"],
                "retention": "delete"}  # fmt: skip
        response = client.post(reverse("upload_new"), form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    upload = Upload.objects.get()  # redirected to its page, which says what happened
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "The task queue (broker) could not be reached" in page
    assert upload.status == JobStatus.FAILED and upload.dispatch_failed
    assert all(Path(p).exists() for p in upload.raw_paths)  # nothing lost
    # the broker is back: what a starting worker runs queues it again
    requeue_undispatched_task.delay()

    def requeued_and_finished():
        """the upload to be queued again and finish"""
        row = Upload.objects.get(pk=upload.pk)
        return row if row.finished and not row.dispatch_failed else None

    done = wait_for(requeued_and_finished)
    assert done.status == JobStatus.DONE and not done.dispatch_failed, done.message
    assert done.requests == 120 and done.raw_paths == []


@needs_broker
def test_database_connections_cut_mid_ingest_never_give_a_partial_done(big_log):
    upload = upload_create(name="big", sources=[big_log])

    def reading():
        """the ingest to be under way"""
        row = Upload.objects.get(pk=upload.pk)
        return row.status == JobStatus.RUNNING and row.progress_done > 0

    wait_for(reading, timeout=60, interval=0.05)
    with connection.cursor() as cursor:  # what a PostgreSQL restart does to the worker
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1
    done = wait_for(finished(Upload, upload.pk), timeout=240)
    print(f"after the cut: {done.status} {done.message}")  # which of the two (for -s runs)
    if done.status == JobStatus.FAILED:  # allowed: a clear reason, and a retry
        assert "database connection was lost" in done.message
        assert not Analysis.objects.filter(upload=done).exists()
    else:  # recovered: then complete
        assert done.status == JobStatus.DONE, done.message
        assert done.requests == 20_000
        assert Analysis.objects.get(upload=done).report == _direct_report(big_log)


@pytest.mark.skipif(BROKER_MODE, reason="the real worker keeps the data folder it started with")
def test_an_unwritable_artifact_folder_fails_clearly_and_writes_nothing(chat_log, tmp_path,
                                                                        settings):  # fmt: skip
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact folder should be")
    settings.ARTIFACT_ROOT = blocker / "artifacts"
    upload = upload_create(name="nowhere", sources=[chat_log])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.FAILED
    assert done.message.startswith(f"could not write {blocker}")
    assert "nothing half-written was kept: press Retry" in done.message
    assert blocker.read_text() == "a file where the artifact folder should be"
    assert all(Path(p).exists() for p in done.raw_paths)  # kept for the retry
    settings.ARTIFACT_ROOT = tmp_path / "artifacts"
    upload_retry(upload=done)  # what the Retry button does
    again = wait_for(finished(Upload, upload.pk))
    assert again.status == JobStatus.DONE and again.requests == 120


def test_two_reanalyses_of_one_upload_at_once_are_both_complete(chat_log, settings):
    upload = upload_create(name="shared", sources=[chat_log])
    upload = wait_for(finished(Upload, upload.pk))
    settings.KVSCOPE_EAGER_IN_THREAD = True  # eager: run both side by side in threads
    asks = [{"scope": "tenant", "lifetime": 600.0}, {"scope": "user", "windows": [60.0]}]
    analyses: list[Analysis] = []
    barrier = threading.Barrier(2)

    def submit(params):
        barrier.wait()
        analyses.append(analysis_create(upload=upload, block_tokens=256, params=params))
        connection.close()

    threads = [threading.Thread(target=submit, args=(p,)) for p in asks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for analysis in analyses:
        done = wait_for(finished(Analysis, analysis.pk))
        assert done.status == JobStatus.DONE, done.message
        assert done.report == _direct_report(chat_log, **done.params)


@pytest.mark.skipif(BROKER_MODE, reason="the real worker keeps the data folder it started with")
def test_an_unwritable_upload_folder_is_said_on_the_form_and_keeps_nothing(
    client, analyst, chat_log, tmp_path, settings
):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the media folder should be")
    settings.MEDIA_ROOT = blocker / "media"
    assert client.login(username=analyst.username, password=PASSWORD)
    with open(chat_log, "rb") as fh, open(chat_log, "rb") as fh2:
        form = {"name": "two files", "files": [fh, fh2], "format": "auto",
                "block_sizes": ["256"], "retention": "delete"}  # fmt: skip
        page = client.post(reverse("upload_new"), form)
    assert page.status_code == 200
    assert "Could not store the upload: Not a directory" in page.content.decode()
    assert not Upload.objects.exists()


def test_storing_an_upload_is_all_or_nothing(chat_log, tmp_path):
    raw = Path(settings.MEDIA_ROOT) / "raw"
    before = set(raw.iterdir()) if raw.exists() else set()
    with pytest.raises(StorageError, match="Could not store the upload: No such file"):
        upload_create(name="two files", sources=[chat_log, tmp_path / "gone.jsonl"])
    assert not Upload.objects.exists()
    assert (set(raw.iterdir()) if raw.exists() else set()) == before  # the first file too


def test_a_run_that_was_taken_over_cannot_overwrite_its_successor(chat_log):
    upload = Upload.objects.create(name="claimed twice", raw_paths=[str(chat_log)])
    assert jobs.claim(Upload, upload.pk)
    first_run = Upload.objects.get(pk=upload.pk)
    assert not jobs.claim(Upload, upload.pk)  # a duplicate delivery does nothing
    # a redelivered copy while the first run still beats (the broker restored it when a
    # connection dropped) leaves the live run alone
    assert not jobs.claim(Upload, upload.pk, redelivered=True)
    assert Upload.objects.get(pk=upload.pk).started_at == first_run.started_at
    # the first run's worker stopped beating (it died): its task came back and takes over
    Upload.objects.filter(pk=upload.pk).update(
        heartbeat_at=first_run.started_at - dt.timedelta(hours=1)
    )
    time.sleep(0.002)
    assert jobs.claim(Upload, upload.pk, redelivered=True)
    jobs.fail(Upload, upload.pk, "the first run failed late", first_run.started_at)
    now = Upload.objects.get(pk=upload.pk)
    assert now.status == JobStatus.RUNNING and now.message == ""
    jobs.fail(Upload, upload.pk, "the second run failed", now.started_at)
    assert Upload.objects.get(pk=upload.pk).message == "the second run failed"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _PrivateRedis:
    """A redis-server of this test's own (the shared one is never stopped): no disk, so a
    restart also loses every queued message, the worst case for a broker restart."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._log = tmp_path / "redis.log"
        self._proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self._log, "ab") as log:
            self._proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--daemonize", "no"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip

        def answers():
            """the private redis-server to listen"""
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            except OSError:
                return False
            return True

        wait_for(answers, timeout=30, interval=0.1)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(30)


@contextmanager
def _worker_on_private_broker(name: str, tmp_path: Path):
    """A private redis-server, this process's Celery pointed at it, and a prefork worker
    (the production shape) of our own on it: yields (redis, worker process)."""
    redis = _PrivateRedis(tmp_path)
    redis.start()
    try:
        with _broker_at(redis.url), own_worker(name, "celery", tmp_path, pool="prefork",
                                            CELERY_BROKER_URL=redis.url) as worker:  # fmt: skip
            yield redis, worker
    finally:
        redis.stop()


def _answers(node: str):
    def check():
        """the worker to answer a ping (reconnected)"""
        try:
            return app.control.ping(destination=[node], timeout=0.5)
        except Exception:  # this process's own connections broke with the restart too
            _reset_broker_pools()
            return False

    return check


def _ingesting(pk: int):
    def check():
        """the ingest to be under way"""
        row = Upload.objects.get(pk=pk)
        return row.status == JobStatus.RUNNING and row.progress_done > 0

    return check


@needs_broker
def test_a_busy_worker_survives_a_broker_restart_and_takes_the_next_upload(big_log, chat_log,
                                                                           tmp_path):  # fmt: skip
    """Celery/kombu 5.7 on Redis: a prefork worker with a task running exited with
    "Unrecoverable error: AttributeError('NoneType' object has no attribute 'hostname')"
    when the broker went away (console.broker has the why)."""
    with _worker_on_private_broker("steady", tmp_path) as (redis, worker):
        upload = upload_create(name="big", sources=[big_log])
        wait_for(_ingesting(upload.pk), timeout=60, interval=0.05)
        redis.stop()  # mid-task: the worker's consumer loses its connection
        time.sleep(12)
        assert worker.poll() is None, (tmp_path / "steady.log").read_text()[-3000:]
        redis.start()
        # the task went on through the outage (the database was there) and finished
        done = wait_for(finished(Upload, upload.pk), timeout=240)
        assert done.status == JobStatus.DONE, done.message
        assert done.requests == 20_000
        assert Analysis.objects.get(upload=done).report == _direct_report(big_log)
        wait_for(_answers(f"steady@{socket.gethostname()}"), timeout=60)
        # the same worker, reconnected, takes the next upload
        after = upload_create(name="after the restart", sources=[chat_log])
        again = wait_for(finished(Upload, after.pk), timeout=120)
        assert again.status == JobStatus.DONE and not again.dispatch_failed, again.message
        assert again.requests == 120
        assert worker.poll() is None
        log = (tmp_path / "steady.log").read_text()
        assert "Unrecoverable error" not in log
        assert "Connection to broker lost" in log  # it did see the outage


@needs_broker
def test_jobs_undispatched_while_the_broker_was_down_are_queued_when_a_worker_reconnects(
    chat_log, tmp_path
):
    with _worker_on_private_broker("patient", tmp_path) as (redis, worker):
        redis.stop()
        upload = upload_create(name="while down", sources=[chat_log])
        failed = Upload.objects.get(pk=upload.pk)
        assert failed.status == JobStatus.FAILED and failed.dispatch_failed
        assert all(Path(p).exists() for p in failed.raw_paths)
        redis.start()  # back, and the worker was never restarted

        def requeued_and_finished():
            """the upload to be queued again by the reconnected worker, and finish"""
            row = Upload.objects.get(pk=upload.pk)
            return row if row.finished and not row.dispatch_failed else None

        done = wait_for(requeued_and_finished, timeout=120)
        assert done.status == JobStatus.DONE, done.message
        assert done.requests == 120 and done.raw_paths == []
        assert worker.poll() is None
