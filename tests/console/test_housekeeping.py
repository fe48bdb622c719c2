"""Housekeeping (#16): uploads, analyses and benchmark runs renamed on their pages and
deleted with their files after a confirmation, each change an event of the audit trail,
whose chain still verifies."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from console.benchmarks.services import bench_runs_create
from console.leftovers import raw_folder
from console.models import Analysis, AuditEvent, BenchRun, Upload
from console.policies import audit
from console.uploads.services import upload_create
from console.uploads.storage import upload_folder
from tests.console.factories import BENCH_TAGS, default_analysis, rerun, vllm_file

pytestmark = pytest.mark.django_db(transaction=True)


def data_dir() -> set[Path]:
    """Every file and folder under kvscope's data folders (raw files, artifacts)."""
    roots = [Path(settings.MEDIA_ROOT), Path(settings.ARTIFACT_ROOT)]
    return {path for root in roots if root.exists() for path in root.rglob("*")}


def last_event() -> AuditEvent:
    return AuditEvent.objects.order_by("-pk").first()


def newest() -> int:
    """The newest event's id (0: none): a test's own events come after it, those of its
    fixtures (uploads, ingests, sign-ins: #17 records them all) before."""
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def assert_chain_verifies(events: int, since: int) -> None:
    """The whole chain verifies, and `events` of it came after #since."""
    check = audit.verify()
    assert check.ok and check.events == AuditEvent.objects.count()
    assert AuditEvent.objects.filter(pk__gt=since).count() == events
    call_command("verify_audit")  # (raises when the chain is broken)


@pytest.fixture
def signed_in(client, analyst):
    client.force_login(analyst)
    return client


@pytest.fixture
def run(analyst) -> BenchRun:
    return bench_runs_create(files=[vllm_file("c16.json")], tags=BENCH_TAGS, user=analyst)[0]


# --- rename ----------------------------------------------------------------------------------
def test_an_upload_is_renamed_on_its_page_and_the_rename_audited(signed_in, analysis):
    upload = analysis.upload
    page = signed_in.get(reverse("upload_detail", args=[upload.pk])).content.decode()
    # the inline form posts to the rename page, prefilled with the name it has
    assert f'action="{reverse("upload_rename", args=[upload.pk])}"' in page
    assert 'name="rename-name" value="day"' in page
    before, since = timezone.now(), newest()
    response = signed_in.post(reverse("upload_rename", args=[upload.pk]),
                              {"rename-name": "  Tuesday traffic  "})  # fmt: skip
    assert response.status_code == 302 and response["Location"] == f"/uploads/{upload.pk}/"
    page = signed_in.get(response["Location"]).content.decode()
    assert "<h1>Tuesday traffic</h1>" in page  # (the spaces around it stripped)
    assert Upload.objects.get(pk=upload.pk).name == "Tuesday traffic"
    event = last_event()
    assert (event.action, event.object_type, event.object_id, event.actor_name) == (
        "upload.rename", "Upload", str(upload.pk), "ana")  # fmt: skip
    assert event.details == {"old_name": "day", "new_name": "Tuesday traffic"}
    assert before <= event.at <= timezone.now()
    assert_chain_verifies(1, since)


def test_an_analysis_is_labelled_and_the_label_shown_beside_its_summary(signed_in, analysis):
    url, since = reverse("analysis_rename", args=[analysis.pk]), newest()
    response = signed_in.post(url, {"rename-name": "Before the holiday"})
    assert response.status_code == 302
    page = signed_in.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    assert "<span data-analysis-label>Before the holiday</span>" in page
    assert f"<small>{analysis.summary}</small>" in page  # the parameters still said
    listing = signed_in.get(reverse("upload_detail", args=[analysis.upload_id])).content.decode()
    assert f'#{analysis.pk} Before the holiday</a><br><small class="muted">' in listing
    event = last_event()
    assert (event.action, event.object_type, event.object_id) == (
        "analysis.rename", "Analysis", str(analysis.pk))  # fmt: skip
    assert event.details == {"old_name": "", "new_name": "Before the holiday"}
    assert_chain_verifies(1, since)


def test_a_benchmark_run_is_renamed_on_its_own_page(signed_in, run):
    listing = signed_in.get(reverse("evidence_list")).content.decode()
    assert f'href="{reverse("evidence_run", args=[run.pk])}" data-run-link>c16.json' in listing
    since = newest()
    response = signed_in.post(reverse("evidence_run_rename", args=[run.pk]),
                              {"rename-name": "Llama 16 users, no offload"})  # fmt: skip
    assert response.status_code == 302
    assert response["Location"] == reverse("evidence_run", args=[run.pk])
    page = signed_in.get(response["Location"]).content.decode()
    assert "<h1 data-run-name>Llama 16 users, no offload</h1>" in page
    event = last_event()
    assert (event.action, event.object_type, event.object_id) == (
        "benchmark_run.rename", "BenchRun", str(run.pk))  # fmt: skip
    assert event.details == {"old_name": "c16.json", "new_name": "Llama 16 users, no offload"}
    assert_chain_verifies(1, since)


@pytest.mark.parametrize(
    ("posted", "error"),
    [("   ", "Give the upload a name: it cannot be empty."),
     ("x" * 201, "Ensure this value has at most 200 characters (it has 201)."),
     ("day", "That is its name already: nothing to change.")],
)  # fmt: skip
def test_a_rename_is_validated_next_to_its_field_and_changes_nothing(
    signed_in, analysis, posted, error
):
    url, since = reverse("upload_rename", args=[analysis.upload_id]), newest()
    response = signed_in.post(url, {"rename-name": posted})
    page = response.content.decode()
    assert response.status_code == 400
    assert f'<div id="id_rename-name_error"><p class="error" role="alert">{error}</p>' in page
    assert Upload.objects.get(pk=analysis.upload_id).name == "day"
    assert not AuditEvent.objects.filter(pk__gt=since).exists()


def test_the_longest_name_its_field_holds_is_taken(signed_in, analysis):
    url = reverse("upload_rename", args=[analysis.upload_id])
    assert signed_in.post(url, {"rename-name": "y" * 200}).status_code == 302
    assert Upload.objects.get(pk=analysis.upload_id).name == "y" * 200


# --- delete ----------------------------------------------------------------------------------
def kept_upload(analyst, chat_log) -> tuple[Upload, list[Analysis]]:
    """An upload of two block sizes, its raw file kept, a tokenizer.json kept with it and
    what a killed run left in its folder, with two analyses."""
    keep = timezone.localdate() + dt.timedelta(days=7)
    upload = upload_create(name="kept", sources=[chat_log], user=analyst, block_sizes=[256, 512],
                           keep_raw_until=keep)  # fmt: skip
    first = default_analysis(upload)
    second = rerun(first, analyst, scope="tenant")
    tokenizer = raw_folder() / "0123abcd.tokenizer.json"
    tokenizer.write_text("{}")
    Upload.objects.filter(pk=upload.pk).update(tokenizer_path=str(tokenizer),
                                               tokenizer_name="tokenizer.json")  # fmt: skip
    (upload_folder(upload.pk) / "parts-20260101").mkdir()
    (upload_folder(upload.pk) / "parts-20260101" / "part-0").write_text("half")
    upload.refresh_from_db()
    return upload, [first, second]


def test_an_upload_is_deleted_with_its_analyses_and_every_file_after_a_confirmation(
    signed_in, analysis, analyst, chat_log
):
    before = data_dir()  # the other upload's files: they stay
    upload, analyses = kept_upload(analyst, chat_log)
    added = data_dir() - before
    added_files = [p for p in added if p.is_file()]
    added_bytes = sum(p.stat().st_size for p in added_files)
    assert Path(upload.raw_paths[0]) in added and Path(upload.tokenizer_path) in added
    assert {Path(p) for p in upload.streams.values()} <= added  # both block streams
    url = reverse("upload_delete", args=[upload.pk])
    page = signed_in.get(url).content.decode()
    ids = f"#{analyses[0].pk}, #{analyses[1].pk}"
    assert f"<li>its 2 analyses ({ids})</li>" in page
    assert f"<li>its raw file as kept ({chat_log.name})</li>" in page
    assert "<li>its block streams (256, 512 tokens per block)</li>" in page
    assert f"Files on disk: {len(added_files)} files" in page
    # not ticked: nothing goes
    response = signed_in.post(url, {})
    assert response.status_code == 400 and "Tick the box to confirm" in response.content.decode()
    assert Upload.objects.filter(pk=upload.pk).exists() and data_dir() == before | added
    since = newest()
    response = signed_in.post(url, {"confirm": "on"})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert not Upload.objects.filter(pk=upload.pk).exists()
    assert not Analysis.objects.filter(pk__in=[a.pk for a in analyses]).exists()
    assert data_dir() == before  # nothing of it is left on disk
    assert Analysis.objects.filter(pk=analysis.pk).exists()  # the other upload's stays
    events = list(AuditEvent.objects.filter(pk__gt=since).order_by("pk"))
    assert [(e.action, e.object_id) for e in events] == [
        ("analysis.delete", str(analyses[0].pk)), ("analysis.delete", str(analyses[1].pk)),
        ("upload.delete", str(upload.pk))]  # fmt: skip
    assert events[2].details == {
        "name": "kept", "analyses": [a.pk for a in analyses], "raw_names": [chat_log.name],
        "files": len(added_files), "bytes": added_bytes}  # fmt: skip
    assert events[1].details["summary"] == analyses[1].summary and events[1].actor_name == "ana"
    assert_chain_verifies(3, since)


def test_an_analysis_is_deleted_alone(signed_in, analysis, analyst):
    other = rerun(analysis, analyst, scope="user")
    before = data_dir()
    url = reverse("analysis_delete", args=[other.pk])
    page = signed_in.get(url).content.decode()
    assert f"<li>analysis #{other.pk} {other.summary}</li>" in page
    assert "Files on disk: none." in page
    since = newest()
    response = signed_in.post(url, {"confirm": "on"})
    assert response.status_code == 302
    assert response["Location"] == reverse("upload_detail", args=[analysis.upload_id])
    assert not Analysis.objects.filter(pk=other.pk).exists()
    # its upload, its streams and its other analysis stay
    assert Analysis.objects.filter(pk=analysis.pk).exists() and data_dir() == before
    event = last_event()
    assert (event.action, event.object_type, event.object_id) == (
        "analysis.delete", "Analysis", str(other.pk))  # fmt: skip
    assert event.details == {"name": "", "summary": other.summary,
                             "upload": analysis.upload_id}  # fmt: skip
    assert_chain_verifies(1, since)


def test_a_benchmark_run_is_deleted_with_its_file(signed_in, run, analyst):
    kept = bench_runs_create(files=[vllm_file("c4.json", max_concurrency=4)], tags=BENCH_TAGS,
                             user=analyst)[0]  # fmt: skip
    before = data_dir()
    url = reverse("evidence_run_delete", args=[run.pk])
    page = signed_in.get(url).content.decode()
    assert "its result file as uploaded (kept in its row, not on disk)" in page
    since = newest()
    response = signed_in.post(url, {"confirm": "on"})
    assert response.status_code == 302 and response["Location"] == reverse("evidence_list")
    assert list(BenchRun.objects.values_list("pk", flat=True)) == [kept.pk]
    assert signed_in.get(reverse("evidence_run_raw", args=[run.pk])).status_code == 404
    assert data_dir() == before
    event = last_event()
    assert (event.action, event.object_type, event.object_id) == (
        "benchmark_run.delete", "BenchRun", str(run.pk))  # fmt: skip
    assert event.details == {"name": "c16.json", "model": "meta-llama/Llama-3.1-8B",
                             "tiers": "No offload"}  # fmt: skip
    assert_chain_verifies(1, since)


def test_a_path_outside_the_data_folders_is_never_removed(signed_in, analyst, tmp_path):
    """A row naming a file elsewhere (a damaged row) loses the row, never that file."""
    elsewhere = tmp_path / "not-kvscope.log"
    elsewhere.write_text("keep me")
    upload = Upload.objects.create(name="odd", created_by=analyst, status="failed",
                                   raw_paths=[str(elsewhere)])  # fmt: skip
    response = signed_in.post(reverse("upload_delete", args=[upload.pk]), {"confirm": "on"},
                              follow=True)  # fmt: skip
    assert not Upload.objects.filter(pk=upload.pk).exists()
    assert elsewhere.read_text() == "keep me"
    assert f"{elsewhere} was left alone: it is outside kvscope&#x27;s data folders." in (
        response.content.decode()
    )
