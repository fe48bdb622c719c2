"""Upload ingest through Celery: eagerly on the embedded default, on the real worker
(started by .ci/run, with Redis and PostgreSQL) when CELERY_BROKER_URL is set."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import orjson
import pytest
from django.conf import settings
from django.utils import timezone

from analysis import AnalysisParams, BlockStream, IngestOptions, analyze, ingest
from console.models import Analysis, JobStatus, Upload
from console.uploads.services import _parts_for, upload_create
from tests.analysis.factories import as_gateway_csv
from tests.console.waiting import BROKER_MODE, finished, wait_for


def _in_a_month():
    return timezone.localdate() + dt.timedelta(days=30)


pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_ingest_runs_the_task_and_stores_the_engine_report(chat_log):
    upload = upload_create(name="day one", sources=[chat_log])
    done = wait_for(finished(Upload, upload.pk))

    assert done.status == JobStatus.DONE, done.message
    worker_pid = int(done.processed_by.rsplit(":", 1)[1])
    if BROKER_MODE:  # really ran in the worker process, not here
        assert worker_pid != os.getpid()
    else:
        assert worker_pid == os.getpid()
    assert done.requests == 120
    assert done.stage == "done" and done.progress_done == done.progress_total > 0
    # the raw file is deleted after ingest by default
    assert done.raw_paths == []
    assert upload.raw_paths and not any(Path(p).exists() for p in upload.raw_paths)

    stored = Analysis.objects.get(upload=done).report
    assert Analysis.objects.get(upload=done).status == "done"
    direct = analyze(
        ingest([chat_log], IngestOptions(hash_key=settings.KVSCOPE_HASH_KEY)), AnalysisParams()
    ).to_dict()
    for key in (
        "requests",
        "prompt_tokens",
        "block_refs",
        "distinct_blocks",
        "infinite_hit_ratio",
        "recommendation",
        "mrc",
    ):
        assert stored[key] == direct[key], key
    # the block stream artifact re-analyzes to the same numbers without the raw file
    again = analyze(BlockStream.load(done.streams["256"]), AnalysisParams()).to_dict()
    assert again["windows"] == direct["windows"]


def test_a_file_with_no_usable_line_fails_with_the_reason(tmp_path):
    log = tmp_path / "bad.jsonl"
    log.write_text('{"timestamp": 1, "messages": []}\n')
    upload = upload_create(name="bad", sources=[log])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.FAILED
    assert "line 1: OpenAI chat body: no messages" in done.message


def test_kept_raw_file_survives_the_ingest(chat_log):
    upload = upload_create(name="kept", sources=[chat_log], keep_raw_until=_in_a_month())
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.DONE
    assert Path(done.raw_paths[0]).read_bytes() == chat_log.read_bytes()


def test_embedded_default_can_run_the_ingest_in_a_background_thread(chat_log, settings):
    settings.KVSCOPE_EAGER_IN_THREAD = True
    upload = upload_create(name="threaded", sources=[chat_log])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.DONE, done.message
    assert done.requests == 120
    assert Analysis.objects.get(upload=done).report["requests"] == 120


def test_kept_raw_files_are_purged_after_their_date(chat_log):
    from django.core.management import call_command

    upload = upload_create(name="kept", sources=[chat_log], keep_raw_until=_in_a_month())
    done = wait_for(finished(Upload, upload.pk))
    raw = Path(done.raw_paths[0])
    call_command("purge_expired_raw")  # not expired yet: kept
    assert raw.exists()
    Upload.objects.filter(pk=upload.pk).update(keep_raw_until="2020-01-01")
    call_command("purge_expired_raw")
    assert not raw.exists()
    assert Upload.objects.get(pk=upload.pk).raw_paths == []


def test_a_split_ingest_over_a_chord_gives_the_single_pass_report(chat_log):
    upload = upload_create(name="split", sources=[chat_log], parts=3)
    assert upload.ingest_parts == 3
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.DONE, done.message
    assert done.requests == 120
    stored = Analysis.objects.get(upload=done).report
    direct = analyze(
        ingest([chat_log], IngestOptions(hash_key=settings.KVSCOPE_HASH_KEY)), AnalysisParams()
    ).to_dict()
    stored.pop("ingest_stats"), direct.pop("ingest_stats")  # each part tokenizes on its own
    assert stored == direct
    # the parts' own streams are cleaned up once merged
    assert not list(Path(done.streams["256"]).parent.glob("parts*"))


def test_a_gateway_csv_upload_is_read_whole_not_split(chat_log, tmp_path, settings):
    """A CSV row may span lines (a quoted cell holding newlines): never cut into byte
    ranges, even when parts are asked for; the JSONL log of the same requests is split."""
    settings.KVSCOPE_INGEST_PARTS = 3
    settings.KVSCOPE_PARALLEL_MIN_BYTES = 1
    log = as_gateway_csv(chat_log, tmp_path / "gateway.csv")
    jsonl = upload_create(name="jsonl", sources=[chat_log])
    assert jsonl.ingest_parts == 3
    # (waited for: with a real worker, its parts must not outlive the test's database)
    assert wait_for(finished(Upload, jsonl.pk)).status == JobStatus.DONE
    for upload in (upload_create(name="csv", sources=[log]),
                   upload_create(name="csv, 3 parts asked", sources=[log], parts=3)):  # fmt: skip
        assert upload.ingest_parts == 1
        done = wait_for(finished(Upload, upload.pk))
        assert done.status == JobStatus.DONE, done.message
        assert done.requests == 120 and done.skipped_lines == 0
        assert done.progress_done == done.progress_total > 0  # bytes read, all of them


def _mixed_log(path: Path, bad: int) -> Path:
    good = [
        orjson.dumps({"id": f"r{i}", "timestamp": 1_700_000_000 + i,
                      "messages": [{"role": "user", "content": f"question {i}"}]})
        for i in range(3)
    ]  # fmt: skip
    path.write_bytes(b"\n".join([good[0], *[b"{broken"] * bad, *good[1:], good[1]]) + b"\n")
    return path


def test_bad_lines_leave_a_partial_upload_that_names_them(tmp_path):
    upload = upload_create(name="mixed", sources=[_mixed_log(tmp_path / "mixed.jsonl", 2)])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.PARTIAL and done.requests == 3 and done.skipped_lines == 3
    assert [(e["line"], e["reason"][:40]) for e in done.errors] == [
        (2, "not valid JSON (unexpected character, ex"),
        (3, "not valid JSON (unexpected character, ex"),
        (6, "request id 'r1' was already used by an e"),
    ]
    assert Analysis.objects.get(upload=done).report["requests"] == 3


def test_past_the_error_budget_the_upload_fails_and_says_so(tmp_path):
    budget = settings.KVSCOPE_MAX_BAD_LINES  # the worker's own default: 10,000
    log = _mixed_log(tmp_path / "mostly-bad.jsonl", budget + 1)
    upload = upload_create(name="mostly bad", sources=[log])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.FAILED
    expected = (f"stopped after {budget + 1:,} bad lines, past the budget of {budget:,} "
                f"(the last: line {budget + 2}: not valid JSON")  # fmt: skip
    assert done.message.startswith(expected)
    assert not Analysis.objects.filter(upload=done).exists()


def test_parts_are_never_under_half_the_split_threshold(chat_log, settings):
    # as manage.py analyze splits: a 64-core web host must not cut a log just over the
    # threshold into 64 slivers, each paying a task's start-up and a merge
    size = chat_log.stat().st_size
    settings.KVSCOPE_INGEST_PARTS = 64
    settings.KVSCOPE_PARALLEL_MIN_BYTES = size
    assert _parts_for([chat_log], "auto", None) == 2
    settings.KVSCOPE_PARALLEL_MIN_BYTES = size // 4
    assert _parts_for([chat_log], "auto", None) == size // (size // 8)
    settings.KVSCOPE_PARALLEL_MIN_BYTES = size + 1
    assert _parts_for([chat_log], "auto", None) == 1
    assert _parts_for([chat_log], "auto", 5) == 5  # asked for: as asked
