"""What the benchmarks that run the console itself (`workers`, `load`, `pageload`) share: its
environment, a fresh PostgreSQL database, the Redis broker, waiting for HTTP, and a Django
shell."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from pathlib import Path

import psycopg

from bench.harness import MANAGE

PG = os.environ.get("KVSCOPE_BENCH_PG", "postgres://postgres@127.0.0.1:5432")


def broker_url(db: int) -> str:
    """The Redis broker: KVSCOPE_BENCH_BROKER, or the machine's Redis on database `db` (each
    benchmark its own, so their queues never mix)."""
    return os.environ.get("KVSCOPE_BENCH_BROKER", f"redis://127.0.0.1:6379/{db}")


def console_env(
    *, database_url: str, data_dir: Path, hash_key: str, broker: str | None = None
) -> dict[str, str]:
    """The variables the console's settings read, for a server or worker a benchmark runs."""
    env = {
        "DATABASE_URL": database_url,
        "KVSCOPE_DATA_DIR": str(data_dir),
        "KVSCOPE_HASH_KEY": hash_key,
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    if broker is not None:
        env["CELERY_BROKER_URL"] = broker
    return env


def fresh_database(name: str) -> str:
    """Drops and creates PostgreSQL database `name`; returns its URL."""
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{PG}/{name}"


def wait_http(url: str) -> None:
    """Returns once `url` answers (up to a minute), or exits."""
    for _ in range(120):
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer")


def django_shell(env: dict[str, str], code: str) -> str:
    """Runs `code` in `manage.py shell` under `env`; returns what it printed."""
    return subprocess.run([*MANAGE, "shell", "-c", code], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
