"""Fixtures for the console's tests (pytest-django).

On the embedded default Celery runs tasks eagerly in this process. When CELERY_BROKER_URL
is set (the second run of .ci/run), tasks go through the broker to the real worker that
.ci/run started, which shares KVSCOPE_DATA_DIR and the test database with this process.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.generate import chat_requests, write_jsonl
from console.uploads.services import upload_create
from tests.console.factories import default_analysis, make_user
from tests.console.waiting import BROKER_MODE, until_worker_idle

# How long a transactional test's teardown waits for the real worker's jobs to end
WORKER_IDLE_TIMEOUT_S = 30.0


@pytest.fixture(autouse=True)
def data_dirs(settings, tmp_path):
    """Private media/artifact folders per test, except with a real worker, which only
    sees the folder it was started with."""
    if not BROKER_MODE:
        settings.MEDIA_ROOT = tmp_path / "media"
        settings.ARTIFACT_ROOT = tmp_path / "artifacts"
    # tasks run inside the request/test unless a test asks for the background thread
    settings.KVSCOPE_EAGER_IN_THREAD = False
    return Path(settings.MEDIA_ROOT), Path(settings.ARTIFACT_ROOT)


@pytest.fixture(autouse=True)
def worker_idle_before_flush(request):
    """On a real worker, a transactional test's teardown waits for the jobs it queued to
    end before pytest-django's flush TRUNCATEs every table. A job still writing would
    otherwise deadlock with the TRUNCATE (seen in CI), or land its late writes and audit
    events in the next test. Set up after the database fixture, so torn down before it."""
    transactional = BROKER_MODE and _is_transactional(request)
    if transactional:
        request.getfixturevalue("_django_db_helper")
    yield
    if transactional and not until_worker_idle(WORKER_IDLE_TIMEOUT_S):
        # (said, not warned: warnings are errors in this suite, and the flush copes)
        print(f"\n{request.node.nodeid}: the worker's jobs still run after "
              f"{WORKER_IDLE_TIMEOUT_S:.0f} s; flushing anyway", file=sys.__stderr__)  # fmt: skip


def _is_transactional(request) -> bool:
    """The test commits (only then can a job reach the worker): as pytest-django decides."""
    marker = request.node.get_closest_marker("django_db")
    fixtures = request.fixturenames
    return bool(marker and marker.kwargs.get("transaction")) or any(
        name in fixtures for name in ("transactional_db", "live_server")
    )


@pytest.fixture
def chat_log(tmp_path) -> Path:
    """A small generated chat log (120 requests, 3 tenants)."""
    path = tmp_path / "chat.jsonl"
    write_jsonl(chat_requests(120, seed=3, documents=8, doc_words=(300, 700)), path)
    return path


@pytest.fixture
def analysis(chat_log, analyst):
    """A finished default analysis of the chat log, uploaded by the analyst."""
    upload = upload_create(name="day", sources=[chat_log], user=analyst)
    return default_analysis(upload)


@pytest.fixture
def analyst(db):
    return make_user("ana", "analyst")


@pytest.fixture
def auditor(db):
    return make_user("aud", "auditor")


@pytest.fixture
def approver(db):
    return make_user("appr", "approver")


@pytest.fixture
def no_role(db):
    return make_user("nobody")
