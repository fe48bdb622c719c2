"""The benchmarks pages compute their grid and figures once per set of stored runs: a
second view reads them back, a new run is seen at once."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from console.benchmarks import selectors
from console.benchmarks.services import bench_runs_create
from tests.console.factories import BENCH_TAGS, PASSWORD, vllm_file

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "meta-llama/Llama-3.1-8B"
SLO = {"model": MODEL, "p99_ttft_ms": "2000", "p99_itl_ms": "100"}


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()  # another test's runs must not answer for this one's


def _page(client, name: str, query: dict) -> str:
    """The page's HTML, its per-response CSRF token taken out."""
    html = client.get(reverse(name), query).content.decode()
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", html)


def _counting(monkeypatch, name: str) -> list[int]:
    """Count the calls of the selectors' `name` (the engine work behind a page)."""
    calls: list[int] = []
    real = getattr(selectors, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(selectors, name, counted)
    return calls


def test_the_matrix_is_judged_once_until_a_run_is_added(client, analyst, monkeypatch):
    assert client.login(username=analyst.username, password=PASSWORD)
    bench_runs_create(files=[vllm_file("c4.json", ttft=600.0, max_concurrency=4)],
                      tags=BENCH_TAGS, user=analyst)  # fmt: skip
    judged = _counting(monkeypatch, "matrix")
    first = _page(client, "evidence_matrix", SLO)
    again = _page(client, "evidence_matrix", SLO)
    assert len(judged) == 1 and first == again
    assert first.count('class="cell ok"') == 1
    # a tighter objective is another question: judged on its own
    client.get(reverse("evidence_matrix"), {**SLO, "p99_ttft_ms": "500"})
    assert len(judged) == 2
    # a new run changes the answer, seen on the next view
    bench_runs_create(files=[vllm_file("c64.json", ttft=3100.0, max_concurrency=64)],
                      tags=BENCH_TAGS, user=analyst)  # fmt: skip
    page = _page(client, "evidence_matrix", SLO)
    assert len(judged) == 3
    assert page.count('class="cell ok"') == 1 and page.count('class="cell bad"') == 1


def test_runs_side_by_side_are_drawn_once_until_a_run_is_added(client, analyst, monkeypatch):
    assert client.login(username=analyst.username, password=PASSWORD)
    cold = vllm_file("cold.json", ttft=900.0, max_concurrency=8)
    bench_runs_create(files=[cold], tags=BENCH_TAGS, user=analyst)
    grouped = _counting(monkeypatch, "comparisons")
    first = _page(client, "evidence_compare", {"model": MODEL})
    assert _page(client, "evidence_compare", {"model": MODEL}) == first
    assert len(grouped) == 1
    warm = vllm_file("warm.json", ttft=300.0, max_concurrency=8)
    bench_runs_create(files=[warm], tags={**BENCH_TAGS, "warm": True}, user=analyst)
    page = _page(client, "evidence_compare", {"model": MODEL})
    assert len(grouped) == 2 and page != first
