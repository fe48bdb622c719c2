"""Pages do no engine work per view: stored figures are redrawn once when the charts have
changed, the replay page loads its block stream once per choice, the comparison draws its
figure once per set of analyses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.cache import caches
from django.urls import reverse

from analysis import BlockStream, analyze
from console.engine import analysis_params
from console.models import Analysis, Upload
from console.uploads import figures, selectors
from console.uploads.charts import CHARTS_VERSION
from tests.console.factories import PASSWORD, make_user
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def empty_cache():
    for each in caches.all():  # another test's cached pages must not answer for this one
        each.clear()


@pytest.fixture
def done_upload(client, analyst, chat_log) -> Upload:
    assert client.login(username=analyst.username, password=PASSWORD)
    with open(chat_log, "rb") as fh:
        form = {"name": "monday", "files": [fh], "format": "auto", "block_sizes": ["256", "64"]}
        client.post(reverse("upload_new"), {**form, "retention": "delete"})
    upload = Upload.objects.get()

    def finished():
        """the upload's ingest to finish"""
        upload.refresh_from_db()
        return upload if upload.finished else None

    return wait_for(finished)


@pytest.fixture
def rescoped(done_upload) -> Analysis:
    """A second finished analysis of the upload: scope user, headroom 50 %."""
    first = Analysis.objects.get(upload=done_upload)
    stream = BlockStream.load(done_upload.streams[str(first.block_tokens)])
    params = dict(first.params, scope="user", headroom=0.5)
    return Analysis.objects.create(
        upload=done_upload, block_tokens=first.block_tokens, params=params, status="done",
        report=analyze(stream, analysis_params(**params)).to_dict())  # fmt: skip


def _counting(monkeypatch, module, name: str) -> list:
    """Count the calls of module.name (still calling it)."""
    calls: list = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _page_figure(page: str, script_id: str) -> dict:
    found = re.search(rf'<script id="{script_id}" type="application/json">(.*?)</script>', page)
    assert found, script_id
    return json.loads(found.group(1))


@pytest.mark.parametrize("stored", ["older", "none"])
def test_older_or_missing_figures_are_redrawn_once_when_the_page_opens(
    client, done_upload, monkeypatch, stored
):
    analysis = Analysis.objects.get(upload=done_upload)
    older = [[name, {**figure, figures.VERSION_KEY: CHARTS_VERSION - 1}]
             for name, figure in figures.draw(analysis.report)]  # fmt: skip
    Analysis.objects.filter(pk=analysis.pk).update(figures=older if stored == "older" else None)
    drawn = _counting(monkeypatch, figures, "report_figures")
    url = reverse("analysis_detail", args=[analysis.pk])

    first = client.get(url).content.decode()
    assert len(drawn) == 1
    saved = Analysis.objects.get(pk=analysis.pk).figures
    assert figures.is_current(saved)
    assert [name for name, _ in saved] == [name for name, _ in older]
    second = client.get(url).content.decode()
    assert len(drawn) == 1  # the second view reads what the first one saved

    for page in (first, second):
        for name, figure in saved:
            shown = _page_figure(page, f"fig-{name}")
            assert figures.VERSION_KEY not in shown  # the page sends the figure alone
            assert shown == {k: v for k, v in figure.items() if k != figures.VERSION_KEY}


def test_current_figures_are_read_not_drawn(client, done_upload, monkeypatch):
    analysis = Analysis.objects.get(upload=done_upload)
    Analysis.objects.filter(pk=analysis.pk).update(figures=figures.draw(analysis.report))
    drawn = _counting(monkeypatch, figures, "report_figures")
    assert client.get(reverse("analysis_detail", args=[analysis.pk])).status_code == 200
    assert drawn == []


def test_the_replay_page_loads_its_stream_once_per_choice(client, done_upload, monkeypatch):
    loads = _counting(monkeypatch, selectors.BlockStream, "load")
    url = reverse("upload_replay", args=[done_upload.pk])
    first = client.get(url).content.decode()
    assert len(loads) == 1 and "120</strong> requests" in first
    # the stream gone: the page still answers from what it computed
    for folder in done_upload.streams.values():
        for path in Path(folder).iterdir():
            path.rename(path.with_suffix(path.suffix + ".moved"))
    again = client.get(url).content.decode()
    assert len(loads) == 1 and "120</strong> requests" in again
    for folder in done_upload.streams.values():
        for path in Path(folder).iterdir():
            path.rename(path.with_suffix(""))
    # another choice is another summary (computed once too)
    later = {"block_tokens": "64", "start_s": "1", "time_scale": "1"}
    client.get(url, later)
    client.get(url, later)
    assert len(loads) == 2


def test_the_comparison_draws_its_figure_once(client, done_upload, monkeypatch):
    first = Analysis.objects.get(upload=done_upload)
    stream = BlockStream.load(done_upload.streams[str(first.block_tokens)])
    params = dict(first.params, tp=2, headroom=0.5)
    second = Analysis.objects.create(
        upload=done_upload, block_tokens=first.block_tokens, params=params, status="done",
        report=analyze(stream, analysis_params(**params)).to_dict())  # fmt: skip
    expected = selectors.compare_figure(
        [(f"#{a.pk} {a.summary}", a.report) for a in (first, second)]
    )
    drawn = _counting(monkeypatch, selectors, "compare_figure")
    pages = [client.get(reverse("compare"), {"a": [first.pk, second.pk]}) for _ in range(2)]
    assert len(drawn) == 1
    for page in pages:
        assert _page_figure(page.content.decode(), "fig-compare") == json.loads(
            json.dumps(expected)
        )
    # the other order is another figure (its first curve is the other analysis)
    client.get(reverse("compare"), {"a": [second.pk, first.pk]})
    assert len(drawn) == 2


def _field(page: str, name: str) -> str:
    """The re-analysis form's control `name` as the page shows it."""
    found = re.search(rf'<(?:input|select)[^>]*name="{name}"[^>]*>(?:(?!</select>).)*', page,
                      re.S)  # fmt: skip
    assert found, name
    return found.group(0)


def test_the_reanalysis_fields_are_rendered_once_per_analysis_with_its_own_values(
    client, done_upload, rescoped, monkeypatch
):
    first, second = Analysis.objects.get(upload=done_upload, pk__lt=rescoped.pk), rescoped
    rendered = _counting(monkeypatch, selectors, "render_to_string")
    pages = {a.pk: [client.get(reverse("analysis_detail", args=[a.pk])).content.decode()
                    for _ in range(2)] for a in (first, second)}  # fmt: skip
    assert len(rendered) == 2  # once per analysis, read from the cache on the second view
    for analysis, scope, headroom in ((first, first.params["scope"], "10"),
                                      (second, "user", "50")):  # fmt: skip
        for page in pages[analysis.pk]:
            assert re.search(rf'<option value="{scope}"\s+selected>', _field(page, "scope"))
            assert f'value="{headroom}"' in _field(page, "headroom")
            assert 'name="csrfmiddlewaretoken"' in page  # the form still posts


def test_the_upload_page_reuses_the_fields_its_latest_analysis_rendered(
    client, done_upload, rescoped, monkeypatch
):
    latest = rescoped
    rendered = _counting(monkeypatch, selectors, "render_to_string")
    client.get(reverse("analysis_detail", args=[latest.pk]))
    upload_pages = [client.get(reverse("upload_detail", args=[done_upload.pk])).content.decode()
                    for _ in range(2)]  # fmt: skip
    assert len(rendered) == 1  # the same values, the same choices: the same fields
    for page in upload_pages:  # the latest analysis's values, prefilled
        assert re.search(r'<option value="user"\s+selected>', _field(page, "scope"))
        assert 'value="50"' in _field(page, "headroom")


def test_polled_and_listing_pages_read_no_figures(client, done_upload):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    analysis = Analysis.objects.get(upload=done_upload)
    with CaptureQueriesContext(connection) as status_queries:
        status = client.get(reverse("analysis_status", args=[analysis.pk])).json()
    assert status["status"] == "done"
    assert not [q for q in status_queries if "report" in q["sql"] or "figures" in q["sql"]]
    with CaptureQueriesContext(connection) as page_queries:
        page = client.get(reverse("upload_detail", args=[done_upload.pk])).content.decode()
    assert not [q for q in page_queries if '"figures"' in q["sql"]]
    # the recommendation, read out of the report by the database, in the listing
    ram = analysis.report["recommendation"]["ram_bytes"] / 2**30
    assert f"{ram:,.2f} GiB" in page


def _metric(page: str, name: str) -> str:
    found = re.search(rf'data-metric="{name}">([^<]*)<', page)
    assert found, name
    return found.group(1)


def test_the_analysis_page_renders_its_report_once_per_kind_of_reader(
    client, done_upload, monkeypatch
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from console.uploads import report_section

    analysis = Analysis.objects.get(upload=done_upload)
    rendered = _counting(monkeypatch, report_section, "_render_sections")
    url = reverse("analysis_detail", args=[analysis.pk])
    first = client.get(url).content.decode()
    with CaptureQueriesContext(connection) as queries:
        second = client.get(url).content.decode()
    assert len(rendered) == 1
    # the second view read neither the report nor the figures from the database (it asks
    # only whether there is a report)
    read = re.compile(r'"(?:report|figures)"(?! IS NOT NULL)')
    assert not [q for q in queries if read.search(q["sql"])]
    assert [q for q in queries if '"report" IS NOT NULL' in q["sql"]]
    ram = f"{analysis.report['recommendation']['ram_bytes'] / 2**30:,.2f} GiB"
    for page in (first, second):
        assert _metric(page, "ram_bytes") == ram
        assert _metric(page, "requests") == f"{analysis.report['requests']:,}"
        assert "Draft a retention policy" in page  # the analyst's own
        for name, figure in figures.page_figures(analysis).items():
            assert _page_figure(page, f"fig-{name}") == json.loads(json.dumps(figure))

    # a question asked is answered for the view that asks it, and not kept
    asked = client.get(url, {"buy_gib": "1"}).content.decode()
    assert len(rendered) == 2
    answer = re.search(r"<output[^>]*data-answer>(.*?)</output>", asked, re.S).group(1)
    assert "1.00 GiB" in answer
    plain = client.get(url).content.decode()
    assert len(rendered) == 2 and re.search(r"data-answer></output>", plain)

    # a reader sees the page an auditor may: without the analyst's link, rendered for them
    client.logout()
    reader = make_user("rita", "auditor")
    assert client.login(username=reader.username, password=PASSWORD)
    for _ in range(2):
        page = client.get(url).content.decode()
        assert _metric(page, "ram_bytes") == ram and "Draft a retention policy" not in page
    assert len(rendered) == 3

    # an analyst once the upload's stream is gone: no re-analysis form, and the page says why
    client.logout()
    assert client.login(username=done_upload.created_by.username, password=PASSWORD)
    Upload.objects.filter(pk=done_upload.pk).update(streams={})
    for _ in range(2):
        page = client.get(url).content.decode()
        assert "which needs the upload's stored stream" in page
        assert "Draft a retention policy" in page and 'id="analysis-form"' not in page
    assert len(rendered) == 4


def test_an_analysis_finished_again_shows_its_new_report(client, done_upload):
    from django.utils import timezone

    analysis = Analysis.objects.get(upload=done_upload)
    url = reverse("analysis_detail", args=[analysis.pk])
    assert _metric(client.get(url).content.decode(), "requests") == "120"
    # as a retried run writes it: the report with the moment it finished
    report = dict(analysis.report, requests=121)
    Analysis.objects.filter(pk=analysis.pk).update(report=report, finished_at=timezone.now())
    assert _metric(client.get(url).content.decode(), "requests") == "121"


def test_the_analysis_page_queries_as_much_with_forty_uploads_as_with_one(
    client, done_upload, monkeypatch
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from console.uploads import comparison

    analysis = Analysis.objects.get(upload=done_upload)
    url = reverse("analysis_detail", args=[analysis.pk])
    client.get(url)
    with CaptureQueriesContext(connection) as alone:
        client.get(url)
    for i in range(40):  # other uploads, each with a finished analysis
        other = Upload.objects.create(name=f"other {i}", status="done")
        Analysis.objects.create(upload=other, block_tokens=256, params=analysis.params,
                                status="done", label=f"run {i}")  # fmt: skip
    pickers = _counting(monkeypatch, comparison, "render_to_string")
    with CaptureQueriesContext(connection) as among_many:
        page = client.get(url).content.decode()
    assert len(among_many) == len(alone)
    # the picker lists the newest 30 uploads (runs 39 to 10), by their analyses' titles
    listed = re.findall(r'<fieldset data-upload="(\d+)">', page)
    assert len(listed) == selectors.PICKER_UPLOADS
    assert "run 39" in page and "run 10" in page and "run 9<" not in page
    # rendered once; again when an analysis it lists is renamed
    client.get(url)
    assert len(pickers) == 1
    Analysis.objects.filter(label="run 39").update(label="renamed run")
    page = client.get(url).content.decode()
    assert len(pickers) == 2 and "renamed run" in page and "run 39" not in page
    Upload.objects.filter(name="other 38").update(name="renamed upload")
    page = client.get(url).content.decode()
    assert len(pickers) == 3 and "renamed upload" in page and "other 38" not in page


def test_an_edited_template_empties_the_rendered_pages(client, done_upload, monkeypatch):
    from django.utils.autoreload import file_changed

    from console.uploads import report_section

    analysis = Analysis.objects.get(upload=done_upload)
    rendered = _counting(monkeypatch, report_section, "_render_sections")
    url = reverse("analysis_detail", args=[analysis.pk])
    client.get(url)
    file_changed.send(sender=None, file_path=Path("console/uploads/charts.py"))
    client.get(url)
    assert len(rendered) == 1  # code is reloaded by a restart, which empties it anyway
    # as the development server's reloader says of an edited template
    results = file_changed.send(sender=None, file_path=Path("templates/uploads/_report.html"))
    client.get(url)
    assert len(rendered) == 2
    assert not any(answer for receiver, answer in results if receiver.__module__ == "console.apps")
