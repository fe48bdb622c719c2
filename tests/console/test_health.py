"""/healthz fails when the database cannot be reached (a real unreachable server: a
PostgreSQL URL at a port nothing listens on), and answers ok when it can."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the console in a process of its own, asked for /healthz through Django's test client
_ASK = """
import json
import django
django.setup()
from django.test import Client
response = Client(HTTP_HOST="127.0.0.1").get("/healthz")
print(json.dumps([response.status_code, response.content.decode()]))
"""


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthz(tmp_path: Path, database_url: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CELERY_BROKER_URL"}
    env |= {"DJANGO_SETTINGS_MODULE": "console.settings", "DATABASE_URL": database_url,
            "KVSCOPE_DATA_DIR": str(tmp_path), "DJANGO_DEBUG": "1"}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", _ASK], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    status, body = json.loads(result.stdout.strip().splitlines()[-1])
    return status, body


def test_healthz_fails_when_the_database_is_unreachable(tmp_path):
    status, body = _healthz(tmp_path, f"postgres://kvscope@127.0.0.1:{_closed_port()}/kvscope")
    assert status == 503
    assert body.startswith("database unreachable: OperationalError")


def test_healthz_is_ok_when_the_database_answers(tmp_path):
    assert _healthz(tmp_path, f"sqlite:///{tmp_path / 'db.sqlite3'}") == (200, "ok")
