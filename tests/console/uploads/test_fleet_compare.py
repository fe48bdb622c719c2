"""The compare page and the downloads with fleets (metrics.md section 8): analyses of the
same upload on 2 replicas behind round robin, prefix-aware routing and a pooled store, and
the default analysis (one cache) beside them, each re-run through the console."""

from __future__ import annotations

import csv
import io
from html import unescape

import pytest
from django.urls import reverse

from console.format import gib
from console.models import Analysis
from tests.console.factories import PASSWORD, gib_shown, rerun

pytestmark = pytest.mark.django_db(transaction=True)


def _with_fleet(analysis: Analysis, user, replicas: int, routers: list[str]) -> Analysis:
    return rerun(analysis, user, replicas=replicas, routers=routers)


def _row(page: str, key: str) -> str:
    start = page.index(f'data-key="{key}"')
    return page[start : page.index("</tr>", start)]


def test_routers_compared_side_by_side_with_the_differences_named(client, analysis, analyst):
    fleets = [_with_fleet(analysis, analyst, 2, [router])
              for router in ("round_robin", "prefix", "pooled")]  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.get(reverse("compare"), {"a": [a.pk for a in fleets]})
    page = unescape(response.content.decode())
    assert response.status_code == 200
    assert "Parameters that differ: Routers." in page
    # each analysis's column says its fleet: 2 x round robin vs 2 x prefix vs pooled
    for words in (
        "2 × round robin</small>",
        "2 × prefix-aware</small>",
        "2 × pooled store</small>",
    ):
        assert words in page
    assert 'Routers <small class="muted">(differs)</small>' in page
    assert "(differs)" not in _row(page, "fleet_replicas")
    pooled = fleets[2].report["fleet"]["routers"][0]
    # the pooled store's host store sees the whole stream: its ceiling is the one cache's
    assert pooled["ceiling"] == pytest.approx(analysis.report["infinite_hit_ratio"])
    cells = _row(page, "router_pooled_ceiling")
    assert "Pooled store: fleet ceiling" in cells
    assert cells.count("—") == 2  # no value in the other two analyses, so no difference
    # the baseline is the first analysis, which has no pooled store: nothing to subtract
    assert f'<td class="num">{pooled["ceiling"] * 100:.1f} %</td>' in cells
    assert "data-delta" not in cells
    ram = fleets[0].report["fleet"]["routers"][0]["recommendation"]["ram_bytes"]
    assert "Round robin: recommended RAM per replica" in _row(page, "router_round_robin_ram_bytes")
    # sizes in GiB, as the analysis pages show them (three significant digits below 1 GiB)
    assert f'<td class="num">{gib_shown(ram)}</td>' in _row(page, "router_round_robin_ram_bytes")


def test_one_cache_beside_a_fleet_compares_with_dashes(client, analysis, analyst):
    fleet = _with_fleet(analysis, analyst, 4, ["prefix"])
    assert client.login(username=analyst.username, password=PASSWORD)
    page = unescape(client.get(reverse("compare"), {"a": [analysis.pk, fleet.pk]}).content.decode())
    assert "Parameters that differ: Fleet (some analyses have one, others are one cache)." \
        in page  # fmt: skip
    replicas = _row(page, "fleet_replicas")
    assert replicas.count("—") == 1 and ">4</td>" in replicas  # one cache: "—", and no Δ


def test_the_fleet_curves_download(client, analysis, analyst):
    fleet = _with_fleet(analysis, analyst, 2, ["round_robin", "pooled"])
    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("analysis_detail", args=[fleet.pk])).content.decode()
    assert reverse("analysis_download", args=[fleet.pk, "fleet.csv"]) in page
    body = client.get(reverse("analysis_download", args=[fleet.pk, "fleet.csv"]))
    rows = list(csv.DictReader(io.StringIO(body.content.decode())))
    curves = fleet.report["fleet"]["routers"]
    assert len(rows) == sum(len(c["mrc"]) for c in curves)
    first = rows[0]
    point = curves[0]["mrc"][0]
    assert (first["router"], int(first["replicas"])) == ("round_robin", 2)
    assert int(first["capacity_bytes"]) == point["capacity_bytes"]
    assert float(first["capacity_gib"]) == pytest.approx(point["capacity_bytes"] / 2**30)
    assert float(first["capacity_gib"]) == pytest.approx(gib(point["capacity_bytes"]))
    # hits split into the GPU tier and host RAM (none on GPU without a GPU cache)
    assert float(rows[-1]["hit_ratio"]) == pytest.approx(
        float(rows[-1]["gpu_hit_ratio"]) + float(rows[-1]["ram_hit_ratio"])
    )
    assert {r["router"] for r in rows} == {"round_robin", "pooled"}
    # an analysis without a fleet: the header only, and no link
    empty = client.get(reverse("analysis_download", args=[analysis.pk, "fleet.csv"]))
    assert empty.content.decode().splitlines()[0].startswith("router,replicas,")
    assert len(empty.content.decode().splitlines()) == 1


def test_the_compare_table_downloads_with_its_fleet_rows(client, analysis, analyst):
    two, four = (_with_fleet(analysis, analyst, n, ["round_robin"])
                 for n in (2, 4))  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    query = {"a": [analysis.pk, two.pk, four.pk]}
    page = client.get(reverse("compare"), query).content.decode()
    assert f"a={analysis.pk}&amp;a={two.pk}&amp;a={four.pk}&amp;baseline={analysis.pk}" \
        "&amp;format=csv" in page  # fmt: skip
    response = client.get(reverse("compare"), {**query, "format": "csv"})
    assert response["Content-Type"].startswith("text/csv")
    rows = {r["key"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    replicas = rows["fleet_replicas"]
    # the first analysis asked is the baseline
    names = (f"#{analysis.pk} (baseline)", f"#{two.pk}", f"#{four.pk}")
    # one cache: blank; the fleets' replica counts and their difference
    assert [replicas[n] for n in names] == ["", "2", "4"]
    assert replicas[f"delta #{four.pk} vs #{analysis.pk}"] == ""
    assert replicas["differs"] == "True"
    ceilings = [a.report["fleet"]["routers"][0]["ceiling"] for a in (two, four)]
    row = rows["router_round_robin_ceiling"]
    assert [float(row[n]) for n in names[1:]] == pytest.approx(ceilings)
    assert rows["ram_bytes"][names[0]] == str(analysis.report["recommendation"]["ram_bytes"])
