"""The retention-policy sign-off in a real browser (headless Chromium, as test_browser.py).

The issue's acceptance, as two people would click it: an analyst drafts a policy from an
analysis page, is refused a submission while the checks fail, fills in what they ask and
submits; an approver signs it off with password and comment; the sign-off page shows the
digest of the stored body; the LMCache YAML downloads with the analysis's block size and
the policy's RAM per tensor-parallel rank.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import Page, expect

from bench.generate import chat_requests, write_jsonl
from console.models import FINISHED, Analysis, JobStatus, PolicyVersion, VersionState
from console.policies.body import digest
from console.policies.exports import lmcache_files
from console.policies.services import findings_for
from console.templatetags.kvscope import gib
from console.uploads.analyses import analysis_create
from console.uploads.services import upload_create
from tests.console import browser_fixtures
from tests.console.browser_fixtures import sign_in
from tests.console.factories import PASSWORD, approved_version
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# the browser fixtures, visible to this module's tests
chromium = browser_fixtures.chromium
browser_page = browser_fixtures.browser_page

GIB = 1 << 30
TP = 2  # not 1: the export must divide the RAM tier by the ranks
COMMENT = "Matches the DPA; purge deadlines checked with the SRE team."


def _done(pk: int) -> Analysis:
    def done():
        """the analysis to finish"""
        return Analysis.objects.filter(pk=pk, status__in=FINISHED).first()

    analysis = wait_for(done)
    assert analysis.status == JobStatus.DONE, analysis.message
    return analysis


@pytest.fixture
def evidence(tmp_path, analyst) -> Analysis:
    """A finished analysis through the service layer: a generated chat log with 64-token
    blocks (not the export's 256 fallback), re-analyzed with two tensor-parallel ranks."""
    log = tmp_path / "policy-chat.jsonl"
    write_jsonl(chat_requests(120, seed=5, documents=8, doc_words=(300, 700)), log)
    upload = upload_create(name="policy day", sources=[log], user=analyst, block_sizes=[64])

    def default():
        """the default analysis"""
        return Analysis.objects.filter(upload=upload).first()

    first = _done(wait_for(default).pk)
    assert first.block_tokens == 64
    rerun = analysis_create(
        upload=first.upload,
        block_tokens=first.block_tokens,
        params=dict(first.params, tp=TP),
        user=analyst,
    )
    return _done(rerun.pk)


def _sign_out(page: Page) -> None:
    page.locator("header").get_by_role("button", name="Sign out").click()  # a POST form
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    expect(page.locator("header .who")).to_have_count(0)


def _fact(page: Page, term: str):
    """The <dd> of the policy body's <dt>term</dt> (the whole term: "Tiers" is not
    "Encryption at rest (disk and remote tiers)")."""
    dt = page.locator("dt", has_text=re.compile(rf"^{re.escape(term)}$"))
    return page.locator("dl.policy-body > div", has=dt).locator("dd")


def test_analyst_drafts_and_submits_approver_signs_off_and_exports(
    browser_page, evidence, analyst, approver
):
    session = browser_page
    page = session.page
    report = evidence.report
    rec = report["recommendation"]
    prefilled_gib = round(rec["ram_bytes"] / GIB, 2)
    assert prefilled_gib > 0 and rec["tp"] == TP

    # --- the analyst drafts a policy from the analysis page -----------------------------
    sign_in(page, analyst.username)
    page.goto(f"/analyses/{evidence.pk}/")
    page.get_by_role("link", name="Draft a retention policy from this analysis").click()
    expect(page).to_have_url(re.compile(rf"/policies/new/\?analysis={evidence.pk}$"))
    expect(page.locator("p.lead")).to_contain_text(f"Prefilled from analysis #{evidence.pk}")
    page.locator("#id_name").fill("Chat EU")
    page.get_by_role("button", name="Create the draft").click()
    expect(page).to_have_url(re.compile(r"/policies/versions/\d+/edit/$"))
    pk = int(re.search(r"/versions/(\d+)/edit/$", page.url).group(1))
    version = PolicyVersion.objects.get(pk=pk)
    assert version.analysis_id == evidence.pk and version.author_id == analyst.pk
    # the form is prefilled from the evidence
    routes = [r["route"] for r in report.get("routes", []) if r["route"]]
    expect(page.locator("#id_routes")).to_have_value(", ".join(routes))
    assert float(page.locator("#id_cpu_ram_size_gib").input_value()) == prefilled_gib
    expect(page.locator("#id_analysis")).to_have_value(str(evidence.pk))

    # --- submitting the bare draft is refused by the checks -----------------------------
    page.locator(".crumbs").get_by_role("link", name="Chat EU v1").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{pk}/$"))
    errors = [f for f in findings_for(version) if f.level == "error"]
    assert {"purge_deadline_s", "end_of_life", "failure", "access"} <= {f.field for f in errors}
    expect(page.locator("section.checks li.error")).to_have_count(len(errors))
    page.get_by_role("button", name="Submit for review").click()
    expect(page.locator("p.flash.error")).to_have_text(
        f"Not submitted: {len(errors)} problem(s) to fix first. See the checks below."
    )
    expect(page.locator("[data-state]")).to_have_text("Draft")
    assert PolicyVersion.objects.get(pk=pk).state == VersionState.DRAFT

    # --- fill in what the checks ask for, save ------------------------------------------
    page.locator(".actions").get_by_role("link", name="Edit").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{pk}/edit/$"))
    if not routes:  # the log named no route: the form requires one
        page.locator("#id_routes").fill("llama-3.1-8b")
    page.locator("#id_scope").select_option("tenant")
    page.locator("#id_purge_deadline_s").fill("86400")  # no event's deadline is longer
    expect(page.locator("#id_eol_lifetime_expiry")).to_be_checked()  # the empty body's event
    page.locator("#id_eol_lifetime_expiry_deadline_s").fill("60")
    page.locator("#id_eol_tenant_offboarding").check()
    page.locator("#id_eol_tenant_offboarding_deadline_s").fill("86400")
    page.locator("#id_ram_full").select_option("evict_lru")
    page.locator("#id_worker_exit").select_option("blocks_lost_recompute")
    page.locator("#id_load_failure").select_option("recompute")
    page.locator("#id_readers").fill("vllm-engine pods in namespace serving")
    page.locator("#id_classification").select_option("confidential")
    page.locator("#id_justification").fill("Hot system prompts and documents, per tenant.")
    page.get_by_role("button", name="Save the draft").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{pk}/$"))
    expect(page.locator("p.flash.success")).to_have_text("Saved.")
    expect(page.locator("section.checks li.error")).to_have_count(0)

    # the version page: the prefilled RAM, the scope, the deadlines, the evidence
    tiers = _fact(page, "Tiers").inner_text()
    shown = re.search(r"CPU RAM ([\d.]+) GiB", tiers)
    assert shown and float(shown.group(1)) == prefilled_gib, tiers
    expect(_fact(page, "Sharing scope")).to_have_text(re.compile(r"^tenant — per-tenant"))
    expect(_fact(page, "End-of-life events")).to_contain_text("Tenant offboarding")
    evidence_row = page.locator("table.evidence tbody tr").first
    expect(evidence_row.locator("td").nth(2)).to_have_text(gib(rec["ram_bytes"]))
    version = PolicyVersion.objects.get(pk=pk)
    assert version.body["tiers"]["cpu_ram"] == {"enabled": True, "size_gib": prefilled_gib}
    assert version.body["scope"] == "tenant"
    assert version.body["evidence"]["block_tokens"] == 64
    assert version.body["evidence"]["params"]["tp"] == TP

    # --- submit --------------------------------------------------------------------------
    page.get_by_role("button", name="Submit for review").click()
    expect(page.locator("p.flash.success")).to_have_text("Submitted for review.")
    expect(page.locator("[data-state]")).to_have_text("In review")
    expect(page.get_by_role("button", name="Approve and sign off")).to_have_count(0)
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)

    # --- the approver signs it off --------------------------------------------------------
    _sign_out(page)
    sign_in(page, approver.username)
    page.goto(f"/policies/versions/{pk}/")
    expect(page.locator("[data-state]")).to_have_text("In review")
    page.locator("#approve-comment").fill(COMMENT)
    page.locator("#approve-password").fill("not the password")
    page.get_by_role("button", name="Approve and sign off").click()
    # the error is at the password field, and the comment written is still there
    expect(page.locator("#approve-password_error")).to_have_text("The password is not correct.")
    expect(page.locator("#approve-comment")).to_have_value(COMMENT)
    expect(page.locator("#approve-password")).to_have_value("")
    expect(page.locator("[data-state]")).to_have_text("In review")
    page.locator("#approve-password").fill(PASSWORD)
    page.get_by_role("button", name="Approve and sign off").click()
    expect(page.locator("p.flash.success")).to_have_text("Approved and signed off.")
    expect(page.locator("[data-state]")).to_have_text("Approved")

    version = PolicyVersion.objects.get(pk=pk)
    expected_digest = digest(version.body)  # what the stored body hashes to
    assert version.state == VersionState.APPROVED
    assert version.digest == version.signoff.digest == expected_digest
    assert version.signoff.approver_name == approver.username
    expect(page.locator("[data-digest]")).to_have_text(expected_digest)

    # --- the sign-off page ------------------------------------------------------------------
    page.get_by_role("link", name="Sign-off page").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{pk}/sign-off/$"))
    shown_digest = page.locator("[data-digest]").inner_text()
    assert re.fullmatch(r"[0-9a-f]{64}", shown_digest), shown_digest
    assert shown_digest == expected_digest
    header = page.locator("article.signoff > header")
    expect(header).to_contain_text(f"Approved by {approver.username}")
    expect(header).to_contain_text(f"Author: {analyst.username}")
    expect(header).to_contain_text(f"Comment: “{COMMENT}”")
    tiers = _fact(page, "Tiers").inner_text()
    assert float(re.search(r"CPU RAM ([\d.]+) GiB", tiers).group(1)) == prefilled_gib
    chain = page.locator("h2:text-is('Chain of reviews') + table tbody tr")
    actions = chain.locator("td:nth-child(3)").all_inner_texts()
    assert actions == ["submit", "approve"]

    # --- the LMCache YAML ------------------------------------------------------------------
    page.get_by_role("link", name="Back to the policy").click()
    expect(page).to_have_url(re.compile(rf"/policies/versions/{pk}/$"))
    # the analysis's own model (its per-rank size is the policy's / TP); when the routes'
    # sizes differ (qwen2.5-7b keeps fewer bytes per token), each has its own file
    files = lmcache_files(PolicyVersion.objects.get(pk=pk).body)
    name = next(n for n, routes in files if "llama-3.1-8b" in routes)
    label = "LMCache YAML" if len(files) == 1 else f"LMCache YAML: {name}"
    with page.expect_download() as download_info:
        page.get_by_role("link", name=label, exact=True).click()
    download = download_info.value
    assert download.suggested_filename == f"chat-eu-v1-{name}"
    text = Path(download.path()).read_text()
    assert f"policy sha256: {expected_digest}" in text
    assert f"({TP} ranks)" in text
    config = yaml.safe_load(text)
    assert config["chunk_size"] == evidence.block_tokens == 64
    assert config["local_cpu"] is True
    # rounded up to 0.01 GB: never less than the policy's share
    per_rank = Fraction(math.ceil(Fraction(str(prefilled_gib)) * 100 / TP), 100)
    assert config["max_local_cpu_size"] == float(per_rank)
    assert config["local_disk"] is None and config["remote_url"] is None
    assert config["cache_policy"] == "LRU"

    # --- nothing left the live server, nothing failed (a refused POST would be a 403) -----
    assert session.requested(rf"/policies/versions/{pk}/approve/$")
    session.assert_clean()


def test_retiring_takes_the_password_and_keeps_the_comment_after_a_wrong_one(
    browser_page, evidence, analyst, approver
):
    version = approved_version(evidence, analyst, approver)
    session, page = browser_page, browser_page.page
    sign_in(page, approver.username)
    page.goto(f"/policies/versions/{version.pk}/")
    page.get_by_text("Retire this policy").click()  # a closed <details>
    page.locator("#retire-comment").fill("Route decommissioned.")
    page.locator("#retire-password").fill("not the password")
    page.get_by_role("button", name="Retire").click()
    # back with the panel open, the error at the password, the reason still written
    expect(page.locator("#retire-password_error")).to_have_text("The password is not correct.")
    expect(page.locator("#retire-comment")).to_be_visible()
    expect(page.locator("#retire-comment")).to_have_value("Route decommissioned.")
    expect(page.locator("[data-state]")).to_have_text("Approved")
    page.locator("#retire-password").fill(PASSWORD)
    page.get_by_role("button", name="Retire").click()
    expect(page.locator("p.flash.success")).to_have_text("The policy is retired.")
    expect(page.locator("[data-state]")).to_have_text("Retired")
    assert PolicyVersion.objects.get(pk=version.pk).state == VersionState.RETIRED
    session.assert_clean()
