"""Sizes wherever the console shows or exports them follow metrics.md section 8 (per TP
rank), the host check reads in words, and absurd numbers are form errors, never a 500 —
also when they are already stored. Through the real views and the real command."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from console.downloads import json_file
from console.models import Analysis, Upload
from console.templatetags.kvscope import (
    bytes_h,
    duration,
    gib,
    gib_abs,
    gib_size,
    num,
    pct,
    signed,
    whole,
)
from tests.console.factories import PASSWORD, gib_shown
from tests.console.waiting import finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 2**30
LLAMA_8B_PER_RANK_AT_16 = 32 * 1 * 128 * 2 * 2  # max(1, 8 // 16) = 1 KV head per rank


def _form(**overrides) -> dict:
    data = {
        "block_tokens": "256", "model": "llama-3.1-8b", "windows": "300 3600", "scope": "global",
        "target": "90", "headroom": "10", "tp": "1", "min_reuses": "2",
        "doc_min_tokens": "512", "weight_dtype": "bf16", "concurrent_sequences": "32",
        "context_tokens": "8192",
    }  # fmt: skip
    return {**data, **overrides}


@pytest.fixture
def upload(client, analyst, chat_log):
    assert client.login(username=analyst.username, password=PASSWORD)
    with open(chat_log, "rb") as fh:
        data = {"name": "sizes", "files": [fh], "format": "auto", "block_sizes": ["256"],
                "retention": "delete"}  # fmt: skip
        client.post(reverse("upload_new"), data)
    return wait_for(lambda: (u := Upload.objects.get()).finished and u)


def _analyze(client, upload, **overrides) -> Analysis:
    response = client.post(reverse("analysis_new", args=[upload.pk]), _form(**overrides))
    assert response.status_code == 302, response.content.decode()[:2000]
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    return analysis


def test_heads_fewer_than_ranks_are_sized_per_rank_on_the_page_and_in_every_download(
    client, upload
):
    # Llama-3.1-8B (8 KV heads) on 16 ranks: each rank keeps one head, the replica 16
    analysis = _analyze(client, upload, tp="16", host_ram_gib="1", reserve_os_gib="0.5")
    rec = analysis.report["recommendation"]
    slots = rec["capacity_slots"]
    assert slots > 0
    # by hand: slots * 256 tokens * 16,384 bytes * 1.1 per rank (exact: 11/10, rounded up)
    per_rank = -(-slots * 256 * LLAMA_8B_PER_RANK_AT_16 * 11 // 10)
    assert rec["per_rank_bytes"] == per_rank
    assert rec["ram_bytes"] == 16 * per_rank
    # twice the model's bytes: the old rule (capacity * 1.1, split over 16) gave half
    assert rec["ram_bytes"] == pytest.approx(2 * rec["capacity_bytes"] * 1.1, abs=16)
    assert rec["host"]["spare_bytes"] == GIB // 2 - 16 * per_rank

    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    assert f"{per_rank / GIB:,.2f} GiB" in page
    assert f"{16 * per_rank / GIB:,.2f} GiB" in page
    assert "16,384 bytes per token each" in page
    assert "8 KV heads on 16 ranks, so heads are replicated" in page
    assert "262,144 bytes per token, more than the model's 131,072" in page
    # the chart's x axis is the RAM, and says why it is more than the curve's capacity * 1.1
    mrc = dict(analysis.figures)["mrc"]
    marker = next(t for t in mrc["data"] if t.get("uid") == "recommended")
    assert marker["x"] == [16 * per_rank / GIB]
    title = "host RAM for KV blocks, with 10 % headroom and ×2 KV on 16 TP ranks (log scale)"
    assert mrc["layout"]["xaxis"]["title"]["text"] == title

    report = json.loads(
        client.get(reverse("analysis_download", args=[analysis.pk, "report.json"])).content
    )
    assert report["recommendation"]["per_rank_bytes"] == per_rank
    assert report["recommendation"]["ram_bytes"] == 16 * per_rank
    assert report["recommendation"]["per_rank_kv_bytes_per_token"] == LLAMA_8B_PER_RANK_AT_16
    # the curve stays in the model's bytes (metrics.md sections 4-5)
    curve = client.get(reverse("analysis_download", args=[analysis.pk, "curve.csv"]))
    rows = list(csv.DictReader(io.StringIO(curve.content.decode())))
    assert all(int(r["capacity_bytes"]) == int(r["capacity_slots"]) * 256 * 131_072 for r in rows)

    # the comparison's rows read the same numbers
    other = _analyze(client, upload, tp="2")
    compare = client.get(reverse("compare"), {"a": [analysis.pk, other.pk]}).content.decode()
    assert gib_shown(16 * per_rank) in compare and gib_shown(per_rank) in compare
    # per rank per token: 16,384 bytes at tp 16, 65,536 at tp 2 (4 of the 8 heads)
    assert "KV bytes per token per rank" in compare
    assert ">16,384<" in compare and f">{32 * 4 * 128 * 2 * 2:,}<" in compare


def test_mla_on_the_page(client, upload):
    analysis = _analyze(client, upload, model="deepseek-v3", tp="8")
    rec = analysis.report["recommendation"]
    per_rank = -(-rec["capacity_slots"] * 256 * 61 * 576 * 2 * 11 // 10)
    assert (rec["per_rank_bytes"], rec["ram_bytes"]) == (per_rank, 8 * per_rank)
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    assert "every rank keeps the whole MLA latent" in page
    assert f"{per_rank / GIB:,.2f} GiB" in page


def test_the_command_line_prints_the_per_rank_sizes(chat_log, tmp_path, capsys):
    out = tmp_path / "r.json"
    call_command("analyze", str(chat_log), "--json", str(out), "--tp", "16")
    rec = json.loads(out.read_text())["recommendation"]
    per_rank = -(-rec["capacity_slots"] * 256 * LLAMA_8B_PER_RANK_AT_16 * 11 // 10)
    assert rec["per_rank_bytes"] == per_rank and rec["ram_bytes"] == 16 * per_rank
    err = capsys.readouterr().err
    assert (
        f"recommended RAM {16 * per_rank / GIB:.2f} GiB ({per_rank / GIB:.2f} GiB per rank)" in err
    )
    with pytest.raises(CommandError, match="cannot share 8 KV heads"):
        call_command("analyze", str(chat_log), "--json", str(out), "--tp", "3")
    with pytest.raises(CommandError, match="out of range"):
        call_command("analyze", str(chat_log), "--json", str(out), "--host-ram-gib", "1e308")


def test_a_recommendation_that_does_not_fit_says_short_by_without_a_minus(client, upload):
    analysis = _analyze(client, upload, host_ram_gib="0.001")
    host = analysis.report["recommendation"]["host"]
    assert not host["fits"] and host["spare_bytes"] < 0
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    assert f"short by {-host['spare_bytes'] / GIB:,.2f} GiB" in page
    assert "short by -" not in page
    roomy = _analyze(client, upload, host_ram_gib="512")
    spare = roomy.report["recommendation"]["host"]["spare_bytes"]
    page = client.get(reverse("analysis_detail", args=[roomy.pk])).content.decode()
    assert f"fits with {spare / GIB:,.2f} GiB to spare" in page


def _errors_at(response, field: str) -> str:
    """The error text rendered at one field of the analysis form."""
    page = response.content.decode()
    start = page.index(f'id="id_{field}_error"')
    return page[start : page.index("</div>", start)]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("host_ram_gib", "1e308", "less than or equal to 1048576"),
        ("reserve_os_gib", "1e308", "less than or equal to 1048576"),
        ("gpu_memory_gib", "1e308", "less than or equal to 4096"),
        ("params_b", "1e300", "less than or equal to 100000"),
        ("min_reuses", str(10**30), "less than or equal to 1000000000"),
        ("doc_min_tokens", str(10**30), "less than or equal to 1000000000"),
        ("concurrent_sequences", str(10**30), "less than or equal to 65536"),
        ("context_tokens", str(10**30), "less than or equal to 10485760"),
        ("lifetime", "1e300", "less than or equal to 1000000000"),
        ("windows", "300 1e300", "at most 1,000,000,000 s"),
        ("windows", "inf", "positive windows"),
        ("windows", "nan", "positive windows"),
        ("target", "1e300", "a percentage of the ceiling from 1 to 100"),
        ("headroom", "1e300", "a percentage from 0 to 500"),
        ("tp", str(10**30), "less than or equal to 64"),
        ("tp", "3", "cannot share 8 KV heads"),
    ],
)
def test_absurd_numbers_are_errors_at_their_field(client, upload, field, value, message):
    before = Analysis.objects.count()
    response = client.post(reverse("analysis_new", args=[upload.pk]), _form(**{field: value}))
    assert response.status_code == 400  # the form page again, with the error at its field
    assert message in _errors_at(response, field)
    assert Analysis.objects.count() == before


def test_reserves_that_take_the_whole_host_are_an_error_at_host_ram(client, upload):
    # 32 + 8 GiB of reserves on a 16 GiB host used to show "-24.00 GiB available"
    before = Analysis.objects.count()
    form = _form(host_ram_gib="16", reserve_os_gib="32", reserve_page_cache_gib="8")
    response = client.post(reverse("analysis_new", args=[upload.pk]), form)
    assert response.status_code == 400
    assert "The reserves (40.00 GiB) take all of the host RAM (16.00 GiB)" in _errors_at(
        response, "host_ram_gib"
    )
    assert Analysis.objects.count() == before
    # reserves below the host's RAM are an analysis, as before
    fits = _analyze(client, upload, host_ram_gib="64", reserve_os_gib="32")
    assert fits.report["recommendation"]["host"]["available_bytes"] == 32 * 2**30


def test_absurd_values_already_stored_never_break_the_page_or_the_json(client, upload):
    analysis = _analyze(client, upload, host_ram_gib="64")
    report = analysis.report
    rec = report["recommendation"]
    # what a row saved before the bounds could hold: integers past 64 bits and past floats
    rec["host"]["host_ram_bytes"] = 10**330  # past any float
    rec["host"]["available_bytes"] = 10**30
    rec["per_rank_bytes"] = 10**40
    report["params"]["min_reuses"] = 10**30
    # (inf cannot be stored: both databases refuse JSON with Infinity in it)
    params = dict(analysis.params, min_reuses=10**30)
    Analysis.objects.filter(pk=analysis.pk).update(report=report, params=params)

    page = client.get(reverse("analysis_detail", args=[analysis.pk]))
    assert page.status_code == 200
    assert "out of range" in page.content.decode()
    response = client.get(reverse("analysis_download", args=[analysis.pk, "report.json"]))
    assert response.status_code == 200
    data = json.loads(response.content)
    assert data["params"]["min_reuses"] == 10**30  # exact, as stored
    assert data["recommendation"]["host"]["host_ram_bytes"] == 10**330
    assert data["requests"] == report["requests"]


def test_display_filters_and_the_json_file_take_any_stored_number():
    for value in (float("inf"), float("nan"), 10**400, "x"):
        for shown in (gib(value), gib_abs(value), gib_size(value), bytes_h(value), pct(value),
                      duration(value), signed(value, "bytes")):  # fmt: skip
            assert shown == "out of range"
    assert num(10**30) == whole(10**30) == f"{10**30:,}"
    assert gib(-5 * GIB) == "-5.00 GiB" and gib_abs(-5 * GIB) == "5.00 GiB"
    # a comparison's differences: points of hit ratio, sizes in GiB at any magnitude
    assert signed(0.032, "ratio") == "+3.2 points" and signed(0, "ratio") == "±0.0 points"
    assert signed(-120 * GIB, "bytes") == "−120.00 GiB" and signed(GIB // 4, "bytes") == "+0.25 GiB"
    assert gib_size(5 * 1024 * GIB) == "5,120.00 GiB"  # never TiB
    assert json.loads(json_file({"a": 10**30, "b": float("inf"), "c": [1.5]})) == {
        "a": 10**30, "b": None, "c": [1.5]}  # fmt: skip
