"""The analysis page's fleet and admission sections (#15) on a four-request trace whose
figures are worked out by hand below: posted through the re-analysis form, run on the
stored stream, shown as a sentence, a table, figures and a CSV (eager Celery, or the real
worker in the second CI run)."""

from __future__ import annotations

import csv
import html
import io
import re

import orjson
import pytest
from django.urls import reverse

from console.models import Analysis, Upload
from console.templatetags.kvscope import gib
from console.uploads.services import upload_create
from tests.console.factories import PASSWORD, default_analysis, opened_analysis_form
from tests.console.waiting import finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

GIB = 2**30
# a Mooncake trace: 512-token blocks, each request the same two blocks (1024 tokens)
FOUR_REQUESTS = [
    {"timestamp": t, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}
    for t in (0, 1000, 2000, 3000)
]
# llama-3.1-8b (the default model), BF16: 32 layers * 8 KV heads * 128 * 2 (K, V) * 2 bytes
SLOT_BYTES = 32 * 8 * 128 * 2 * 2 * 512


def _reanalysis(**fleet) -> dict:
    """The re-analysis form as it opens, with the fleet's fields as given."""
    return opened_analysis_form(512, **fleet)


@pytest.fixture
def four_requests(tmp_path, analyst) -> Upload:
    trace = tmp_path / "four.jsonl"
    trace.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in FOUR_REQUESTS))
    upload = upload_create(name="four", sources=[trace], user=analyst)
    default_analysis(upload)
    return Upload.objects.get(pk=upload.pk)


def test_round_robin_and_prefix_on_two_replicas_by_hand(client, analyst, four_requests):
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.post(
        reverse("analysis_new", args=[four_requests.pk]),
        _reanalysis(replicas="2", routers=["round_robin", "prefix"]),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    assert analysis.params["replicas"] == 2
    # the routers in words, as every page names them
    assert analysis.summary.endswith("B=512 · 2 replicas · round robin / prefix-aware")
    fleet = analysis.report["fleet"]
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()

    # Round robin: requests 0 and 2 on replica 1, 1 and 3 on replica 2; each replica's
    # second request hits both blocks: 2 * 1024 of 4 * 1024 prompt tokens, a 50 % ceiling.
    # Prefix-aware: request 0 matches nothing (below half its prompt) and goes to the
    # least-loaded replica, the first; every later one matches all 1024 tokens there:
    # all four on replica 1, which hits requests 1-3: 3 * 1024 of 4096, 75 %, as one
    # cache fed all of the traffic does.
    assert "Prefix-aware routing reaches a 75.0 % ceiling where round robin reaches " \
        "50.0 %; one cache fed all of the traffic reaches 75.0 %." in page  # fmt: skip
    rows = _table(page)
    assert rows["round_robin"]["ceiling"] == "50.0 %"
    assert rows["prefix"]["ceiling"] == "75.0 %"
    # Round robin's recommendation: 90 % of 50 % is 45 %; one slot per replica holds the
    # block touched last (the first: blocks are touched last to first), 512 of each
    # second request's 1024 tokens, 25 %; two slots hold both, 50 %. Two slots of 64 MiB,
    # +10 % headroom: ceil(2 * 64 MiB * 1.1) bytes = 0.14 GiB per replica, one TP rank.
    ram = -(-2 * SLOT_BYTES * 11 // 10)
    assert rows["round_robin"]["ram_bytes"] == f"{ram / GIB:,.2f} GiB" == "0.14 GiB"
    assert rows["round_robin"]["per_rank_bytes"] == "0.14 GiB"
    assert rows["round_robin"]["hit_ratio"] == "50.0 %"
    # no GPU cache: every hit is a RAM hit
    assert (rows["round_robin"]["gpu_hit_ratio"], rows["round_robin"]["ram_hit_ratio"]) == (
        "0.0 %", "50.0 %")  # fmt: skip
    assert rows["round_robin"]["host_fits"] == "—"  # no host RAM given
    # the load: round robin 2 and 2 requests (busiest / mean 1.00×), prefix 4 and 0
    # (4 over a mean of 2: 2.00×)
    assert rows["round_robin"]["load"] == ["1.00×", "1.00×", "1.00×"]
    assert rows["prefix"]["load"][:2] == ["2.00×", "2.00×"]
    by_router = {entry["router"]: entry for entry in fleet["routers"]}
    assert [r["requests"] for r in by_router["prefix"]["load"]["per_replica"]] == [4, 0]
    # round robin at two slots: each replica prefills its first request (1024) only
    assert [r["prefill_tokens"] for r in by_router["round_robin"]["load"]["per_replica"]] == [
        1024, 1024]  # fmt: skip

    # the figures: one line per router and the single-cache ceiling; the load's bars
    figures = {name: fig for name, fig in analysis.figures}
    uids = [trace["uid"] for trace in figures["fleet"]["data"]]
    assert uids == ["fleet-round_robin", "fleet-prefix", "fleet-recommended-round_robin",
                    "fleet-recommended-prefix", "single-cache-ceiling"]  # fmt: skip
    ceiling = next(t for t in figures["fleet"]["data"] if t["uid"] == "single-cache-ceiling")
    assert ceiling["y"] == [75.0, 75.0]
    recommended = figures["fleet"]["data"][2]
    # the x axis is the RAM per replica with headroom, the table's: the recommended point
    # sits at its ceil(2 * 64 MiB * 1.1) bytes, and says them as the table does
    assert (recommended["x"], recommended["y"]) == ([ram / GIB], [50.0])
    assert figures["fleet"]["layout"]["xaxis"]["title"]["text"] == (
        "host RAM per replica, with 10 % headroom (log scale)")  # fmt: skip
    assert recommended["text"] == ["recommended 0.14 GiB of RAM per replica"]
    # the curve's two-slot point is at the RAM holding 2 slots: 2 * 64 MiB * 1.1
    (curve,) = [t for t in figures["fleet"]["data"] if t["uid"] == "fleet-round_robin"]
    at_two = [x for x, slots in zip(curve["x"], (p["capacity_slots"] for p in
              by_router["round_robin"]["mrc"]), strict=True) if slots == 2]  # fmt: skip
    assert at_two == [pytest.approx(2 * SLOT_BYTES * 1.1 / GIB)]
    requests = next(t for t in figures["fleet_load"]["data"] if t["uid"] == "load-requests-prefix")
    assert requests["y"] == [4, 0]
    for name in ("fleet", "fleet_load", "admission"):
        assert f'id="chart-{name}"' in page

    # fleet.csv: the curve per router and capacity
    download = client.get(reverse("analysis_download", args=[analysis.pk, "fleet.csv"]))
    table = list(csv.DictReader(io.StringIO(download.content.decode())))
    two_slots = [r for r in table if r["router"] == "round_robin" and r["capacity_slots"] == "2"]
    assert len(two_slots) == 1
    assert float(two_slots[0]["hit_ratio"]) == pytest.approx(0.5)
    assert float(two_slots[0]["capacity_gib"]) == pytest.approx(2 * SLOT_BYTES / GIB)


def test_a_gpu_cache_takes_its_share_of_the_hits_by_hand(client, analyst, four_requests):
    """One slot of GPU prefix cache per replica (64 MiB), round robin on 2 replicas: at
    each replica's second request block 1 (touched last, stack distance 1) is a GPU hit;
    block 2 (distance 2) needs 2 slots of RAM. GPU: 2 * 512 of 4096 tokens, 25 %; RAM,
    from 2 slots: as much again. The recommendation (90 % of the 50 % ceiling) is those 2
    slots: 0.14 GiB per replica, which fits a 1 GiB host."""
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.post(
        reverse("analysis_new", args=[four_requests.pk]),
        _reanalysis(replicas="2", routers=["round_robin"], gpu_cache_gib=str(SLOT_BYTES / GIB),
                    host_ram_gib="1"),
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    assert analysis.report["fleet"]["gpu_cache_slots"] == 1
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    row = _table(page)["round_robin"]
    assert (row["ceiling"], row["hit_ratio"]) == ("50.0 %", "50.0 %")
    assert (row["gpu_hit_ratio"], row["ram_hit_ratio"]) == ("25.0 %", "25.0 %")
    assert (row["ram_bytes"], row["host_fits"]) == ("0.14 GiB", "fits")
    assert "Round robin over 2 replicas reaches a 50.0 % ceiling;" in page
    assert "The pooled store's RAM per replica" not in page  # no pooled store asked for


def test_admission_is_explained_with_both_sizes(client, analyst, four_requests):
    """Stored at its second use, a block's first two uses miss: only requests 2 and 3 hit,
    2 * 1024 of 4096 tokens, a 50 % ceiling against the usual 75 %; both need two slots
    (the usual curve reaches 90 % of 75 % only with both blocks)."""
    assert client.login(username=analyst.username, password=PASSWORD)
    analysis = Analysis.objects.get(upload=four_requests)
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    text = html.unescape(re.sub(r"\s+", " ", page))
    ram = -(-2 * SLOT_BYTES * 11 // 10)
    gib = f"{ram / GIB:,.2f} GiB"
    assert (
        f"The LRU recommendation stores one-offs too: {gib} of RAM for a 75.0 % hit ratio "
        "(ceiling 75.0 %)." in text
    )
    assert (
        "Storing a block only at its second use (vLLM's store_threshold 2) recommends "
        f"{gib} of RAM for 50.0 % (ceiling 50.0 %); its target is 90 % of its own ceiling, "
        "so only equal sizes compare the two." in text
    )
    # both recommend two slots (2 * 64 MiB = 0.125 GiB, "0.12 GiB"): one equal size, where
    # storing every block hits requests 1-3 (75 %) and admission only 2 and 3 (50 %)
    assert analysis.report["admission"]["at_equal_size"][0]["capacity_slots"] == 2
    assert (
        f"At {2 * SLOT_BYTES / GIB:,.2f} GiB of cache (both recommended capacities), it hits "
        "50.0 % where storing every block hits 75.0 %. On this traffic admission does not pay "
        "at this size: the one-offs it keeps out are fewer than the second uses it gives up."
        in text
    )
    # the chart marks both curves at that size: 75 % and 50 % at the RAM holding 0.125 GiB
    # of cache, with 10 % headroom (the chart's x axis)
    figures = {name: fig for name, fig in analysis.figures}
    marks = {t["uid"]: (t["x"], t["y"]) for t in figures["admission"]["data"]
             if t["uid"].endswith("at-equal-size")}  # fmt: skip
    at = pytest.approx([2 * SLOT_BYTES * 1.1 / GIB])
    assert marks == {"admission-1-at-equal-size": (at, [75.0]),
                     "admission-k-at-equal-size": (at, [50.0])}  # fmt: skip
    # one cache fed all of the traffic: no fleet, so the headline cards need no label
    assert "data-one-cache" not in page
    # no fleet asked for: a hint to the form instead of the section
    assert "data-no-fleet" in page and 'id="fleet-table"' not in page
    assert "fleet.csv" not in page


def _table(page: str) -> dict[str, dict]:
    """The fleet table's cells by router and data-metric, and its three load cells."""
    body = page.split('id="fleet-table"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for router, row in re.findall(r'<tr data-router="(\w+)">(.*?)</tr>', body, re.S):
        cells = dict(re.findall(r'data-metric="(\w+)">([^<]*)<', row))
        cells["load"] = re.findall(r'<td class="num">([^<]*×)</td>', row)
        rows[router] = cells
    return rows


def test_sessions_on_a_log_without_them_deal_as_round_robin(client, analyst, four_requests):
    """The trace names no sessions: routing by session deals the four requests round robin
    among themselves (metrics.md section 8), exactly as round robin does. The page says so
    instead of reporting a second result: one line on the chart, whose legend names both,
    the session row naming round robin, the sentence saying what session routing did."""
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.post(
        reverse("analysis_new", args=[four_requests.pk]),
        _reanalysis(replicas="2", routers=["round_robin", "session"]),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    text = html.unescape(re.sub(r"\s+", " ", page))
    # round robin: each replica's second request hits both blocks, 2 * 1024 of 4096: 50 %
    assert (
        "Round robin over 2 replicas reaches a 50.0 % ceiling; one cache fed all of the "
        "traffic reaches 75.0 %. Routing by session deals as round robin here: the log names "
        "no sessions." in text
    )
    assert "For 90 % of its ceiling, a replica needs 0.14 GiB with round robin (host" in text
    session_row = re.search(r'<tr data-router="session" data-same-as="round_robin">(.*?)</tr>',
                            page, re.S)  # fmt: skip
    assert session_row is not None
    assert (
        "same requests as round robin (the log names no sessions): its figures are round "
        "robin's" in html.unescape(session_row.group(1))
    )
    figures = {name: fig for name, fig in analysis.figures}
    fleet_traces = figures["fleet"]["data"]
    assert [t["uid"] for t in fleet_traces] == [
        "fleet-round_robin", "fleet-recommended-round_robin", "single-cache-ceiling"]  # fmt: skip
    assert fleet_traces[0]["name"] == "round robin (= session)"
    load_uids = [t["uid"] for t in figures["fleet_load"]["data"]]
    assert load_uids == [f"load-{key}-round_robin"
                         for key in ("requests", "prompt_tokens", "prefill_tokens")]  # fmt: skip

    # the first screen is per replica, for the router a policy takes by default (round
    # robin: session deals alike); the knee and the traffic's ratios are one cache's
    per_replica = analysis.report["fleet"]["routers"][0]["recommendation"]
    first = re.search(r'data-metric="ram_bytes">([^<]*)<', page).group(1)
    assert first == gib(per_replica["ram_bytes"])
    assert "Sized for each of 2 replicas with round robin" in text
    assert page.count("<small data-one-cache>one cache</small>") == 2
    assert ("The traffic's hit ratios are one cache's: one cache fed all of the traffic. The "
            "sizes above are per replica, for each of the fleet's 2 replicas: see the fleet's "
            "figures per replica for every router.") in re.sub(r"<[^>]+>", "", text)  # fmt: skip
    assert '<a href="#fleet">the fleet' in page
    # and in the upload's list of analyses: a link to the fleet's figures per replica
    listing = client.get(reverse("upload_detail", args=[four_requests.pk])).content.decode()
    assert "Recommended RAM, one cache" in listing
    links = re.findall(r'href="([^"]+)" data-per-replica-link', listing)
    assert links == [reverse("analysis_detail", args=[analysis.pk]) + "#fleet"]
    # the same list under a re-analysis form sent back with its error
    refused = client.post(reverse("analysis_new", args=[four_requests.pk]),
                          _reanalysis(replicas="0"))  # fmt: skip
    assert refused.status_code == 400
    listing = refused.content.decode()
    assert re.findall(r'href="([^"]+)" data-per-replica-link', listing) == links
    assert gib(analysis.report["recommendation"]["ram_bytes"]) in listing
