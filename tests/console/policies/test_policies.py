"""Retention policies: the workflow, separation of duties, the audit chain, the checks
and the exports."""

from __future__ import annotations

import copy
import html
import io
import itertools
import json
import re
import shlex

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.urls import reverse

from console.management.commands.flush import guards_off
from console.models import (
    Analysis,
    AuditEvent,
    AuditHead,
    JobStatus,
    Policy,
    PolicyVersion,
    SignInFailure,
    VersionState,
)
from console.policies import audit
from console.policies.body import digest, normalize
from console.policies.checks import check_body
from console.policies.models import AppendOnlyError
from console.policies.services import (
    ChecksFailed,
    PolicyError,
    findings_for,
    policy_create,
    policy_retire,
    version_approve,
    version_new,
    version_request_changes,
    version_submit,
    version_update,
)
from console.policies.views import export_text
from console.uploads.analyses import analysis_create
from tests.console.factories import (
    PASSWORD,
    approved_version,
    complete,
    make_user,
    submitted_version,
    version_in_review,
)
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30
# the routes of the chat log, and the Hugging Face repositories an engine loads for them
HF = {"llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct", "qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct"}


@pytest.fixture
def approver2(db):
    return make_user("appr2", "approver")


def test_a_draft_is_prefilled_from_its_analysis(analysis, analyst):
    version = policy_create(name="chat EU", user=analyst, analysis=analysis)
    report = analysis.report
    assert version.state == VersionState.DRAFT and version.number == 1
    assert version.body["routes"] == [r["route"] for r in report["routes"]]
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == round(
        report["recommendation"]["ram_bytes"] / GIB, 2
    )
    assert (
        version.body["evidence"]["recommended_ram_bytes"] == report["recommendation"]["ram_bytes"]
    )


def test_the_policy_cost_reruns_the_analysis_with_its_lifetime_and_scope(analysis, analyst):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    body = complete(version.body)
    body["lifetime_s"], body["scope"] = 120, "user"
    version = version_update(version=version, body=body, user=analyst, analysis=analysis)
    rerun = wait_for(lambda: Analysis.objects.filter(
        pk=version.constrained_analysis_id, status=JobStatus.DONE).first())  # fmt: skip
    assert rerun.params["lifetime"] == 120 and rerun.params["scope"] == "user"
    assert rerun.report["recommendation"]["lifetime_s"] == 120
    # a 2-minute lifetime and per-user sharing can only lower the ceiling
    assert rerun.report["recommendation"]["ceiling"] <= analysis.report["recommendation"]["ceiling"]


def test_full_workflow_with_sign_off_digest_and_supersession(analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    assert version.state == VersionState.IN_REVIEW
    signoff = version_approve(
        version=version, user=approver, password=PASSWORD, comment="Matches the DPA."
    )
    version.refresh_from_db()
    assert version.state == VersionState.APPROVED
    assert signoff.digest == version.digest == digest(version.body)
    assert len(signoff.digest) == 64
    # a new version supersedes the approved one only when it is approved in turn
    v2 = version_new(policy=version.policy, user=analyst)
    assert v2.number == 2 and v2.body == version.body
    v2 = version_update(
        version=v2, body=dict(v2.body, lifetime_s=900), user=analyst, analysis=analysis
    )
    version_submit(version=v2, user=analyst)
    version_approve(version=v2, user=approver, password=PASSWORD, comment="Shorter.")
    version.refresh_from_db()
    assert version.state == VersionState.SUPERSEDED
    assert PolicyVersion.objects.get(pk=v2.pk).digest != version.digest


@pytest.mark.parametrize("who", ["author", "analyst_only", "wrong_password", "no_comment"])
def test_approval_is_refused(analysis, analyst, approver, who):
    version = submitted_version(analysis, analyst)
    if who == "author":  # an author who is also an approver still cannot approve
        analyst.groups.add(approver.groups.get())
        author = type(analyst).objects.get(pk=analyst.pk)  # fresh: permissions are cached
        kwargs = {"user": author, "password": PASSWORD, "comment": "ok"}
        message = "author of a version can never approve"
    elif who == "analyst_only":
        other = make_user("ana2", "analyst")
        kwargs = {"user": other, "password": PASSWORD, "comment": "ok"}
        message = "Only approvers"
    elif who == "wrong_password":
        kwargs = {"user": approver, "password": "guess", "comment": "ok"}
        message = "password is not correct"
    else:
        kwargs = {"user": approver, "password": PASSWORD, "comment": "  "}
        message = "needs a comment"
    with pytest.raises(PolicyError, match=message):
        version_approve(version=version, **kwargs)
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW and version.digest == ""


def test_double_approve_and_edit_after_approval_change_nothing(analysis, analyst, approver,
                                                               approver2):  # fmt: skip
    version = submitted_version(analysis, analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    events = AuditEvent.objects.count()
    with pytest.raises(PolicyError, match="approved now; nothing was changed"):
        version_approve(version=version, user=approver2, password=PASSWORD, comment="again")
    with pytest.raises(PolicyError, match="approved versions are immutable"):
        version_update(version=version, body=version.body, user=analyst, analysis=analysis)
    assert AuditEvent.objects.count() == events
    assert version.signoff.approver_name == approver.username


def test_changes_requested_goes_back_to_the_author(analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    with pytest.raises(PolicyError, match="Say what should change"):
        version_request_changes(version=version, user=approver, comment="")
    version_request_changes(version=version, user=approver, comment="Purge faster.")
    version.refresh_from_db()
    assert version.state == VersionState.CHANGES_REQUESTED
    body = dict(version.body, purge_deadline_s=600,
                end_of_life=[{"event": "lifetime_expiry", "deadline_s": 60},
                             {"event": "tenant_offboarding", "deadline_s": 600}])  # fmt: skip
    version = version_update(version=version, body=body, user=analyst, analysis=analysis)
    version_submit(version=version, user=analyst)
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW
    assert [r.action for r in version.reviews.all()] == ["submit", "request_changes", "submit"]


def test_submission_runs_the_checks(analysis, analyst):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    with pytest.raises(ChecksFailed) as failed:
        version_submit(version=version, user=analyst)
    fields = {f.field for f in failed.value.findings if f.level == "error"}
    assert {"failure", "access", "purge_deadline_s"} <= fields
    version.refresh_from_db()
    assert version.state == VersionState.DRAFT


def test_retire(analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    policy_retire(policy=version.policy, user=approver, password=PASSWORD,
                  comment="Route decommissioned.")  # fmt: skip
    version.refresh_from_db()
    assert version.state == VersionState.RETIRED
    with pytest.raises(PolicyError, match="retired"):
        version_new(policy=version.policy, user=analyst)


# --- consistency checks ------------------------------------------------------------------
def _report(host_available_gib=None, windows=(300, 3600)):
    host = None
    if host_available_gib is not None:
        host = {"available_bytes": host_available_gib * GIB}
    return {"recommendation": {"host": host}, "windows": [{"window_s": w} for w in windows]}


def _messages(findings, level):
    return " | ".join(f.message for f in findings if f.level == level)


def test_check_disabled_tier_with_a_size():
    from console.policies.body import empty_body

    body = complete(normalize(empty_body()))
    body["tiers"]["no_persistent_storage"] = False
    body["tiers"]["local_disk"] = {"enabled": False, "size_gib": 100, "path": ""}
    assert "local disk tier is disabled but sized (100 GiB)" in _messages(
        check_body(body, _report()), "error")  # fmt: skip


def test_check_no_persistent_storage_forces_disk_and_remote_off():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 100, "path": "/nvme"}
    body["tiers"]["no_persistent_storage"] = True
    body = normalize(body)
    assert body["tiers"]["local_disk"] == {"enabled": False, "size_gib": None, "path": "/nvme"}
    assert body["disk_contract"] is None
    assert _messages(check_body(body, _report()), "error") == ""


def test_check_ram_above_host_budget_and_lifetime_beyond_the_windows():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["cpu_ram"]["size_gib"] = 64
    body["lifetime_s"] = 7200
    findings = check_body(body, _report(host_available_gib=48, windows=(300, 3600)))
    assert "CPU RAM 64 GiB is above the host budget" in _messages(findings, "error")
    assert "48.0 GiB after reserves" in _messages(findings, "error")
    assert "lifetime (7200 s) is longer than the longest window" in _messages(findings, "warning")


def test_check_global_scope_on_several_tenants_and_missing_deadlines():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["scope"] = "global"
    body["end_of_life"].append({"event": "data_subject_deletion", "deadline_s": None})
    findings = check_body(body, _report(), tenants_in_traffic=3)
    assert "traffic from 3 tenants" in _messages(findings, "warning")
    assert "“Data-subject deletion request” has no purge deadline" in _messages(findings, "error")


def test_check_disk_contract_required_with_a_disk_tier():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["no_persistent_storage"] = False
    body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
    body = normalize(body)
    errors = _messages(check_body(body, _report()), "error")
    assert "must say who deletes the files" in errors
    assert "when a block counts as cold" in errors


def test_the_form_edits_every_value_of_the_bodys_shape():
    """Each value of body.empty_body() an author sets has its form field, and goes to the
    form's initial values as it is (GPU memory is always a tier: no field)."""
    from console.policies.body import empty_body
    from console.policies.forms import BODY_PATHS, PolicyForm, initial_from_body

    def scalars(section: dict, path: tuple = ()):
        for key, value in section.items():
            if isinstance(value, dict):
                yield from scalars(value, (*path, key))
            elif not isinstance(value, list):
                yield (*path, key)

    body = complete(empty_body())
    assert set(BODY_PATHS.values()) == set(scalars(body)) - {("tiers", "gpu")}
    initial, fields = initial_from_body(body, None), PolicyForm().fields
    for name, path in BODY_PATHS.items():
        value = body
        for part in path:
            value = value[part]
        assert name in fields and initial[name] == value


# --- audit ---------------------------------------------------------------------------------
def test_every_change_is_in_an_intact_hash_chain(analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    actions = list(AuditEvent.objects.values_list("action", flat=True))
    assert actions[:2] == ["policy.create", "policy.edit"]
    assert actions[-2:] == ["policy.submit", "policy.approve"]
    events = list(AuditEvent.objects.order_by("pk"))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))
    result = audit.verify()
    assert result.ok and result.events == len(events)
    call_command("verify_audit")


def test_a_tampered_row_is_detected(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    events = list(AuditEvent.objects.order_by("pk"))
    with pytest.raises(AppendOnlyError):
        events[0].save()
    with pytest.raises(AppendOnlyError):
        events[0].delete()
    # someone with raw database access edits the details (triggers off, as an owner could)
    _raw_tamper(events[0].pk)
    result = audit.verify()
    assert not result.ok and result.broken_at == events[0].pk
    assert "content does not match its hash" in result.reason
    with pytest.raises(CommandError, match=f"broken at event {events[0].pk}"):
        call_command("verify_audit")


def _raw_tamper(pk: int) -> None:
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER kvscope_audit_append_only")
            cursor.execute(f"UPDATE {table} SET details = %s WHERE id = %s",
                           [json.dumps({"policy": "forged"}), pk])  # fmt: skip
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER kvscope_audit_append_only")
        else:
            cursor.execute("DROP TRIGGER kvscope_audit_no_update")
            cursor.execute(f"UPDATE {table} SET details = %s WHERE id = %s",
                           [json.dumps({"policy": "forged"}), pk])  # fmt: skip
            cursor.execute(
                "CREATE TRIGGER kvscope_audit_no_update BEFORE UPDATE ON console_auditevent "
                "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (UPDATE refused)'); END"
            )


def test_the_database_refuses_to_update_or_delete_audit_rows(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    event = AuditEvent.objects.get()
    table = AuditEvent._meta.db_table
    statements = [f"UPDATE {table} SET action = 'x' WHERE id = %s"]
    if connection.vendor == "postgresql":  # the app's database user cannot delete either
        statements.append(f"DELETE FROM {table} WHERE id = %s")
    for sql in statements:
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, [event.pk])
    assert AuditEvent.objects.get().action == "policy.create"


# --- exports -------------------------------------------------------------------------------
def test_lmcache_yaml_export(analysis, analyst, approver):
    def tp4_disk(body):
        body["routes"] = ["llama-3.1-8b"]  # the analysis's model: per rank = total / tp
        body["evidence"] = {}
        body["tiers"]["no_persistent_storage"] = False
        body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
        body["disk_contract"] = {"allowed_data": "prefixes >= 4k tokens", "cold_after_s": 600,
                                 "request_may_wait": False, "deleted_by": "the engine",
                                 "delete_when": "at lifetime end", "on_disk_full": "evict",
                                 "on_restart": "wipe"}  # fmt: skip

    version = approved_version(analysis, analyst, approver, tp4_disk)
    text = export_text(version, "lmcache")
    assert f"policy sha256: {version.digest}" in text
    config = yaml.safe_load(text)
    assert config["chunk_size"] == analysis.block_tokens == 256
    assert config["local_cpu"] is True
    tp = analysis.params["tp"]
    assert config["max_local_cpu_size"] == round(8.0 / tp, 2)  # GB per TP worker
    assert config["local_disk"] == "file:///nvme/kv"
    assert config["max_local_disk_size"] == round(200 / tp, 2)
    assert config["remote_url"] is None


def _llama_only(body):
    body["routes"] = ["llama-3.1-8b"]  # the model the analysis sized: sizes as the policy's


def test_vllm_flags_export(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver, _llama_only)
    lines = [line for line in export_text(version, "vllm").splitlines()
             if not line.startswith("#")]  # fmt: skip
    assert version.digest in export_text(version, "vllm")
    native = shlex.split(lines[0])
    # the first route the policy governs, served by its Hugging Face id under its own name
    route = version.body["routes"][0]
    assert native[:3] == ["vllm", "serve", HF[route]]
    assert native[native.index("--served-model-name") + 1] == route
    size = native[native.index("--kv-offloading-size") + 1]
    assert float(size) == 8.0  # GiB, the total across TP ranks
    assert native[native.index("--kv-offloading-backend") + 1] == "native"
    assert "--prefix-caching-hash-algo" in native  # scope tenant: a cryptographic hash
    lmcache = shlex.split(lines[1])
    assert lmcache[0] == "LMCACHE_CONFIG_FILE=lmcache.yaml"
    connector = json.loads(lmcache[lmcache.index("--kv-transfer-config") + 1])
    assert connector == {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


def test_helm_values_export(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver, _llama_only)
    values = yaml.safe_load(export_text(version, "helm"))
    spec = values["servingEngineSpec"]["modelSpec"][0]
    assert spec["modelURL"] == HF[version.body["routes"][0]]
    assert spec["lmcacheConfig"] == {"enabled": True, "cpuOffloadingBufferSize": "8"}
    assert spec["vllmConfig"]["tensorParallelSize"] == analysis.params["tp"]


def test_exports_need_an_approved_version_and_are_audited(client, analysis, analyst, approver):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    assert client.login(username=analyst.username, password=PASSWORD)
    url = reverse("policy_export", args=[version.pk, "lmcache.yaml"])
    assert client.get(url).status_code == 302  # a draft: refused, back to the page
    approved = approved_version(analysis, analyst, approver, _llama_only)
    response = client.get(reverse("policy_export", args=[approved.pk, "lmcache.yaml"]))
    assert response.status_code == 200
    assert yaml.safe_load(response.content)["chunk_size"] == 256
    event = AuditEvent.objects.latest("pk")
    assert event.action == "policy.export" and event.details["kind"] == "lmcache.yaml"


# --- pages ---------------------------------------------------------------------------------
def test_pages_enforce_roles_on_direct_posts(client, analysis, analyst, approver, auditor):
    version = submitted_version(analysis, analyst)
    assert client.login(username=auditor.username, password=PASSWORD)
    assert client.get(reverse("policy_version", args=[version.pk])).status_code == 200
    client.post(reverse("policy_approve", args=[version.pk]),
                {"password": PASSWORD, "comment": "sneaky"})  # fmt: skip
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW
    assert client.get(reverse("policy_edit", args=[version.pk])).status_code == 403
    client.logout()
    assert client.login(username=approver.username, password=PASSWORD)
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert "Approve and sign off" in page
    client.post(reverse("policy_approve", args=[version.pk]),
                {"password": PASSWORD, "comment": "fine"})  # fmt: skip
    version.refresh_from_db()
    assert version.state == VersionState.APPROVED
    signoff = client.get(reverse("policy_signoff", args=[version.pk])).content.decode()
    assert version.digest in signoff and "fine" in signoff


def test_deleting_a_draft_is_audited_and_only_for_unsubmitted_drafts(analysis, analyst):
    from console.policies.services import version_delete_draft

    version = policy_create(name="short-lived", user=analyst, analysis=analysis)
    body_digest = digest(version.body)
    assert version_delete_draft(version=version, user=analyst) is None
    assert not PolicyVersion.objects.filter(pk=version.pk).exists()
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions[-2:] == ["policy.delete_draft", "policy.delete"]
    deletion = AuditEvent.objects.get(action="policy.delete_draft")
    assert deletion.details["digest"] == body_digest and audit.verify().ok
    submitted = submitted_version(analysis, analyst)
    with pytest.raises(PolicyError, match="never submitted"):
        version_delete_draft(version=submitted, user=analyst)


def test_no_approval_once_the_policy_is_retired(analysis, analyst, approver, approver2):
    v1 = submitted_version(analysis, analyst)
    version_approve(version=v1, user=approver, password=PASSWORD, comment="ok")
    v2 = version_new(policy=v1.policy, user=analyst)
    v2 = version_update(version=v2, body=v2.body, user=analyst, analysis=analysis)
    version_submit(version=v2, user=analyst)
    policy_retire(policy=v1.policy, user=approver, password=PASSWORD, comment="gone")
    with pytest.raises(PolicyError, match="retired"):
        version_approve(version=v2, user=approver2, password=PASSWORD, comment="late")
    v2.refresh_from_db()
    assert v2.state == VersionState.IN_REVIEW


def test_an_approver_who_edited_the_version_cannot_approve_it(analysis, analyst):
    editor = make_user("both", "analyst", "approver")
    version = version_in_review(analysis, analyst, editor=editor, submitter=analyst)
    with pytest.raises(PolicyError, match="You edited this version"):
        version_approve(version=version, user=editor, password=PASSWORD, comment="mine")


def test_a_body_edited_after_it_was_read_is_not_submitted(analysis, analyst):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    version = version_update(version=version, body=complete(version.body), user=analyst,
                             analysis=analysis)  # fmt: skip
    stale = PolicyVersion.objects.get(pk=version.pk)  # what the submit request read
    broken = dict(version.body, routes=[])
    version_update(version=version, body=broken, user=analyst, analysis=analysis)
    with pytest.raises(PolicyError, match="edited meanwhile"):
        version_submit(version=stale, user=analyst)
    assert PolicyVersion.objects.get(pk=version.pk).state == VersionState.DRAFT


# --- the audit trail cannot be cut quietly -------------------------------------------------
def _as_owner(sql: str, params: list | None = None) -> None:
    """Raw SQL with kvscope's triggers off inside one transaction — what a table owner on
    PostgreSQL (or anyone holding the SQLite file) can do."""
    with transaction.atomic(), guards_off(connection), connection.cursor() as cursor:
        cursor.execute(sql, params)


def _refused(sql: str, params: list | None = None) -> None:
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, params)


def test_the_database_refuses_to_cut_the_audit_trail_or_move_its_head(analysis, analyst):
    for name in ("p1", "p2", "p3"):
        policy_create(name=name, user=analyst, analysis=analysis)
    events = AuditEvent.objects.count()
    assert events == 3
    trail, head = AuditEvent._meta.db_table, AuditHead._meta.db_table
    statements = [
        f"DELETE FROM {trail}",
        f"DELETE FROM {trail} WHERE id = (SELECT max(id) FROM {trail})",  # the newest
        f"DELETE FROM {head}",
        f"UPDATE {head} SET events = events - 1",
        f"UPDATE {head} SET events = events + 1, last_id = last_id + 1",
    ]
    if connection.vendor == "postgresql":
        statements += [
            f"TRUNCATE {trail}",
            f"TRUNCATE {trail} CASCADE",
            f"TRUNCATE {head}",
            "TRUNCATE console_policy CASCADE",  # would cascade to versions and sign-offs
            "TRUNCATE console_signoff",
        ]
    for sql in statements:
        _refused(sql)
    result = audit.verify()
    assert result.ok and result.events == events == result.head_events
    assert result.head_hash == AuditEvent.objects.latest("pk").hash


def test_a_cut_tail_is_detected_named_and_nothing_is_recorded_on_top(analysis, analyst):
    for name in ("p1", "p2", "p3", "p4"):
        policy_create(name=name, user=analyst, analysis=analysis)
    events = list(AuditEvent.objects.order_by("pk"))
    assert len(events) == 4
    _as_owner(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id > %s", [events[1].pk])
    result = audit.verify()  # the two left still verify as a chain: the head shows the cut
    assert not result.ok and result.events == 2 and result.broken_at is None
    assert result.reason == (
        f"the newest 2 events are missing after #{events[1].pk}: the head records 4 events "
        f"ending at #{events[3].pk}"
    )
    with pytest.raises(CommandError, match="broken after 2 events: the newest 2 events"):
        call_command("verify_audit", stdout=io.StringIO())
    with pytest.raises(PolicyError, match="does not end where its head says"):
        policy_create(name="p5", user=analyst, analysis=analysis)
    assert AuditEvent.objects.count() == 2 and not Policy.objects.filter(name="p5").exists()


def test_a_trail_emptied_behind_the_guards_is_not_intact(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    last = AuditEvent.objects.latest("pk")
    table = AuditEvent._meta.db_table
    _as_owner(f"TRUNCATE {table}" if connection.vendor == "postgresql" else f"DELETE FROM {table}")
    result = audit.verify()
    assert not result.ok and result.events == 0
    assert result.reason == (
        f"the newest 2 events are missing (all of them): the head records 2 events ending "
        f"at #{last.pk}"
    )
    with pytest.raises(CommandError, match="the newest 2 events are missing"):
        call_command("verify_audit", stdout=io.StringIO())


def test_verify_audit_prints_the_head_to_keep_elsewhere(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    last = AuditEvent.objects.latest("pk")
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    assert out.getvalue().splitlines() == [
        f"audit head: 2 events, last #{last.pk} sha256 {last.hash}",
        "audit chain intact: 2 events",
    ]


def test_flush_empties_the_trail_and_its_guards_come_back(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    call_command("flush", interactive=False, verbosity=0)
    assert not AuditEvent.objects.exists() and not AuditHead.objects.exists()
    assert not PolicyVersion.objects.exists()
    again = make_user("ana-after-flush", "analyst")  # the flush removed the users too
    policy_create(name="after the flush", user=again)
    assert audit.verify() == audit.ChainCheck(
        True, 1, head_events=1, head_id=AuditEvent.objects.get().pk,
        head_hash=AuditEvent.objects.get().hash)  # fmt: skip
    _refused(f"DELETE FROM {AuditEvent._meta.db_table}")
    if connection.vendor == "postgresql":
        _refused(f"TRUNCATE {AuditEvent._meta.db_table}")


# --- what was signed stays signed ----------------------------------------------------------
def _forged(version: PolicyVersion, gib: float = 4096) -> dict:
    body = copy.deepcopy(version.body)
    body["tiers"]["cpu_ram"]["size_gib"] = gib
    return body


def test_the_database_refuses_to_change_a_signed_version(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    forged = _forged(version)
    table = PolicyVersion._meta.db_table
    for sql, params in [
        (f"UPDATE {table} SET body = %s WHERE id = %s", [json.dumps(forged), version.pk]),
        (f"UPDATE {table} SET digest = %s WHERE id = %s", [digest(forged), version.pk]),
        (f"UPDATE {table} SET state = 'draft' WHERE id = %s", [version.pk]),
        (f"UPDATE {table} SET number = 9 WHERE id = %s", [version.pk]),
        (f"DELETE FROM {table} WHERE id = %s", [version.pk]),
        (
            "UPDATE console_signoff SET digest = %s WHERE version_id = %s",
            [digest(forged), version.pk],
        ),
        ("DELETE FROM console_signoff WHERE version_id = %s", [version.pk]),
    ]:
        _refused(sql, params)
    stored = PolicyVersion.objects.get(pk=version.pk)
    assert stored.body["tiers"]["cpu_ram"]["size_gib"] == 8.0
    assert stored.digest == stored.signoff.digest == digest(stored.body)
    # what must still work: deleting the people (their names stay) and retiring
    type(analyst).objects.filter(pk__in=[analyst.pk, approver.pk]).delete()
    stored = PolicyVersion.objects.get(pk=version.pk)
    assert stored.author_id is None and stored.signoff.approver_id is None
    assert stored.signoff.approver_name == "appr"
    approver2 = make_user("appr2", "approver")
    policy_retire(policy=stored.policy, user=approver2, password=PASSWORD, comment="gone")
    assert PolicyVersion.objects.get(pk=version.pk).state == VersionState.RETIRED


def test_exports_and_the_sign_off_page_refuse_a_body_changed_after_approval(
    client, analysis, analyst, approver
):
    version = approved_version(analysis, analyst, approver)
    signed = version.digest
    forged = _forged(version)  # 8 -> 4096 GiB, written behind the guards
    _as_owner(f"UPDATE {PolicyVersion._meta.db_table} SET body = %s WHERE id = %s",
              [json.dumps(forged), version.pk])  # fmt: skip
    version = PolicyVersion.objects.get(pk=version.pk)
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == 4096 and version.digest == signed
    message = f"it hashes to {digest(forged)}, but {signed} was signed"
    for name in ("lmcache", "vllm", "helm"):
        with pytest.raises(PolicyError, match=message):
            export_text(version, name)
    client.force_login(analyst)
    events = AuditEvent.objects.count()
    for kind in ("lmcache.yaml", "vllm-serve.sh", "helm-values.yaml"):
        response = client.get(reverse("policy_export", args=[version.pk, kind]))
        assert response.status_code == 302  # back to the page, nothing served
        assert response["Location"] == reverse("policy_version", args=[version.pk])
    assert AuditEvent.objects.count() == events  # and no export recorded
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert message in page and reverse("policy_export", args=[version.pk, "vllm-serve.sh"]) \
        not in page  # fmt: skip
    signoff = client.get(reverse("policy_signoff", args=[version.pk]))
    assert signoff.status_code == 409
    text = signoff.content.decode()
    assert message in text and "<strong>Approved</strong> by" not in text


# --- approvals: throttled, separated, and kind to the reviewer ------------------------------
def test_the_approval_password_is_throttled_with_sign_in(client, analysis, analyst, approver,
                                                         settings):  # fmt: skip
    version = submitted_version(analysis, analyst)
    limit = settings.KVSCOPE_LOGIN_FAILURES
    for _ in range(limit):
        with pytest.raises(PolicyError, match="The password is not correct"):
            version_approve(version=version, user=approver, password="guess", comment="ok",
                            address="10.0.0.5")  # fmt: skip
    assert SignInFailure.objects.filter(username=approver.username).count() == limit
    # now even the right password is refused for a while
    minutes = settings.KVSCOPE_LOGIN_LOCKOUT_SECONDS // 60
    with pytest.raises(PolicyError, match=f"Too many failed password checks for this account; "
                                          f"try again in {minutes} minutes"):  # fmt: skip
        version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW and version.digest == ""
    # one count: the guesses at the approval form lock the sign-in form too
    page = client.post(reverse("login"), {"username": approver.username, "password": PASSWORD})
    assert "Too many failed sign-ins for this account" in page.content.decode()
    assert "_auth_user_id" not in client.session


def _textarea(page: str, field_id: str) -> str:
    found = re.search(rf'<textarea[^>]*id="{field_id}"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, f"no textarea #{field_id}"
    return html.unescape(found.group(1)).strip()


def test_a_wrong_password_keeps_the_reviewers_comment(client, analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    client.force_login(approver)
    url = reverse("policy_approve", args=[version.pk])
    comment = "Matches the DPA; purge deadlines checked with the SRE team."
    response = client.post(url, {"comment": comment, "password": "not it"})
    assert response.status_code == 200
    page = response.content.decode()
    assert _textarea(page, "approve-comment") == comment
    assert re.search(r'id="approve-password_error"><p class="error" role="alert">'
                     r"The password is not correct.</p>", page)  # fmt: skip
    response = client.post(url, {"comment": "  ", "password": PASSWORD})
    assert response.status_code == 200
    assert 'id="approve-comment_error"><p class="error" role="alert">An approval needs a ' \
        "comment.</p>" in response.content.decode()  # fmt: skip
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW
    assert client.post(url, {"comment": comment, "password": PASSWORD}).status_code == 302
    assert PolicyVersion.objects.get(pk=version.pk).signoff.comment == comment


def test_retiring_asks_for_the_password_and_a_comment(client, analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    with pytest.raises(PolicyError, match="The password is not correct"):
        policy_retire(policy=version.policy, user=approver, password="x", comment="gone")
    with pytest.raises(PolicyError, match="Say why the policy is retired"):
        policy_retire(policy=version.policy, user=approver, password=PASSWORD, comment=" ")
    client.force_login(approver)
    url = reverse("policy_retire", args=[version.pk])
    response = client.post(url, {"comment": "Route decommissioned.", "password": "x"})
    assert response.status_code == 200
    page = response.content.decode()
    assert _textarea(page, "retire-comment") == "Route decommissioned."
    assert 'id="retire-password_error"' in page
    version.refresh_from_db()
    assert version.state == VersionState.APPROVED and version.policy.retired_at is None
    client.post(url, {"comment": "Route decommissioned.", "password": PASSWORD})
    version.refresh_from_db()
    assert version.state == VersionState.RETIRED
    assert version.reviews.last().comment == "Route decommissioned."


def test_only_its_creator_deletes_a_draft(analysis, analyst):
    from console.policies.services import version_delete_draft

    colleague = make_user("ana2", "analyst")
    version = policy_create(name="mine", user=analyst, analysis=analysis)
    body = dict(version.body, lifetime_s=61)  # one trivial edit by the colleague
    version = version_update(version=version, body=body, user=colleague, analysis=analysis)
    with pytest.raises(PolicyError, match="Only the analyst who created a draft may delete it"):
        version_delete_draft(version=version, user=colleague)
    assert PolicyVersion.objects.filter(pk=version.pk).exists()
    assert version_delete_draft(version=version, user=analyst) is None
    assert not PolicyVersion.objects.filter(pk=version.pk).exists()


def test_an_approver_who_submitted_the_version_cannot_approve_it(analysis, analyst, approver):
    both = make_user("both", "analyst", "approver")
    version = version_in_review(analysis, analyst, editor=analyst, submitter=both)
    with pytest.raises(PolicyError, match="You submitted this version"):
        version_approve(version=version, user=both, password=PASSWORD, comment="mine")
    version.refresh_from_db()
    assert version.state == VersionState.IN_REVIEW
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")  # another
    assert PolicyVersion.objects.get(pk=version.pk).state == VersionState.APPROVED


# --- exports and checks that match the policy ----------------------------------------------
@pytest.fixture
def fp8_tp2(analysis, analyst):
    """The same traffic sized for an FP8 KV cache at TP 2."""
    params = dict(analysis.params, kv_dtype="fp8", tp=2)
    rerun = analysis_create(upload=analysis.upload, block_tokens=analysis.block_tokens,
                            params=params, user=analyst)  # fmt: skip
    return wait_for(lambda: Analysis.objects.filter(pk=rerun.pk, status=JobStatus.DONE).first())


# Bytes per token by hand (metrics.md sections 5 and 8), for the tests below:
# llama-3.1-8b: 32 layers, 8 KV heads, head_dim 128; qwen2.5-7b: 28 layers, 4 KV heads, 128;
# gemma-2-9b: 42 layers, 8 KV heads, 256; deepseek-v3 (MLA): 61 layers, latent 512 + 64.
LLAMA_FP8_TP2_REPLICA = 32 * (8 // 2) * 128 * 2 * 1 * 2  # 65,536 B per token
QWEN_FP8_TP2_RANK = 28 * (4 // 2) * 128 * 2 * 1  # 14,336
QWEN_BF16_TP4_RANK = 28 * (4 // 4) * 128 * 2 * 2  # 14,336


def test_every_governed_route_is_exported_with_its_model_tp_and_kv_dtype(fp8_tp2, analyst,
                                                                        approver):  # fmt: skip
    def governs_both(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]

    version = approved_version(fp8_tp2, analyst, approver, governs_both)
    assert version.body["evidence"]["params"]["kv_dtype"] == "fp8"
    # 8 GiB for llama at fp8, TP 2 hold 8 GiB / 65,536 B = 131,072 tokens; qwen keeps as
    # many: 131,072 x 14,336 B = 1.75 GiB per rank, 3.5 GiB over its 2 ranks
    tokens = 8 * GIB // LLAMA_FP8_TP2_REPLICA
    assert tokens == 131_072 and tokens * QWEN_FP8_TP2_RANK == 1.75 * GIB
    per_rank = {"llama-3.1-8b": 4.0, "qwen2.5-7b": 1.75}
    commands = [shlex.split(line) for line in export_text(version, "vllm").splitlines()
                if not line.startswith("#")]  # fmt: skip
    assert len(commands) == 4  # native and LMCache, for each route
    pairs = list(zip(commands[::2], commands[1::2], strict=True))
    for route, (native, lmcache) in zip(HF, pairs, strict=True):
        for command in (native, lmcache[1:]):  # lmcache[0] is LMCACHE_CONFIG_FILE=…
            assert command[:3] == ["vllm", "serve", HF[route]]
            assert command[command.index("--served-model-name") + 1] == route
            assert command[command.index("--tensor-parallel-size") + 1] == "2"
            assert command[command.index("--kv-cache-dtype") + 1] == "fp8"
        # replica totals: per rank x 2 ranks
        assert float(native[native.index("--kv-offloading-size") + 1]) == 2 * per_rank[route]
    # the sizes differ, so each route has its own LMCache file (LMCache loads one mapping)
    files = {route: lmcache[0].removeprefix("LMCACHE_CONFIG_FILE=")
             for route, (_, lmcache) in zip(HF, pairs, strict=True)}  # fmt: skip
    assert files == {"llama-3.1-8b": "lmcache-llama-3-1-8b.yaml",
                     "qwen2.5-7b": "lmcache-qwen2-5-7b.yaml"}  # fmt: skip
    for route in HF:
        lmcache_text = export_text(version, "lmcache", route=route)
        (config,) = yaml.safe_load_all(lmcache_text)  # one document
        assert config["max_local_cpu_size"] == per_rank[route]
        assert f"# save as {files[route]}\n# for routes: {route}\n" in lmcache_text
    assert "# route qwen2.5-7b: model Qwen/Qwen2.5-7B-Instruct, TP 2, KV dtype fp8 (vLLM " \
        "--kv-cache-dtype fp8)" in export_text(version, "lmcache", route="qwen2.5-7b")  # fmt: skip
    specs = yaml.safe_load(export_text(version, "helm"))["servingEngineSpec"]["modelSpec"]
    assert [s["modelURL"] for s in specs] == list(HF.values())
    for spec, route in zip(specs, HF, strict=True):
        assert spec["vllmConfig"]["tensorParallelSize"] == spec["requestGPU"] == 2
        assert spec["vllmConfig"]["extraArgs"] == ["--kv-cache-dtype", "fp8",
                                                   "--served-model-name", route]  # fmt: skip
        buffer = f"{per_rank[route]:g}"  # GB per worker: "4", "1.75"
        assert spec["lmcacheConfig"] == {"enabled": True, "cpuOffloadingBufferSize": buffer}


def test_a_route_served_at_its_own_tp_gets_its_own_per_rank_sizes(fp8_tp2, analyst, approver):
    def qwen_at_tp4(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]
        body["serving"] = {"qwen2.5-7b": {"tp": 4, "kv_dtype": "bf16"}}

    version = approved_version(fp8_tp2, analyst, approver, qwen_at_tp4)
    # 131,072 tokens (8 GiB at llama fp8 TP 2) x 14,336 B per qwen bf16 rank at TP 4 (one
    # of its 4 KV heads each) = 1.75 GiB per rank (not 8 / 4 = 2), 7 GiB over 4 ranks
    assert 8 * GIB // LLAMA_FP8_TP2_REPLICA * QWEN_BF16_TP4_RANK == 1.75 * GIB
    llama = yaml.safe_load(export_text(version, "lmcache", route="llama-3.1-8b"))
    qwen = yaml.safe_load(export_text(version, "lmcache", route="qwen2.5-7b"))
    assert (llama["max_local_cpu_size"], qwen["max_local_cpu_size"]) == (4.0, 1.75)
    native = shlex.split(export_text(version, "vllm").splitlines()[-3])
    assert native[native.index("--tensor-parallel-size") + 1] == "4"
    assert native[native.index("--kv-offloading-size") + 1] == "7"
    specs = yaml.safe_load(export_text(version, "helm"))["servingEngineSpec"]["modelSpec"]
    qwen = specs[1]
    assert qwen["requestGPU"] == 4 and qwen["lmcacheConfig"]["cpuOffloadingBufferSize"] == "1.75"
    assert qwen["vllmConfig"]["extraArgs"][:2] == ["--kv-cache-dtype", "auto"]  # its own bf16


def test_check_routes_served_unlike_the_analysis():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["routes"] = ["llama-3.1-8b", "Qwen/Qwen2.5-7B-Instruct", "chat-prod"]
    body["serving"] = {"llama-3.1-8b": {"tp": 2, "kv_dtype": "fp8"}}
    report = dict(_report(), params={"model": "llama-3.1-8b", "kv_dtype": "bf16", "tp": 1})
    warnings = [f.message for f in check_body(body, report) if f.field == "routes"]
    assert warnings == [
        "Route “llama-3.1-8b” stores KV as fp8, but the analysis sized bf16.",
        "Route “llama-3.1-8b” runs at TP 2, but the analysis sized TP 1.",
        "Route “Qwen/Qwen2.5-7B-Instruct” serves qwen2.5-7b, but the analysis sized "
        "llama-3.1-8b: its KV bytes per token differ.",
        "Route “chat-prod” is not a model kvscope knows; its sizes assume llama-3.1-8b and "
        "the exports serve meta-llama/Llama-3.1-8B-Instruct.",
    ]


def test_check_event_deadlines_longer_than_the_purge_deadline():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["purge_deadline_s"] = 900  # 15 min
    body["end_of_life"] = [
        {"event": "lifetime_expiry", "deadline_s": 3600},
        {"event": "tenant_offboarding", "deadline_s": 86400},
        {"event": "manual_purge", "deadline_s": 900},  # exactly the deadline: fine
    ]
    errors = [f.message for f in check_body(body, _report()) if f.level == "error"]
    assert errors == [
        "“Lifetime expiry” may take 1 h, longer than the maximum time to purge (15 min).",
        "“Tenant offboarding” may take 24 h, longer than the maximum time to purge (15 min).",
    ]


def test_check_ram_tier_against_the_policys_own_rerun():
    from console.policies.body import empty_body

    body = complete(empty_body())  # 8 GiB of CPU RAM
    recommendation = {"ram_bytes": 4 * GIB, "headroom": 0.1, "lifetime_s": 1800}
    rerun = {"scope": "tenant", "recommendation": recommendation}
    assert _messages(check_body(body, _report(), constrained_report=rerun), "warning") == (
        "CPU RAM 8 GiB is 100% above the 4.00 GiB the re-run with the policy's lifetime "
        "(1800 s) and scope (tenant) recommends: more than its headroom of 10%."
    )
    body["tiers"]["cpu_ram"]["size_gib"] = 4.3  # 7.5 % above: within the headroom
    assert _messages(check_body(body, _report(), constrained_report=rerun), "warning") == ""
    body["tiers"]["cpu_ram"]["size_gib"] = 3.5  # 12.5 % below
    assert "12% below the 4.00 GiB" in _messages(
        check_body(body, _report(), constrained_report=rerun), "warning")  # fmt: skip


def test_the_rerun_check_runs_on_a_real_version(analysis, analyst):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    version = version_update(version=version, body=complete(version.body), user=analyst,
                             analysis=analysis)  # fmt: skip
    rerun = wait_for(lambda: Analysis.objects.filter(
        pk=version.constrained_analysis_id, status=JobStatus.DONE).first())  # fmt: skip
    need = rerun.report["recommendation"]["ram_bytes"]
    assert abs(8 * GIB - need) > 0.1 * need  # the chat log needs far less than 8 GiB
    version = PolicyVersion.objects.get(pk=version.pk)
    tiers = [f.message for f in findings_for(version) if f.field == "tiers"]
    assert len(tiers) == 1 and f"above the {need / GIB:.2f} GiB the re-run" in tiers[0]


# --- form limits ---------------------------------------------------------------------------
def _form_post(version: PolicyVersion) -> dict:
    """The edit form's POST for a version as stored (what a browser sends back)."""
    from console.policies.forms import initial_from_body

    data = {}
    for key, value in initial_from_body(version.body, version.analysis).items():
        if value is True:
            data[key] = "on"
        elif value not in (None, False, []):
            data[key] = value
    return data


def test_oversized_text_and_absurd_numbers_are_errors_at_their_fields(client, analysis,
                                                                      analyst):  # fmt: skip
    version = policy_create(name="p", user=analyst, analysis=analysis)
    before = PolicyVersion.objects.get(pk=version.pk).body
    client.force_login(analyst)
    url = reverse("policy_edit", args=[version.pk])
    data = _form_post(version) | {
        "cpu_ram_size_gib": "1e308",
        "lifetime_s": "1e308",
        "eol_lifetime_expiry_deadline_s": "1e308",
        "justification": "x" * 100_000,
        "routes": ", ".join(f"r{i}" for i in range(51)),
        "serving": "r1 tp=0",
    }
    response = client.post(url, data)
    assert response.status_code == 200
    page = response.content.decode()
    for field, message in [
        ("cpu_ram_size_gib", "less than or equal to 1048576"),
        ("lifetime_s", "less than or equal to 1000000000"),
        ("eol_lifetime_expiry_deadline_s", "less than or equal to 1000000000"),
        ("justification", "at most 10000 characters (it has 100000)"),
        ("routes", "At most 50 routes (51 given)."),
        ("serving", "Line 1: “tp=0” is not tp=&lt;1…256&gt;"),
    ]:
        found = re.search(rf'id="id_{field}_error">(.*?)</div>', page, re.S)
        assert found and message in found.group(1), (field, found and found.group(1))
    assert PolicyVersion.objects.get(pk=version.pk).body == before


def test_a_form_over_the_request_limit_is_shown_again(client, analysis, analyst, settings):
    version = policy_create(name="p", user=analyst, analysis=analysis)
    before = PolicyVersion.objects.get(pk=version.pk).body
    client.force_login(analyst)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    data = _form_post(version) | {"justification": "x" * (65 * 1024)}
    response = client.post(reverse("policy_edit", args=[version.pk]), data)
    assert response.status_code == 200
    assert "Nothing was saved: the form sent is larger than the server accepts (64 KiB)" \
        in response.content.decode()  # fmt: skip
    assert PolicyVersion.objects.get(pk=version.pk).body == before


def test_the_migration_anchors_a_chain_written_before_the_head_existed(analysis, analyst):
    from django.db.migrations.executor import MigrationExecutor

    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    last = AuditEvent.objects.latest("pk")
    try:
        # back to before 0013: no head table, no new guards
        MigrationExecutor(connection).migrate([("console", "0012_job_heartbeat")])
        assert "console_audithead" not in connection.introspection.table_names()
    finally:  # forward to every latest migration (later ones included)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    head = AuditHead.objects.get()
    assert (head.events, head.last_id, head.last_hash) == (2, last.pk, last.hash)
    assert audit.verify().ok
    _refused(f"DELETE FROM {AuditHead._meta.db_table}")  # guarded again


def test_pages_say_so_when_the_trail_is_cut(client, analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    newest = AuditEvent.objects.latest("pk")
    previous = AuditEvent.objects.filter(pk__lt=newest.pk).latest("pk")
    _as_owner(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", [newest.pk])
    client.force_login(analyst)
    trail = client.get(reverse("audit_log")).content.decode()
    assert (f"<strong>The chain is broken:</strong> the newest 1 event is missing after "
            f"#{previous.pk}") in trail  # fmt: skip
    response = client.post(reverse("policy_new"), {"name": "after the cut"})
    assert response.status_code == 200  # the form again, the reason above it, not a 500
    page = response.content.decode()
    assert re.search(r'<div class="error-box" role="alert"><p>The audit trail does not end '
                     r"where its head says", page)  # fmt: skip
    assert not Policy.objects.filter(name="after the cut").exists()
    # an export must be recorded: with no way to record it, nothing is served
    left = AuditEvent.objects.count()
    response = client.get(reverse("policy_export", args=[version.pk, "vllm-serve.sh"]))
    assert response.status_code == 302
    assert response["Location"] == reverse("policy_version", args=[version.pk])
    assert AuditEvent.objects.count() == left


def test_the_audit_page_hashes_only_new_events_yet_reports_a_changed_old_one(
    client, analysis, analyst, monkeypatch
):
    for name in ("p1", "p2", "p3"):
        policy_create(name=name, user=analyst, analysis=analysis)
    hashed = []
    event_hash = audit._event_hash

    def counted(*args):
        hashed.append(args)
        return event_hash(*args)

    monkeypatch.setattr(audit, "_event_hash", counted)
    client.force_login(analyst)

    def page() -> str:
        hashed.clear()
        return client.get(reverse("audit_log")).content.decode()

    assert "Hash chain intact: 3 events verified." in page() and len(hashed) == 3
    assert "Hash chain intact: 3 events verified." in page() and hashed == []  # nothing new
    policy_create(name="p4", user=analyst, analysis=analysis)
    assert "Hash chain intact: 4 events verified." in page() and len(hashed) == 1  # the new one
    oldest = AuditEvent.objects.order_by("pk").first()
    _raw_tamper(oldest.pk)  # the head does not move: the rows themselves show the change
    trail = page()
    assert f"<strong>The chain is broken at event {oldest.pk}:</strong> its content does " \
        "not match its hash" in trail  # fmt: skip
    assert page().count("The chain is broken at event") == 1  # still, on every view


# --- per-route sizes (metrics.md section 8), LMCache files, TP and dtype checks -----------
META = {"name": "p", "version": 1, "digest": "d" * 64, "approved_at": "2026-12-01T00:00:00",
        "approved_by": "appr", "lifetime_s": 1800, "scope": "tenant"}  # fmt: skip


def _sized(params: dict, routes: list[str], ram_gib: float, serving: dict | None = None):
    """A complete body whose sizes came from an analysis with these parameters."""
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["routes"], body["serving"] = routes, serving or {}
    body["tiers"]["cpu_ram"]["size_gib"] = ram_gib
    body["evidence"] = {"params": params}
    return body


def _native(text: str, route: str) -> list[str]:
    for line in text.splitlines():
        words = shlex.split(line) if line.startswith("vllm serve") else []
        if words and words[words.index("--served-model-name") + 1] == route:
            return words
    raise AssertionError(route)


def test_an_mla_route_at_more_ranks_keeps_the_whole_latent_on_each():
    from console.policies import exports

    # DeepSeek-V3 sized at TP 1 with 100 GiB; served at TP 8. Every rank keeps the whole
    # latent: 61 x 576 x 2 B per token on each rank, the same as the TP-1 replica, so the
    # same cached tokens need 100 GiB on every rank, 800 GiB over the 8 (not 100 / 8).
    rank = replica = 61 * (512 + 64) * 2
    per_rank_gib = 100 * rank / replica
    body = _sized({"model": "deepseek-v3", "tp": 1}, ["deepseek-v3"], 100.0,
                  {"deepseek-v3": {"tp": 8}})  # fmt: skip
    config = yaml.safe_load(exports.lmcache_yaml(body, META, chunk_size=256))
    assert config["max_local_cpu_size"] == per_rank_gib == 100.0
    native = _native(exports.vllm_flags(body, META), "deepseek-v3")
    assert native[native.index("--kv-offloading-size") + 1] == "800"  # 100 x 8 ranks
    spec = yaml.safe_load(exports.helm_values(body, META))["servingEngineSpec"]["modelSpec"][0]
    assert spec["lmcacheConfig"]["cpuOffloadingBufferSize"] == "100"


def test_route_sizes_round_up_and_an_unknown_model_keeps_total_over_tp_with_a_warning():
    from console.policies import exports

    # llama-3.1-8b bf16 TP 1: 32 x 8 x 128 x 2 x 2 = 131,072 B per token; 1.01 GiB of it
    # for gemma-2-9b (42 x 8 x 256 x 2 x 2 = 344,064 B): 1.01 x 344,064 / 131,072 =
    # 2.65125 GiB, up to 2.66 (to the nearest would be 2.65: a route short of 1.25 MiB)
    assert pytest.approx(2.65125) == 1.01 * 344_064 / 131_072
    params = {"model": "llama-3.1-8b", "kv_dtype": "bf16", "tp": 1}
    config = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "hidden_size": 4096, "torch_dtype": "bfloat16"}  # fmt: skip
    body = _sized(params, ["gemma-2-9b"], 1.01)
    assert yaml.safe_load(exports.lmcache_yaml(body, META, chunk_size=256))[
        "max_local_cpu_size"] == 2.66  # fmt: skip
    native = _native(exports.vllm_flags(body, META), "gemma-2-9b")
    assert native[native.index("--kv-offloading-size") + 1] == "2.66"
    # sized from a config.json: a route kvscope does not know is served as named, with no
    # profile: 10 GiB / 3 ranks = 3.333…, up to 3.34, the total as it was, and said so
    params = {"model": "config.json", "model_config": config, "tp": 1}
    body = _sized(params, ["acme/chat-8b"], 10.0, {"acme/chat-8b": {"tp": 3}})
    text = exports.lmcache_yaml(body, META, chunk_size=256)
    assert yaml.safe_load(text)["max_local_cpu_size"] == 3.34
    warning = ("# WARNING: route acme/chat-8b: sizes are the policy's total / TP 3 (kvscope "
               "does not know the KV bytes per token of acme/chat-8b; metrics.md section 8 "
               "not applied: check them by hand)")  # fmt: skip
    assert warning in text
    flags = exports.vllm_flags(body, META)
    assert warning in flags
    native = shlex.split(flags.splitlines()[-3])  # served as named: no --served-model-name
    assert native[native.index("--kv-offloading-size") + 1] == "10"
    assert warning in exports.helm_values(body, META)


def test_routes_with_different_lmcache_sizes_get_a_file_each_and_download_it(
    client, fp8_tp2, analyst, approver
):
    def qwen_at_tp4(body):
        body["routes"] = ["llama-3.1-8b", "qwen2.5-7b"]
        body["serving"] = {"qwen2.5-7b": {"tp": 4, "kv_dtype": "bf16"}}

    version = approved_version(fp8_tp2, analyst, approver, qwen_at_tp4)
    flags = export_text(version, "vllm")
    named = [shlex.split(line)[0] for line in flags.splitlines() if line.startswith("LMCACHE_")]
    assert named == ["LMCACHE_CONFIG_FILE=lmcache-llama-3-1-8b.yaml",
                     "LMCACHE_CONFIG_FILE=lmcache-qwen2-5-7b.yaml"]  # fmt: skip
    client.force_login(analyst)
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    url = reverse("policy_export", args=[version.pk, "lmcache.yaml"])
    assert f'href="{url}?route=llama-3.1-8b"' in page and f'href="{url}?route=qwen2.5-7b"' in page
    assert "LMCache YAML: lmcache-qwen2-5-7b.yaml" in page
    for route, name, size in [("llama-3.1-8b", "lmcache-llama-3-1-8b.yaml", 4.0),
                              ("qwen2.5-7b", "lmcache-qwen2-5-7b.yaml", 1.75)]:  # fmt: skip
        response = client.get(url, {"route": route})
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="exported-v1-{name}"'
        text = response.content.decode()
        (config,) = yaml.safe_load_all(text)  # one mapping: what LMCache loads
        assert config["max_local_cpu_size"] == size
        assert f"# save as {name}\n" in text
        event = AuditEvent.objects.latest("pk")
        assert event.action == "policy.export" and event.details["kind"] == name
    # the URL as it was: the first route's file, naming the other
    response = client.get(url)
    assert response["Content-Disposition"] == 'attachment; filename="exported-v1-lmcache-' \
        'llama-3-1-8b.yaml"'  # fmt: skip
    text = response.content.decode()
    assert yaml.safe_load(text)["max_local_cpu_size"] == 4.0
    assert "#   lmcache-qwen2-5-7b.yaml for routes: qwen2.5-7b (?route=qwen2.5-7b)" in text
    assert client.get(url, {"route": "nope"}).status_code == 302  # not a governed route


def test_a_tp_that_splits_kv_heads_unevenly_is_an_error_at_the_serving_field(client, analysis,
                                                                              analyst):  # fmt: skip
    version = policy_create(name="p", user=analyst, analysis=analysis)
    before = PolicyVersion.objects.get(pk=version.pk).body
    client.force_login(analyst)
    data = _form_post(version) | {"routes": "llama-3.1-8b, qwen2.5-7b",
                                  "serving": "qwen2.5-7b tp=3"}  # fmt: skip
    page = client.post(reverse("policy_edit", args=[version.pk]), data).content.decode()
    found = re.search(r'id="id_serving_error">(.*?)</div>', page, re.S)
    assert found and "Line 1: qwen2.5-7b at tp=3: 3 tensor-parallel ranks cannot share 4 KV " \
        "heads" in found.group(1)  # fmt: skip
    assert PolicyVersion.objects.get(pk=version.pk).body == before
    # the parser on its own, with a route's profile (an unknown route: the analysis's model)
    from console.policies.forms import parse_serving
    from console.policies.serving import route_profile, sizing

    size = sizing({"model": "llama-3.1-8b", "tp": 1})
    profile_of = lambda route: route_profile(route, size)  # noqa: E731
    # 8 KV heads: tp 1, 2, 4, 8 split them, 16 replicates them; 3 and 6 cannot
    assert parse_serving("llama-3.1-8b tp=16\nqwen2.5-7b tp=8", profile_of) == {
        "llama-3.1-8b": {"tp": 16}, "qwen2.5-7b": {"tp": 8}}  # fmt: skip
    message = ("Line 2: chat-prod at tp=6: 6 tensor-parallel ranks cannot share 8 KV heads: "
               "tp must divide 8 or be a multiple of it.")  # fmt: skip
    with pytest.raises(ValidationError, match=re.escape(message)):
        parse_serving("llama-3.1-8b tp=2\nchat-prod tp=6", profile_of)  # served as llama
    assert parse_serving("deepseek-v3 tp=3", profile_of) == {"deepseek-v3": {"tp": 3}}  # MLA
    # a body that says so anyway (not through the form) cannot be submitted
    body = complete(before)
    body["routes"], body["serving"] = ["qwen2.5-7b"], {"qwen2.5-7b": {"tp": 3}}
    errors = [f for f in check_body(body, _report()) if f.level == "error"]
    assert [(f.field, f.message) for f in errors] == [("serving", "Route “qwen2.5-7b” at TP 3: "
        "3 tensor-parallel ranks cannot share 4 KV heads: tp must divide 4 or be a multiple "
        "of it.")]  # fmt: skip


def test_an_fp32_sizing_that_vllm_serves_as_auto_is_said_and_sized_for_what_it_holds():
    from console.policies import exports

    # sized for an fp32 KV cache: 32 x 8 x 128 x 2 x 4 = 262,144 B per token; vLLM has no
    # fp32 KV cache, "auto" holds the model's bf16 (131,072 B): the 100 GiB of tokens
    # planned fit in 100 x 131,072 / 262,144 = 50 GiB on the engine
    params = {"model": "llama-3.1-8b", "kv_dtype": "fp32", "tp": 1}
    body = _sized(params, ["llama-3.1-8b"], 100.0)
    message = ("Route “llama-3.1-8b” stores KV as fp32, but vLLM has no fp32 KV cache: "
               "--kv-cache-dtype auto holds the model's own bf16 (2 bytes per element, not "
               "4); the exports size it for bf16.")  # fmt: skip
    report = dict(_report(), params=params)
    assert [(f.level, f.message) for f in check_body(body, report) if f.field == "serving"] \
        == [("warning", message)]  # fmt: skip
    plain = "# WARNING: " + message.replace("“", "").replace("”", "")
    flags = exports.vllm_flags(body, META)
    native = _native(flags, "llama-3.1-8b")
    assert native[native.index("--kv-cache-dtype") + 1] == "auto"
    assert native[native.index("--kv-offloading-size") + 1] == "50"
    for text in (flags, exports.lmcache_yaml(body, META, chunk_size=256),
                 exports.helm_values(body, META)):  # fmt: skip
        assert plain in text
    assert yaml.safe_load(exports.lmcache_yaml(body, META, chunk_size=256))[
        "max_local_cpu_size"] == 50.0  # fmt: skip
