"""Retention policies: the workflow, separation of duties, the pages' roles and the
approvals (throttled, and kind to the reviewer)."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from console.models import (
    Analysis,
    AuditEvent,
    JobStatus,
    PolicyVersion,
    SignInFailure,
    VersionState,
)
from console.policies import audit
from console.policies.body import digest
from console.policies.services import (
    ChecksFailed,
    PolicyError,
    policy_create,
    policy_retire,
    version_approve,
    version_new,
    version_request_changes,
    version_submit,
    version_update,
)
from tests.console.factories import (
    PASSWORD,
    approved_version,
    complete,
    make_user,
    submitted_version,
    version_in_review,
)
from tests.console.waiting import settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 1 << 30


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
    wait_for(settled)  # its re-runs' ends are events too (#17)
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
    wait_for(settled)  # its re-run's end is an event too (#17): the deletion's come last
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


@pytest.mark.parametrize(("role", "button_named"), [("analyst", True), ("approver", False),
                                                    ("auditor", False)])  # fmt: skip
def test_the_empty_list_points_each_role_to_what_it_can_do(client, role, button_named, request):
    """Only an analyst has the "Draft a retention policy" button: the others are told who
    drafts, not sent to look for it."""
    client.force_login(request.getfixturevalue(role))
    page = client.get(reverse("policy_list")).content.decode()
    assert "No policies yet" in page
    assert ("“Draft a retention policy” button" in page) is button_named
    assert ("An analyst drafts one" in page) is not button_named
