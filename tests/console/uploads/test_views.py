"""The pages, through Django's test client: roles, the upload form, re-analysis,
downloads and comparison (eager Celery, or the real worker in the second CI run)."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import io
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from analysis import BlockStream, analyze, ingest as ingest_engine
from console.engine import analysis_params, ingest_options
from console.models import Analysis, ReplayExport, Upload
from console.staticfinders import STATIC_PATH
from console.uploads import charts
from tests.console.factories import PASSWORD, gib_shown
from tests.console.waiting import finished, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _login(client, user):
    assert client.login(username=user.username, password=PASSWORD)


def _upload_through_form(client, path, **extra):
    with open(path, "rb") as fh:
        data = {
            "name": "monday",
            "files": [fh],
            "format": "auto",
            "block_sizes": ["256", "64"],
            "retention": "delete",
            **extra,
        }
        return client.post(reverse("upload_new"), data)


@pytest.fixture
def done_upload(client, analyst, chat_log):
    _login(client, analyst)
    response = _upload_through_form(client, chat_log)
    upload = Upload.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("upload_detail", args=[upload.pk])
    return wait_for(finished(Upload, upload.pk))


def test_every_page_needs_sign_in(client):
    for url in [
        "/",
        reverse("upload_new"),
        reverse("upload_detail", args=[1]),
        reverse("analysis_detail", args=[1]),
        reverse("compare"),
        reverse("upload_status", args=[1]),
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/")


def test_an_account_without_a_role_is_told_so(client, no_role):
    _login(client, no_role)
    response = client.get("/")
    assert response.status_code == 403
    assert b"no role yet" in response.content


def test_the_empty_state_says_what_to_do(client, analyst, auditor):
    _login(client, analyst)
    response = client.get("/")
    assert b"No uploads yet" in response.content
    assert reverse("upload_new").encode() in response.content
    _login(client, auditor)
    response = client.get("/")
    assert b"An analyst uploads logs" in response.content


def test_upload_form_ingests_every_block_size_and_runs_the_default_analysis(client, done_upload):
    assert done_upload.status == "done", done_upload.message
    assert done_upload.available_block_sizes == [64, 256]
    analysis = Analysis.objects.get(upload=done_upload)
    # the chat default when it is ticked (services.FIRST_ANALYSIS_BLOCK_TOKENS), not the smallest
    assert analysis.block_tokens == 256
    page = client.get(reverse("upload_detail", args=[done_upload.pk])).content.decode()
    assert f"#{analysis.pk}" in page and "Compare selected" in page
    status = client.get(reverse("upload_status", args=[done_upload.pk])).json()
    assert status["finished"] and status["requests"] == 120


def test_analysis_page_shows_the_stored_numbers_and_charts(client, done_upload):
    analysis = Analysis.objects.get(upload=done_upload)
    report = analysis.report
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    ram_gib = f"{report['recommendation']['ram_bytes'] / 2**30:,.2f} GiB"
    assert ram_gib in page
    assert f"{report['infinite_hit_ratio'] * 100:.1f} %" in page
    assert "tokens counted by cl100k_base" in page  # the default tokenizer, named
    for name in ("mrc", "working_set", "reuse", "segments", "routes"):
        assert f'id="chart-{name}"' in page and f'id="fig-{name}"' in page
    assert f"/static/{STATIC_PATH}" in page
    assert "cdn.plot.ly" not in page


def test_reanalysis_uses_the_stored_stream(client, done_upload):
    # the raw file is gone: the new analysis can only come from the block stream
    assert done_upload.raw_paths == []
    response = client.post(
        reverse("analysis_new", args=[done_upload.pk]),
        {
            "block_tokens": "256",
            "model": "llama-3.1-70b",
            "kv_dtype": "fp8",
            "windows": "60, 600",
            "scope": "tenant",
            "lifetime": "900",
            "target": "80",
            "headroom": "20",
            "tp": "4",
            "min_reuses": "2",
            "doc_min_tokens": "512",
            "host_ram_gib": "64",
            "reserve_os_gib": "8",
            "weight_dtype": "bf16",
            "concurrent_sequences": "16",
            "context_tokens": "4096",
        },
    )
    assert response.status_code == 302
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    stream = BlockStream.load(done_upload.streams["256"])
    expected = analyze(stream, analysis_params(**analysis.params)).to_dict()
    assert analysis.report["recommendation"] == expected["recommendation"]
    assert analysis.report["recommendation"]["tp"] == 4
    # entered as percentages (80, 20), stored and analysed as shares
    assert (analysis.params["target"], analysis.params["headroom"]) == (0.8, 0.2)
    assert analysis.report["scope"] == "tenant"
    assert [w["window_s"] for w in analysis.report["windows"]] == [60.0, 600.0]
    # 80 layers * 8 KV heads * 128 * 2 (K, V) * 1 byte (FP8)
    assert analysis.report["kv_bytes_per_token"] == 80 * 8 * 128 * 2
    host = analysis.report["recommendation"]["host"]
    assert host["available_bytes"] == (64 - 8) * 2**30


def test_bad_parameters_are_explained_on_the_form(client, done_upload):
    response = client.post(
        reverse("analysis_new", args=[done_upload.pk]),
        {
            "block_tokens": "256",
            "model": "llama-3.1-8b",
            "windows": "five minutes",
            "scope": "global",
            "target": "150",
            "headroom": "10",
            "tp": "1",
            "min_reuses": "2",
            "doc_min_tokens": "512",
            "weight_dtype": "bf16",
            "concurrent_sequences": "1",
            "context_tokens": "1",
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "Windows are seconds" in page
    assert "Give the target as a percentage of the ceiling from 1 to 100, e.g. 90." in page


def test_downloads_match_the_stored_report(client, done_upload):
    analysis = Analysis.objects.get(upload=done_upload)
    url = reverse("analysis_download", args=[analysis.pk, "report.json"])
    response = client.get(url)
    assert response["Content-Disposition"].endswith('.json"')
    assert json.loads(response.content) == analysis.report
    curve = client.get(reverse("analysis_download", args=[analysis.pk, "curve.csv"]))
    rows = list(csv.DictReader(io.StringIO(curve.content.decode())))
    assert [int(r["capacity_bytes"]) for r in rows] == [
        p["capacity_bytes"] for p in analysis.report["mrc"]
    ]
    assert client.get(reverse("analysis_download", args=[analysis.pk, "x.exe"])).status_code == 404


def test_compare_shows_both_and_the_difference(client, done_upload):
    first = Analysis.objects.get(upload=done_upload)
    stream = BlockStream.load(done_upload.streams[str(first.block_tokens)])  # the same stream
    params = dict(first.params, tp=2, headroom=0.5)
    second = Analysis.objects.create(
        upload=done_upload,
        block_tokens=first.block_tokens,
        params=params,
        status="done",
        report=analyze(stream, analysis_params(**params)).to_dict(),
    )
    response = client.get(reverse("compare"), {"a": [first.pk, second.pk]})
    page = response.content.decode()
    assert response.status_code == 200
    ram = [a.report["recommendation"]["ram_bytes"] for a in (first, second)]
    # headroom 0.1 -> 0.5 on the same capacity: the difference is 0.4 x capacity
    assert ram[1] > ram[0]
    delta = ram[1] - ram[0]
    assert 2**20 <= delta < 2**30  # still in GiB, never MiB: the unit of every size shown
    assert f'{gib_shown(ram[1])}<span class="delta" data-delta>+{gib_shown(delta)}</span>' in page
    # the table's sizes (the chart's log axis may tick at MiB below 1 GiB)
    table = page[page.index('id="compare-table"') : page.index("</table>")]
    assert gib_shown(ram[0]) in table and "MiB" not in table
    assert 'id="fig-compare"' in page


def test_auditor_reads_but_changes_nothing(client, done_upload, auditor):
    client.logout()
    _login(client, auditor)
    analysis = Analysis.objects.get(upload=done_upload)
    assert client.get(reverse("upload_detail", args=[done_upload.pk])).status_code == 200
    assert client.get(reverse("analysis_detail", args=[analysis.pk])).status_code == 200
    assert client.get(reverse("upload_new")).status_code == 403
    before = Analysis.objects.count()
    response = client.post(reverse("analysis_new", args=[done_upload.pk]), {"scope": "tenant"})
    assert response.status_code == 403
    assert client.post(reverse("upload_retry", args=[done_upload.pk])).status_code == 403
    assert Analysis.objects.count() == before


def test_a_raw_file_being_read_is_not_said_to_be_kept(client, analyst):
    # the default retention deletes it once the ingest ends: while it runs, say so
    _login(client, analyst)
    upload = Upload.objects.create(name="busy", status="running", stage="reading",
                                   raw_paths=["/nowhere/busy.jsonl"])  # fmt: skip
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "<dd data-raw-file>read now, deleted when the ingest ends</dd>" in page
    kept = timezone.now() + dt.timedelta(days=3)
    Upload.objects.filter(pk=upload.pk).update(keep_raw_until=kept)
    page = client.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    assert "<dd data-raw-file>kept until " in page


@pytest.mark.parametrize("role", ["analyst", "auditor", "analyst without the stream"])
def test_every_link_within_the_analysis_page_has_its_target(client, done_upload, role, request):
    # a reader, or an analyst whose upload's stream is gone, has no re-analysis form:
    # nothing may point at it ("enter host RAM"), and the page says why
    client.logout()
    _login(client, request.getfixturevalue(role.split()[0]))
    if role == "analyst without the stream":
        Upload.objects.filter(pk=done_upload.pk).update(streams={})
    analysis = Analysis.objects.get(upload=done_upload)
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    targets = set(re.findall(r'href="#([^"]+)"', page))
    assert ("analysis-form" in targets) == (role == "analyst")
    assert {t for t in targets if f'id="{t}"' not in page} == set()
    assert ("an analyst can enter host RAM" in page) == (role == "auditor")
    assert ("needs the upload's stored stream" in page) == (role == "analyst without the stream")


def test_upload_larger_than_the_limit_is_refused_with_a_message(
    client, analyst, chat_log, settings
):
    settings.KVSCOPE_UPLOAD_MAX_BYTES = 10_000
    _login(client, analyst)
    response = _upload_through_form(client, chat_log)
    assert response.status_code == 200
    assert "larger than the limit of 9.8 KiB" in response.content.decode()
    assert not Upload.objects.exists()


def test_keeping_the_raw_file_needs_a_future_date(client, analyst, chat_log):
    _login(client, analyst)
    response = _upload_through_form(client, chat_log, retention="keep", keep_until="2001-01-01")
    assert "The date must be in the future" in response.content.decode()
    assert not Upload.objects.exists()


def test_a_failed_ingest_can_be_retried_when_the_raw_file_was_kept(client, analyst, tmp_path):
    _login(client, analyst)
    log = tmp_path / "broken.jsonl"
    log.write_text("{not json\n")
    keep_until = (timezone.localdate() + dt.timedelta(days=30)).isoformat()
    response = _upload_through_form(client, log, retention="keep", keep_until=keep_until)
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "failed" and "not valid JSON" in upload.message
    page = client.get(response["Location"]).content.decode()
    assert "Retry the ingest" in page
    # the same bytes fail the same way, but the retry really runs again
    client.post(reverse("upload_retry", args=[upload.pk]))
    again = wait_for(finished(Upload, upload.pk))
    assert again.status == "failed" and again.finished_at > upload.finished_at


def test_healthz_answers_without_sign_in(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.content == b"ok"


def test_the_bundled_sample_is_one_click_away(client, analyst):
    _login(client, analyst)
    assert b"Analyze the bundled sample" in client.get("/").content
    client.post(reverse("upload_sample"))  # (where it lands: test_home)
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "done" and upload.requests == 2000
    # the bundled file itself is never deleted: only the stored copy is
    assert (settings.BASE_DIR / "sample" / "chat-sample.jsonl.gz").exists()


def test_odd_query_strings_are_not_errors(client, analyst):
    _login(client, analyst)
    for query in ["a=%C2%B2&a=1", "a=99999999999999999999&a=1", "a=x"]:
        response = client.get(f"{reverse('compare')}?{query}", HTTP_REFERER="https://evil.example/")
        assert response.status_code == 302
        assert response["Location"] == reverse("home")  # never back to another site
    assert client.get(f"{reverse('policy_new')}?analysis=%C2%B2").status_code == 200


def test_a_malformed_config_json_is_a_form_error(client, done_upload):
    from django.core.files.uploadedfile import SimpleUploadedFile

    for content in [b"[]", b"1", b'{"num_hidden_layers": 2, "num_attention_heads": 0}']:
        response = client.post(
            reverse("analysis_new", args=[done_upload.pk]),
            {"block_tokens": "256", "model": "llama-3.1-8b", "windows": "300", "scope": "global",
             "target": "90", "headroom": "10", "tp": "1", "min_reuses": "2",
             "doc_min_tokens": "512", "weight_dtype": "bf16", "concurrent_sequences": "1",
             "context_tokens": "1",
             "model_config": SimpleUploadedFile("config.json", content)},
        )  # fmt: skip
        assert response.status_code == 400
        assert "Not a usable config.json" in response.content.decode()


def test_a_failed_ingest_deletes_the_raw_file_unless_kept(client, analyst, tmp_path):
    _login(client, analyst)
    raw = Path(settings.MEDIA_ROOT) / "raw"
    before = set(raw.glob("*"))
    log = tmp_path / "broken.jsonl"
    log.write_text("{not json\n")
    _upload_through_form(client, log)
    upload = wait_for(finished(Upload, Upload.objects.get().pk))
    assert upload.status == "failed" and upload.raw_paths == []
    assert set(raw.glob("*")) == before  # the stored copy is gone


def test_analysis_pages_answer_from_stored_results(client, done_upload):
    """The task stores the report and its figures; a page view reads them, and still
    works with the block stream gone (nothing is recomputed per view)."""
    analysis = Analysis.objects.get(upload=done_upload)
    figures = dict(analysis.figures)  # stored as [name, figure] pairs, in drawing order
    assert [name for name, _ in analysis.figures] == list(charts.report_figures(analysis.report))
    assert set(figures) >= {"mrc", "working_set"}
    for folder in done_upload.streams.values():
        for path in sorted(Path(folder).iterdir(), reverse=True):
            path.unlink()
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    for name in figures:
        assert f'id="chart-{name}"' in page
    last_point = figures["mrc"]["data"][0]["y"][-1]
    assert json.dumps(last_point) in page  # the stored figure's own numbers
    assert Analysis.objects.filter(upload=done_upload).count() == 1


def test_the_analysis_page_says_whether_offload_pays(client, done_upload):
    analysis = Analysis.objects.get(upload=done_upload)
    url = reverse("analysis_detail", args=[analysis.pk])
    page = client.get(url).content.decode()  # the defaults: PCIe 5, 30k tokens/s
    assert "Does offload pay?" in page and "Loading hits from RAM is" in page
    assert 'name="prefill_tokens_per_s" value="30000"' in page  # not "30000.0"
    report = analysis.report
    saved = (
        report["recommendation"]["hit_ratio"] * report["prompt_tokens"] / (report["span_s"] / 3600)
    )
    assert f">{round(saved):,}<" in page  # prefill tokens saved per hour, as the engine says
    ask = {"pcie": "3", "bandwidth_gb_s": "0.5", "prefill_tokens_per_s": "40000",
           "hit_ratio": "25"}  # fmt: skip
    slow = client.get(url, ask).content.decode()
    break_even = report["kv_bytes_per_token"] * 40_000 / 1e9
    assert f"{break_even:.2f} GB/s: below it, recomputing is faster" in slow
    assert "At this bandwidth recomputing is faster: 25.00 µs per token" in slow
    # one token per second: a quarter of the hour's prompt tokens take that many seconds,
    # in thousands as every other big number on the page is
    crawl = client.get(url, {**ask, "prefill_tokens_per_s": "1"}).content.decode()
    seconds = 0.25 * report["prompt_tokens"] / (report["span_s"] / 3600)
    assert seconds > 1000 and f">{seconds:,.1f} s per hour" in crawl
    assert "1,000,000.00 µs per token" in crawl  # a million µs: one token a second


def test_a_replay_trace_is_exported_and_reads_back_to_the_same_numbers(
    client, done_upload, tmp_path
):
    page = client.get(reverse("upload_detail", args=[done_upload.pk])).content.decode()
    assert reverse("upload_replay", args=[done_upload.pk]) in page
    form = client.get(reverse("upload_replay", args=[done_upload.pk])).content.decode()
    assert "--dataset-name timed_trace" in form and "--custom-dataset-type mooncake_trace" in form
    size = done_upload.available_block_sizes[0]  # the default: the smallest stored
    assert f"--timed-trace-chunk-hash-size {size}" in form and "120</strong> requests" in form
    response = client.get(reverse("upload_replay_download", args=[done_upload.pk]),
                          {"block_tokens": "64", "time_scale": "1"})  # fmt: skip
    export = ReplayExport.objects.get()  # the trace's id in its name, its digest kept
    assert response["Content-Disposition"].endswith(f'-b64-x{export.pk}.jsonl"')
    trace = tmp_path / "replay.jsonl"
    trace.write_bytes(b"".join(response.streaming_content))
    assert hashlib.sha256(trace.read_bytes()).hexdigest() == export.sha256
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert len(lines) == 120 and set(lines[0]) == {"timestamp", "input_length",
                                                   "output_length", "hash_ids"}  # fmt: skip
    # read back as kvscope's own trace: the 64-token stream's numbers, to the millisecond
    original = BlockStream.load(done_upload.streams["64"])
    again = ingest_engine([trace], ingest_options(format="mooncake", block_tokens=64,
                                                  trace_partial_cached=False))  # fmt: skip
    assert again.req_prompt_tokens.tolist() == original.req_prompt_tokens.tolist()
    a = analyze(original, analysis_params()).to_dict()
    b = analyze(again, analysis_params()).to_dict()
    assert a["block_refs"] == b["block_refs"] and a["distinct_blocks"] == b["distinct_blocks"]
    assert a["infinite_hit_ratio"] == b["infinite_hit_ratio"]
    backwards = {"block_tokens": "64", "start_s": "50", "end_s": "10", "time_scale": "1"}
    bad = client.get(reverse("upload_replay_download", args=[done_upload.pk]), backwards)
    assert bad.status_code == 400 and "The end must come after the start" in bad.content.decode()


def test_absurd_numbers_in_the_estimate_and_export_forms_are_refused_not_crashing(
    client, done_upload
):
    analysis = Analysis.objects.get(upload=done_upload)
    absurd = {"pcie": "5", "bandwidth_gb_s": "1e300", "prefill_tokens_per_s": "1"}
    page = client.get(reverse("analysis_detail", args=[analysis.pk]), absurd)
    assert page.status_code == 200 and "less than or equal to 100000" in page.content.decode()
    replay = client.get(reverse("upload_replay", args=[done_upload.pk]),
                        {"block_tokens": "64", "start_s": "1e303", "time_scale": "1"})  # fmt: skip
    assert replay.status_code == 200
    assert "less than or equal to 1000000000" in replay.content.decode()


def test_a_warm_up_is_chosen_on_the_form_and_said_on_the_page(client, done_upload):
    response = client.post(
        reverse("analysis_new", args=[done_upload.pk]),
        {"block_tokens": "256", "model": "llama-3.1-8b", "windows": "300", "scope": "global",
         "warmup": "50", "target": "90", "headroom": "10", "tp": "1", "min_reuses": "2",
         "doc_min_tokens": "512", "weight_dtype": "bf16", "concurrent_sequences": "32",
         "context_tokens": "8192"},
    )  # fmt: skip
    assert response.status_code == 302
    analysis = wait_for(finished(Analysis, Analysis.objects.latest("pk").pk))
    assert analysis.status == "done", analysis.message
    report = analysis.report
    assert analysis.params["warmup"] == 0.5
    assert report["warmup_requests"] == report["requests"] // 2
    page = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    # half of the requests (floor(0.5 x requests)), named as requests, then the share
    assert "data-warmup" in page
    assert f"leaves out the first {report['requests'] // 2:,} requests (warm-up 50 %)" in page
    # the first analysis had none, and says nothing
    first = Analysis.objects.filter(upload=done_upload).earliest("pk")
    assert first.report["warmup_requests"] == 0
    page = client.get(reverse("analysis_detail", args=[first.pk])).content.decode()
    assert "data-warmup" not in page
