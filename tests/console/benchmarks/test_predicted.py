"""Predicted against measured, per benchmark run (#18): a run names the replay export it
replayed; kvscope predicts it for exactly that trace on the run's configuration, and the
pages set the two side by side, flagged past 3 points. Checked by hand on a four-request
Mooncake trace of 512-token blocks (A A C A)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from console.benchmarks.predictions import PENDING, run_predict
from console.models import FINISHED, AuditEvent, BenchRun, ReplayExport, Upload
from console.uploads.services import upload_create
from tests.analysis.test_scrapes import vllm_scrape
from tests.console.factories import BENCH_TAGS, PASSWORD, vllm_file
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# Llama-3.1-8B (the default profile): 131,072 bytes per token, 64 MiB per 512-token block
BLOCK_GIB = 512 * 131_072 / 2**30
PROMPT_TOKENS = 4 * 1024  # four requests of two blocks


@pytest.fixture
def export(tmp_path, analyst, client) -> ReplayExport:
    """The trace uploaded, then its replay export downloaded whole (by the analyst)."""
    path = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 1000 * i, "input_length": 1024, "output_length": 16, "hash_ids": ids}
            for i, ids in enumerate([[1, 2], [1, 2], [3, 4], [1, 2]])]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    created = upload_create(name="four", sources=[path], user=analyst)
    upload = wait_for(lambda: Upload.objects.filter(pk=created.pk, status__in=FINISHED).first())
    assert client.login(username=analyst.username, password=PASSWORD)
    response = client.get(reverse("upload_replay_download", args=[upload.pk]),
                          {"block_tokens": 512, "time_scale": 1})  # fmt: skip
    assert len(b"".join(response.streaming_content).splitlines()) == 4
    return ReplayExport.objects.get()


def run_with(client, export, hits: float | None = None, **tags) -> BenchRun:
    """A run of `export` uploaded with its tags; with `hits`, scrapes in which vLLM's KV
    connector served that many of the trace's prompt tokens (its GPU cache none)."""
    data = {**BENCH_TAGS, "tier": "ram", "files": [vllm_file("c4.json", max_concurrency=4)],
            "replay_export": export.pk, **tags}  # fmt: skip
    if hits is not None:
        after = vllm_scrape({"0": PROMPT_TOKENS}, {"0": 0}, {"0": hits})
        data |= {"scrape_before": vllm_scrape({"0": 0}, {"0": 0}, {"0": 0}), "scrape_after": after}
    assert client.post(reverse("evidence_list"), data).status_code == 302
    run = BenchRun.objects.order_by("-pk").first()
    return wait_for(lambda: BenchRun.objects.filter(pk=run.pk).exclude(predicted={}).first()
                    or _failed(run.pk))  # fmt: skip


def _failed(pk: int) -> None:
    """A run whose prediction ended without one fails the test with its note."""
    note = BenchRun.objects.get(pk=pk).prediction_note
    assert not note.startswith("No prediction"), note


def test_a_run_is_predicted_for_its_trace_and_a_matching_measurement_differs_by_nothing(
    client, export
):
    # 2 blocks of RAM: r1 hits A, C evicts it, r3 misses: 1,024 of 4,096 tokens
    run = run_with(client, export, hits=1024, ram_gib=2 * BLOCK_GIB)
    assert run.predicted["hit_ratio"] == 0.25 and run.predicted["ram_slots"] == 2
    assert (run.predicted["gpu_hit_ratio"], run.predicted["ram_hit_ratio"]) == (0.0, 0.25)
    assert run.measured["hit_ratio"] == 0.25 and run.prediction_note == ""
    page = client.get(reverse("evidence_run", args=[run.pk])).content.decode()
    assert "kvscope predicts <strong data-predicted-ratio>25.0 %</strong>" in page
    # the GPU cache left blank (the form's default): said as none, not "0 GiB"
    assert "with no GPU prefix cache and 0.125 GiB of RAM per replica" in page
    assert f'replay export <a href="/uploads/{export.upload_id}/replay/">x{export.pk}</a>' in page
    row = page.split('data-versus-row="all">')[1].split("</tr>")[0]
    assert row == ('<td>All tiers</td><td class="num">25.0 %</td><td class="num">25.0 %</td>'
                   '<td class="num">±0.0 points</td>')  # fmt: skip
    assert 'class="differs"' not in page
    listed = client.get(reverse("evidence_list")).content.decode()
    cell = '<td class="num" data-predicted>25.0 % <span class="small" data-points>(±0.0 points)'
    assert cell in listed
    event = AuditEvent.objects.get(action="benchmark.upload")
    assert event.details["replay_export"] == export.pk


def test_a_measurement_shifted_past_three_points_is_flagged_everywhere(client, export):
    # 4 blocks: r1 and r3 hit, 2,048 of 4,096 predicted; the engine counted 2,248 (+4.9)
    run = run_with(client, export, hits=2248, ram_gib=4 * BLOCK_GIB)
    assert run.predicted["hit_ratio"] == 0.5
    page = client.get(reverse("evidence_run", args=[run.pk])).content.decode()
    row = page.split('data-versus-row="all">')[1].split("</tr>")[0]
    assert "+4.9 points ⚠ more than 3 points" in row
    assert '<tr class="differs" data-versus-row="all">' in page
    assert '<tr class="differs" data-versus-row="ram">' in page  # the connector's share
    matrix = client.get(reverse("evidence_matrix"), {"model": run.model_name}).content.decode()
    assert "hit ratio 54.9 % measured" in matrix and "50.0 % predicted ⚠ differs" in matrix
    # within three points: no flag
    near = run_with(client, export, hits=2100, ram_gib=4 * BLOCK_GIB)
    assert client.get(reverse("evidence_run", args=[near.pk])).content.decode().count(
        'class="differs"') == 0  # fmt: skip


def test_the_runs_configuration_is_what_is_predicted(client, export):
    # a GPU cache of 2 blocks takes r1's hit; RAM of 4 blocks then holds A for r3
    split = run_with(client, export, ram_gib=4 * BLOCK_GIB, gpu_cache_gib=2 * BLOCK_GIB)
    assert (split.predicted["gpu_hit_ratio"], split.predicted["ram_hit_ratio"]) == (0.25, 0.25)
    # two replicas, round robin: only r1, r3 share one: 1,024 of 4,096
    fleet = run_with(client, export, ram_gib=4 * BLOCK_GIB, replicas=2, router="round_robin")
    assert fleet.predicted["hit_ratio"] == 0.25 and fleet.predicted["config"]["replicas"] == 2
    # warm: the second pass after a first; 2 blocks hold A for r0 and r1: 2,048 of 4,096
    warm = run_with(client, export, ram_gib=2 * BLOCK_GIB, warm="on")
    assert warm.predicted["hit_ratio"] == 0.5 and warm.predicted["config"]["warm"] is True
    page = client.get(reverse("evidence_run", args=[warm.pk])).content.decode()
    assert "warm (the trace&#x27;s second pass)" in page or "warm (the trace's second pass)" in page


def test_without_an_export_or_its_stream_the_run_says_so(client, export):
    plain = {**BENCH_TAGS, "files": [vllm_file("c8.json", max_concurrency=8)]}
    assert client.post(reverse("evidence_list"), plain).status_code == 302
    run = BenchRun.objects.get()
    assert run.predicted == {} and run.replay_export is None
    page = client.get(reverse("evidence_run", args=[run.pk])).content.decode()
    assert "No replay export was named for this run" in page
    Upload.objects.filter(pk=export.upload_id).update(streams={})  # its stream gone
    data = {**BENCH_TAGS, "tier": "ram", "ram_gib": "1", "replay_export": export.pk,
            "files": [vllm_file("c16.json", max_concurrency=16)]}  # fmt: skip
    assert client.post(reverse("evidence_list"), data).status_code == 302
    orphan = wait_for(lambda: BenchRun.objects.filter(name="c16.json")
                      .exclude(prediction_note=PENDING).first())  # fmt: skip
    assert orphan.predicted == {}
    assert orphan.prediction_note == (
        "No prediction: the upload “four” no longer holds its 512-token block stream"
    )
    page = client.get(reverse("evidence_run", args=[orphan.pk])).content.decode()
    assert "no longer holds its 512-token block stream" in page


def test_a_run_keeps_its_prediction_when_the_export_goes_with_its_upload(client, export):
    run = run_with(client, export, hits=1024, ram_gib=2 * BLOCK_GIB)
    Upload.objects.filter(pk=export.upload_id).delete()  # its exports go with it
    run.refresh_from_db()
    assert run.replay_export is None and run.predicted["hit_ratio"] == 0.25
    page = client.get(reverse("evidence_run", args=[run.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "a replay export since deleted with its upload" in text
    assert "<strong data-predicted-ratio>25.0 %</strong>" in text


def test_the_matrix_shows_a_prediction_that_arrives_after_it_was_drawn(client, export):
    run = run_with(client, export, hits=1024, ram_gib=2 * BLOCK_GIB)
    # as on a real worker: the run stored, its prediction not there yet
    BenchRun.objects.filter(pk=run.pk).update(predicted={}, prediction_note=PENDING)
    url = reverse("evidence_matrix")
    before = client.get(url, {"model": run.model_name}).content.decode()
    assert "predicted" not in before.split('class="grid matrix"')[1].split("</table>")[0]
    run_predict(run.pk)  # the task ends
    after = client.get(url, {"model": run.model_name}).content.decode()
    assert "25.0 % predicted" in after  # not the figures cached before it


def test_a_trace_that_is_no_longer_the_downloaded_one_is_not_predicted(client, export):
    ReplayExport.objects.filter(pk=export.pk).update(sha256="0" * 64)  # as if it changed
    data = {**BENCH_TAGS, "tier": "ram", "ram_gib": "1", "replay_export": export.pk,
            "files": [vllm_file("c32.json", max_concurrency=32)]}  # fmt: skip
    assert client.post(reverse("evidence_list"), data).status_code == 302
    run = wait_for(
        lambda: BenchRun.objects.filter(name="c32.json").exclude(prediction_note=PENDING).first()
    )  # (a real worker's, meanwhile)
    assert run.predicted == {}
    assert run.prediction_note == (f"No prediction: the upload no longer gives export "
                                   f"x{export.pk}'s trace (its SHA-256 differs from the file "
                                   "downloaded)")  # fmt: skip


def test_an_lmcache_servers_lookups_are_shown_but_not_compared(client, export):
    def page(requested: int, hit: int) -> str:
        return ("# TYPE lmcache_mp_lookup_requested_tokens counter\n"
                f"lmcache_mp_lookup_requested_tokens_total {requested}\n"
                "# TYPE lmcache_mp_lookup_hit_tokens counter\n"
                f"lmcache_mp_lookup_hit_tokens_total {hit}\n")  # fmt: skip

    data = {**BENCH_TAGS, "tier": "ram", "ram_gib": str(2 * BLOCK_GIB), "replay_export": export.pk,
            "files": [vllm_file("c2.json", max_concurrency=2)],
            "scrape_before": page(0, 0), "scrape_after": page(2048, 1536)}  # fmt: skip
    assert client.post(reverse("evidence_list"), data).status_code == 302
    run = wait_for(lambda: BenchRun.objects.exclude(predicted={}).first())
    assert run.measured["hit_ratio"] == 0.75 and run.predicted["hit_ratio"] == 0.25
    run_page = client.get(reverse("evidence_run", args=[run.pk])).content.decode()
    assert "LMCache server counts tokens looked up in LMCache, not every prompt token" in run_page
    assert "data-versus" not in run_page
    matrix = client.get(reverse("evidence_matrix"), {"model": run.model_name}).content.decode()
    assert "75.0 % of tokens looked up in LMCache hit" in matrix and "⚠" not in matrix
