"""What every response carries (Content-Security-Policy), how plotly.js is served (gzip,
cached for good under a versioned name) in development and in production's shape, and
what a refused page logs. Through Django's test client and the real middleware."""

from __future__ import annotations

import gzip
import io
import json
import logging
import re
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from console.middleware import CONTENT_SECURITY_POLICY
from console.staticfinders import SOURCE, STATIC_PATH
from console.templatetags.kvscope import figure_script
from tests.console.factories import PASSWORD

pytestmark = pytest.mark.django_db
PLOTLY = SOURCE  # the bundle served (plotly.js's cartesian bundle)
A_YEAR = 365 * 86400


def _max_age(response) -> int:
    match = re.search(r"max-age=(\d+)", response["Cache-Control"])
    assert match, response["Cache-Control"]
    return int(match[1])


def _body(response) -> bytes:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    response.close()  # whitenoise streams the file: let it go
    return body


# --- Content-Security-Policy ---------------------------------------------------------------


def test_every_kind_of_response_carries_the_policy(client, analyst):
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY.split("script-src")[1].split(";")[0]
    anonymous = [
        client.get(reverse("login")),  # a page
        client.get(reverse("healthz")),  # plain text
        client.get(reverse("home")),  # a redirect to sign in
        client.get("/static/js/charts.js"),  # a static file (whitenoise)
        client.get("/static/no-such-file.js"),  # a 404
    ]
    assert client.login(username=analyst.username, password=PASSWORD)
    signed_in = [client.get(reverse("home")), client.get(reverse("evidence_list"))]
    for response in anonymous + signed_in:
        assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, response
        response.close()


def test_no_template_has_inline_script():
    """Every template, also of pages the test below does not visit (policy versions,
    sign-off sheets): scripts come from static files only."""
    templates = sorted((settings.BASE_DIR / "templates").rglob("*.html"))
    assert len(templates) > 20
    for path in templates:
        html = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag, (path.name, tag)
        assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), path.name
        assert "javascript:" not in html, path.name


def test_pages_run_no_inline_script(client, analyst):
    """What the policy would block: <script> without src (json_script blocks are data,
    not run) and on*= attributes."""
    assert client.login(username=analyst.username, password=PASSWORD)
    pages = [reverse(name) for name in ("home", "upload_new", "evidence_list", "policy_list",
                                        "policy_new", "audit_log")]  # fmt: skip
    for url in pages:
        html = client.get(url).content.decode()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag or 'type="application/json"' in tag, (url, tag)
        assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), url


# --- plotly.js: compressed, versioned, cached -------------------------------------------


def test_plotly_is_served_gzipped_and_immutable_in_development(client):
    # the embedded default (DEBUG, runserver): whitenoise finds files through the finders
    url = f"/static/{STATIC_PATH}"
    packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert packed.status_code == 200
    assert packed["Content-Encoding"] == "gzip"
    assert "immutable" in packed["Cache-Control"] and _max_age(packed) >= A_YEAR
    assert "Accept-Encoding" in packed["Vary"]
    body = _body(packed)
    assert len(body) < PLOTLY.stat().st_size / 2  # 1.5 MB -> 0.5 MB
    assert gzip.decompress(body) == PLOTLY.read_bytes()
    # a client that takes no gzip gets the file itself
    plain = client.get(url)
    assert "Content-Encoding" not in plain and _body(plain) == PLOTLY.read_bytes()
    # the console's own small files keep a short cache (their names are not versioned)
    own = client.get("/static/js/charts.js")
    assert own.status_code == 200 and "immutable" not in own["Cache-Control"]
    own.close()


def test_plotly_is_served_gzipped_and_immutable_in_production(settings, tmp_path):
    """DEBUG=0 under gunicorn: collectstatic (hashed and gzipped by whitenoise's manifest
    storage) and whitenoise serving STATIC_ROOT, nothing through the finders."""
    settings.STATIC_ROOT = tmp_path / "staticfiles"
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    settings.WHITENOISE_USE_FINDERS = False
    settings.WHITENOISE_AUTOREFRESH = False
    call_command("collectstatic", interactive=False, verbosity=0)
    from django.templatetags.static import static

    url = static(STATIC_PATH)
    assert re.search(r"/vendor/plotly/plotly-[^/]+\.min\.[0-9a-f]{12}\.js$", url), url
    client = Client()  # a new handler: the middleware reads the settings above
    packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert packed.status_code == 200 and packed["Content-Encoding"] == "gzip"
    assert "immutable" in packed["Cache-Control"] and _max_age(packed) >= A_YEAR
    assert gzip.decompress(_body(packed)) == PLOTLY.read_bytes()
    assert packed["Content-Security-Policy"] == CONTENT_SECURITY_POLICY


# --- what a 403 logs ----------------------------------------------------------------------


@pytest.fixture
def log_output():
    """Everything the configured handlers print for django.request, as they print it: each
    stream handler on the way to the root writes to one buffer."""
    buffer = io.StringIO()
    handlers, logger = [], logging.getLogger("django.request")
    while logger is not None:
        # the configured console handlers (not pytest's capturing subclasses)
        handlers += [h for h in logger.handlers if type(h) is logging.StreamHandler]
        logger = logger.parent if logger.propagate else None
    previous = [h.setStream(buffer) for h in handlers]
    yield buffer
    for handler, stream in zip(handlers, previous, strict=True):
        handler.setStream(stream)


@pytest.mark.parametrize("debug", [True, False])
def test_a_refused_page_logs_one_line_without_a_traceback(
    client, no_role, settings, caplog, log_output, debug
):
    settings.DEBUG = debug  # Django's own console handler printed a second copy with DEBUG
    assert client.login(username=no_role.username, password=PASSWORD)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(reverse("home"))
    assert response.status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1 and records[0].exc_info is None
    assert records[0].getMessage() == "Forbidden (Permission denied): /"
    printed = log_output.getvalue()
    assert printed == "Forbidden (Permission denied): /\n", printed
    assert "Traceback" not in printed


def test_a_fault_keeps_its_traceback(rf, log_output):
    # anything but a refusal is still logged whole
    from django.utils.log import log_response

    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        response = type("R", (), {"status_code": 500})()
        log_response("Internal Server Error: %s", "/x", response=response, request=rf.get("/x"),
                     exception=exc)  # fmt: skip
    assert "Traceback" in log_output.getvalue() and "RuntimeError: boom" in log_output.getvalue()


# --- Server-Timing ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_every_response_says_the_time_the_console_spent(client, analysis):
    assert client.login(username=analysis.upload.created_by.username, password=PASSWORD)
    for url in (reverse("login"), "/static/js/charts.js", "/static/no-such-file.js",
                reverse("analysis_detail", args=[analysis.pk])):  # fmt: skip
        start = time.perf_counter()
        response = client.get(url)
        elapsed_ms = (time.perf_counter() - start) * 1000
        spent = re.fullmatch(r"app;dur=([0-9]+\.[0-9])", response["Server-Timing"])
        assert spent, response["Server-Timing"]
        assert 0 <= float(spent.group(1)) <= elapsed_ms + 0.1, url  # within what the client saw
        response.close()
    assert float(spent.group(1)) > 0  # the analysis page (last) takes measurable time


def test_a_figure_cannot_close_its_script_element():
    figure = {"layout": {"title": {"text": "</script><b onclick=x>&amp;"}}, "data": [1.5]}
    html = str(figure_script(figure, "fig-x"))
    body = re.fullmatch(r'<script id="fig-x" type="application/json">(.*)</script>', html)
    assert body and "<" not in body.group(1) and "&" not in body.group(1)
    assert json.loads(body.group(1)) == figure  # the same data, as json_script's would parse
