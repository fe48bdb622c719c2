"""The evidence pack's download: built, checked, recorded in the audit trail, sent."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from console.policies import audit
from console.policies.evidence_pack import ACTION, build_pack
from console.policies.models import PolicyError, PolicyVersion
from console.policies.services import SIGNED
from console.roles import reader_required
from console.web import download


@reader_required
def evidence_pack(request: HttpRequest, pk: int) -> HttpResponse:
    """The ZIP of a signed-off version, for any reader; one audit event per download
    (the pack's own digests in it). A version never approved has no pack (404); one
    whose body or audit trail no longer verifies is refused saying why (409)."""
    version = get_object_or_404(PolicyVersion.objects.select_related("policy"), pk=pk)
    try:
        with transaction.atomic():  # no download without its event, no event without one
            pack = build_pack(version)
            audit.record(actor=request.user, action=ACTION, obj=version,
                         details=pack.audit_details())  # fmt: skip
    except PolicyError as exc:
        status = 404 if version.state not in SIGNED else 409
        context = {"version": version, "policy": version.policy, "reason": str(exc)}
        return render(request, "policies/pack_refused.html", context, status=status)
    return download(pack.content, pack.filename, "application/zip")
