"""The reviewer's walk of issue #17 in a real browser (headless Chromium, as test_browser.py):
an approver reads what v2 of a policy changes against the approved v1, signs it off,
downloads the evidence pack (which manage.py verify_pack passes), checks a deployment that
drifted from it, and finds all of it on the audit page, whose export verify_audit passes.

The policy (factories.approved_version over the chat log's analysis, llama-3.1-8b at TP 1
and bf16, the analysis's own model): v1 keeps 8.0 GiB of CPU RAM and blocks for 1800 s;
v2 keeps 12.5 GiB, for 3600 s, and adds the data-subject deletion event (purge within
3600 s). For llama-3.1-8b at TP 1 the vLLM size is the policy's (metrics.md section 8:
the route is the analysis's own (model, dtype, TP)), so --kv-offloading-size is 12.5.
The screenshots of the diff, the drift result and the audit page go into SCREENSHOTS
(README, "What a planner sees").
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from console.models import AuditEvent, DriftCheck, PolicyVersion, VersionState
from console.policies.body import canonical_json
from console.policies.services import version_new, version_submit, version_update
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in
from tests.console.factories import PASSWORD, approved_version

pytestmark = pytest.mark.django_db(transaction=True)
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page
SCREENSHOTS = Path(os.environ.get("KVSCOPE_SCREENSHOTS", Path(__file__).parents[3] / "screenshots"))
ROUTE = "llama-3.1-8b"
V1_GIB, V2_GIB, DRIFTED_GIB = 8.0, 12.5, 20.0
V1_LIFETIME, V2_LIFETIME = 1800, 3600
COMMENT = "Deletion requests covered; RAM raised for the new tenants."
# the rows v2's page shows against v1, written here from the two bodies (not by diff.py):
# GiB with two decimals, seconds in the largest whole unit
CHANGES = {
    "End-of-life events: added": ("—", "Data-subject deletion request (purge within 1 h)"),
    "Block lifetime (s after last use)": ("30 min", "1 h"),
    "CPU RAM": ("8.00 GiB", "12.50 GiB"),
}


def _only_llama(body: dict) -> None:
    body["routes"] = [ROUTE]  # one route: its size is the policy's own


@pytest.fixture
def in_review(analysis, analyst, approver) -> PolicyVersion:
    """v1 approved, v2 (RAM, lifetime, a new end-of-life event) submitted by the analyst."""
    v1 = approved_version(analysis, analyst, approver, mutate=_only_llama)
    assert v1.body["tiers"]["cpu_ram"]["size_gib"] == V1_GIB
    assert v1.body["lifetime_s"] == V1_LIFETIME
    v2 = version_new(policy=v1.policy, user=analyst)
    body = copy.deepcopy(v2.body)
    body["tiers"]["cpu_ram"]["size_gib"] = V2_GIB
    body["lifetime_s"] = V2_LIFETIME
    body["end_of_life"].append({"event": "data_subject_deletion", "deadline_s": 3600})
    v2 = version_update(version=v2, body=body, user=analyst, analysis=analysis)
    version_submit(version=v2, user=analyst)
    v2.refresh_from_db()
    assert v2.number == 2 and v2.state == VersionState.IN_REVIEW
    return v2


def _change_rows(page: Page) -> dict[str, tuple[str, str]]:
    rows = page.locator("[data-changes] tr[data-change]")
    expect(rows).to_have_count(len(CHANGES))
    out = {}
    for n in range(rows.count()):
        row = rows.nth(n)
        cells = row.locator("td").all_inner_texts()
        out[row.locator("th").inner_text()] = (cells[0], cells[1])
    return out


def _read_the_changes_and_approve(page: Page, v2: PolicyVersion) -> None:
    page.goto(f"/policies/versions/{v2.pk}/")
    expect(page.locator("[data-state]")).to_have_text("In review")
    changes = page.locator("[data-changes]")
    expect(changes.locator("h2")).to_have_text("Changes against v1 (approved)")
    header = changes.locator("thead th").all_inner_texts()
    assert header == ["Field", "v1", "v2 (this version)"]
    assert _change_rows(page) == CHANGES
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "policy-diff.png", full_page=True)

    # the sign-off form says what it signs, below the changes and above its button
    review = page.locator("section.review")
    expect(review).to_contain_text(f"with the {len(CHANGES)} changes against v1 listed above")
    button = page.get_by_role("button", name="Approve and sign off")
    assert changes.bounding_box()["y"] < button.bounding_box()["y"]
    page.locator("#approve-comment").fill(COMMENT)
    page.locator("#approve-password").fill(PASSWORD)
    button.click()
    expect(page.locator("p.flash.success")).to_have_text("Approved and signed off.")
    expect(page.locator("[data-state]")).to_have_text("Approved")

    # the sign-off page shows the same changes (v1 is superseded now)
    page.get_by_role("link", name="Sign-off page").click()
    expect(page.locator("[data-changes] h2")).to_have_text("Changes against v1 (superseded)")
    assert _change_rows(page) == CHANGES
    expect(page.locator("article.signoff > header")).to_contain_text(f"Comment: “{COMMENT}”")
    page.get_by_role("link", name="Back to the policy").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{v2.pk}/$"))


def _download(page: Page, link_name: str, tmp_path: Path) -> Path:
    with page.expect_download() as info:
        page.get_by_role("link", name=link_name, exact=True).click()
    download = info.value
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    return path


def _check_the_pack(page: Page, v2: PolicyVersion, tmp_path: Path) -> None:
    path = _download(page, "Download evidence pack", tmp_path)
    assert path.name == "exported-v2-evidence.zip"
    out = io.StringIO()
    call_command("verify_pack", str(path), stdout=out)  # a CommandError would fail here
    assert "exported" in out.getvalue() and v2.digest in out.getvalue()
    with zipfile.ZipFile(path) as pack:
        policy_json = pack.read("policy.json")
        sha_line = pack.read("policy.sha256").decode()
    # the body as stored, canonical (sorted keys, no spaces, UTF-8), hashed here
    body = PolicyVersion.objects.get(pk=v2.pk).body
    expected = hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert canonical_json(body) == policy_json
    assert hashlib.sha256(policy_json).hexdigest() == expected
    assert sha_line == f"{expected}  policy.json\n"
    assert json.loads(policy_json)["tiers"]["cpu_ram"]["size_gib"] == V2_GIB


def _drifted(export: str) -> str:
    """v2's vLLM export as a fleet really runs it: more RAM on the native command, fp8 KV."""
    native = f"--kv-offloading-size {V2_GIB:g} "
    assert export.count(native) == 1, export
    text = export.replace(native, f"--kv-offloading-size {DRIFTED_GIB:g} ")
    dtype = "--tensor-parallel-size 1 --kv-cache-dtype auto"
    assert dtype in text, text
    return text.replace(dtype, "--tensor-parallel-size 1 --kv-cache-dtype fp8", 1)


def _check_a_drifted_deployment(page: Page, v2: PolicyVersion, tmp_path: Path) -> DriftCheck:
    export = _download(page, "vLLM flags", tmp_path).read_text()
    assert f"policy sha256: {v2.digest}" in export
    page.get_by_text("Check a deployment").click()  # a closed <details>
    page.locator("#id_text").fill(_drifted(export))
    page.get_by_role("button", name="Check the deployment").click()
    expect(page).to_have_url(re.compile(r"/policies/drift/\d+/$"))
    check = DriftCheck.objects.get(pk=int(re.search(r"/drift/(\d+)/$", page.url).group(1)))
    assert check.version_id == v2.pk and not check.compliant
    expect(page.locator("[data-result]")).to_have_text("2 differences")
    size = page.locator("li[data-kind=size]")
    expect(size).to_have_count(1)
    # the line is the edited command's, found in the text
    line = next(n for n, t in enumerate(_drifted(export).splitlines(), 1) if "size 20 " in t)
    expect(size).to_have_text(
        f"Size: {ROUTE} (line {line}): the CPU RAM tier is {DRIFTED_GIB:g} GiB in total over "
        f"the route's TP ranks (--kv-offloading-size); the policy's is {V2_GIB:g} GiB."
    )
    dtype = page.locator("li[data-kind=dtype]")
    expect(dtype).to_have_count(1)
    expect(dtype).to_contain_text("KV dtype:")
    expect(dtype).to_contain_text("holds KV as fp8 (--kv-cache-dtype fp8)")
    expect(dtype).to_contain_text("the policy's sizes are for bf16")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "policy-drift.png", full_page=True)

    # the policy's page lists the check as not compliant
    page.locator(".crumbs").get_by_role("link", name="exported v2").click()
    row = page.locator(f"[data-drift-check='{check.pk}']")
    expect(row.locator(".badge")).to_have_text("2 differences")
    expect(row.locator("[data-kinds]")).to_have_text("dtype, size")
    expect(row.locator("td").nth(4)).to_have_text("v2")
    return check


def _audit_of_the_version(page: Page, v2: PolicyVersion, check: DriftCheck, tmp_path) -> None:
    page.goto("/policies/audit/")
    page.locator("#id_object_type").select_option(label="Policy version")
    page.locator("#id_object_id").fill(str(v2.pk))
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(rf"object_id={v2.pk}"))
    table = page.locator("[data-audit-events]")
    labels = table.locator("tbody tr td:nth-child(4)").all_inner_texts()
    actions = [label.split()[-1] for label in labels]
    assert {"policy.approve", "policy.evidence_pack", "policy.drift_check"} <= set(actions)
    text = table.inner_text()
    assert "{'" not in text and "['" not in text, text
    approve = AuditEvent.objects.get(action="policy.approve", object_id=str(v2.pk))
    expect(page.locator(f"tr[data-event='{approve.pk}']")).to_contain_text(COMMENT)
    pack = AuditEvent.objects.get(action="policy.evidence_pack")
    pack_row = page.locator(f"tr[data-event='{pack.pk}']")
    expect(pack_row).to_contain_text(pack.details["pack_sha256"])
    drift = AuditEvent.objects.get(action="policy.drift_check")
    drift_row = page.locator(f"tr[data-event='{drift.pk}']")
    expect(drift_row).to_contain_text("dtype, size")
    expect(drift_row).to_contain_text(check.sha256)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SCREENSHOTS / "policy-audit.png", full_page=True)

    path = _download(page, "Download JSON", tmp_path)
    exported = json.loads(path.read_text())
    assert exported["filter"] == {"object_type": "PolicyVersion", "object_id": str(v2.pk)}
    selected = {e["action"] for e in exported["events"] if "action" in e}
    assert {"policy.approve", "policy.evidence_pack", "policy.drift_check"} <= selected
    out = io.StringIO()
    call_command("verify_audit", file=path, stdout=out)
    assert f"audit file intact: {AuditEvent.objects.count()} events" in out.getvalue()


def test_a_reviewer_reads_the_diff_approves_downloads_the_pack_and_checks_drift(
    browser_page, in_review, approver, tmp_path
):
    session, page, v2 = browser_page, browser_page.page, in_review
    sign_in(page, approver.username)
    _read_the_changes_and_approve(page, v2)
    v2.refresh_from_db()
    assert v2.state == VersionState.APPROVED and v2.signoff.comment == COMMENT
    _check_the_pack(page, v2, tmp_path)
    check = _check_a_drifted_deployment(page, v2, tmp_path)
    _audit_of_the_version(page, v2, check, tmp_path)
    session.assert_clean()
