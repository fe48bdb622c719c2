"""Settings read the environment in one place and fail loudly on bad values."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool, env_int


def test_bad_boolean_and_integer_values_are_refused(monkeypatch):
    monkeypatch.setenv("KV_TEST_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="KV_TEST_FLAG='maybe'"):
        env_bool("KV_TEST_FLAG", False)
    monkeypatch.setenv("KV_TEST_FLAG", "off")
    assert env_bool("KV_TEST_FLAG", True) is False
    monkeypatch.setenv("KV_TEST_INT", "12x")
    with pytest.raises(ImproperlyConfigured, match="expected an integer"):
        env_int("KV_TEST_INT", 3)
    monkeypatch.setenv("KV_TEST_INT", "-1")
    with pytest.raises(ImproperlyConfigured, match="at least 0"):
        env_int("KV_TEST_INT", 3, minimum=0)


def _settings_process(**env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY")
    }
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**clean, "DJANGO_SETTINGS_MODULE": "console.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_without_a_secret_key_refuses_to_start():
    result = _settings_process(DJANGO_DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_a_malformed_database_url_refuses_to_start():
    result = _settings_process(DATABASE_URL="nosuchdb://x")
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_production_settings_pass_the_deploy_checks():
    """DEBUG off and a secret from the environment: HTTPS-only cookies, HSTS, secure
    headers; `check --deploy` has nothing to say, not even a warning."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "SECRET_KEY")}
    secret = "s" * 10 + os.urandom(24).hex()  # 58 characters, many distinct
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={**clean, "DJANGO_DEBUG": "0", "SECRET_KEY": secret},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues (0 silenced)." in result.stdout
    # and plain HTTP must be asked for explicitly: then the checks say what is missing
    plain = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={**clean, "DJANGO_DEBUG": "0", "SECRET_KEY": secret, "KVSCOPE_HTTPS": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode != 0 and "SESSION_COOKIE_SECURE" in plain.stderr + plain.stdout


def _parts_setting(**env: str) -> int:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("CELERY_BROKER_URL", "KVSCOPE_INGEST_PARTS")}  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c",
         "from django.conf import settings; print(settings.KVSCOPE_INGEST_PARTS)"],
        env={**clean, "DJANGO_SETTINGS_MODULE": "console.settings", **env},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return int(result.stdout)


def test_a_big_log_is_split_over_the_cores_when_real_workers_take_the_parts():
    # with a broker, one part per core this process may use (a worker runs as many at once);
    # run eagerly there is no one to run them side by side: one part
    cores = len(os.sched_getaffinity(0))
    assert _parts_setting(CELERY_BROKER_URL="redis://127.0.0.1:6379/15") == cores
    assert _parts_setting() == 1
    assert _parts_setting(CELERY_BROKER_URL="redis://127.0.0.1:6379/15",
                          KVSCOPE_INGEST_PARTS="3") == 3  # fmt: skip


# Two requests through the WSGI application, as gunicorn serves them: the connections
# opened for them (one when the first request's connection is kept for the second).
_TWO_REQUESTS = """
import io, sys
if sys.argv[1] == "web":
    import console.wsgi
    application = console.wsgi.application
else:
    import django
    from django.core.handlers.wsgi import WSGIHandler
    django.setup()
    application = WSGIHandler()
from django.conf import settings
from django.db.backends.signals import connection_created
opened = []
connection_created.connect(lambda sender, connection, **kw: opened.append(connection))
for _ in range(2):
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "SERVER_NAME": "127.0.0.1",
               "SERVER_PORT": "80", "wsgi.input": io.BytesIO(), "wsgi.url_scheme": "http",
               "HTTP_HOST": "127.0.0.1"}
    response = application(environ, lambda status, headers: None)
    body = b"".join(response)
    response.close()  # as a WSGI server does: the request has finished
    assert body == b"ok", body
print(settings.DATABASES["default"]["CONN_MAX_AGE"], len(opened))
"""


@pytest.mark.parametrize(
    ("process", "env", "kept"),
    [
        ("web", {}, 60),
        ("web", {"KVSCOPE_WEB_CONN_MAX_AGE": "0"}, 0),
        ("other", {}, 0),  # a worker, a command, a test
        ("other", {"DATABASE_CONN_MAX_AGE": "30"}, 30),
    ],
)
def test_the_web_keeps_its_database_connection_between_requests(tmp_path, process, env, kept):
    ours = ("DATABASE_URL", "DATABASE_CONN_MAX_AGE", "KVSCOPE_WEB_PROCESS",
            "KVSCOPE_WEB_CONN_MAX_AGE", "KVSCOPE_DATA_DIR")  # fmt: skip
    clean = {k: v for k, v in os.environ.items() if k not in ours}
    result = subprocess.run(
        [sys.executable, "-c", _TWO_REQUESTS, process],
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "KVSCOPE_DATA_DIR": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    age, opened = map(int, result.stdout.split())
    assert age == kept
    # kept: the second request used the connection the first one opened
    assert opened == (1 if kept else 2)
