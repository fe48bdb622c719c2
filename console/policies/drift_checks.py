"""Running a drift check: read the uploaded deployment, compare it with the policy's
approved version, store the result and record it in the audit trail (one event,
"policy.drift_check", in the same transaction as the check)."""

from __future__ import annotations

import dataclasses
import hashlib

from django.db import transaction

from console.policies import audit
from console.policies.deployed_read import read_deployment
from console.policies.drift import Drift, compare
from console.policies.models import DriftCheck, Policy, PolicyError, PolicyVersion, VersionState
from console.policies.services import signed_body
from console.roles import can_analyze, can_approve


def can_check(user) -> bool:
    """Engineers (analysts) and reviewers (approvers) run checks; auditors read them."""
    return can_analyze(user) or can_approve(user)


def approved_version(policy: Policy) -> PolicyVersion | None:
    """The version governing the policy's routes now (None before one is approved, or
    once the policy is retired)."""
    return policy.versions.filter(state=VersionState.APPROVED).first()


def _governed_elsewhere(drift: Drift, policy: Policy) -> Drift:
    """A route this policy does not govern: say which approved version does, if any."""
    others = PolicyVersion.objects.filter(state=VersionState.APPROVED).exclude(policy=policy)
    governs = {route: v for v in others.select_related("policy") for route in v.body["routes"]}
    out = []
    for d in drift.differences:
        if d.kind == "route not governed":
            names = str(d.found).split(", ")
            owner = next((governs[n] for n in names if n in governs), None)
            where = (
                f" Policy “{owner.policy.name}” v{owner.number} governs it."
                if owner
                else " No approved policy governs it."
            )
            d = dataclasses.replace(d, message=d.message + where)
        out.append(d)
    drift.differences = out
    return drift


def drift_check_create(
    *, policy: Policy, user, file_name: str, text: str, route: str = ""
) -> DriftCheck:
    """Check a deployment against the policy's approved version. Raises DeployedError (the
    file cannot be read), DriftError (the check needs a route) or PolicyError (nothing
    approved, or its body no longer as signed)."""
    if not can_check(user):
        raise PolicyError("Only analysts and approvers check deployments.")
    version = approved_version(policy)
    if version is None:
        raise PolicyError(
            f"“{policy.name}” has no approved version: nothing governs its routes to check "
            "a deployment against."
        )
    body = signed_body(version)
    deployment = read_deployment(file_name, text)
    drift = _governed_elsewhere(compare(deployment, body, route or None), policy)
    sha256 = hashlib.sha256(text.encode()).hexdigest()
    with transaction.atomic():
        check = DriftCheck.objects.create(
            version=version,
            uploaded_by=user,
            uploaded_by_name=user.get_username(),
            file_name=file_name[:255],
            format=deployment.format,
            route=route,
            deployed=deployment.as_json(),
            compliant=drift.compliant,
            differences=drift.as_json(),
            notes=drift.notes,
            sha256=sha256,
        )
        audit.record(
            actor=user,
            action="policy.drift_check",
            obj=check,
            details={
                "version": version.pk,
                "digest": version.digest,
                "file": check.file_name,
                "format": deployment.format,
                "compliant": drift.compliant,
                "kinds": drift.kinds(),
                "sha256": sha256,
            },
        )
    return check
