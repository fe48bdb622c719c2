"""Housekeeping (#16), what is refused: deleting the evidence a policy version relies on
(named in the refusal), an upload whose ingest is still writing files, and renaming or
deleting by anyone the roles do not allow."""

from __future__ import annotations

import html

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.benchmarks.services import bench_runs_create
from console.models import Analysis, AuditEvent, BenchRun, PolicyVersion, Upload
from console.policies.services import (
    policy_create,
    version_approve,
    version_submit,
    version_update,
)
from tests.console.factories import (
    BENCH_TAGS,
    PASSWORD,
    approved_version,
    complete,
    make_user,
    vllm_file,
)
from tests.console.test_housekeeping import assert_chain_verifies, data_dir, newest
from tests.console.waiting import settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
EVIDENCE_RULE = "relies on it as evidence. A policy's evidence stays as long as the policy does"


def _refused(client: Client, url: str) -> str:
    """The deletion page's refusal, after checking a confirmed POST is refused too."""
    response = client.post(url, {"confirm": "on"})
    assert response.status_code == 409
    page = response.content.decode()
    assert "Delete for good" not in page  # no form to confirm with
    refusal = page.split('<div class="error-box" role="alert" data-refusal><p>')[1]
    return html.unescape(refusal.split("</p>")[0])


def test_the_evidence_of_an_approved_policy_is_not_deleted(client, analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    rerun = version.constrained_analysis  # the policy's own re-run is evidence too
    assert rerun is not None
    client.force_login(analyst)
    wait_for(settled)  # its re-runs' ends are events too (#17)
    before, since = data_dir(), newest()
    refusal = _refused(client, reverse("analysis_delete", args=[analysis.pk]))
    assert refusal.startswith(
        f"Analysis #{analysis.pk} {analysis.summary} is not deleted: policy “exported” v1 "
        f"(approved) on analysis #{analysis.pk} {EVIDENCE_RULE}"
    )
    refusal = _refused(client, reverse("upload_delete", args=[analysis.upload_id]))
    assert refusal.startswith(
        "The upload “day” is not deleted: policy “exported” v1 (approved) on analysis "
        f"#{analysis.pk}; policy “exported” v1 (approved) on analysis #{rerun.pk} (its re-run "
        f"with the policy's lifetime and scope) {EVIDENCE_RULE}"
    )
    refusal = _refused(client, reverse("analysis_delete", args=[rerun.pk]))
    assert f"policy “exported” v1 (approved) on analysis #{rerun.pk} (its re-run" in refusal
    # nothing went: rows, files, and no event was recorded
    assert Analysis.objects.filter(pk__in=[analysis.pk, rerun.pk]).count() == 2
    assert Upload.objects.filter(pk=analysis.upload_id).exists() and data_dir() == before
    assert_chain_verifies(0, since)


def test_a_draft_relying_on_an_analysis_is_named_too(client, analysis, analyst):
    policy_create(name="draft one", user=analyst, analysis=analysis)
    client.force_login(analyst)
    refusal = _refused(client, reverse("analysis_delete", args=[analysis.pk]))
    assert f"policy “draft one” v1 (draft) on analysis #{analysis.pk} relies on it" in refusal


def test_a_benchmark_run_a_signed_version_cites_is_not_deleted(client, analysis, analyst, approver):
    run = bench_runs_create(files=[vllm_file("c16.json")], tags=BENCH_TAGS, user=analyst)[0]
    version = policy_create(name="with runs", user=analyst, analysis=analysis)
    version = version_update(version=version, body=complete(version.body), user=analyst,
                             analysis=analysis, bench_runs=[run])  # fmt: skip
    version_submit(version=version, user=analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    client.force_login(analyst)
    refusal = _refused(client, reverse("evidence_run_delete", args=[run.pk]))
    assert f"policy “with runs” v1 (approved) on benchmark run #{run.pk} relies on it" in refusal
    assert BenchRun.objects.filter(pk=run.pk).exists()
    assert PolicyVersion.objects.get(pk=version.pk).body["evidence"]["benchmark_runs"][0][
        "id"] == run.pk  # fmt: skip


def test_an_upload_whose_ingest_is_writing_is_not_deleted(client, analysis, analyst):
    now = timezone.now()  # alive: it beat just now
    Upload.objects.filter(pk=analysis.upload_id).update(status="running", started_at=now,
                                                        heartbeat_at=now)  # fmt: skip
    client.force_login(analyst)
    before = data_dir()
    refusal = _refused(client, reverse("upload_delete", args=[analysis.upload_id]))
    assert refusal.startswith("Its ingest is running: wait until it finishes (or stalls)")
    assert Upload.objects.filter(pk=analysis.upload_id).exists() and data_dir() == before


def _targets(analysis: Analysis, run: BenchRun) -> list[tuple[str, str, object]]:
    """(kind's URL prefix, field holding the name, object) of one of each kind."""
    return [("upload", "name", analysis.upload), ("analysis", "label", analysis),
            ("evidence_run", "name", run)]  # fmt: skip


def test_an_auditor_can_neither_rename_nor_delete(client, analysis, analyst, auditor):
    run = bench_runs_create(files=[vllm_file("c16.json")], tags=BENCH_TAGS, user=analyst)[0]
    client.force_login(auditor)
    before, since = data_dir(), newest()
    for prefix, field, obj in _targets(analysis, run):
        for action, body in (
            ("rename", {"rename-name": "mine now"}),
            ("delete", {"confirm": "on"}),
        ):
            url = reverse(f"{prefix}_{action}", args=[obj.pk])
            assert client.get(url).status_code == 403, url
            assert client.post(url, body).status_code == 403, url
        obj.refresh_from_db()
        assert getattr(obj, field) != "mine now"
    page = client.get(reverse("upload_detail", args=[analysis.upload_id])).content.decode()
    assert "data-housekeeping" not in page  # no panel offered
    assert data_dir() == before
    # (#17) only the refusals are recorded: each GET and POST of 2 pages of 3 objects
    refusals = list(AuditEvent.objects.filter(pk__gt=since).values_list("action", flat=True))
    assert refusals == ["auth.forbidden"] * (2 * 2 * 3)
    assert_chain_verifies(12, since)


def test_another_analyst_renames_but_only_the_one_who_stored_it_deletes(client, analysis, run_of):
    other = make_user("ana2", "analyst")
    client.force_login(other)
    since = newest()
    upload_url = reverse("upload_detail", args=[analysis.upload_id])
    page = client.get(upload_url).content.decode()
    assert "data-delete-link" not in page
    assert "Only ana, who stored this upload, or an administrator may delete it." in page
    response = client.post(reverse("upload_rename", args=[analysis.upload_id]),
                           {"rename-name": "renamed by ana2"})  # fmt: skip
    assert response.status_code == 302
    for url in (reverse("upload_delete", args=[analysis.upload_id]),
                reverse("analysis_delete", args=[analysis.pk]),
                reverse("evidence_run_delete", args=[run_of.pk])):  # fmt: skip
        response = client.post(url, {"confirm": "on"})
        assert response.status_code == 403 and "Only ana, who stored this" in (
            response.content.decode()
        )
    assert Analysis.objects.filter(pk=analysis.pk).exists() and BenchRun.objects.exists()
    # (#17) the three deletions refused are recorded as refusals
    assert list(AuditEvent.objects.filter(pk__gt=since).values_list("action", "actor_name")) == [
        ("upload.rename", "ana2"), *[("auth.forbidden", "ana2")] * 3]  # fmt: skip
    # an administrator may delete what anyone stored
    admin = make_user("root")
    admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    response = client.post(reverse("evidence_run_delete", args=[run_of.pk]), {"confirm": "on"})
    assert response.status_code == 302 and not BenchRun.objects.exists()
    # the rename, the three refusals, the administrator's sign-in, the deletion
    assert_chain_verifies(6, since)


@pytest.fixture
def run_of(analyst) -> BenchRun:
    return bench_runs_create(files=[vllm_file("c16.json")], tags=BENCH_TAGS, user=analyst)[0]
