"""Every chart as a planner sees it, in headless Chromium at 1280 and 800 px wide: no text
cut at a chart's edge (the budgets' "U memory (2 GPUs)"), and no title, panel title, axis
title, legend or label on top of another (the load per replica's panel titles ran into
each other, the knee's label could sit on the recommended point's). The analysis pages of
the golden reports that draw the most (a host the recommendation does not fit, a fleet,
budgets with copies of the KV, the session band), the compare page and the evidence
pages."""

from __future__ import annotations

import itertools

import pytest

from console.benchmarks.services import bench_runs_create
from console.models import Analysis, JobStatus, Upload
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in, wait_for_charts
from tests.console.factories import BENCH_TAGS, vllm_file
from tests.golden.figures import reports

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page

WIDTHS = (1280, 800)
ANALYSES = ("mooncake-short-budget", "mooncake-fleet", "sample-reanalysis-budgets",
            "sample-sessions")  # fmt: skip
MODEL = "meta-llama/Llama-3.1-8B"
# each chart: its box, every text drawn in it, and the boxes that must not meet
LAYOUT = r"""() => [...document.querySelectorAll('[data-figure]')].map((el) => {
  const box = (node) => {
    const r = node.getBoundingClientRect();
    return {l: r.left, t: r.top, r: r.right, b: r.bottom};
  };
  const shown = (node) => node.getBoundingClientRect().width > 0 && node.textContent.trim();
  const texts = [...el.querySelectorAll('svg text')]
    .filter((t) => !t.closest('.hoverlayer') && shown(t))
    .map((t) => ({
      what: t.textContent, ...box(t),
      clipped: !!t.closest('[clip-path]') && !t.closest('.legend'),  // a legend's: its own
    }));
  // a text drawn in a plot (a shape's label, a cell's) is clipped to it, not to the chart
  const plots = [...el.querySelectorAll('.draglayer .nsewdrag')].map(box);
  const titles = [...el.querySelectorAll('svg text')]
    .filter((t) => /^(g|[xy]\d*)title$/.test(t.getAttribute('class') || '') && shown(t));
  const notes = [...el.querySelectorAll('g.annotation text')].filter(shown);
  const labels = [...titles, ...notes].map((t) => ({what: t.textContent, ...box(t)}));
  const legend = el.querySelector('g.legend rect.bg');
  if (legend && legend.getBoundingClientRect().width > 0) {
    labels.push({what: 'legend', ...box(legend)});
  }
  return {id: el.id, svg: box(el.querySelector('svg.main-svg')), plots, texts, labels};
})"""


def _meet(a: dict, b: dict) -> bool:
    """Whether two boxes overlap by more than a pixel each way."""
    return min(a["r"], b["r"]) - max(a["l"], b["l"]) > 1 and (
        min(a["b"], b["b"]) - max(a["t"], b["t"]) > 1
    )


def _inside(a: dict, b: dict) -> bool:
    """Whether box a lies within box b, give or take a pixel."""
    return (a["l"] >= b["l"] - 1 and a["r"] <= b["r"] + 1
            and a["t"] >= b["t"] - 1 and a["b"] <= b["b"] + 1)  # fmt: skip


def _problems(chart: dict) -> list[str]:
    found = []
    for text in chart["texts"]:
        bounds = chart["plots"] if text["clipped"] else [chart["svg"]]
        if not any(_inside(text, bound) for bound in bounds):
            found.append(f"cut: {text['what']!r}")
    found += [f"overlap: {a['what']!r} / {b['what']!r}"
              for a, b in itertools.combinations(chart["labels"], 2) if _meet(a, b)]  # fmt: skip
    return found


@pytest.fixture
def pages(analyst) -> dict[str, str]:
    """The pages to look at, by name, with what they show stored."""
    upload = Upload.objects.create(name="layouts", created_by=analyst, status=JobStatus.DONE)
    golden = reports()
    ids = {}
    for name in ANALYSES:
        report = golden[name]
        ids[name] = Analysis.objects.create(upload=upload, block_tokens=report["block_tokens"],
                                            params=report["params"], report=report,
                                            status=JobStatus.DONE).pk  # fmt: skip
    for tier, runs in (("none", ((4, 600.0), (16, 1500.0), (64, 3100.0))), ("ram", ((16, 900.0),))):
        files = [vllm_file(f"{tier}-c{n}.json", ttft=t, max_concurrency=n) for n, t in runs]
        tags = {**BENCH_TAGS, "tier": tier, "ram_gib": 64.0 if tier == "ram" else None}
        bench_runs_create(files=files, tags=tags, user=analyst)
    found = {name: f"/analyses/{pk}/" for name, pk in ids.items()}
    found["compare"] = f"/compare/?a={ids['sample-sessions']}&a={ids['sample-reanalysis-budgets']}"
    found["evidence matrix"] = f"/evidence/matrix/?model={MODEL}"
    found["evidence compare"] = f"/evidence/compare/?model={MODEL}"
    return found


@pytest.mark.parametrize("width", WIDTHS)
def test_no_chart_cuts_or_overlaps_its_words(browser_page, analyst, pages, width):
    page, session = browser_page.page, browser_page
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, analyst.username)
    problems, seen = [], 0
    for name, url in pages.items():
        page.goto(url)
        wait_for_charts(page)
        for chart in page.evaluate(LAYOUT):
            seen += 1
            problems += [f"{name} {chart['id']}: {p}" for p in _problems(chart)]
    # 4 analysis pages (5, 7, 7 and 6 charts), compare, 2 tiers + lines, 1 side by side
    assert seen == 5 + 7 + 7 + 6 + 1 + 3 + 1
    assert not problems, "\n".join(problems)
    session.assert_clean()
