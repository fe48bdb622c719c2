"""A benchmark run uploaded with the engine's /metrics scraped before and after it (#18):
the hit ratio its counters measured is stored with the run, shown on its row, its page
and in the CSV, audited without the text; a pair that gives no ratio stores nothing and
says why on the field to mend."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from console.models import AuditEvent, BenchRun
from tests.analysis.test_scrapes import vllm_scrape
from tests.console.factories import BENCH_TAGS, PASSWORD, vllm_file

pytestmark = pytest.mark.django_db(transaction=True)
MODEL = "meta-llama/Llama-3.1-8B"
# 12,000 prompt tokens looked up; 4,800 GPU hits and 2,000 from the connector (by hand:
# (9000-1000)+(4500-500); (3300-100)+(1650-50); (1610-10)+(400-0))
BEFORE = vllm_scrape({"0": 1000, "1": 500}, {"0": 100, "1": 50}, {"0": 10, "1": 0})
AFTER = vllm_scrape({"0": 9000, "1": 4500}, {"0": 3300, "1": 1650}, {"0": 1610, "1": 400})


def upload(client, user, **fields):
    assert client.login(username=user.username, password=PASSWORD)
    files = fields.pop("files", None) or [vllm_file("c16.json", ttft=900.0, max_concurrency=16)]
    data = {**BENCH_TAGS, "tier": "ram", "ram_gib": "64", "files": files, **fields}
    return client.post(reverse("evidence_list"), data)


def errors_of(response) -> dict[str, list[str]]:
    return {name: list(errors) for name, errors in response.context["form"].errors.items()}


def test_pasted_scrapes_give_the_runs_measured_hit_ratio_everywhere(client, analyst, auditor):
    response = upload(client, analyst, scrape_before=BEFORE, scrape_after=AFTER)
    assert response.status_code == 302
    run = BenchRun.objects.get()
    assert run.measured["engine"] == "vllm"
    assert run.measured["hit_ratio"] == pytest.approx(6800 / 12000)
    assert [(t["tier"], t["hit_tokens"]) for t in run.measured["tiers"]] == [
        ("gpu", 4800), ("connector", 2000)]  # fmt: skip
    assert run.scrapes == {"before": BEFORE, "after": AFTER}  # kept: the numbers re-derive
    event = AuditEvent.objects.get(action="benchmark.upload")
    assert event.details["measured_by"] == "vllm"
    assert event.details["measured_hit_ratio"] == round(6800 / 12000, 6)
    assert "vllm:prefix_cache_hits_total" not in str(event.details)  # never the text
    client.logout()
    assert client.login(username=auditor.username, password=PASSWORD)
    listed = client.get(reverse("evidence_list")).content.decode()
    assert '<td class="num" data-measured>56.7 %</td>' in listed
    page = client.get(reverse("evidence_run", args=[run.pk])).content.decode()
    assert "vLLM counted <strong>6,800</strong> of 12,000 prompt tokens" in page
    assert "<strong data-measured-ratio>56.7 %</strong>" in page
    assert "<td>GPU prefix cache</td><td class=\"num\">4,800</td><td class=\"num\">40.0 %</td>" in (
        page)  # fmt: skip
    assert "KV connector (CPU offload, LMCache)" in page and "16.7 %" in page
    table = client.get(reverse("evidence_runs_csv"), {"model": MODEL}).content.decode()
    rows = list(csv.DictReader(io.StringIO(table)))
    assert float(rows[0]["measured_hit_ratio"]) == pytest.approx(6800 / 12000)
    assert rows[0]["measured_by"] == "vLLM"


def test_scrapes_given_as_files_count_alike_and_a_run_without_says_how_to_get_one(client, analyst):
    files = {"scrape_before_file": SimpleUploadedFile("before.prom", BEFORE.encode()),
             "scrape_after_file": SimpleUploadedFile("after.prom", AFTER.encode())}  # fmt: skip
    assert upload(client, analyst, **files).status_code == 302
    assert (
        upload(client, analyst, files=[vllm_file("c4.json", max_concurrency=4)]).status_code == 302
    )
    with_scrapes, without = BenchRun.objects.order_by("pk")
    assert with_scrapes.measured["hit_tokens"] == 6800 and without.measured == {}
    page = client.get(reverse("evidence_run", args=[without.pk])).content.decode()
    assert "data-measured-empty" in page and "No engine metrics came with this run" in page
    listed = client.get(reverse("evidence_list")).content.decode()
    assert listed.count("data-measured>—</td>") == 1


def test_a_restart_between_the_scrapes_stores_nothing_and_names_the_counter(client, analyst):
    restarted = vllm_scrape({"0": 40, "1": 4500}, {"0": 0, "1": 1650}, {"0": 0, "1": 400})
    response = upload(client, analyst, scrape_before=BEFORE, scrape_after=restarted)
    assert response.status_code == 200 and not BenchRun.objects.exists()
    (problem,) = errors_of(response)["scrape_after"]
    assert 'vllm:prefix_cache_queries_total{engine="0",model_name="llama"}' in problem
    assert "went down from 1000 to 40" in problem and "restarted" in problem
    assert not AuditEvent.objects.filter(action="benchmark.upload").exists()


def test_each_scrape_is_checked_on_its_own_field(client, analyst):
    response = upload(client, analyst, scrape_before="up 1\nnot { prometheus\n")
    errors = errors_of(response)
    (unreadable,) = errors["scrape_before"]
    assert unreadable.startswith("the scrape before the run is not Prometheus text (line 2): ")
    assert errors["scrape_after"] == ["Give the scrape after the run too: the measured hit "
                                      "ratio is the counters' difference."]  # fmt: skip
    both = upload(client, analyst, scrape_before=BEFORE, scrape_after=AFTER,
                  scrape_after_file=SimpleUploadedFile("a.prom", AFTER.encode()))  # fmt: skip
    assert errors_of(both)["scrape_after"] == ["Paste the scrape or give its file, not both."]
    not_text = SimpleUploadedFile("a.prom", b"\xff\xfe metrics")
    binary = upload(client, analyst, scrape_before=BEFORE, scrape_after_file=not_text)
    assert errors_of(binary)["scrape_after_file"] == [
        "a.prom is not UTF-8 text (byte 0): save the /metrics page as it was served."]  # fmt: skip
    two = [vllm_file("c4.json", max_concurrency=4), vllm_file("c8.json", max_concurrency=8)]
    several = upload(client, analyst, files=two, scrape_before=BEFORE, scrape_after=AFTER)
    assert "Scrapes measure one run" in errors_of(several)["files"][0]
    assert not BenchRun.objects.exists()


def test_every_field_of_the_upload_form_is_in_one_of_its_fieldsets(client, analyst):
    from console.benchmarks.forms import BenchUploadForm

    assert client.login(username=analyst.username, password=PASSWORD)
    page = client.get(reverse("evidence_list")).content.decode()
    form = page.split('<details id="upload"')[1].split("</form>")[0]
    for name in BenchUploadForm.base_fields:
        assert form.count(f'id="id_{name}"') == 1, name
    assert form.count("<fieldset") >= 4
