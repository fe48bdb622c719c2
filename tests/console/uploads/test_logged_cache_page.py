"""A log whose responses report cached tokens, on the analysis page (#18): what the engine
reported, kvscope's prediction for the RAM the form states, the difference in points (none
for a log built from kvscope's own prediction, the shift for a shifted one), per route,
with its chart; and nothing of it for a log without usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from analysis import BlockStream
from bench.generate import chat_requests
from console.models import Analysis, JobStatus
from console.uploads.services import upload_create
from tests.console.factories import default_analysis, opened_analysis_form
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
ROWS = list(chat_requests(60, seed=8, documents=5, doc_words=(200, 400)))


def log_with(tmp_path: Path, name: str, prompt: list[int], cached: list[int]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({**row, "usage": {
        "prompt_tokens": p, "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": c}}}) + "\n"
        for row, p, c in zip(ROWS, prompt, cached, strict=True)))  # fmt: skip
    return path


def analyzed(client, analyst, path: Path, **form) -> tuple[Analysis, str]:
    """The log uploaded, then analyzed with `form` over the defaults; its page."""
    upload = upload_create(name=path.stem, sources=[path], user=analyst)
    first = default_analysis(upload)
    client.force_login(analyst)
    data = opened_analysis_form(first.block_tokens, **form)
    assert client.post(reverse("analysis_new", args=[upload.pk]), data).status_code == 302
    done = wait_for(lambda: Analysis.objects.filter(upload=upload, status=JobStatus.DONE)
                    .exclude(pk=first.pk).first())  # fmt: skip
    return done, client.get(reverse("analysis_detail", args=[done.pk])).content.decode()


def test_the_page_sets_the_engines_reported_reuse_beside_kvscopes_prediction(
    client, analyst, tmp_path
):
    form = {"logged_ram_gib": 0.5, "replicas": 2, "gpu_cache_gib": 0.0625}
    blank, _ = analyzed(client, analyst, log_with(tmp_path, "probe.jsonl", [1] * 60, [0] * 60),
                        **form)  # fmt: skip
    sample = blank.report["logged_cache"]["sample"]
    predicted = sample["predicted_tokens"]  # every request's: fewer than a sample holds
    assert sample["request"] == list(range(60)) and sum(predicted) > 0
    prompt = _prompt_tokens(blank)
    # the engine reported exactly kvscope's prediction, on kvscope's own counts: no difference
    same, page = analyzed(client, analyst, log_with(tmp_path, "same.jsonl", prompt, predicted),
                          **form)  # fmt: skip
    logged = same.report["logged_cache"]
    assert logged["difference"] == 0.0 and logged["measured_hit_ratio"] > 0
    share = f"{100 * sum(predicted) / sum(prompt):.1f} %"
    assert f"<strong data-logged-measured>{share}</strong>" in page
    assert f"<strong data-logged-predicted>{share}</strong>" in page
    assert "<strong data-logged-difference>±0.0 points</strong>" in page
    assert "On 2 replicas behind the round robin router, with a 0.06 GiB GPU prefix cache" in page
    assert 'id="chart-logged_cache"' in page
    # 200 more cached tokens on the first ten requests that can take them: the shift by hand
    shifted = list(predicted)
    room = [i for i, (c, p) in enumerate(zip(predicted, prompt, strict=True)) if p - c >= 200]
    for i in room[:10]:
        shifted[i] += 200
    moved, page = analyzed(client, analyst, log_with(tmp_path, "moved.jsonl", prompt, shifted),
                           **form)  # fmt: skip
    points = 100 * 2000 / sum(prompt)
    assert moved.report["logged_cache"]["difference"] == pytest.approx(points / 100, abs=1e-12)
    assert f"<strong data-logged-difference>+{points:.1f} points</strong>" in page


def test_without_a_stated_configuration_only_the_engines_figure_shows(client, analyst, tmp_path):
    path = log_with(tmp_path, "day.jsonl", [1000] * 60, [250] * 60)
    upload = upload_create(name="day", sources=[path], user=analyst)
    first = default_analysis(upload)
    client.force_login(analyst)
    page = client.get(reverse("analysis_detail", args=[first.pk])).content.decode()
    assert "<strong data-logged-measured>25.0 %</strong>" in page
    assert "60 requests (100.0 % of the log) report their cached tokens" in page
    assert "Host RAM per replica the logged engine had" in page  # where to say it
    assert "data-logged-predicted" not in page


def test_a_log_without_usage_shows_no_such_section(client, analyst, tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    first = default_analysis(upload_create(name="plain", sources=[path], user=analyst))
    client.force_login(analyst)
    page = client.get(reverse("analysis_detail", args=[first.pk])).content.decode()
    assert "logged_cache" not in first.report and "data-logged-sentence" not in page


def _prompt_tokens(analysis: Analysis) -> list[int]:
    """kvscope's prompt token count of every request (the analysis's stored stream)."""
    stream = BlockStream.load(analysis.upload.streams[str(analysis.block_tokens)])
    return stream.req_prompt_tokens.tolist()
