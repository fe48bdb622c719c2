"""The upload's messages name the files as the user uploaded them, never the generated
names they are stored under (issue #12)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from console.models import JobStatus, Upload
from console.uploads.services import upload_create
from tests.console.waiting import finished, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _write(path: Path, rows: list) -> Path:
    path.write_bytes(b"".join((r if isinstance(r, bytes) else orjson.dumps(r)) + b"\n"
                              for r in rows))  # fmt: skip
    return path


def _chat(i: int) -> dict:
    return {"id": f"r{i}", "timestamp": 1_700_000_000 + i,
            "messages": [{"role": "user", "content": f"question {i}"}]}  # fmt: skip


def test_errors_and_failures_name_the_files_as_uploaded(tmp_path):
    monday = _write(tmp_path / "monday.jsonl", [_chat(1), b"{oops", _chat(2)])
    tuesday = _write(tmp_path / "tuesday.jsonl", [_chat(3), b"[1]"])
    upload = upload_create(name="two days", sources=[monday, tuesday])
    stored = [Path(p).name for p in upload.raw_paths]
    assert stored != ["monday.jsonl", "tuesday.jsonl"]  # generated names on disk
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.PARTIAL and done.requests == 3
    assert [(e["file"], e["line"]) for e in done.errors] == [("monday.jsonl", 2),
                                                             ("tuesday.jsonl", 2)]  # fmt: skip

    row = {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [7]}
    trace = _write(tmp_path / "mooncake.jsonl", [row])
    upload = upload_create(name="mixed kinds", sources=[monday, trace])
    stored = [Path(p).name for p in upload.raw_paths]
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.FAILED
    assert done.message == (
        "the files are in different formats: monday.jsonl is a chat log, mooncake.jsonl is a "
        "pre-hashed (Mooncake) trace; upload each kind on its own"
    )
    assert not any(name in done.message for name in stored)


def test_past_the_blank_line_budget_the_upload_fails_naming_the_file(tmp_path, settings):
    settings.KVSCOPE_MAX_BLANK_LINES = 5  # (a real worker keeps its own: 1,000,000)
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        pytest.skip("the setting is read in the worker process")
    log = tmp_path / "gaps.jsonl"
    log.write_bytes(orjson.dumps(_chat(1)) + b"\n" * 8 + orjson.dumps(_chat(2)) + b"\n")
    upload = upload_create(name="gaps", sources=[log])
    done = wait_for(finished(Upload, upload.pk))
    assert done.status == JobStatus.FAILED
    assert done.message == (
        "gaps.jsonl: stopped at line 8: 7 blank (whitespace-only) lines against 1 with "
        "content, past the budget of 5 more blank lines than lines with content; is this a "
        "log?"
    )
