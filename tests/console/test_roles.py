"""One permission per right: everything an analyst does (upload, analyse, draft and submit
policies) is console.analyze_upload; approving is console.approve_policy."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from console.policies.models import Policy, PolicyError
from console.policies.services import policy_create
from console.roles import can_analyze, can_approve
from tests.console.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_analyst_permission_alone_drafts_a_policy(analysis):
    perms = set(Permission.objects.filter(content_type__app_label="console")
                .values_list("codename", flat=True))  # fmt: skip
    assert "author_policy" not in perms and {"analyze_upload", "approve_policy"} <= perms
    # granted the one permission directly, in no group: an analyst in every right
    solo = make_user("solo")
    solo.user_permissions.add(Permission.objects.get(codename="analyze_upload"))
    solo = type(solo).objects.get(pk=solo.pk)  # a fresh permission cache
    assert can_analyze(solo) and not can_approve(solo)
    policy_create(name="drafted alone", user=solo, analysis=analysis)
    assert Policy.objects.filter(name="drafted alone").exists()
    # without it, no draft
    approver = make_user("appr", "approver")
    with pytest.raises(PolicyError):
        policy_create(name="not an analyst's", user=approver, analysis=analysis)
    assert not Policy.objects.filter(name="not an analyst's").exists()
