"""Heartbeats: a running job beats; one whose worker stopped beating is stalled, its page
says so and offers Retry, and a redelivered task takes over only a run that is over.

On the embedded default these rows are set as a dead worker leaves them; the broker run
(test_faults.py) SIGKILLs a real worker."""

from __future__ import annotations

import datetime as dt
import os
import socket
import subprocess
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from analysis.readers import split_lines
from bench.generate import chat_requests, write_jsonl
from console.models import Analysis, JobStatus, Upload
from console.uploads.parts import upload_ingest_merge, upload_ingest_part
from console.uploads.services import upload_create, upload_ingest, upload_retry
from tests.console.factories import PASSWORD
from tests.console.waiting import BROKER_MODE, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(BROKER_MODE, reason="sets job rows as a dead worker leaves them"),
]
THIS_MACHINE = socket.gethostname()


def _left_running(upload: Upload, beat_age_s: float, owner: str) -> Upload:
    """The row as a worker killed mid-ingest leaves it: running at 20 %, last beat
    `beat_age_s` ago, raw files kept."""
    beat = timezone.now() - dt.timedelta(seconds=beat_age_s)
    Upload.objects.filter(pk=upload.pk).update(
        status=JobStatus.RUNNING, stage="reading", progress_done=20, progress_total=100,
        started_at=beat - dt.timedelta(seconds=5), heartbeat_at=beat, finished_at=None,
        processed_by=owner, streams={}, requests=0,
    )  # fmt: skip
    return Upload.objects.get(pk=upload.pk)


@pytest.fixture
def kept_upload(chat_log) -> Upload:
    """An ingested upload whose raw file is kept (so it can be ingested again)."""
    tomorrow = timezone.localdate() + dt.timedelta(days=1)
    upload = upload_create(name="kept", sources=[chat_log], keep_raw_until=tomorrow)
    done = Upload.objects.get(pk=upload.pk)
    assert done.status == JobStatus.DONE and done.requests == 120
    return done


def _dead_pid() -> int:
    """The pid of a process of this machine that has exited (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_running_job_whose_beat_is_old_is_stalled_and_retry_completes_it(
    client, analyst, kept_upload, settings
):
    settings.KVSCOPE_STALL_SECONDS = 180
    assert client.login(username=analyst.username, password=PASSWORD)
    page_url = reverse("upload_detail", args=[kept_upload.pk])
    # beating a minute ago: alive, so no Retry, and a Retry POST changes nothing
    alive = _left_running(kept_upload, 60, "other-machine:7")
    assert not alive.stalled
    assert "The ingest stalled" not in client.get(page_url).content.decode()
    said = client.post(reverse("upload_retry", args=[alive.pk]), follow=True)
    assert "The ingest is still running: nothing to retry." in said.content.decode()
    still = Upload.objects.get(pk=alive.pk)
    assert (still.status, still.started_at, still.progress_done) == (
        JobStatus.RUNNING, alive.started_at, 20)  # fmt: skip
    # no beat for four minutes: stalled, said on the page and in the polled status
    stalled = _left_running(kept_upload, 240, "other-machine:7")
    assert stalled.stalled
    page = client.get(page_url).content.decode()
    assert "The ingest stalled." in page and "other-machine:7" in page
    # its badge says so too (it read "Running" beside the stalled notice)
    assert '<span class="badge stalled" data-upload-status data-job-status>Stalled</span>' in page
    assert reverse("upload_retry", args=[stalled.pk]) in page  # the Retry button
    status = orjson.loads(client.get(reverse("upload_status", args=[stalled.pk])).content)
    assert status["stalled"] is True and status["status"] == "running"
    # Retry claims it (conditionally on that old beat) and the ingest runs again to the end
    client.post(reverse("upload_retry", args=[stalled.pk]))
    done = Upload.objects.get(pk=stalled.pk)
    assert done.status == JobStatus.DONE and not done.stalled, done.message
    assert done.requests == 120 and done.processed_by == f"{THIS_MACHINE}:{os.getpid()}"
    assert done.started_at > stalled.started_at


def test_retry_of_a_live_job_is_refused_in_the_claim_itself(kept_upload, settings):
    settings.KVSCOPE_STALL_SECONDS = 180
    alive = _left_running(kept_upload, 1, "other-machine:7")
    after = upload_retry(upload=alive)  # the service, as a second click or a stale page
    assert (after.status, after.started_at, after.heartbeat_at) == (
        JobStatus.RUNNING, alive.started_at, alive.heartbeat_at)  # fmt: skip


def test_a_redelivered_task_takes_over_only_a_run_that_is_over(kept_upload, settings):
    settings.KVSCOPE_STALL_SECONDS = 180
    # beating, on another machine: a copy of a task still running there; left alone
    live = _left_running(kept_upload, 5, "other-machine:7")
    upload_ingest(upload_id=live.pk, redelivered=True)
    assert Upload.objects.get(pk=live.pk).started_at == live.started_at
    # beating 5 s ago, but by a process of this machine that is gone: taken over at once
    dead = _left_running(kept_upload, 5, f"{THIS_MACHINE}:{_dead_pid()}")
    upload_ingest(upload_id=dead.pk, redelivered=True)
    done = Upload.objects.get(pk=dead.pk)
    assert done.status == JobStatus.DONE and done.requests == 120
    # another machine's run with a beat past the stall time: taken over too
    stalled = _left_running(kept_upload, 200, "other-machine:7")
    upload_ingest(upload_id=stalled.pk, redelivered=True)
    assert Upload.objects.get(pk=stalled.pk).status == JobStatus.DONE


def test_a_long_ingest_beats_while_it_runs(tmp_path, settings):
    settings.KVSCOPE_STALL_SECONDS = 6  # a beat a second: 6 s of slack for a loaded machine
    settings.KVSCOPE_EAGER_IN_THREAD = True  # in the background, as on the embedded default
    log = tmp_path / "long.jsonl"
    # long enough for several beats even when the machine is idle (16,000 took ~2 s)
    write_jsonl(chat_requests(48_000, seed=8, documents=30), log)
    upload = upload_create(name="long", sources=[log])
    beats: set[dt.datetime] = set()

    def beats_seen():
        """the upload to finish"""
        row = Upload.objects.get(pk=upload.pk)
        if row.status == JobStatus.RUNNING and row.heartbeat_at:
            beats.add(row.heartbeat_at)
            assert not row.stalled  # beating: never shown stalled while it works
        return row if row.finished else None

    done = wait_for(beats_seen, timeout=240, interval=0.05)
    assert done.status == JobStatus.DONE, done.message
    # the claim's own beat, then the thread's: many distinct beats during one ingest
    assert len(beats) >= 3, sorted(beats)
    assert Path(log).exists()


def test_a_stalled_analysis_offers_retry_and_runs_again(client, analyst, kept_upload, settings):
    settings.KVSCOPE_STALL_SECONDS = 180
    done = Analysis.objects.get(upload=kept_upload)
    beat = timezone.now() - dt.timedelta(minutes=10)
    left = Analysis.objects.create(
        upload=kept_upload, block_tokens=done.block_tokens, params=done.params,
        status=JobStatus.RUNNING, stage="analyzing", started_at=beat, heartbeat_at=beat,
        processed_by="other-machine:9",
    )  # fmt: skip
    assert left.stalled
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("analysis_detail", args=[left.pk])).content.decode()
    assert "The analysis stalled." in page and reverse("analysis_retry", args=[left.pk]) in page
    client.post(reverse("analysis_retry", args=[left.pk]))
    again = Analysis.objects.get(pk=left.pk)
    assert again.status == JobStatus.DONE and again.report == done.report


def _parts_folders(upload: Upload) -> list[str]:
    folder = Path(settings.ARTIFACT_ROOT) / f"upload-{upload.pk}"
    return sorted(p.name for p in folder.glob("parts*"))


def test_a_split_ingest_taken_over_leaves_the_new_run_to_its_own_parts(kept_upload, settings):
    """A split ingest stalls (its parts wait in the queue), Retry re-claims it; the old
    run's late part and merge, carrying the old run mark, write nothing and never finish
    the new run; the new run's merge does. The services are called as the tasks would."""
    settings.KVSCOPE_STALL_SECONDS = 180
    ranges = split_lines(kept_upload.raw_paths[0], 2)
    assert len(ranges) == 2
    Upload.objects.filter(pk=kept_upload.pk).update(ingest_parts=2)
    old = _left_running(kept_upload, 240, "other-machine:7")
    old_run = old.started_at.isoformat()

    def part(i: int, run: str) -> None:
        r = ranges[i]
        upload_ingest_part(upload_id=old.pk, index=i, start=r.start, end=r.end,
                           first_line=r.first_line, run=run)  # fmt: skip

    part(0, old_run)  # the old run's first part ran before it stalled
    assert len(_parts_folders(old)) == 1
    # Retry re-claims the stalled upload: a new run, with its own mark
    now = timezone.now()
    Upload.objects.filter(pk=old.pk).update(
        started_at=now, heartbeat_at=now, progress_done=0, processed_by="this"
    )
    new = Upload.objects.get(pk=old.pk)
    new_run = new.started_at.isoformat()
    assert new_run != old_run
    part(0, new_run)
    assert len(_parts_folders(new)) == 2  # its own folder, beside the old run's
    # the old run's late part writes nothing, and counts no progress
    before = set((Path(settings.ARTIFACT_ROOT) / f"upload-{new.pk}").rglob("*"))
    progress = Upload.objects.get(pk=new.pk).progress_done
    part(1, old_run)
    assert set((Path(settings.ARTIFACT_ROOT) / f"upload-{new.pk}").rglob("*")) == before
    assert Upload.objects.get(pk=new.pk).progress_done == progress
    # the old merge (its parts incomplete) neither merges nor fails nor finishes the new run
    upload_ingest_merge(upload_id=new.pk, parts=2, run=old_run)
    row = Upload.objects.get(pk=new.pk)
    assert (row.status, row.started_at, row.streams, row.message) == (
        JobStatus.RUNNING, new.started_at, {}, "")  # fmt: skip
    assert row.raw_paths and Path(row.raw_paths[0]).exists()
    assert len(_parts_folders(row)) == 1  # it removed its own run's parts only
    # a part or merge queued before runs were marked cannot say whose it is: nothing
    part(1, "")
    upload_ingest_merge(upload_id=new.pk, parts=2)
    assert Upload.objects.get(pk=new.pk).status == JobStatus.RUNNING
    # the new run's last part and its merge finish the upload, as one pass would
    part(1, new_run)
    upload_ingest_merge(upload_id=new.pk, parts=2, run=new_run)
    done = Upload.objects.get(pk=new.pk)
    assert done.status == JobStatus.DONE, done.message
    assert done.requests == 120 and done.started_at == new.started_at
    assert _parts_folders(done) == []
