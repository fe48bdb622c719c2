"""One palette across pages: every colour any figure draws (the analysis page's, the fleet's,
the compare page's, the evidence pages') is one of console.palette's, the same thing keeps
its colour from one page to the next, and the stylesheet's copies agree with it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse

from console import palette
from console.uploads.charts import compare_figure, report_figures
from tests.console.factories import BENCH_TAGS, PASSWORD, vllm_file
from tests.golden.figures import COMPARED, golden_report, reports

CSS = Path(__file__).resolve().parents[2] / "static" / "css" / "kvscope.css"
COLOUR = re.compile(r"^(#[0-9a-fA-F]{3,8}|rgba?\(.*\))$")


def colours(value, found: set[str]) -> set[str]:
    """Every colour string in a figure (its template, plotly_white's own, aside)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "template":
                colours(item, found)
    elif isinstance(value, list):
        for item in value:
            colours(item, found)
    elif isinstance(value, str) and COLOUR.match(value):
        found.add(value)
    return found


def _golden_figures() -> dict[str, dict]:
    figures = {f"{name}/{fig}": figure for name, report in reports().items()
               for fig, figure in report_figures(report).items()}  # fmt: skip
    items = [(label, golden_report(name)) for label, name in COMPARED]
    figures["compare"] = compare_figure(items)
    return figures


def test_every_figure_of_the_analysis_and_compare_pages_draws_the_palettes_colours():
    for where, figure in _golden_figures().items():
        stray = colours(figure, set()) - palette.ALL
        assert not stray, (where, stray)
        # a trace that names no colour takes the palette's, in order
        assert figure["layout"]["colorway"] == list(palette.SERIES), where


def test_one_thing_keeps_its_colour_from_one_chart_to_the_next():
    figures = _golden_figures()
    fleet = figures["mooncake-fleet/fleet"]["data"]
    by_uid = {t["uid"]: t for t in fleet}
    # the single cache is blue on its own curve, as the usual curve of admission
    curve = next(t for t in figures["mooncake-fleet/mrc"]["data"] if t["uid"] == "curve")
    usual = next(t for t in figures["mooncake-fleet/admission"]["data"]
                 if t["uid"] == "admission-1")  # fmt: skip
    assert curve["line"]["color"] == usual["line"]["color"] == palette.SINGLE_CACHE
    assert by_uid["fleet-prefix"]["line"]["color"] == palette.ROUTERS["prefix"]
    load = figures["mooncake-fleet/fleet_load"]["data"]
    assert {t["marker"]["color"] for t in load if t["uid"].endswith("-prefix")} == {
        palette.ROUTERS["prefix"]}  # fmt: skip
    marks = {t["uid"]: t for t in figures["mooncake-short-budget/mrc"]["data"]}
    assert marks["recommended"]["marker"]["color"] == palette.RECOMMENDED
    assert marks["knee"]["marker"]["color"] == palette.KNEE
    assert marks["at-host-budget"]["marker"]["color"] == palette.BUDGET
    assert marks["at-budget-0"]["marker"]["color"] == palette.BUDGET
    # and the knee, the budgets and the recommendation are told apart
    assert len({palette.RECOMMENDED, palette.KNEE, palette.BUDGET, palette.SINGLE_CACHE}) == 4


def test_the_stylesheet_agrees_with_the_palette():
    css = CSS.read_text()

    def value(pattern: str) -> str:
        return re.search(pattern, css)[1].replace(" ", "").lower()

    assert value(r"--accent:\s*([^;]+);") == palette.SERIES[0]
    assert value(r"--ink:\s*([^;]+);") == palette.INK
    assert value(r"--muted:\s*([^;]+);") == palette.MUTED

    def rgba(text: str) -> tuple[float, ...]:
        return tuple(float(x) for x in re.findall(r"[\d.]+", text))

    assert rgba(value(r"\.swatch\.same\s*\{\s*background:\s*([^;]+);")) == rgba(
        palette.SAME_SESSION_FILL)  # fmt: skip
    assert rgba(value(r"\.swatch\.cross\s*\{\s*background:\s*([^;]+);")) == rgba(
        palette.CROSS_SESSION_FILL)  # fmt: skip


def _page_figures(page: str) -> dict[str, dict]:
    found = re.findall(r'<script id="fig-([^"]+)" type="application/json">(.*?)</script>', page)
    return {name: json.loads(text) for name, text in found}


@pytest.mark.django_db
def test_the_evidence_pages_draw_the_palettes_colours(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    model = "meta-llama/Llama-3.1-8B"
    for tier, runs in (("none", ((4, 600.0), (16, 1500.0), (64, 3100.0))), ("ram", ((16, 900.0),))):
        files = [vllm_file(f"{tier}-c{n}.json", ttft=t, max_concurrency=n) for n, t in runs]
        tags = {**BENCH_TAGS, "tier": tier, "ram_gib": "64" if tier == "ram" else ""}
        assert client.post(reverse("evidence_list"), {**tags, "files": files}).status_code == 302
    figures = {}
    for view in ("evidence_matrix", "evidence_compare"):
        page = client.get(reverse(view), {"model": model}).content.decode()
        figures.update(_page_figures(page))
    assert set(figures) == {"tier-0", "tier-1", "lines", "schedule-0"}
    for name, figure in figures.items():
        assert not colours(figure, set()) - palette.ALL, name
    lines = figures["lines"]
    assert [t["line"]["color"] for t in lines["data"]] == list(palette.SERIES[:2])
    # the concurrency axis: 1-2-5 ticks within 4 to 64 users
    assert lines["layout"]["xaxis"]["ticktext"] == ["5", "10", "20", "50"]
    bars = figures["schedule-0"]["data"]
    assert [t["marker"]["color"] for t in bars] == list(palette.SERIES[:2])
