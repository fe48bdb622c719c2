"""Retention policies: a version's changes against its baseline, field by field, on the
version page (before the approve button) and on the sign-off page."""

from __future__ import annotations

import copy

import pytest
from django.urls import reverse
from django.utils import timezone

from console.models import Policy, PolicyVersion, SignOff, VersionState
from console.policies.body import digest, empty_body, normalize
from console.policies.diff import Change, baseline, body_changes
from console.policies.services import (
    policy_create,
    version_approve,
    version_new,
    version_submit,
    version_update,
)
from tests.console.factories import PASSWORD, complete, form_post

pytestmark = pytest.mark.django_db
ENCRYPT_LABEL = (
    "Blocks encrypted at rest on the disk and remote tiers (where the engine offers it: "
    "LMCache's per-salt AES-GCM serde)"
)


def _body() -> dict:
    """A complete body (8 GiB of RAM, lifetime 30 min, no disk) citing analysis #3."""
    body = normalize(complete(empty_body()))
    body["evidence"] = {"analysis_id": 3}
    return body


def test_the_changed_fields_and_only_they_are_rows_with_their_old_and_new_text():
    old = _body()
    new = copy.deepcopy(old)
    new["routes"].append("qwen2.5-7b")
    new["lifetime_s"] = 3600
    new["end_of_life"] = [
        {"event": "lifetime_expiry", "deadline_s": 120},  # was 60
        {"event": "session_end", "deadline_s": 3600},  # added; tenant offboarding removed
    ]
    new["tiers"]["cpu_ram"]["size_gib"] = 12.5
    new["tiers"]["no_persistent_storage"] = False
    new["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
    new["tiers"]["encrypt_at_rest"] = True
    new["failure"]["ram_full"] = "refuse_store"
    new["disk_contract"] = dict(empty_body()["disk_contract"], cold_after_s=600)
    new["evidence"] = {"analysis_id": 7}
    assert body_changes(old, new) == [
        Change("Model routes governed: added", "—", "qwen2.5-7b"),
        Change("End-of-life events: added", "—", "Session end (purge within 1 h)"),
        Change("End-of-life events: removed", "Tenant offboarding (purge within 24 h)", "—"),
        Change("End-of-life events: Lifetime expiry, purge within", "1 min", "2 min"),
        Change("Block lifetime (s after last use)", "30 min", "1 h"),
        Change("CPU RAM", "8.00 GiB", "12.50 GiB"),
        Change("Local disk / NVMe tier enabled", "off", "on"),
        Change("Disk size", "—", "200.00 GiB"),
        Change("Disk path", "—", "/nvme/kv"),
        Change("No persistent storage of content (forces disk and remote off)", "yes", "no"),
        Change(ENCRYPT_LABEL, "no", "yes"),
        Change(
            "When the RAM tier is full",
            "Evict the least recently used blocks",
            "Refuse to store new blocks",
        ),
        Change("A block is cold after", "—", "10 min"),
        Change("Evidence: the analysis this policy relies on", "analysis #3", "analysis #7"),
    ]


def test_lists_serving_and_the_evidence_runs_are_said_as_items():
    old = _body()
    old["tenants"] = ["acme", "globex"]
    old["serving"] = {"llama-3.1-8b": {"tp": 2}}
    old["evidence"]["benchmark_runs"] = [{"id": 4, "file": "off.json"}]
    new = copy.deepcopy(old)
    new["tenants"] = ["globex", "initech"]
    new["serving"] = {"llama-3.1-8b": {"tp": 2, "kv_dtype": "fp8"}}
    new["scope"] = "user"
    new["access"]["classification"] = "restricted"
    new["evidence"]["benchmark_runs"] = [{"id": 5, "file": "on.json"}]
    assert body_changes(old, new) == [
        Change("Served differently from the analysis: llama-3.1-8b", "tp=2", "kv_dtype=fp8 tp=2"),
        Change("Tenants: added", "—", "initech"),
        Change("Tenants: removed", "acme", "—"),
        Change("Sharing scope", "tenant", "user"),
        Change("Data classification of the traffic", "confidential", "restricted"),
        Change(
            "Evidence: benchmark runs (replays with offload off and on): added", "—", "#5 on.json"
        ),
        Change(
            "Evidence: benchmark runs (replays with offload off and on): removed",
            "#4 off.json",
            "—",
        ),
    ]


def test_identical_bodies_and_a_body_signed_before_encryption_existed_give_no_rows():
    body = _body()
    assert body_changes(body, copy.deepcopy(body)) == []
    # a body approved before tiers.encrypt_at_rest existed says "not encrypted"
    signed_before = copy.deepcopy(body)
    del signed_before["tiers"]["encrypt_at_rest"]
    assert body_changes(signed_before, body) == []
    encrypted = copy.deepcopy(body)
    encrypted["tiers"]["encrypt_at_rest"] = True
    assert body_changes(signed_before, encrypted) == [Change(ENCRYPT_LABEL, "no", "yes")]


def _approved(policy_name: str, analyst, approver, change=None) -> PolicyVersion:
    """A new policy (no analysis: the checks only warn) with a complete body, approved."""
    version = policy_create(name=policy_name, user=analyst)
    return _approve(version, analyst, approver, change)


def _approve(version: PolicyVersion, analyst, approver, change=None) -> PolicyVersion:
    body = complete(version.body)
    if change:
        change(body)
    version = version_update(version=version, body=body, user=analyst)
    version_submit(version=version, user=analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    version.refresh_from_db()
    return version


def _hour(body: dict) -> None:
    body["lifetime_s"] = 3600


def test_the_baseline_is_the_approved_version_before_else_the_one_followed(analyst, approver):
    v1 = _approved("chat", analyst, approver)
    assert baseline(v1) is None
    v2 = _approve(version_new(policy=v1.policy, user=analyst), analyst, approver, _hour)
    v3 = version_new(policy=v1.policy, user=analyst)
    assert baseline(v3) == v2  # the approved one
    # v2 is the approved one itself: compared with the version it follows (now superseded)
    assert baseline(v2) == v1 and PolicyVersion.objects.get(pk=v1.pk).state == "superseded"
    # an approved version wins over a later one that was not approved
    policy = Policy.objects.create(name="by hand")
    made = {
        number: PolicyVersion.objects.create(
            policy=policy, number=number, state=state, body=empty_body()
        )
        for number, state in ((1, VersionState.SUPERSEDED), (2, VersionState.APPROVED),
                              (3, VersionState.CHANGES_REQUESTED), (4, VersionState.DRAFT))
    }  # fmt: skip
    assert baseline(made[4]) == made[2]
    assert baseline(made[3]) == made[2]
    assert baseline(made[1]) is None  # a later approved version is not what v1 changed


def test_the_version_page_shows_the_changes_above_the_approve_button(client, analyst, approver):
    v1 = _approved("chat", analyst, approver)
    v2 = version_new(policy=v1.policy, user=analyst)
    body = copy.deepcopy(v2.body)
    _hour(body)
    version_update(version=v2, body=body, user=analyst)
    version_submit(version=v2, user=analyst)
    client.force_login(approver)
    page = client.get(reverse("policy_version", args=[v2.pk])).content.decode()
    assert "Changes against v1 (approved)" in page
    row = '<th scope="row">Block lifetime (s after last use)</th><td>30 min</td><td>1 h</td>'
    assert page.count("<tr data-change>") == 1 and row in page
    assert page.index(row) < page.index("Approve and sign off")
    assert "with the 1 change against v1 listed above" in page
    first = client.get(reverse("policy_version", args=[v1.pk])).content.decode()
    assert "data-first-version" in first and "data-change-rows" not in first


def test_the_sign_off_page_shows_what_the_signed_version_changed(client, analyst, approver):
    v1 = _approved("chat", analyst, approver)
    v2 = _approve(version_new(policy=v1.policy, user=analyst), analyst, approver, _hour)
    client.force_login(approver)
    page = client.get(reverse("policy_signoff", args=[v2.pk])).content.decode()
    assert "Changes against v1 (superseded)" in page
    assert "<td>30 min</td><td>1 h</td>" in page and page.count("<tr data-change>") == 1
    # no change: v3 approved as v2 was says so, on its page before it is approved
    v3 = version_new(policy=v1.policy, user=analyst)
    version_submit(version=v3, user=analyst)
    page = client.get(reverse("policy_version", args=[v3.pk])).content.decode()
    assert "Nothing changed: v3 says what v2 says." in page
    assert "unchanged from v2" in page


def test_a_baseline_changed_after_its_sign_off_is_not_compared(client, analyst, approver):
    policy = Policy.objects.create(name="by hand")
    signed = _body()
    # v1 as the database would hold it had its body been changed after the sign-off
    # (outside kvscope: the database refuses the UPDATE itself, so it is written so)
    changed = dict(signed, lifetime_s=60)
    v1 = PolicyVersion.objects.create(
        policy=policy, number=1, state=VersionState.APPROVED, body=changed, digest=digest(signed)
    )
    SignOff.objects.create(
        version=v1,
        approver=approver,
        approver_name="appr",
        at=timezone.now(),
        comment="ok",
        digest=digest(signed),
    )
    v2 = PolicyVersion.objects.create(policy=policy, number=2, author=analyst, body=signed)
    client.force_login(approver)
    page = client.get(reverse("policy_version", args=[v2.pk])).content.decode()
    assert "Changes against v1 (approved)" in page
    assert "data-baseline-problem" in page and "data-change-rows" not in page
    assert "stored body no longer matches what was signed" in page


def test_encryption_at_rest_round_trips_through_the_form_and_the_body(client, analyst):
    version = policy_create(name="chat", user=analyst)
    version = version_update(version=version, body=complete(version.body), user=analyst)
    client.force_login(analyst)
    data = form_post(version)
    assert "encrypt_at_rest" not in data  # a new body starts unencrypted
    data |= {"no_persistent_storage": "", "disk_enabled": "on", "disk_size_gib": "200",
             "disk_path": "/nvme/kv", "encrypt_at_rest": "on"}  # fmt: skip
    data = {key: value for key, value in data.items() if value != ""}
    response = client.post(reverse("policy_edit", args=[version.pk]), data)
    assert response.status_code == 302
    version.refresh_from_db()
    assert version.body["tiers"]["encrypt_at_rest"] is True
    assert form_post(version)["encrypt_at_rest"] == "on"  # back into the form, checked
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert "<dd data-encrypt-at-rest>blocks encrypted</dd>" in page
    edit = client.get(reverse("policy_edit", args=[version.pk])).content.decode()
    assert 'name="encrypt_at_rest" id="id_encrypt_at_rest" checked' in edit
