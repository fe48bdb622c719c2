"""Access: every page needs sign-in; every view that changes something refuses the roles
that may not, on direct POSTs too, and then changes nothing; CSRF is enforced; an
auditor changes nothing anywhere; sign-in throttling, session expiry, password hashing."""

from __future__ import annotations

import datetime as dt
import gzip
import time
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.hashers import identify_hasher
from django.test import Client
from django.urls import URLPattern, get_resolver, reverse
from django.utils import timezone

from console.benchmarks.services import bench_runs_create
from console.models import Analysis, AuditEvent, AuditHead, JobStatus, Policy, Upload
from console.policies.services import policy_create, version_approve, version_update
from console.policies.signed_exports import export_text
from console.uploads.services import upload_create
from console.uploads.storage import upload_delete_raw
from tests.console.factories import (
    BENCH_TAGS,
    PASSWORD,
    complete,
    make_user,
    submitted_version,
    vllm_file,
)
from tests.console.waiting import settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC = {"healthz", "login", "logout"}
READ_PAGES = {"home", "upload_detail", "upload_status", "analysis_detail", "analysis_status",
              "analysis_download", "compare", "policy_list", "audit_log", "policy_version",
              "policy_signoff", "policy_export", "upload_replay", "audit_export",
              "upload_replay_download", "evidence_matrix", "evidence_compare",
              "evidence_runs_csv", "evidence_run_raw", "glossary", "evidence_run",
              "analysis_buys", "policy_evidence_pack", "policy_drift_check"}  # fmt: skip
# view -> who may POST to it (the others are refused and change nothing)
CHANGES = {
    "upload_new": "analyst", "upload_sample": "analyst", "upload_retry": "analyst",
    "analysis_new": "analyst", "analysis_retry": "analyst", "policy_new": "analyst",
    "policy_edit": "analyst",
    "policy_submit": "analyst", "policy_new_version": "analyst", "policy_delete": "author",
    "policy_request_changes": "approver", "policy_approve": "approver",
    "policy_retire": "approver", "evidence_list": "analyst",
    # housekeeping: any analyst renames; only the one who stored it deletes
    "upload_rename": "analyst", "analysis_rename": "analyst", "evidence_run_rename": "analyst",
    "upload_delete": "author", "analysis_delete": "author", "evidence_run_delete": "author",
    # a drift check: whoever engineers or approves (not auditors, not readers)
    "policy_drift_new": "analyst_or_approver",
}  # fmt: skip


def _names() -> set[str]:
    return {p.name for p in get_resolver().url_patterns if isinstance(p, URLPattern)}


def test_every_url_is_classified():
    """A new view must be placed in one of these sets, and so gets the tests below."""
    assert _names() == PUBLIC | READ_PAGES | set(CHANGES)


@pytest.fixture
def world(chat_log, analyst, approver):
    upload = upload_create(name="day", sources=[chat_log], user=analyst)
    analysis = wait_for(lambda: Analysis.objects.filter(upload=upload, status=JobStatus.DONE)
                        .first())  # fmt: skip
    draft = policy_create(name="draft one", user=analyst, analysis=analysis)
    draft = version_update(version=draft, body=complete(draft.body), user=analyst,
                           analysis=analysis)  # fmt: skip
    review = submitted_version(analysis, analyst)
    Policy.objects.filter(pk=review.policy_id).update(name="in review")
    approved = submitted_version(analysis, analyst)
    version_approve(version=approved, user=approver, password=PASSWORD, comment="ok")
    failed = Upload.objects.create(name="broken", status=JobStatus.FAILED, message="x",
                                   raw_paths=[str(chat_log)], created_by=analyst)  # fmt: skip
    failed_analysis = Analysis.objects.create(upload=upload, block_tokens=256,
                                              params=analysis.params, status=JobStatus.FAILED,
                                              message="x", created_by=analyst)  # fmt: skip
    run = bench_runs_create(files=[vllm_file("w.json")], tags=BENCH_TAGS, user=analyst)[0]
    wait_for(settled)  # a worker still writing would change the state the tests compare
    return {"upload": upload, "analysis": analysis, "draft": draft, "review": review,
            "approved": approved, "failed": failed,
            "failed_analysis": failed_analysis, "run": run}  # fmt: skip


def _target(name: str, w: dict) -> tuple[str, dict]:
    """URL and a plausible POST body for each view that changes something."""
    version = {"policy_edit": w["draft"], "policy_submit": w["draft"],
               "policy_delete": w["draft"], "policy_new_version": w["approved"],
               "policy_request_changes": w["review"], "policy_approve": w["review"],
               "policy_retire": w["approved"]}.get(name)  # fmt: skip
    if version is not None:
        return reverse(name, args=[version.pk]), {"password": PASSWORD, "comment": "why not"}
    # housekeeping: the upload (by name), or what nothing relies on (deleting)
    renamed = {"upload_rename": w["upload"], "analysis_rename": w["analysis"],
               "evidence_run_rename": w["run"]}.get(name)  # fmt: skip
    if renamed is not None:
        return reverse(name, args=[renamed.pk]), {"rename-name": "sneaky"}
    deleted = {"upload_delete": w["failed"], "analysis_delete": w["failed_analysis"],
               "evidence_run_delete": w["run"]}.get(name)  # fmt: skip
    if deleted is not None:
        return reverse(name, args=[deleted.pk]), {"confirm": "on"}
    if name == "policy_drift_new":  # the approved version's own vLLM flags, as deployed
        return reverse(name, args=[w["approved"].pk]), {"text": export_text(w["approved"], "vllm")}
    if name == "upload_retry":
        return reverse(name, args=[w["failed"].pk]), {}
    if name == "analysis_retry":
        return reverse(name, args=[w["failed_analysis"].pk]), {}
    if name == "analysis_new":
        return reverse(name, args=[w["upload"].pk]), {
            "block_tokens": "256", "model": "llama-3.1-8b", "windows": "60, 600",
            "scope": "user", "target": "90", "headroom": "10", "tp": "1",
            "min_reuses": "2", "doc_min_tokens": "512", "weight_dtype": "bf16",
            "concurrent_sequences": "1", "context_tokens": "4096", "host_ram_gib": "64",
            "reserve_os_gib": "8"}  # fmt: skip
    if name == "evidence_list":
        return reverse(name), {"tier": "none", "context_tokens": "4096"}
    if name == "policy_new":
        return reverse(name), {"name": "sneaky", "analysis": w["analysis"].pk}
    return reverse(name), {"name": "sneaky", "format": "auto", "block_sizes": ["256"],
                           "retention": "delete"}  # fmt: skip


def _state() -> list:
    """Everything a POST could change: every row of every console table but the audit
    trail's, which records the sign-in and the refusal itself (see _refusal_events)."""
    rows = []
    for model in apps.get_app_config("console").get_models():
        if model not in (AuditEvent, AuditHead):
            rows.append((model._meta.label, list(model.objects.order_by("pk").values())))
    return rows


def _newest_event() -> int:
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def _refusal_events(since: int, status: int) -> None:
    """What a refused POST added to the audit trail: its sign-in (force_login), then its
    403 (a 302 refusal, a policy service's, records nothing of its own)."""
    added = list(AuditEvent.objects.filter(pk__gt=since).values_list("action", flat=True))
    assert added == ["auth.sign_in", *(["auth.forbidden"] if status == 403 else [])], added


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_views_that_change_something_refuse_other_roles(
    name, world, analyst, approver, auditor, chat_log
):
    nobody = make_user("nobody")  # signed in, no role
    other_analyst = make_user("ana2", "analyst")
    allowed = CHANGES[name]
    refused = [nobody, auditor]
    # "author": the analyst who wrote the draft, not any analyst
    refused += {"analyst": [approver], "author": [approver, other_analyst],
                "approver": [analyst], "analyst_or_approver": []}[allowed]  # fmt: skip
    url, body = _target(name, world)
    before = _state()
    for user in refused:
        since = _newest_event()
        client = Client()
        client.force_login(user)
        response = client.post(url, body)
        assert response.status_code in (302, 403), (user, response.status_code)
        assert _state() == before, f"{user.username} changed something through {name}"
        _refusal_events(since, response.status_code)
    since = _newest_event()
    anonymous = Client().post(url, body)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert _state() == before and _newest_event() == since  # (sent to sign in: no event)
    # the control: whom it is for does change something (so the refusals above mean it)
    if name != "policy_edit":  # its body needs the whole policy form
        client = Client()
        client.force_login({"analyst": analyst, "author": analyst, "approver": approver,
                            "analyst_or_approver": analyst}[allowed])  # fmt: skip
        with open(chat_log, "rb") as fh:
            files = {"upload_new": [fh], "evidence_list": [vllm_file("run.json")]}.get(name)
            client.post(url, {**body, "files": files} if files else body)
        assert _state() != before, f"{allowed} could not use {name}"
        # what the control queued finishes first: the teardown's TRUNCATE deadlocks with a
        # worker's writes
        wait_for(settled)


def test_every_page_needs_sign_in(world):
    w = world
    args = {"upload_detail": [w["upload"].pk], "upload_status": [w["upload"].pk],
            "analysis_detail": [w["analysis"].pk], "analysis_status": [w["analysis"].pk],
            "analysis_download": [w["analysis"].pk, "report.json"],
            "policy_version": [w["approved"].pk], "policy_signoff": [w["approved"].pk],
            "policy_export": [w["approved"].pk, "lmcache.yaml"],
            "policy_evidence_pack": [w["approved"].pk],
            "upload_replay": [w["upload"].pk],
            "upload_replay_download": [w["upload"].pk], "evidence_run_raw": [1],
            "evidence_run": [1], "analysis_buys": [w["analysis"].pk],
            "audit_export": ["json"], "policy_drift_check": [1]}  # fmt: skip
    for name in sorted(READ_PAGES | set(CHANGES)):
        if name in CHANGES:  # POST only (a GET is 405 before anything else)
            response = Client().post(_target(name, w)[0])
        else:
            response = Client().get(reverse(name, args=args.get(name, [])))
        assert response.status_code == 302, name
        assert response["Location"].startswith(reverse("login")), name


def test_csrf_is_enforced(analyst):
    client = Client(enforce_csrf_checks=True)
    client.force_login(analyst)
    response = client.post(reverse("policy_new"), {"name": "no token"})
    assert response.status_code == 403 and not Policy.objects.exists()


def test_sign_in_is_throttled_after_repeated_failures(client, analyst, settings):
    for _ in range(settings.KVSCOPE_LOGIN_FAILURES):
        page = client.post(reverse("login"), {"username": "ana", "password": "wrong"})
        assert "Please enter a correct username and password" in page.content.decode()
    # now even the right password is refused for a while, and the page says why
    page = client.post(reverse("login"), {"username": "ana", "password": PASSWORD})
    assert page.status_code == 200 and "_auth_user_id" not in client.session
    assert "Too many failed sign-ins for this account" in page.content.decode()
    # another account is not locked out by these failures
    other = make_user("ana3", "analyst")
    elsewhere = Client(REMOTE_ADDR="10.0.0.9")
    response = elsewhere.post(reverse("login"), {"username": "ana3", "password": PASSWORD})
    assert response.status_code == 302 and int(elsewhere.session["_auth_user_id"]) == other.pk


def test_sessions_expire(client, analyst, settings):
    settings.SESSION_COOKIE_AGE = 1
    assert client.login(username=analyst.username, password=PASSWORD)
    assert client.get(reverse("home")).status_code == 200
    time.sleep(2.1)
    assert client.get(reverse("home")).status_code == 302


def test_passwords_are_hashed_with_djangos_default(analyst):
    assert identify_hasher(analyst.password).algorithm == "pbkdf2_sha256"
    assert PASSWORD not in analyst.password


def test_uploaded_files_are_stored_under_generated_names_and_never_served(
    client, analyst, chat_log
):
    keep = timezone.localdate() + dt.timedelta(days=3)
    upload = upload_create(name="day", sources=[chat_log], user=analyst, keep_raw_until=keep)
    stored = Path(wait_for(lambda: Upload.objects.get(pk=upload.pk).raw_paths)[0])
    assert stored.exists() and stored.name != chat_log.name
    assert stored.is_relative_to(settings.MEDIA_ROOT)
    assert not stored.is_relative_to(settings.STATIC_ROOT)
    assert client.login(username=analyst.username, password=PASSWORD)
    for url in (f"/media/raw/{stored.name}", f"/raw/{stored.name}",
                f"/static/../media/raw/{stored.name}"):  # fmt: skip
        assert client.get(url).status_code == 404
    upload_delete_raw(upload_id=upload.pk, reason="expired")


FORM = {"name": "x", "format": "auto", "block_sizes": ["256"], "retention": "delete"}


def test_uploads_are_sniffed_by_name_and_first_bytes(client, analyst, chat_log, tmp_path):
    assert client.login(username=analyst.username, password=PASSWORD)
    cases = {
        "holiday.png": (b"\x89PNG\r\n\x1a\n" + bytes(64), "holiday.png: not a log file name"),
        "dump.jsonl": (bytes(range(256)), "dump.jsonl: does not look like JSON lines"),
        "day.jsonl.gz": (chat_log.read_bytes(), "day.jsonl.gz: named .gz but not gzip"),
    }
    raw = Path(settings.MEDIA_ROOT) / "raw"
    stored_before = set(raw.glob("*"))  # (shared with the real worker's other uploads)
    for name, (content, reason) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with open(path, "rb") as fh:
            page = client.post(reverse("upload_new"), {**FORM, "files": [fh]})
        assert page.status_code == 200 and reason in page.content.decode(), name
    assert not Upload.objects.exists() and set(raw.glob("*")) == stored_before
    packed = tmp_path / "day.jsonl.gz"
    packed.write_bytes(gzip.compress(chat_log.read_bytes()))
    with open(packed, "rb") as fh:
        response = client.post(reverse("upload_new"), {**FORM, "files": [fh]})
    assert response.status_code == 302 and Upload.objects.count() == 1


def test_sign_in_is_throttled_by_address_too_behind_the_proxy(analyst, settings):
    settings.KVSCOPE_LOGIN_FAILURES = 2  # an address: after 4 x 2 failures
    settings.KVSCOPE_BEHIND_PROXY = True
    via_proxy = {"REMOTE_ADDR": "10.0.0.1"}  # every request comes from the proxy

    def sign_in(client_ip: str, username: str, password: str):
        return Client(**via_proxy).post(
            reverse("login"), {"username": username, "password": password},
            HTTP_X_FORWARDED_FOR=f"203.0.113.7, {client_ip}",  # first: what the client claims
        )  # fmt: skip

    for i in range(8):  # a different account each time: only the address adds up
        sign_in("198.51.100.4", f"guess{i}", "wrong")
    refused = sign_in("198.51.100.4", analyst.username, PASSWORD)
    assert "Too many failed sign-ins from this address" in refused.content.decode()
    assert sign_in("198.51.100.5", analyst.username, PASSWORD).status_code == 302
