"""A web process killed mid-upload: its temporary file (the upload so far) is in kvscope's
own temp folder, not the system one, and it is removed at the next web start; the purge
command also removes half-stored .part files and raw files no upload refers to, and keeps
the raw files uploads do refer to.

A real `runserver` is SIGKILLed while a request body streams in; the other leftovers are
made as `_store_raw` names them (a crash between its steps is too narrow to hit)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench.generate import chat_requests, write_jsonl
from tests.console.waiting import BROKER_MODE, wait_for

pytestmark = pytest.mark.skipif(
    BROKER_MODE, reason="self-contained: its own web process and SQLite database"
)
ROOT = Path(__file__).resolve().parents[3]
SENTENCE = "Marmalade zeppelins whisper quarterly audit secrets to the lighthouse keeper"
ORPHAN_SECONDS = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    return env | {"KVSCOPE_DATA_DIR": str(data), "DJANGO_DEBUG": "1",
                  "KVSCOPE_HASH_KEY": "leftovers-test-key-0123456789",
                  "KVSCOPE_ORPHAN_SECONDS": str(ORPHAN_SECONDS),
                  "KVSCOPE_EAGER_IN_THREAD": "0"}  # fmt: skip


def _run(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _csrf_cookie(port: int) -> str:
    """The CSRF cookie the login page sets (the middleware reads the body only with one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /accounts/login/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    match = re.search(rb"csrftoken=([A-Za-z0-9]+)", answer)
    assert match, answer[:500]
    return match.group(1).decode()


def _start_streaming_an_upload(port: int, csrf: str) -> socket.socket:
    """Send the headers of a 64 MiB upload and its first 4 MiB, then stop (the socket is
    kept open: the server waits for the rest)."""
    boundary = "kvscopeboundary"
    line = json.dumps({"timestamp": 1_700_000_000, "messages": [
        {"role": "user", "content": SENTENCE}]}).encode() + b"\n"  # fmt: skip
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
            'filename="day.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()  # fmt: skip
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        (f"POST /uploads/new/ HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: csrftoken={csrf}\r\n"
         f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
         f"Content-Length: {64 * 1024**2}\r\n\r\n").encode() + head
    )  # fmt: skip
    sent = 0
    while sent < 4 * 1024**2:
        sock.sendall(line * 512)
        sent += len(line) * 512
    return sock


def _files_with(data: Path, text: str) -> list[Path]:
    needle = text.encode()
    return [p for p in data.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _age(*paths: Path) -> None:
    """As old as the leftovers of a crash a while ago (past KVSCOPE_ORPHAN_SECONDS)."""
    then = time.time() - 2 * ORPHAN_SECONDS
    for path in paths:
        os.utime(path, (then, then))


def test_a_web_process_killed_mid_upload_leaves_nothing_after_start_up_and_purge(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    env = _env(data)
    _run(env, "manage.py", "migrate", "-v0")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: _listening(port), timeout=60)
        upload_request = _start_streaming_an_upload(port, _csrf_cookie(port))
        temp = data / "tmp"

        def streamed():
            """the upload body to be streaming into a temporary file"""
            files = list(temp.glob("tmp*.upload*"))
            return files if files and files[0].stat().st_size >= 2 * 1024**2 else None

        (temp_file,) = wait_for(streamed, timeout=60)
        os.kill(server.pid, signal.SIGKILL)  # mid-body
        server.wait(10)
        upload_request.close()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
    # what the crash left: the upload so far, in kvscope's temp folder (not the system's)
    assert _files_with(data, SENTENCE) == [temp_file]
    # what other crashes leave (named as _store_raw names them), and an upload's kept file
    raw = data / "media" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    half_stored = raw / f"{uuid.uuid4().hex}.part"
    half_stored.write_text(f"{SENTENCE}\n")
    unreferenced = raw / f"{uuid.uuid4().hex}.log"  # stored, the row never written
    unreferenced.write_text(f"{SENTENCE}\n")
    kept_log = tmp_path / "kept.jsonl"
    write_jsonl(chat_requests(20, seed=2), kept_log)
    kept_until = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    kept = Path(_run(env, "manage.py", "shell", "-c", (
        "import datetime as dt; from pathlib import Path; "
        "from console.uploads.services import upload_create; "
        f"u = upload_create(name='kept', sources=[Path('{kept_log}')], "
        f"keep_raw_until=dt.date.fromisoformat('{kept_until}')); print(u.raw_paths[0])"
    )).strip().splitlines()[-1])  # fmt: skip
    assert kept.exists()
    _age(temp_file, half_stored, unreferenced, kept)
    under_way = temp / "tmpfresh.upload.jsonl"  # a request streaming right now: too young
    under_way.write_text("streaming")
    # the web starts again (gunicorn and runserver load console.wsgi)
    _run(env, "-c", "import console.wsgi")
    assert not temp_file.exists() and not half_stored.exists()
    assert unreferenced.exists() and under_way.exists() and kept.exists()
    # the purge command (cron, or celery beat's task) also removes unreferenced raw files
    out = _run(env, "manage.py", "purge_expired_raw")
    assert "deleted 1 file(s) left by interrupted uploads" in out
    assert not unreferenced.exists()
    assert kept.exists() and under_way.exists()
    assert _files_with(data, SENTENCE) == []


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True
