"""Privacy by default: no prompt text anywhere in the database or in stored files."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.db import connection

from console.models import JobStatus, Upload
from console.uploads.services import upload_create
from tests.console.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

SENTENCE = "Marmalade zeppelins whisper quarterly audit secrets to the lighthouse keeper"


def _log_with_sentence(path: Path) -> Path:
    rows = [
        {
            "timestamp": 1_700_000_000 + i * 30,
            "metadata": {"tenant": "acme"},
            "messages": [
                {"role": "system", "content": "You are helpful. " * 80},
                {"role": "user", "content": f"{SENTENCE} (ticket {i % 2})"},
            ],
        }
        for i in range(6)
    ]
    with gzip.open(path, "wb") as fh:
        fh.writelines(orjson.dumps(r) + b"\n" for r in rows)
    return path


def _database_text() -> str:
    parts = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            parts.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(parts)


def _stored_files_text(folders: list[Path]) -> str:
    """Every stored file's content; Parquet decoded (it is compressed on disk)."""
    parts = []
    for folder in folders:
        for path in Path(folder).rglob("*"):
            if not path.is_file():
                continue
            if path.suffix == ".parquet":
                parts.append(repr(pq.read_table(path).to_pylist()))
            else:
                data = path.read_bytes()
                if data[:2] == b"\x1f\x8b":
                    data = gzip.decompress(data)
                parts.append(data.decode("utf-8", "replace"))
    return "\n".join(parts)


def _ingest(tmp_path: Path, previews: bool) -> Upload:
    log = _log_with_sentence(tmp_path / "private.jsonl.gz")
    upload = upload_create(name="private", sources=[log], previews=previews)

    def finished():
        """the ingest to finish"""
        u = Upload.objects.get(pk=upload.pk)
        return u if u.status in ("done", "partial", "failed") else None

    return wait_for(finished)


def test_a_sentence_from_the_log_is_stored_nowhere(tmp_path):
    done = _ingest(tmp_path, previews=False)
    assert done.status == JobStatus.DONE, done.message
    assert SENTENCE not in _database_text()
    stored = _stored_files_text([Path(settings.MEDIA_ROOT), Path(settings.ARTIFACT_ROOT)])
    assert SENTENCE not in stored
    assert "marmalade" not in stored.lower()


def test_with_previews_on_the_same_search_finds_it(tmp_path):
    # proves the search above can see text when it is there
    done = _ingest(tmp_path, previews=True)
    assert done.status == JobStatus.DONE, done.message
    found = SENTENCE in _database_text() or SENTENCE in _stored_files_text(
        [Path(settings.ARTIFACT_ROOT)]
    )
    assert found
