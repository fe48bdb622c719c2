"""Benchmark evidence through the pages: three vLLM result files uploaded with their
tags, the matrix coloured against the SLO, and the boundary the engine computes."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from analysis.benchmarks.files import parse_result
from analysis.benchmarks.results import ResultFileError
from console.benchmarks import charts
from console.benchmarks.services import bench_runs_create
from console.models import BenchRun
from console.policies.body import digest
from console.policies.services import (
    policy_create,
    version_approve,
    version_submit,
    version_update,
)
from tests.analysis.factories import aiperf_summary, vllm_result
from tests.console.factories import BENCH_TAGS, PASSWORD, complete, vllm_file

pytestmark = pytest.mark.django_db(transaction=True)


def test_runs_are_uploaded_with_tags_and_the_matrix_shows_the_boundary(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    files = [vllm_file(f"c{n}.json", ttft=t, max_concurrency=n)
             for n, t in ((4, 600.0), (16, 1500.0), (64, 3100.0))]  # fmt: skip
    response = client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": files})
    assert response.status_code == 302
    runs = list(BenchRun.objects.order_by("concurrency"))
    assert [r.concurrency for r in runs] == [4, 16, 64]
    assert runs[0].raw["p99_ttft_ms"] == 600.0  # the file itself is kept
    assert all(r.result == parse_result(r.raw) for r in runs)  # and its numbers, read once
    assert runs[0].versions == {"driver": "570.86", "cuda": "12.8", "engine": "vllm 0.11"}
    assert runs[0].topology == "GPU0 X NV18" and runs[0].model_name == "meta-llama/Llama-3.1-8B"
    # with RAM offload the 64-user run holds
    ram = [vllm_file("r64.json", ttft=1700.0, max_concurrency=64)]
    client.post(
        reverse("evidence_list"), {**BENCH_TAGS, "tier": "ram", "ram_gib": "64", "files": ram}
    )
    page = client.get(reverse("evidence_matrix"),
                      {"model": "meta-llama/Llama-3.1-8B", "p99_ttft_ms": "2000",
                       "p99_itl_ms": "100"}).content.decode()  # fmt: skip
    assert "No offload" in page and "CPU RAM 64 GiB" in page
    assert page.count('class="cell bad"') == 1 and page.count('class="cell ok"') == 3
    assert "up to <strong>16</strong> concurrent" in page  # no offload breaks at 64
    assert "up to <strong>64</strong> concurrent" in page  # RAM offload holds
    assert 'id="chart-tier-0"' in page and 'id="chart-tier-1"' in page
    lines = json.loads(page.split('id="fig-lines" type="application/json">')[1].split("<")[0])
    assert [(t["name"], t["x"], t["y"]) for t in lines["data"]] == [
        ("No offload · 8,192 tokens", [4, 16, 64], [600.0, 1500.0, 3100.0]),
        ("CPU RAM 64 GiB · 8,192 tokens", [64], [1700.0])]  # fmt: skip
    assert lines["layout"]["shapes"][0]["y0"] == 2000.0  # the SLO line
    # a tighter objective moves the boundary
    tight = client.get(reverse("evidence_matrix"), {"model": "meta-llama/Llama-3.1-8B",
                       "p99_ttft_ms": "1000", "p99_itl_ms": "100"}).content.decode()  # fmt: skip
    assert "up to <strong>4</strong> concurrent" in tight


def _figure(page: str, name: str) -> dict:
    return json.loads(page.split(f'id="fig-{name}" type="application/json">')[1].split("<")[0])


def test_heatmap_cells_are_coloured_pass_or_fail_against_every_objective(client, analyst):
    """A run inside the TTFT objective but over the ITL one is a fail cell (red), as the
    table and the boundary count it; the text still shows its p99 TTFT."""
    assert client.login(username=analyst.username, password=PASSWORD)
    files = [vllm_file("ok.json", ttft=600.0, itl=35.0, max_concurrency=4),
             vllm_file("itl.json", ttft=650.0, itl=150.0, max_concurrency=16),
             vllm_file("tpot.json", ttft=700.0, tpot=90.0, max_concurrency=32),
             vllm_file("failed.json", ttft=700.0, failed=2, max_concurrency=64)]  # fmt: skip
    assert client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": files}).status_code == 302
    slo = {"model": "meta-llama/Llama-3.1-8B", "p99_ttft_ms": "2000", "p99_tpot_ms": "60",
           "p99_itl_ms": "100"}  # fmt: skip
    page = client.get(reverse("evidence_matrix"), slo).content.decode()
    assert page.count('class="cell bad"') == 3 and page.count('class="cell ok"') == 1
    trace = _figure(page, "tier-0")["data"][0]
    # columns: concurrency 4, 16, 32, 64; only the first is inside every objective
    assert trace["z"] == [[0, 1, 1, 1]]
    assert trace["text"] == [["600 ms ✓", "650 ms ✗", "700 ms ✗", "700 ms ✗"]]
    assert trace["customdata"] == [["inside the SLO", "breaks p99 ITL", "breaks p99 TPOT",
                                    "breaks failed requests"]]  # fmt: skip
    # 0 is drawn in the pass colour and 1 in the fail colour, whatever the TTFT
    assert (trace["zmin"], trace["zmax"]) == (0, 1)
    scale = dict((stop, colour) for stop, colour in trace["colorscale"][::3])
    assert scale == {0: charts.PASS_COLOUR, 1: charts.FAIL_COLOUR}


def test_a_file_that_is_not_a_result_stores_nothing(analyst):
    good = vllm_file("good.json", max_concurrency=8)
    bad = SimpleUploadedFile("notes.json", b'{"completed": 3}')
    with pytest.raises(ResultFileError, match=r"notes\.json: not a vllm bench serve result"):
        bench_runs_create(files=[good, bad], tags=BENCH_TAGS, user=analyst)
    assert not BenchRun.objects.exists()


def test_only_analysts_upload_runs(client, auditor):
    assert client.login(username=auditor.username, password=PASSWORD)
    assert "Upload runs" not in client.get(reverse("evidence_list")).content.decode()
    response = client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": [vllm_file("x.json")]})
    assert response.status_code == 403 and not BenchRun.objects.exists()


def test_a_policy_cites_runs_and_its_sign_off_shows_them(client, analysis, analyst, approver):
    on = vllm_file("offload-on.json", ttft=1234.0, max_concurrency=32)
    (run,) = bench_runs_create(files=[on], tags={**BENCH_TAGS, "tier": "ram", "ram_gib": 64.0},
                               user=analyst)  # fmt: skip
    version = policy_create(name="cited", user=analyst, analysis=analysis)
    version = version_update(version=version, body=complete(version.body), user=analyst,
                             analysis=analysis, bench_runs=[run])  # fmt: skip
    cited = version.body["evidence"]["benchmark_runs"]
    assert cited == [{"id": run.pk, "file": "offload-on.json", "model": run.model_name,
                      "tier": "CPU RAM 64 GiB", "context_tokens": 8192, "concurrency": 32,
                      "p99_ttft_ms": 1234.0, "p99_itl_ms": 35.0, "completed": 100,
                      "failed": 0}]  # fmt: skip
    version_submit(version=version, user=analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    version.refresh_from_db()
    # the citation is signed too: the digest changes if it is taken out
    uncited = {**version.body, "evidence": {k: v for k, v in version.body["evidence"].items()
                                            if k != "benchmark_runs"}}  # fmt: skip
    assert version.digest == digest(version.body) != digest(uncited)
    assert client.login(username=approver.username, password=PASSWORD)
    page = client.get(reverse("policy_signoff", args=[version.pk])).content.decode()
    assert "data-bench-evidence" in page and "offload-on.json" in page and ">1234<" in page


def test_an_aiperf_summary_is_uploaded_with_its_model_and_limit_from_the_tags(client, analyst):
    assert client.login(username=analyst.username, password=PASSWORD)
    summary = SimpleUploadedFile("profile_export_aiperf.json",
                                 json.dumps(aiperf_summary(ttft_p99=2500.0)).encode())  # fmt: skip
    broken = SimpleUploadedFile("notes.json", b'{"completed": 3,\n nope}')
    refused = client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": [summary, broken]})
    form = refused.context["form"]  # every problem at once, each at the field to mend
    assert form.errors["model_name"] == [
        "profile_export_aiperf.json does not name its model: give it."]  # fmt: skip
    assert form.errors["concurrency"] == [
        "profile_export_aiperf.json has no max_concurrency: give the limit it ran with."
    ]
    assert form.errors["files"] == [
        "notes.json: not a JSON file (it stops making sense at line 2, column 2)"
    ]
    assert 'id="upload-errors"' in refused.content.decode()  # summarized at the top too
    assert not BenchRun.objects.exists()
    summary.seek(0)
    tags = {**BENCH_TAGS, "concurrency": "8", "model_name": "llama-8b", "request_rate": "4"}
    client.post(reverse("evidence_list"), {**tags, "files": [summary]})
    run = BenchRun.objects.get()
    assert (run.tool, run.model_name, run.concurrency) == ("aiperf", "llama-8b", 8)
    assert run.request_rate == 4.0  # the tag: AIPerf's summary has no documented rate field
    slo = {"p99_ttft_ms": "2000", "p99_itl_ms": "100"}
    page = client.get(reverse("evidence_matrix"), {"model": "llama-8b", **slo}).content.decode()
    assert page.count('class="cell bad"') == 1 and "TTFT 2500" in page


def test_one_schedule_side_by_side_cold_warm_off_on(client, analyst):
    """Changes against the cold run without offload, RAM growth when the files carry it."""
    assert client.login(username=analyst.username, password=PASSWORD)

    def upload(ttft, completed, tier="none", warm=False, **extra):
        tags = {**BENCH_TAGS, "tier": tier, "ram_gib": "64" if tier != "none" else ""}
        if warm:
            tags["warm"] = "on"
        values = {"max_concurrency": 16, "failed": 200 - completed, **extra}  # 200 sent
        files = [vllm_file("run.json", ttft=ttft, completed=completed, **values)]
        assert client.post(reverse("evidence_list"), {**tags, "files": files}).status_code == 302

    upload(2000.0, 180, host_ram_start_gib="100", host_ram_end_gib="101.5")
    upload(1600.0, 190, tier="ram", host_ram_growth_gib=42.25)
    upload(600.0, 200, tier="ram", warm=True)
    upload(900.0, 200, max_concurrency=4)  # another schedule, alone
    model = "meta-llama/Llama-3.1-8B"
    page = client.get(reverse("evidence_compare"), {"model": model}).content.decode()
    assert page.count('<section class="schedule"') == 1
    assert 'data-schedule="8192x16@inf"' in page
    assert "Changes are against <strong>No offload · cold</strong>" in page
    rows = page.split("<tbody>")[1].split("</tbody>")[0].split('<tr data-row="')[1:]
    assert [r.split('"')[0] for r in rows] == [
        "No offload · cold", "CPU RAM 64 GiB · cold", "CPU RAM 64 GiB · warm"]  # fmt: skip
    assert "baseline" in rows[0] and "1.50 GiB" in rows[0]
    assert "−20.0 %" in rows[1] and "+10" in rows[1] and "42.25 GiB" in rows[1]  # 1600 vs 2000
    assert "−70.0 %" in rows[2] and "+20" in rows[2]  # 600 vs 2000, 200 vs 180
    # TTFT mean, median, p99 per row (the fixture's mean and median are 0.7 and 0.6 x p99)
    assert '<td class="num">1400</td><td class="num">1200</td><td class="num">2000</td>' in rows[0]
    assert '<td class="num">420</td><td class="num">360</td><td class="num">600</td>' in rows[2]
    assert 'id="chart-schedule-0"' in page
    empty = client.get(reverse("evidence_compare"), {"model": "none"}).content.decode()
    assert "data-empty" in empty


def test_runs_stored_before_get_their_numbers_from_the_kept_file():
    """Migration 0011 reads each stored run once; a key the old parser never read (here a
    percentile that is not a number) does not stop it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("console", "0010_bench_runs")],
        [("console", "0011_bench_run_tool_and_numbers")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("console", "BenchRun")
    fields = {"model_name": "m", "tier": "none", "context_tokens": 4096, "concurrency": 8}
    good = old.objects.create(name="a.json", raw=vllm_result(ttft=777.0), **fields)
    odd_raw = vllm_result(ttft=888.0, p90_ttft_ms="n/a", host_ram_end_gib="?")
    odd = old.objects.create(name="b.json", raw=odd_raw, **fields)
    executor = MigrationExecutor(connection)  # a fresh graph, as `migrate` would load it
    executor.migrate(after)
    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
    runs = {r.name: r for r in BenchRun.objects.filter(pk__in=[good.pk, odd.pk])}
    assert runs["a.json"].result == parse_result(vllm_result(ttft=777.0))
    assert runs["b.json"].result.p99("ttft") == 888.0 and runs["b.json"].tool == "vllm"
    assert "p90_ttft" not in runs["b.json"].result.latencies_ms


def test_the_matrix_of_one_request_rate(client, analyst):
    """Runs at two rates: by default a cell shows its worst run; a chosen rate shows its own."""
    assert client.login(username=analyst.username, password=PASSWORD)
    for rate, ttft in (("", 3000.0), ("2.5", 900.0)):  # blank: the file's "inf"
        files = [vllm_file("r.json", ttft=ttft, max_concurrency=16)]
        client.post(reverse("evidence_list"), {**BENCH_TAGS, "request_rate": rate, "files": files})
    assert sorted(BenchRun.objects.values_list("request_rate", flat=True),
                  key=lambda r: r or 0) == [None, 2.5]  # fmt: skip
    slo = {"model": "meta-llama/Llama-3.1-8B", "p99_ttft_ms": "2000", "p99_itl_ms": "100"}
    every = client.get(reverse("evidence_matrix"), slo).content.decode()
    assert '<option value="2.5">2.5 req/s</option>' in every
    assert every.count('class="cell bad"') == 1 and "TTFT 3000" in every  # the worst
    assert "2 runs: the worst shown" in every
    paced = client.get(reverse("evidence_matrix"), {**slo, "rate": "2.5"}).content.decode()
    assert paced.count('class="cell ok"') == 1 and "TTFT 900" in paced
    assert "runs: the worst shown" not in paced
    # no TTFT objective: the cell is coloured by the objectives left (pass), not by its ms
    free = client.get(reverse("evidence_matrix"), {**slo, "p99_ttft_ms": "", "rate": "2.5"})
    heatmap = _figure(free.content.decode(), "tier-0")
    assert heatmap["data"][0]["z"] == [[0]] and heatmap["data"][0]["zmax"] == 1
    unlimited = client.get(reverse("evidence_matrix"), {**slo, "rate": "unlimited"})
    assert "TTFT 3000" in unlimited.content.decode()
    refused = client.get(reverse("evidence_matrix"), {**slo, "rate": "7"}).content.decode()
    assert "Select a valid choice" in refused


def test_runs_download_as_csv_and_each_file_as_uploaded(client, analyst, auditor):
    assert client.login(username=analyst.username, password=PASSWORD)
    files = [vllm_file("c4.json", ttft=600.0, max_concurrency=4, host_ram_growth_gib=3.5),
             vllm_file("c16.json", ttft=1500.0, max_concurrency=16, failed=2)]  # fmt: skip
    client.post(reverse("evidence_list"), {**BENCH_TAGS, "tier": "ram", "ram_gib": "64",
                                           "kv_dtype": "fp8", "files": files})  # fmt: skip
    client.logout()
    assert client.login(username=auditor.username, password=PASSWORD)  # readers may download
    response = client.get(reverse("evidence_runs_csv"), {"model": "meta-llama/Llama-3.1-8B"})
    assert response["Content-Disposition"] == (
        'attachment; filename="kvscope-runs-meta-llamallama-31-8b.csv"')  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["file"], r["concurrency"], r["p99_ttft_ms"], r["failed"]) for r in rows] == [
        ("c4.json", "4", "600.0", "0"), ("c16.json", "16", "1500.0", "2")]  # fmt: skip
    assert rows[0]["tiers"] == "CPU RAM 64 GiB, KV fp8" and rows[0]["request_rate"] == "unlimited"
    assert rows[0]["median_ttft_ms"] == "360.0" and rows[0]["host_ram_growth_gib"] == "3.5"
    assert rows[0]["driver"] == "570.86" and rows[1]["host_ram_growth_gib"] == ""
    run = BenchRun.objects.get(name="c16.json")
    raw = client.get(reverse("evidence_run_raw", args=[run.pk]))
    assert json.loads(raw.content) == run.raw and run.raw["failed"] == 2
    assert client.get(reverse("evidence_run_raw", args=[run.pk + 99])).status_code == 404
