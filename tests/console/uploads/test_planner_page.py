"""The analysis page's first screen as a planner reads it (issue #16): the figures are the
report's (the engine's, tested by hand in tests/analysis), formatted once; what a size
buys answered from the stored curve steps, as JSON and without scripts; the cost view
only with prices. Through the real views on a real analysis."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from analysis.cost import Prices, cost_view
from analysis.metrics.at_budget import buys
from console.templatetags.kvscope import gib, money, pct
from tests.console.factories import PASSWORD, rerun

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30


def _metric(page: str, name: str) -> str:
    found = re.search(rf'data-metric="{name}">([^<]*)<', page)
    assert found, f"no {name} on the page"
    return found.group(1)


@pytest.fixture
def short_host(client, analysis, analyst):
    """The default analysis re-run with a host whose RAM the recommendation does not fit
    (half of it, no reserves)."""
    assert client.login(username=analyst.username, password=PASSWORD)
    half = analysis.report["recommendation"]["ram_bytes"] / 2 / GIB
    reserves = {k: 0 for k in analysis.params if k.startswith("reserve_")}
    return rerun(analysis, analyst, host_ram_gib=half, budgets_gib=[half / 2], **reserves)


def test_the_first_screen_leads_with_size_hit_ratio_and_what_the_host_buys(client, short_host):
    report = short_host.report
    rec, host = report["recommendation"], report["recommendation"]["host"]
    assert not host["fits"]
    page = client.get(reverse("analysis_detail", args=[short_host.pk])).content.decode()
    first = page[page.index('id="recommendation"') : page.index("The traffic</h2>")]
    assert _metric(first, "ram_bytes") == gib(rec["ram_bytes"])
    assert _metric(first, "per_rank_bytes") == gib(rec["per_rank_bytes"])
    assert _metric(first, "rec_hit_ratio") == pct(rec["hit_ratio"])
    assert _metric(first, "fits") == "Does not fit"
    # the host's own reading is at_budget's exact one (the page reads the stored steps,
    # within half a tenth of a point: the same when shown)
    exact = next(e for e in report["at_budget"] if e["source"] == "host")
    assert _metric(first, "host_buys") == pct(exact["hit_ratio"])
    assert f"short by {gib(-host['spare_bytes'])}" in first
    # the knee as host RAM, and the budget asked for with what it buys
    assert _metric(first, "knee_bytes") == gib(report["knee"]["ram_bytes"])
    budget = next(e for e in report["at_budget"] if e["source"] == "budget")
    assert f"{gib(budget['ram_bytes'])} of host RAM buys a {pct(budget['hit_ratio'])}" in first
    # the traffic's cards come after it, the first screen holds no request counts
    assert 'data-metric="requests"' not in first


def test_what_a_size_buys_answers_as_json_and_without_scripts(client, short_host):
    report = short_host.report
    url = reverse("analysis_buys", args=[short_host.pk])
    got = client.get(url, {"buy_gib": "3.5"}).json()
    expected = buys(report, round(3.5 * GIB))
    assert got["hit_ratio"] == expected["hit_ratio"]
    assert got["sentence"] == (
        f"3.50 GiB of host RAM buys a {pct(expected['hit_ratio'])} hit ratio (of a "
        f"{pct(report['recommendation']['ceiling'])} ceiling); "
        f"it {'fits' if expected['host_fits'] else 'does not fit'} the host."
    )
    # the same answer in the page, for a browser without scripts
    page = client.get(reverse("analysis_detail", args=[short_host.pk]), {"buy_gib": "3.5"})
    assert got["sentence"] in page.content.decode()
    for bad in ("0", "-1", "abc", str(2**21)):
        response = client.get(url, {"buy_gib": bad})
        assert response.status_code == 400 and response.json()["error"]


def test_no_price_no_cost_view_and_with_prices_the_engines_figures(client, short_host):
    detail = reverse("analysis_detail", args=[short_host.pk])
    page = client.get(detail).content.decode()
    assert "data-no-cost" in page and "data-cost-verdict" not in page
    page = client.get(detail, {"ram_price": "3", "gpu_price": "2.5"}).content.decode()
    view = cost_view(short_host.report, Prices(ram_per_gib_month=3, gpu_per_hour=2.5))
    best = view["best"]
    verdict = re.search(r"data-cost-verdict>(.*?)</p>", page, re.S).group(1)
    assert f"stops paying at {gib(best['ram_per_replica_bytes'])}" in verdict
    assert f"{money(best['net_per_month'])} net a month" in verdict
    assert "30,000 tokens/s" in page  # the offload estimate's default throughput, stated
    refused = client.get(detail, {"ram_price": "0", "gpu_price": "2.5"}).content.decode()
    assert "data-cost-verdict" not in refused and 'role="alert"' in refused
