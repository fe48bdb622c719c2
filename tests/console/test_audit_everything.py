"""Every action that touches data is exactly one audit event (#17): uploads, ingests,
analyses, downloads, raw-file deletions, benchmark runs, sign-ins and refusals, each done
through its real page, task or command, and the chain still verifies after it."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from bench.generate import chat_requests
from console.audit_actions import ACTIONS, label_of
from console.benchmarks.housekeeping import BENCH_RUN
from console.leftovers import raw_folder
from console.management.commands.flush import guards_off
from console.models import Analysis, AuditEvent, BenchRun, JobStatus, ReplayExport, Upload
from console.policies import audit
from console.policies.services import policy_create, version_update
from console.uploads.housekeeping import ANALYSIS, UPLOAD
from console.uploads.services import upload_create
from console.uploads.views import SAMPLE_LOG
from tests.console.factories import (
    BENCH_TAGS,
    PASSWORD,
    approved_version,
    complete,
    default_analysis,
    opened_analysis_form,
    rerun,
    vllm_file,
)
from tests.console.waiting import finished, settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
CSVS = ["curve.csv", "windows.csv", "series.csv", "segments.csv", "fleet.csv"]


def mark() -> int:
    """The newest event's id (0: none yet): what a test's action adds comes after it."""
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def added(since: int) -> list[str]:
    """The actions recorded after `since`, in order."""
    return list(AuditEvent.objects.filter(pk__gt=since).values_list("action", flat=True))


def recorded(since: int, expected: list[str]) -> None:
    """The actions after #since are `expected`, once as many are in (a real worker records
    the ends of ingests and analyses meanwhile)."""
    wait_for(lambda: len(added(since)) >= len(expected))
    assert added(since) == expected


def one(action: str, since: int) -> AuditEvent:
    """The single event of `action` after `since` (fails on none or several)."""
    events = list(AuditEvent.objects.filter(pk__gt=since, action=action))
    assert len(events) == 1, (action, added(since))
    return events[0]


def names(event: AuditEvent) -> tuple[str, str, str]:
    return (event.actor_name, event.object_type, event.object_id)


def assert_verifies() -> None:
    check = audit.verify()
    assert check.ok and check.events == AuditEvent.objects.count()


def signed_in(client, user):
    client.force_login(user)  # (itself an auth.sign_in event: tests mark after it)
    return client


def chat_file(tmp_path: Path, name: str, rows: list[dict], bad_lines: int = 0) -> Path:
    """A chat log of these generated requests, then `bad_lines` lines that are not JSON."""
    path = tmp_path / name
    path.write_text("\n".join([*map(json.dumps, rows), *["not json"] * bad_lines]) + "\n")
    return path


def unusable_file(tmp_path: Path, lines: int) -> Path:
    """JSON lines that are no request of any format: nothing to read at any block size."""
    path = tmp_path / "bad.jsonl"
    path.write_text('{"hello": "world"}\n' * lines)
    return path


# --- uploads and their ingest ---------------------------------------------------------------
def test_an_upload_is_one_event_and_its_ingest_another(client, analyst, tmp_path):
    signed_in(client, analyst)
    rows = list(chat_requests(50, seed=5))  # one log in two files, in time order
    first, second = chat_file(tmp_path, "a.jsonl", rows[:30]), chat_file(tmp_path, "b.jsonl",
                                                                        rows[30:], 1)  # fmt: skip
    keep = timezone.localdate() + dt.timedelta(days=7)
    since = mark()
    with open(first, "rb") as a, open(second, "rb") as b:
        response = client.post(reverse("upload_new"), {
            "name": "two files", "files": [a, b], "format": "auto", "block_sizes": ["256"],
            "previews": "on", "retention": "keep", "keep_until": keep.isoformat()})  # fmt: skip
    # kept: no raw.delete; the automatic first analysis ends with the ingest
    recorded(since, ["upload.create", "ingest.done", "analysis.done"])
    upload = Upload.objects.get()
    assert response.status_code == 302 and upload.status == JobStatus.PARTIAL
    created = one("upload.create", since)
    assert names(created) == ("ana", "Upload", str(upload.pk))
    sizes = [first.stat().st_size, second.stat().st_size]
    assert created.details == {
        "name": "two files", "files": [{"name": "a.jsonl", "bytes": sizes[0]},
                                       {"name": "b.jsonl", "bytes": sizes[1]}],
        "bytes": sizes[0] + sizes[1], "format": "auto", "block_sizes": [256],
        "previews": True, "tokenizer": None, "keep_raw_until": keep.isoformat(),
        "sample": False}  # fmt: skip
    done = one("ingest.done", since)
    first_analysis = Analysis.objects.get(upload=upload)
    assert names(done) == ("system", "Upload", str(upload.pk))
    # 30 + 20 requests read; the one line that is not JSON skipped
    assert done.details == {"requests": 50, "lines_skipped": 1, "block_sizes": [256],
                            "analysis": first_analysis.pk}  # fmt: skip
    ended = one("analysis.done", since)
    assert names(ended) == ("system", "Analysis", str(first_analysis.pk))
    # the engine's defaults, as the lists of analyses sum them up
    assert ended.details == {"upload": upload.pk, "block_tokens": 256,
                             "summary": "llama-3.1-8b · global · B=256", "auto": True}  # fmt: skip
    assert_verifies()


def test_the_bundled_sample_is_one_upload_and_its_raw_file_deleted_after_ingest(client, analyst):
    signed_in(client, analyst)
    since, stored = mark(), set(raw_folder().glob("*.log"))
    assert client.post(reverse("upload_sample")).status_code == 302
    recorded(since, ["upload.create", "ingest.done", "analysis.done", "raw.delete"])
    upload = Upload.objects.get()
    created = one("upload.create", since)
    assert created.details["sample"] is True and created.details["previews"] is False
    assert created.details["files"] == [
        {"name": "chat-sample.jsonl.gz", "bytes": SAMPLE_LOG.stat().st_size}]  # fmt: skip
    assert created.details["keep_raw_until"] is None
    assert one("ingest.done", since).details["requests"] == 2000 == upload.requests
    deleted = one("raw.delete", since)
    assert names(deleted) == ("system", "Upload", str(upload.pk))
    assert deleted.details == {"reason": "ingested", "files": ["chat-sample.jsonl.gz"],
                               "tokenizer": None}  # fmt: skip
    assert upload.raw_paths == [] and set(raw_folder().glob("*.log")) == stored
    assert_verifies()


def test_a_failed_ingest_says_why_and_its_retry_is_one_event(client, analyst, tmp_path):
    signed_in(client, analyst)
    bad = unusable_file(tmp_path, 3)
    keep = timezone.localdate() + dt.timedelta(days=2)
    since = mark()
    with open(bad, "rb") as fh:
        client.post(reverse("upload_new"), {"name": "bad", "files": [fh], "format": "auto",
                                            "block_sizes": ["256"], "retention": "keep",
                                            "keep_until": keep.isoformat()})  # fmt: skip
    recorded(since, ["upload.create", "ingest.fail"])  # kept: no raw.delete
    upload = Upload.objects.get()
    assert upload.status == JobStatus.FAILED
    failed = one("ingest.fail", since)
    assert names(failed) == ("system", "Upload", str(upload.pk))
    assert failed.details == {"reason": upload.message[:500], "lines_skipped": 3}
    since = mark()
    assert client.post(reverse("upload_retry", args=[upload.pk])).status_code == 302
    recorded(since, ["ingest.retry", "ingest.fail"])  # (the same bytes fail again)
    assert names(one("ingest.retry", since)) == ("ana", "Upload", str(upload.pk))
    assert_verifies()


def test_raw_files_unusable_for_any_block_size_are_deleted_by_the_system(client, analyst, tmp_path):
    signed_in(client, analyst)
    bad = unusable_file(tmp_path, 2)
    since, stored = mark(), set(raw_folder().glob("*.log"))
    with open(bad, "rb") as fh:
        form = {"name": "bad", "files": [fh], "format": "auto", "block_sizes": ["256"],
                "retention": "delete"}  # fmt: skip
        client.post(reverse("upload_new"), form)
    recorded(since, ["upload.create", "ingest.fail", "raw.delete"])
    upload = Upload.objects.get()
    deleted = one("raw.delete", since)
    assert names(deleted) == ("system", "Upload", str(upload.pk))
    assert deleted.details == {"reason": "unusable", "files": ["bad.jsonl"], "tokenizer": None}
    assert upload.raw_paths == [] and set(raw_folder().glob("*.log")) == stored
    assert_verifies()


def test_raw_files_past_their_date_and_orphans_are_deleted_by_the_purge(
    analyst, tmp_path, settings
):
    keep = timezone.localdate() + dt.timedelta(days=3)
    log = chat_file(tmp_path, "kept.jsonl", list(chat_requests(10, seed=5)))
    upload = upload_create(name="kept", sources=[log], user=analyst, keep_raw_until=keep)
    wait_for(finished(Upload, upload.pk))
    yesterday = timezone.localdate() - dt.timedelta(days=1)
    Upload.objects.filter(pk=upload.pk).update(keep_raw_until=yesterday)  # its date passed
    orphan = raw_folder() / "0123abcd.log"  # stored, then its process died before the row
    orphan.write_bytes(b"{}\n")
    old = time.time() - settings.KVSCOPE_ORPHAN_SECONDS - 60
    os.utime(orphan, (old, old))
    since = mark()
    call_command("purge_expired_raw")
    recorded(since, ["raw.delete", "raw.purge_orphans"])
    deleted = one("raw.delete", since)
    assert names(deleted) == ("system", "Upload", str(upload.pk))
    assert deleted.details == {"reason": "expired", "files": ["kept.jsonl"], "tokenizer": None,
                               "keep_raw_until": yesterday.isoformat()}  # fmt: skip
    orphans = one("raw.purge_orphans", since)
    assert names(orphans) == ("system", "RawFolder", "raw") and orphans.details == {"files": 1}
    assert not orphan.exists() and Upload.objects.get(pk=upload.pk).raw_paths == []
    since = mark()
    call_command("purge_expired_raw")  # nothing left to delete: nothing recorded
    assert added(since) == []
    assert_verifies()


def test_deleting_an_upload_with_its_kept_raw_file_is_its_one_upload_delete(
    client, analyst, tmp_path
):
    keep = timezone.localdate() + dt.timedelta(days=3)
    log = chat_file(tmp_path, "kept.jsonl", list(chat_requests(10, seed=5)))
    upload = upload_create(name="kept", sources=[log], user=analyst, keep_raw_until=keep)
    analysis = default_analysis(upload)
    signed_in(client, analyst)
    since = mark()
    url = reverse("upload_delete", args=[upload.pk])
    assert client.post(url, {"confirm": "on"}).status_code == 302
    # the raw file goes with the upload: named in its upload.delete, no raw.delete of its own
    recorded(since, ["analysis.delete", "upload.delete"])
    assert one("upload.delete", since).details["raw_names"] == ["kept.jsonl"]
    assert names(one("analysis.delete", since)) == ("ana", "Analysis", str(analysis.pk))
    assert_verifies()


# --- analyses -----------------------------------------------------------------------------
def test_an_analysis_is_asked_for_then_ended_each_one_event(client, analyst, analysis):
    signed_in(client, analyst)
    since = mark()
    form = opened_analysis_form(analysis.block_tokens, min_reuses=3, scope="tenant")
    response = client.post(reverse("analysis_new", args=[analysis.upload_id]), form)
    recorded(since, ["analysis.create", "analysis.done"])
    new = Analysis.objects.exclude(pk=analysis.pk).get()
    assert response.status_code == 302 and new.status == JobStatus.DONE
    asked = one("analysis.create", since)
    assert names(asked) == ("ana", "Analysis", str(new.pk))
    summary = {
        "upload": analysis.upload_id,
        "block_tokens": 256,
        "summary": "llama-3.1-8b · tenant · B=256",
    }  # (min_reuses is not in it)
    assert asked.details == {**summary, "why": "asked"}
    ended = one("analysis.done", since)
    assert names(ended) == ("system", "Analysis", str(new.pk)) and ended.details == summary
    assert_verifies()


def test_a_failed_analysis_says_why_and_its_retry_is_one_event(client, analyst, analysis):
    shutil.rmtree(analysis.upload.streams["256"])  # its block stream lost on disk
    signed_in(client, analyst)
    since = mark()
    form = opened_analysis_form(analysis.block_tokens, scope="user")
    client.post(reverse("analysis_new", args=[analysis.upload_id]), form)
    recorded(since, ["analysis.create", "analysis.fail"])
    new = Analysis.objects.exclude(pk=analysis.pk).get()
    assert new.status == JobStatus.FAILED and new.message
    failed = one("analysis.fail", since)
    assert names(failed) == ("system", "Analysis", str(new.pk))
    assert failed.details == {"upload": analysis.upload_id, "block_tokens": 256,
                              "summary": "llama-3.1-8b · user · B=256",
                              "reason": new.message}  # fmt: skip
    since = mark()
    client.post(reverse("analysis_retry", args=[new.pk]))
    recorded(since, ["analysis.retry", "analysis.fail"])
    assert names(one("analysis.retry", since)) == ("ana", "Analysis", str(new.pk))
    assert_verifies()


def test_a_policys_rerun_is_asked_for_by_its_editor(client, analyst, analysis):
    version = policy_create(name="chat EU", user=analyst, analysis=analysis)
    wait_for(settled)  # a re-run the draft asked for ended (a real worker's, meanwhile)
    body = complete(version.body) | {"lifetime_s": 120, "scope": "user"}
    since = mark()
    version = version_update(version=version, body=body, user=analyst, analysis=analysis)
    rerun = version.constrained_analysis
    recorded(since, ["policy.edit", "analysis.create", "analysis.done"])
    asked = one("analysis.create", since)
    assert names(asked) == ("ana", "Analysis", str(rerun.pk))
    assert asked.details["why"] == "policy re-run"
    assert asked.details["summary"] == "llama-3.1-8b · user · B=256 · lifetime 120s"
    assert_verifies()


# --- downloads ------------------------------------------------------------------------------
def test_every_download_of_an_analysis_is_one_event_for_a_reader_too(client, analysis, auditor):
    signed_in(client, auditor)
    stem = f"kvscope-analysis-{analysis.pk}"
    files = [("report.json", "download.report", f"{stem}.json"),
             *[(csv, "download.csv", f"{stem}-{csv}") for csv in CSVS]]  # fmt: skip
    for what, action, file in files:
        since = mark()
        response = client.get(reverse("analysis_download", args=[analysis.pk, what]))
        assert response.status_code == 200
        recorded(since, [action])
        event = one(action, since)
        assert names(event) == ("aud", "Analysis", str(analysis.pk))
        assert event.details == {"file": file, "upload": analysis.upload_id}
        assert file in response["Content-Disposition"]
    since = mark()
    assert client.get(reverse("analysis_download", args=[analysis.pk, "x.csv"])).status_code == 404
    assert added(since) == []  # nothing was downloaded
    assert_verifies()


def test_a_comparison_csv_and_a_replay_trace_are_one_event_each(client, analyst, analysis, auditor):
    other = rerun(analysis, analyst, min_reuses=3)
    signed_in(client, auditor)
    since = mark()
    query = {"a": [analysis.pk, other.pk], "baseline": other.pk, "format": "csv"}
    assert client.get(reverse("compare"), query).status_code == 200
    event = one("download.compare", since)
    ids = f"{analysis.pk}-{other.pk}"
    assert names(event) == ("aud", "Comparison", ids)
    assert event.details == {"file": f"kvscope-compare-{ids}.csv",
                             "analyses": [analysis.pk, other.pk], "baseline": other.pk}  # fmt: skip
    since = mark()
    url = reverse("upload_replay_download", args=[analysis.upload_id])
    response = client.get(url, {"block_tokens": 256, "time_scale": 0.5})
    trace = b"".join(response.streaming_content)
    assert response.status_code == 200 and trace
    recorded(since, ["download.replay"])
    replay = one("download.replay", since)
    assert names(replay) == ("aud", "Upload", str(analysis.upload_id))
    export = ReplayExport.objects.get()  # the trace's id and its file's digest
    assert export.sha256 == hashlib.sha256(trace).hexdigest()
    assert replay.details == {
        "file": f"kvscope-replay-upload{analysis.upload_id}-b256-x{export.pk}.jsonl",
        "block_tokens": 256, "labels": False, "tenants": None, "start_s": None, "end_s": None,
        "time_scale": 0.5, "export": export.pk, "sha256": export.sha256}  # fmt: skip
    assert_verifies()


def test_a_readers_policy_export_is_recorded_once(client, analysis, analyst, approver, auditor):
    version = approved_version(analysis, analyst, approver)
    signed_in(client, auditor)
    since = mark()
    response = client.get(reverse("policy_export", args=[version.pk, "vllm-serve.sh"]))
    assert response.status_code == 200
    recorded(since, ["policy.export"])
    event = one("policy.export", since)
    assert names(event) == ("aud", "PolicyVersion", str(version.pk))
    assert event.details == {"kind": "vllm-serve.sh", "digest": version.digest}
    assert_verifies()


# --- benchmark runs -------------------------------------------------------------------------
def test_benchmark_runs_uploaded_and_downloaded_are_one_event_each(client, analyst, auditor):
    signed_in(client, analyst)
    files = [vllm_file("c4.json", max_concurrency=4), vllm_file("c16.json", max_concurrency=16)]
    sizes = [f.size for f in files]
    since = mark()
    assert client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": files}).status_code == 302
    runs = list(BenchRun.objects.order_by("pk"))
    recorded(since, ["benchmark.upload", "benchmark.upload"])  # one per run stored
    events = list(AuditEvent.objects.filter(pk__gt=since).order_by("pk"))
    for event, run, size, concurrency in zip(events, runs, sizes, [4, 16], strict=True):
        assert names(event) == ("ana", "BenchRun", str(run.pk))
        assert event.details == {"file": run.name, "bytes": size, "tool": "vllm",
                                 "model": "meta-llama/Llama-3.1-8B", "tiers": "No offload",
                                 "context_tokens": 8192, "concurrency": concurrency}  # fmt: skip
    client.logout()
    signed_in(client, auditor)
    since = mark()
    model = "meta-llama/Llama-3.1-8B"
    assert client.get(reverse("evidence_runs_csv"), {"model": model}).status_code == 200
    listed = one("download.benchmark_csv", since)
    assert names(listed) == ("aud", "BenchModel", model)
    assert listed.details == {"file": "kvscope-runs-meta-llamallama-31-8b.csv", "model": model,
                              "runs": [run.pk for run in runs]}  # fmt: skip
    since = mark()
    assert client.get(reverse("evidence_run_raw", args=[runs[1].pk])).status_code == 200
    raw = one("download.benchmark_raw", since)
    assert names(raw) == ("aud", "BenchRun", str(runs[1].pk))
    assert raw.details == {"file": f"kvscope-run-{runs[1].pk}.json", "name": "c16.json"}
    recorded(since, ["download.benchmark_raw"])
    assert_verifies()


# --- sign-ins and refusals ------------------------------------------------------------------
def test_a_sign_in_is_one_event_and_a_failed_one_another_without_the_password(client, analyst):
    login = reverse("login")
    since = mark()
    assert client.post(login, {"username": "ana", "password": PASSWORD}).status_code == 302
    recorded(since, ["auth.sign_in"])
    signed = one("auth.sign_in", since)
    assert names(signed) == ("ana", "User", str(analyst.pk))
    assert signed.details == {"address": "127.0.0.1"}
    client.logout()
    since = mark()
    wrong = "not-the-password-17"
    assert client.post(login, {"username": "ana", "password": wrong}).status_code == 200
    recorded(since, ["auth.refused"])
    refused = one("auth.refused", since)
    assert names(refused) == ("system", "User", "ana")
    assert refused.details == {"username": "ana", "address": "127.0.0.1",
                               "reason": "wrong username or password"}  # fmt: skip
    stored = json.dumps([refused.details, refused.object_id, refused.actor_name])
    assert wrong not in stored and PASSWORD not in stored
    assert_verifies()


def test_a_throttled_sign_in_is_refused_with_its_reason(client, analyst, settings):
    settings.KVSCOPE_LOGIN_FAILURES = 2
    login = reverse("login")
    for _ in range(2):
        client.post(login, {"username": "ana", "password": "wrong"})
    since = mark()
    client.post(login, {"username": "ana", "password": PASSWORD})  # right, but too late
    recorded(since, ["auth.refused"])
    assert one("auth.refused", since).details["reason"] == "throttled"
    assert "_auth_user_id" not in client.session
    assert_verifies()


def test_a_page_refused_to_a_role_is_one_event(client, auditor):
    signed_in(client, auditor)
    since = mark()
    assert client.post(reverse("upload_sample")).status_code == 403  # (a roles decorator)
    refused = one("auth.forbidden", since)
    assert names(refused) == ("aud", "Page", "upload_sample")
    reason = "Only analysts can upload logs and run analyses."
    assert refused.details == {"path": "/uploads/sample/", "method": "POST", "reason": reason}
    since = mark()
    files = [vllm_file("x.json")]
    assert client.post(reverse("evidence_list"), {**BENCH_TAGS, "files": files}).status_code == 403
    recorded(since, ["auth.forbidden"])  # (a view's own refusal: console.web.forbidden)
    refused = one("auth.forbidden", since)
    reason = "Only analysts upload runs."
    assert (refused.object_id, refused.details["reason"]) == ("evidence_list", reason)
    assert not Upload.objects.exists() and not BenchRun.objects.exists()
    assert_verifies()


def test_with_the_trail_cut_an_upload_is_refused_saying_why_and_sign_in_goes_on(
    client, analyst, tmp_path
):
    signed_in(client, analyst)
    newest = AuditEvent.objects.latest("pk")  # the sign-in's
    with transaction.atomic(), guards_off(connection), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", [newest.pk])
    log = chat_file(tmp_path, "day.jsonl", list(chat_requests(5, seed=5)))
    with open(log, "rb") as fh:
        form = {
            "name": "day",
            "files": [fh],
            "format": "auto",
            "block_sizes": ["256"],
            "retention": "delete",
        }
        response = client.post(reverse("upload_new"), form)
    assert response.status_code == 200  # the form again, saying why: not a 500
    assert "The audit trail does not end where its head says" in response.content.decode()
    assert not Upload.objects.exists()
    client.logout()  # signing in still works (an administrator comes to see the break)
    assert (
        client.post(reverse("login"), {"username": "ana", "password": PASSWORD}).status_code == 302
    )
    assert not audit.verify().ok and not AuditEvent.objects.filter(pk__gt=newest.pk).exists()


# --- the vocabulary -------------------------------------------------------------------------
def test_every_action_the_code_records_is_in_the_vocabulary():
    """Literal actions in the source, the housekeeping kinds' and the policy transitions'."""
    source = "\n".join(p.read_text() for p in Path(settings.BASE_DIR, "console").rglob("*.py"))
    literal = set(re.findall(r'action="([a-z_]+\.[a-z_]+)"', source))
    literal |= set(re.findall(r'audit_events\.\w+\(.*?"([a-z_]+\.[a-z_]+)"', source))
    kinds = {f"{k.action}.{verb}" for k in (UPLOAD, ANALYSIS, BENCH_RUN)
             for verb in ("rename", "delete")}  # fmt: skip
    transitions = {f"policy.{a}" for a in ("submit", "request_changes", "approve",
                                            "supersede", "retire")}  # fmt: skip
    assert {"upload.create", "auth.refused", "policy.export"} <= literal
    assert literal | kinds | transitions <= set(ACTIONS)
    assert label_of("upload.create") == "uploaded a log" and label_of("old.thing") == "old.thing"


def test_an_unlisted_action_or_an_unnamed_object_is_refused(analyst):
    with pytest.raises(ValueError, match=r"not in console\.audit_actions"):
        audit.record(actor=analyst, action="upload.misspelt", obj=analyst)
    with pytest.raises(ValueError, match="names its object"):
        audit.record(actor=analyst, action="auth.refused")
    assert not AuditEvent.objects.exists()
    # an object named by its type and id, cut to what the column holds
    event = audit.record(actor=None, action="auth.refused", object_type="User",
                         object_id="u" * 60, details={"reason": "x"})  # fmt: skip
    assert (event.actor_name, event.object_id) == ("system", "u" * 40)
    assert_verifies()
