"""The analysis page's first screen as a planner reads it (issue #16): the figures are the
report's (the engine's, tested by hand in tests/analysis), formatted once; what a size
buys answered from the stored curve steps, as JSON and without scripts; the cost view
only with prices. Through the real views on a real analysis."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from analysis.cost import Prices, cost_at, cost_view
from analysis.metrics.at_budget import buys
from console.models import Analysis
from console.templatetags.kvscope import gib, money, pct, signed
from tests.console.factories import PASSWORD, opened_analysis_form, rerun
from tests.console.waiting import finished, wait_for

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
    assert f"a month, worth {money(best['saved_per_month'])}, for" in verdict  # named
    assert "30,000 tokens/s" in page  # the offload estimate's default throughput, stated
    assert view["pays"] and "data-cost-best" in page
    refused = client.get(detail, {"ram_price": "0", "gpu_price": "2.5"}).content.decode()
    assert "data-cost-verdict" not in refused and 'role="alert"' in refused
    # RAM dear, GPUs cheap: no size pays, and no size is offered as where paying stops
    dear = {"ram_price": "1000", "gpu_price": "0.01"}
    assert not cost_view(short_host.report, Prices(ram_per_gib_month=1000,
                                                   gpu_per_hour=0.01))["pays"]  # fmt: skip
    page = client.get(detail, dear).content.decode()
    assert "At these prices no size pays" in page
    assert "data-cost-best" not in page and "Where one more GiB stops paying" not in page


def test_a_fleets_first_screen_is_the_default_routers_per_replica(client, analysis, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    half = analysis.report["recommendation"]["ram_bytes"] / 4 / GIB
    reserves = {k: 0 for k in analysis.params if k.startswith("reserve_")}
    fleet = rerun(analysis, analyst, replicas=2, host_ram_gib=half, **reserves)
    report = fleet.report
    best = max((r for r in report["fleet"]["routers"] if r["router"] != "pooled"),
               key=lambda r: r["ceiling"])  # fmt: skip
    page = client.get(reverse("analysis_detail", args=[fleet.pk])).content.decode()
    assert _metric(page, "ram_bytes") == gib(best["recommendation"]["ram_bytes"])
    # what the host buys per replica under that router: its own exact at_budget
    host = next(e for e in best["at_budget"] if e["source"] == "host")
    assert _metric(page, "host_buys") == pct(host["hit_ratio"])
    # the field names the router; the cost view counts what host RAM adds over the GPUs
    got = client.get(reverse("analysis_buys", args=[fleet.pk]), {"buy_gib": "1"}).json()
    assert got["router"] == best["router"] and "per replica with" in got["sentence"]
    view = cost_view(report, Prices(ram_per_gib_month=3, gpu_per_hour=2.5), best["router"])
    assert all(row["ram_hit_ratio"] == pytest.approx(max(row["hit_ratio"] - best["gpu_hit_ratio"],
               0)) for row in view["points"])  # fmt: skip


def test_a_difference_of_a_few_bytes_is_no_difference():
    assert signed(1, "bytes") == signed(-1000, "bytes") == "±0.00 GiB"
    assert signed(GIB, "bytes") == "+1.00 GiB"


def test_budgets_typed_on_the_form_are_priced_on_the_first_screen(client, analysis, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    url = reverse("analysis_new", args=[analysis.upload_id])
    refused = client.post(url, opened_analysis_form(analysis.block_tokens, budgets_gib="0 x"))
    assert refused.status_code == 400 and "Budgets are GiB per replica" in refused.content.decode()
    response = client.post(url, opened_analysis_form(analysis.block_tokens, budgets_gib="2, 0.5"))
    assert response.status_code == 302
    done = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert done.params["budgets_gib"] == [0.5, 2.0]
    page = client.get(reverse("analysis_detail", args=[done.pk])).content.decode()
    for entry in done.report["at_budget"]:  # each the engine's exact reading, in words
        assert f"Your budget: {gib(entry['ram_bytes'])} of host RAM buys a " \
               f"{pct(entry['hit_ratio'])} hit ratio" in page  # fmt: skip
    # and the form opens again with them
    assert 'value="0.5 2"' in page


def test_the_verdict_says_when_the_recommended_size_loses_money(client, short_host):
    """Some size pays, but RAM is dear enough that the recommended size (sized for hits)
    loses money: the verdict says so, with the loss in words, not as a bare negative."""
    report = short_host.report
    rec = report["recommendation"]
    detail = reverse("analysis_detail", args=[short_host.pk])
    losing = None
    for ram_price in (0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256):
        prices = Prices(ram_per_gib_month=ram_price, gpu_per_hour=2.5)
        row = cost_at(report, prices, rec["capacity_slots"], rec["hit_ratio"])
        if cost_view(report, prices)["pays"] and row["net_per_month"] < 0:
            losing = ram_price, row
            break
    assert losing is not None  # (the fixture's curve has such a price)
    ram_price, row = losing
    page = client.get(detail, {"ram_price": str(ram_price), "gpu_price": "2.5"}).content.decode()
    verdict = re.search(r"data-cost-verdict>(.*?)</p>", page, re.S).group(1)
    assert "data-cost-recommended-loses" in verdict
    assert f"loses {money(-row['net_per_month'])} a month" in verdict
    assert "−" not in verdict.split("data-cost-recommended-loses")[1]
    # at prices where it pays, nothing is said
    page = client.get(detail, {"ram_price": "0.01", "gpu_price": "2.5"}).content.decode()
    assert "data-cost-recommended-loses" not in page


def test_pricing_keeps_the_offload_estimate_and_the_other_way_round(client, short_host):
    """Each question form sends the page's other answered questions on as hidden fields
    (and never its own): pressing one does not clear the other's result."""
    detail = reverse("analysis_detail", args=[short_host.pk])
    asked = {"ram_price": "3", "gpu_price": "2.5", "pcie": "4", "prefill_tokens_per_s": "12000",
             "buy_gib": "2"}  # fmt: skip
    page = client.get(detail, asked).content.decode()

    def hidden(anchor: str) -> dict[str, str]:
        form = re.search(rf'<form method="get" action="#{anchor}".*?</form>', page, re.S)
        assert form is not None, anchor
        return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', form[0]))

    assert hidden("cost") == {"pcie": "4", "prefill_tokens_per_s": "12000", "buy_gib": "2"}
    assert hidden("offload") == {"ram_price": "3", "gpu_price": "2.5", "buy_gib": "2"}
    assert "data-cost-verdict" in page and "data-offload" in page  # both answered
    # a view that asks nothing carries nothing (and is the page cache's)
    plain = client.get(detail).content.decode()
    assert 'type="hidden" name="ram_price"' not in plain
    assert 'type="hidden" name="prefill_tokens_per_s"' not in plain
