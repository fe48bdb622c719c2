"""Fixtures for the console's tests (pytest-django).

On the embedded default Celery runs tasks eagerly in this process. When CELERY_BROKER_URL
is set (the second run of .ci/run), tasks go through the broker to the real worker that
.ci/run started, which shares KVSCOPE_DATA_DIR and the test database with this process.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings

from bench.generate import chat_requests, write_jsonl

BROKER_MODE = not settings.CELERY_TASK_ALWAYS_EAGER


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


@pytest.fixture
def chat_log(tmp_path) -> Path:
    """A small generated chat log (120 requests, 3 tenants)."""
    path = tmp_path / "chat.jsonl"
    write_jsonl(chat_requests(120, seed=3, documents=8, doc_words=(300, 700)), path)
    return path


def wait_for(predicate, timeout: float = 120.0, interval: float = 0.2):
    """Poll until predicate() returns a truthy value (a task on a real worker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {predicate.__doc__ or predicate}")


PASSWORD = "correct-horse-battery-staple"


def _user(username: str, *roles: str):
    from django.contrib.auth.models import Group, User

    from console.roles import ensure_roles

    ensure_roles()  # transactional tests flush the groups the migration made
    user = User.objects.create_user(username, password=PASSWORD)
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def analyst(db):
    return _user("ana", "analyst")


@pytest.fixture
def auditor(db):
    return _user("aud", "auditor")


@pytest.fixture
def approver(db):
    return _user("appr", "approver")


@pytest.fixture
def no_role(db):
    return _user("nobody")
