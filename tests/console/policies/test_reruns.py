"""A policy's re-run (its linked analysis with the policy's own lifetime and scope): one
analysis per parameter set, however many versions and policies ask for it, and said as
such on every list of analyses."""

from __future__ import annotations

import pytest
from django.urls import reverse

from console.models import Analysis, JobStatus, PolicyVersion
from console.policies.forms import PolicyForm
from console.policies.services import policy_create, version_new, version_update
from tests.console.factories import PASSWORD, approved_version, complete, rerun
from tests.console.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _policy(name: str, analysis: Analysis, user, lifetime_s: float, scope: str):
    """A policy drafted from `analysis`, saved with this lifetime and scope."""
    version = policy_create(name=name, user=user, analysis=analysis)
    body = complete(version.body) | {"lifetime_s": lifetime_s, "scope": scope}
    return version_update(version=version, body=body, user=user, analysis=analysis)


def _approved(analysis: Analysis, analyst, approver, lifetime_s: float, scope: str):
    """Policy "exported" v1, with this lifetime and scope, signed off (a new version of
    it may be started then)."""

    def mutate(body: dict) -> None:
        body.update(lifetime_s=lifetime_s, scope=scope)

    return approved_version(analysis, analyst, approver, mutate)


def _next_version(version: PolicyVersion, user) -> PolicyVersion:
    """The next version of the policy, saved with the same body."""
    new = version_new(policy=version.policy, user=user)
    return version_update(version=new, body=new.body, user=user, analysis=version.analysis)


def _done(pk: int) -> Analysis:
    return wait_for(lambda: Analysis.objects.filter(pk=pk, status=JobStatus.DONE).first())


def test_a_second_identical_rerun_reuses_the_first(analysis, analyst, approver):
    first = _approved(analysis, analyst, approver, 120, "user")
    rerun_pk = first.constrained_analysis_id
    assert rerun_pk not in (None, analysis.pk)
    # (the draft as created, prefilled from the analysis, had a re-run of its own too)
    before = Analysis.objects.count()
    # saved again unchanged, another policy with the same lifetime and scope (its draft's
    # prefilled one too), and a new version with the same body: the same analyses
    other = _policy("chat US", analysis, analyst, 120, "user")
    version_update(version=other, body=other.body, user=analyst, analysis=analysis)
    v2 = _next_version(first, analyst)
    assert other.constrained_analysis_id == v2.constrained_analysis_id == rerun_pk
    assert Analysis.objects.count() == before
    # another lifetime is one more analysis
    shorter = _policy("chat APAC", analysis, analyst, 60, "user")
    assert shorter.constrained_analysis_id not in (rerun_pk, analysis.pk)
    assert Analysis.objects.count() == before + 1
    done = _done(rerun_pk)
    assert (done.params["lifetime"], done.params["scope"]) == (120, "user")


def test_a_failed_identical_rerun_is_run_again_not_duplicated(analysis, analyst):
    first = _policy("chat EU", analysis, analyst, 120, "user")
    rerun_pk = _done(first.constrained_analysis_id).pk
    Analysis.objects.filter(pk=rerun_pk).update(status=JobStatus.FAILED, message="lost")
    before = Analysis.objects.count()
    other = _policy("chat US", analysis, analyst, 120, "user")
    assert other.constrained_analysis_id == rerun_pk and Analysis.objects.count() == before
    assert _done(rerun_pk).message == ""


def test_an_analysis_by_hand_with_the_same_parameters_is_reused(analysis, analyst):
    by_hand = rerun(analysis, analyst, lifetime=600.0, scope="tenant")
    version = _policy("chat EU", analysis, analyst, 600, "tenant")
    assert version.constrained_analysis_id == by_hand.pk


def test_reruns_are_labelled_with_their_policy_versions_on_every_list(
    client, analysis, analyst, approver
):
    first = _approved(analysis, analyst, approver, 120, "user")
    v2 = _next_version(first, analyst)
    rerun_pk = _done(first.constrained_analysis_id).pk
    links = (f'<a href="/policies/versions/{first.pk}/">exported v1</a>, '
             f'<a href="/policies/versions/{v2.pk}/">exported v2</a>')  # fmt: skip
    assert client.login(username=analyst.username, password=PASSWORD)
    home = client.get(reverse("home")).content.decode()
    upload_page = client.get(reverse("upload_detail", args=[analysis.upload_id])).content.decode()
    compare = client.get(reverse("compare"), {"a": [analysis.pk, rerun_pk]}).content.decode()
    # the re-run, not the analysis it re-ran (compare: its column and its pick)
    for page, labels in ((home, 1), (upload_page, 1), (compare, 2)):
        assert page.count("data-policy-rerun") == labels
        assert f"policy re-run: {links}" in page
    # the analysis page's compare picker, and the policy form's evidence choices
    original = client.get(reverse("analysis_detail", args=[analysis.pk])).content.decode()
    pick = original.split(f'name="a" value="{rerun_pk}"', 1)[1].split("</div>", 1)[0]
    assert f"policy re-run: {links}" in pick
    assert original.count("data-policy-rerun") == 1
    choices = dict(PolicyForm().fields["analysis"].choices)
    assert str(choices[rerun_pk]).endswith(" · policy re-run: exported v1, v2")
    assert "policy re-run" not in str(choices[analysis.pk])


def test_an_analysis_that_is_its_policys_own_rerun_is_not_called_one(analysis, analyst):
    """The policy's lifetime and scope are the analysis's own: the re-run is the analysis
    itself, which stays the evidence it is (no label)."""
    own = rerun(analysis, analyst, lifetime=1800.0, scope="tenant")
    version = _policy("chat EU", own, analyst, 1800, "tenant")
    assert PolicyVersion.objects.get(pk=version.pk).constrained_analysis_id == own.pk
    choices = dict(PolicyForm().fields["analysis"].choices)
    assert "policy re-run" not in str(choices[own.pk])
