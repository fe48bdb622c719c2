"""Retention policies: the consistency checks, the form over the body's shape and its limits."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from console.models import (
    Analysis,
    JobStatus,
    PolicyVersion,
)
from console.policies.body import normalize
from console.policies.checks import check_body
from console.policies.services import (
    findings_for,
    policy_create,
    version_update,
)
from tests.console.factories import (
    check_report,
    complete,
    form_post,
)
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30


# --- consistency checks ------------------------------------------------------------------
def _messages(findings, level):
    return " | ".join(f.message for f in findings if f.level == level)


def test_check_disabled_tier_with_a_size():
    from console.policies.body import empty_body

    body = complete(normalize(empty_body()))
    body["tiers"]["no_persistent_storage"] = False
    body["tiers"]["local_disk"] = {"enabled": False, "size_gib": 100, "path": ""}
    assert "local disk tier is disabled but sized (100 GiB)" in _messages(
        check_body(body, check_report()), "error")  # fmt: skip


def test_check_no_persistent_storage_forces_disk_and_remote_off():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 100, "path": "/nvme"}
    body["tiers"]["no_persistent_storage"] = True
    body = normalize(body)
    assert body["tiers"]["local_disk"] == {"enabled": False, "size_gib": None, "path": "/nvme"}
    assert body["disk_contract"] is None
    assert _messages(check_body(body, check_report()), "error") == ""


def test_check_ram_above_host_budget_and_lifetime_beyond_the_windows():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["cpu_ram"]["size_gib"] = 64
    body["lifetime_s"] = 7200
    findings = check_body(body, check_report(host_available_gib=48, windows=(300, 3600)))
    assert "CPU RAM 64 GiB is above the host budget" in _messages(findings, "error")
    assert "48.0 GiB after reserves" in _messages(findings, "error")
    assert "lifetime (7200 s) is longer than the longest window" in _messages(findings, "warning")


def test_check_global_scope_on_several_tenants_and_missing_deadlines():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["scope"] = "global"
    body["end_of_life"].append({"event": "data_subject_deletion", "deadline_s": None})
    findings = check_body(body, check_report(), tenants_in_traffic=3)
    assert "traffic from 3 tenants" in _messages(findings, "warning")
    assert "“Data-subject deletion request” has no purge deadline" in _messages(findings, "error")


def test_check_disk_contract_required_with_a_disk_tier():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["no_persistent_storage"] = False
    body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
    body = normalize(body)
    errors = _messages(check_body(body, check_report()), "error")
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


def test_check_routes_served_unlike_the_analysis():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["routes"] = ["llama-3.1-8b", "Qwen/Qwen2.5-7B-Instruct", "chat-prod"]
    body["serving"] = {"llama-3.1-8b": {"tp": 2, "kv_dtype": "fp8"}}
    report = dict(check_report(), params={"model": "llama-3.1-8b", "kv_dtype": "bf16", "tp": 1})
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
    errors = [f.message for f in check_body(body, check_report()) if f.level == "error"]
    assert errors == [
        "“Lifetime expiry” may take 1 h, longer than the maximum time to purge (15 min).",
        "“Tenant offboarding” may take 24 h, longer than the maximum time to purge (15 min).",
    ]


def test_check_ram_tier_against_the_policys_own_rerun():
    from console.policies.body import empty_body

    body = complete(empty_body())  # 8 GiB of CPU RAM
    recommendation = {"ram_bytes": 4 * GIB, "headroom": 0.1, "lifetime_s": 1800}
    rerun = {"scope": "tenant", "recommendation": recommendation}
    assert _messages(check_body(body, check_report(), constrained_report=rerun), "warning") == (
        "CPU RAM 8 GiB is 100% above the 4.00 GiB the re-run with the policy's lifetime "
        "(1800 s) and scope (tenant) recommends: more than its headroom of 10%."
    )
    body["tiers"]["cpu_ram"]["size_gib"] = 4.3  # 7.5 % above: within the headroom
    assert _messages(check_body(body, check_report(), constrained_report=rerun), "warning") == ""
    body["tiers"]["cpu_ram"]["size_gib"] = 3.5  # 12.5 % below
    assert "12% below the 4.00 GiB" in _messages(
        check_body(body, check_report(), constrained_report=rerun), "warning")  # fmt: skip


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
def test_oversized_text_and_absurd_numbers_are_errors_at_their_fields(client, analysis,
                                                                      analyst):  # fmt: skip
    version = policy_create(name="p", user=analyst, analysis=analysis)
    before = PolicyVersion.objects.get(pk=version.pk).body
    client.force_login(analyst)
    url = reverse("policy_edit", args=[version.pk])
    data = form_post(version) | {
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
    data = form_post(version) | {"justification": "x" * (65 * 1024)}
    response = client.post(reverse("policy_edit", args=[version.pk]), data)
    assert response.status_code == 200
    assert "Nothing was saved: the form sent is larger than the server accepts (64 KiB)" \
        in response.content.decode()  # fmt: skip
    assert PolicyVersion.objects.get(pk=version.pk).body == before


def _stored_on(disk: bool, remote: bool, encrypted: bool, classification: str) -> dict:
    """A complete body with the disk and remote tiers as given (their contract filled)."""
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["tiers"]["no_persistent_storage"] = not (disk or remote)
    if disk:
        body["tiers"]["local_disk"] = {"enabled": True, "size_gib": 200, "path": "/nvme/kv"}
    if remote:
        body["tiers"]["remote"] = {"enabled": True, "kind": "valkey", "size_gib": 500,
                                   "url": "valkey://kv:6379"}  # fmt: skip
    body["tiers"]["encrypt_at_rest"] = encrypted
    body["access"]["classification"] = classification
    body["disk_contract"] = {"allowed_data": "prefixes >= 4k tokens", "cold_after_s": 600,
                             "request_may_wait": False, "deleted_by": "the engine",
                             "delete_when": "at lifetime end", "on_disk_full": "evict",
                             "on_restart": "wipe"}  # fmt: skip
    return normalize(body)


def _tier_findings(body: dict) -> list[tuple[str, str]]:
    return [(f.level, f.message) for f in check_body(body, check_report()) if f.field == "tiers"]


def test_check_a_persistent_tier_stored_unencrypted():
    fix = "encrypt the blocks at rest (LMCache's per-salt AES-GCM serde)"
    assert _tier_findings(_stored_on(True, False, False, "internal")) == [
        ("warning", "The local disk tier stores blocks unencrypted, where they outlive the "
                    f"process and others may read them: {fix}, or justify why not."),
    ]  # fmt: skip
    assert _tier_findings(_stored_on(True, False, False, "confidential")) == [
        ("error", f"Confidential traffic is stored unencrypted on the local disk tier: {fix}, "
                  "or turn it off."),
    ]  # fmt: skip
    assert _tier_findings(_stored_on(True, True, False, "restricted")) == [
        ("error", "Restricted traffic is stored unencrypted on the local disk and remote store "
                  f"tiers: {fix}, or turn them off."),
    ]  # fmt: skip
    # encrypted, or nothing stored beyond RAM: nothing to say
    assert _tier_findings(_stored_on(True, True, True, "restricted")) == []
    assert _tier_findings(_stored_on(False, False, False, "restricted")) == []


def test_check_reads_a_body_signed_before_encryption_existed_as_unencrypted():
    body = _stored_on(True, False, False, "public")
    del body["tiers"]["encrypt_at_rest"]  # as bodies approved before the key was added
    assert [level for level, _ in _tier_findings(body)] == ["warning"]


def test_check_global_scope_on_multi_tenant_traffic_names_the_timing_side_channel():
    from console.policies.body import empty_body

    body = complete(empty_body())
    body["scope"] = "global"
    scope = [f for f in check_body(body, check_report(), tenants_in_traffic=2)
             if f.field == "scope"]  # fmt: skip
    assert len(scope) == 1 and scope[0].level == "warning"
    assert "CVE-2025-46570" in scope[0].message and "`cache_salt`" in scope[0].message
    assert "traffic from 2 tenants" in scope[0].message
    # one tenant has no one to share with
    assert not [f for f in check_body(body, check_report(), tenants_in_traffic=1)
                if f.field == "scope"]  # fmt: skip
