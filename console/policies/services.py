"""Policy workflow: draft -> in review -> approved, or -> changes requested -> draft again.

Each transition is a conditional UPDATE on the current state, so a second click or a
concurrent request changes nothing; every change is an audit event in the same
transaction. Separation of duties: only approvers approve, never the version's author,
and only after re-entering their password.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from console.models import Analysis, BenchRun
from console.policies import audit
from console.policies.body import digest, empty_body, normalize
from console.policies.checks import Finding, check_body
from console.policies.models import (
    EDITABLE,
    AuditEvent,
    Policy,
    PolicyError,
    PolicyVersion,
    Review,
    SignOff,
    VersionState,
)
from console.policies.sources import analysis_evidence, body_from_analysis, run_evidence
from console.roles import can_analyze, can_approve
from console.signin import record_failure, throttled
from console.uploads.analyses import analysis_reuse_or_create

# states whose body was signed: fixed, and read only through signed_body()
SIGNED = (VersionState.APPROVED, VersionState.SUPERSEDED, VersionState.RETIRED)


class DigestMismatch(PolicyError):
    """A signed version whose stored body no longer hashes to what was signed."""


class ChecksFailed(PolicyError):
    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__(f"{sum(f.level == 'error' for f in findings)} problem(s) to fix first")


def _require(allowed: bool, message: str) -> None:
    if not allowed:
        raise PolicyError(message)


def _require_open(version: PolicyVersion) -> None:
    if Policy.objects.filter(pk=version.policy_id).exclude(retired_at=None).exists():
        raise PolicyError("This policy is retired.")


def _submitted_by(version: PolicyVersion, user) -> bool:
    return Review.objects.filter(version=version, action="submit", actor=user).exists()


def worked_on(version: PolicyVersion, user) -> bool:
    """Whether the user wrote, edited or submitted the version: then they may not sign it
    off (version_approve says which)."""
    return version.author_id == user.pk or _edited_by(version, user) or _submitted_by(version, user)


def _check_password(user, password: str, address: str) -> None:
    """The re-entered password, throttled as sign-in is (and counted with it): after
    KVSCOPE_LOGIN_FAILURES wrong ones even the right one is refused for a while."""
    refused = throttled(user.get_username(), address, "password checks")
    if refused:
        raise PolicyError(refused, field="password")
    if not user.check_password(password):
        record_failure(user.get_username(), address)
        raise PolicyError("The password is not correct.", field="password")


def signed_body(version: PolicyVersion) -> dict:
    """The body of a signed version, once its digest is recomputed and matches both the
    version's and the sign-off's. Exports and the sign-off page read it through this:
    a body changed in the database after approval is refused, never shown as signed."""
    signoff = SignOff.objects.filter(version_id=version.pk).first()
    if signoff is None:
        raise DigestMismatch("This version has no sign-off.")
    actual = digest(version.body)
    if not (actual == version.digest == signoff.digest):
        raise DigestMismatch(
            f"v{version.number}'s stored body no longer matches what was signed: it hashes "
            f"to {actual}, but {signoff.digest} was signed. It was changed after approval, "
            "outside kvscope; nothing is exported or shown as signed from it."
        )
    return version.body


def _edited_by(version: PolicyVersion, user) -> bool:
    """Whether the user wrote any of this version's content (creator or editor)."""
    return AuditEvent.objects.filter(
        object_type="PolicyVersion",
        object_id=str(version.pk),
        actor_name=user.get_username(),
        action__in=["policy.create", "policy.edit", "policy.new_version"],
    ).exists()


def policy_create(*, name: str, user, analysis: Analysis | None = None) -> PolicyVersion:
    _require(can_analyze(user), "Only analysts draft policies.")
    if Policy.objects.filter(name=name).exists():
        raise PolicyError(f"A policy named “{name}” exists already.", field="name")
    try:
        version = _create_policy(name, user, analysis)
    except IntegrityError:  # the same name created concurrently
        raise PolicyError(f"A policy named “{name}” exists already.", field="name") from None
    _rerun_constrained(version, user)
    return version


def _create_policy(name: str, user, analysis: Analysis | None) -> PolicyVersion:
    with transaction.atomic():
        policy = Policy.objects.create(name=name, created_by=user)
        body = body_from_analysis(analysis)
        body["evidence"] = analysis_evidence(analysis)
        version = PolicyVersion.objects.create(
            policy=policy, number=1, author=user, body=normalize(body), analysis=analysis
        )
        audit.record(
            actor=user,
            action="policy.create",
            obj=version,
            details={"policy": name, "analysis": analysis.pk if analysis else None},
        )
    return version


def version_update(
    *,
    version: PolicyVersion,
    body: dict,
    user,
    analysis: Analysis | None = None,
    bench_runs: Sequence[BenchRun] = (),
) -> PolicyVersion:
    """Edit a draft (or a version sent back for changes). The evidence (the analysis and
    the benchmark runs cited, with their numbers) is part of the body, so of its digest."""
    _require(can_analyze(user), "Only analysts edit policies.")
    _require_open(version)
    body = normalize(copy.deepcopy(body))
    body["evidence"] = analysis_evidence(analysis, body.get("fleet_router"))
    if bench_runs:
        body["evidence"]["benchmark_runs"] = [run_evidence(r) for r in bench_runs]
    with transaction.atomic():
        changed = PolicyVersion.objects.filter(pk=version.pk, state__in=EDITABLE).update(
            body=body, analysis=analysis, updated_at=timezone.now()
        )
        if not changed:
            raise PolicyError("Only a draft can be edited; approved versions are immutable.")
        audit.record(
            actor=user, action="policy.edit", obj=version, details={"digest": digest(body)}
        )
    version.refresh_from_db()
    _rerun_constrained(version, user)
    return version


def rerun_params(params: dict, body: dict) -> dict:
    """An analysis's stored parameters with a policy's lifetime and scope in their place:
    what the policy's re-run analyses with (everything else as the linked analysis had)."""
    return dict(params, lifetime=float(body["lifetime_s"]), scope=body["scope"])


def _rerun_constrained(version: PolicyVersion, user) -> None:
    """Queue the linked analysis again with the policy's own lifetime and scope (or reuse
    the analysis that ran with them already: another version's re-run, or one by hand)."""
    analysis, body = version.analysis, version.body
    if analysis is None or not body.get("lifetime_s"):
        return
    params = rerun_params(analysis.params, body)
    current = version.constrained_analysis
    if current is not None and current.params == params:
        return
    try:
        rerun = analysis_reuse_or_create(
            upload=analysis.upload, block_tokens=analysis.block_tokens, params=params, user=user
        )
    except ValueError:  # e.g. a lifetime the engine refuses: no cost shown, nothing broken
        return
    PolicyVersion.objects.filter(pk=version.pk).update(constrained_analysis=rerun)
    version.constrained_analysis = rerun


def findings_for(version: PolicyVersion) -> list[Finding]:
    analysis = version.analysis
    report = analysis.report if analysis is not None else None
    tenants = report.get("tenants", 0) if report else 0
    rerun = version.constrained_analysis
    # the policy's own re-run, once it has finished (until then nothing to compare)
    constrained = rerun.report if rerun is not None and rerun.report else None
    return check_body(version.body, report, tenants, constrained)


def _transition(
    version: PolicyVersion,
    sources,
    target: str,
    user,
    action: str,
    comment: str = "",
    unchanged_since=None,
    **fields,
) -> None:
    """Move the version if it is (still) in one of `sources` — and, with
    `unchanged_since`, not edited since the caller read the body it checked or signed."""
    with transaction.atomic():
        rows = PolicyVersion.objects.filter(pk=version.pk, state__in=sources)
        if unchanged_since is not None:
            rows = rows.filter(updated_at=unchanged_since)
        moved = rows.update(state=target, updated_at=timezone.now(), **fields)
        if not moved:
            version.refresh_from_db()
            if unchanged_since is not None and version.updated_at != unchanged_since:
                raise PolicyError("The version was edited meanwhile; nothing was changed.")
            raise PolicyError(
                f"This version is {version.get_state_display().lower()} now; nothing was changed."
            )
        Review.objects.create(version=version, actor=user, action=action, comment=comment)
        audit.record(
            actor=user,
            action=f"policy.{action}",
            obj=version,
            details={"comment": comment, "to": target, **fields},
        )
    version.refresh_from_db()


def version_submit(*, version: PolicyVersion, user) -> None:
    _require(can_analyze(user), "Only analysts submit policies.")
    _require_open(version)
    findings = findings_for(version)
    if any(f.level == "error" for f in findings):
        raise ChecksFailed(findings)
    _transition(version, EDITABLE, VersionState.IN_REVIEW, user, "submit",
                unchanged_since=version.updated_at)  # fmt: skip


def version_request_changes(*, version: PolicyVersion, user, comment: str) -> None:
    _require(can_approve(user), "Only approvers review policies.")
    _require(bool(comment.strip()), "Say what should change.")
    _transition(
        version,
        [VersionState.IN_REVIEW],
        VersionState.CHANGES_REQUESTED,
        user,
        "request_changes",
        comment,
    )


def version_approve(
    *, version: PolicyVersion, user, password: str, comment: str, address: str = ""
) -> SignOff:
    """Sign off: approver role, not the author, nor anyone who edited or submitted it,
    password re-entered (throttled), a comment."""
    _require(can_approve(user), "Only approvers approve policies.")
    _require(version.author_id != user.pk, "The author of a version can never approve it.")
    _require(not _edited_by(version, user),
             "You edited this version: another approver must sign it off.")  # fmt: skip
    _require(not _submitted_by(version, user),
             "You submitted this version: another approver must sign it off.")  # fmt: skip
    _require_open(version)
    if not comment.strip():
        raise PolicyError("An approval needs a comment.", field="comment")
    _check_password(user, password, address)
    signed = digest(version.body)
    with transaction.atomic():
        _transition(
            version,
            [VersionState.IN_REVIEW],
            VersionState.APPROVED,
            user,
            "approve",
            comment,
            unchanged_since=version.updated_at,
            digest=signed,
        )
        signoff = SignOff.objects.create(
            version=version,
            approver=user,
            approver_name=user.get_username(),
            at=timezone.now(),
            comment=comment,
            digest=signed,
        )
        older = PolicyVersion.objects.filter(
            policy=version.policy, state=VersionState.APPROVED
        ).exclude(pk=version.pk)
        for old in older:
            _transition(
                old,
                [VersionState.APPROVED],
                VersionState.SUPERSEDED,
                user,
                "supersede",
                f"superseded by v{version.number}",
            )
    return signoff


def version_new(*, policy: Policy, user) -> PolicyVersion:
    """A new draft from the latest version (an approved one stays as it is)."""
    _require(can_analyze(user), "Only analysts draft policies.")
    _require(policy.retired_at is None, "This policy is retired.")
    try:
        return _new_version(policy, user)
    except IntegrityError:  # a second click created the same number first
        raise PolicyError("A new version was just started; open it from the list.") from None


def _new_version(policy: Policy, user) -> PolicyVersion:
    with transaction.atomic():
        Policy.objects.select_for_update().filter(pk=policy.pk).first()  # one at a time
        latest = PolicyVersion.objects.filter(policy=policy).first()
        if latest is not None and latest.state in (*EDITABLE, VersionState.IN_REVIEW):
            raise PolicyError(f"v{latest.number} is still open; finish it first.")
        version = PolicyVersion.objects.create(
            policy=policy,
            number=(latest.number + 1) if latest else 1,
            author=user,
            body=copy.deepcopy(latest.body) if latest else empty_body(),
            analysis=latest.analysis if latest else None,
        )
        audit.record(
            actor=user,
            action="policy.new_version",
            obj=version,
            details={"from": latest.number if latest else None},
        )
    return version


def version_delete_draft(*, version: PolicyVersion, user) -> Policy | None:
    """Delete a draft that was never submitted (and its policy, if nothing else is left).
    Returns the policy when it still exists. The deletion is an audit event."""
    _require(can_analyze(user), "Only analysts delete drafts.")
    # its creator only: an edit (which any analyst may make) gives no right to delete
    _require(version.author_id == user.pk, "Only the analyst who created a draft may delete it.")
    with transaction.atomic():
        locked = PolicyVersion.objects.select_for_update().filter(pk=version.pk).first()
        if locked is None or locked.state != VersionState.DRAFT or locked.reviews.exists():
            raise PolicyError("Only a draft that was never submitted can be deleted.")
        policy = locked.policy
        audit.record(actor=user, action="policy.delete_draft", obj=locked,
                     details={"policy": policy.name, "number": locked.number,
                              "digest": digest(locked.body)})  # fmt: skip
        locked.delete()
        if not policy.versions.exists():
            audit.record(actor=user, action="policy.delete", obj=policy,
                         details={"policy": policy.name})  # fmt: skip
            policy.delete()
            return None
    return policy


def policy_retire(*, policy: Policy, user, password: str, comment: str, address: str = "") -> None:
    """Retire: like an approval, an approver's decision with a comment and the password."""
    _require(can_approve(user), "Only approvers retire policies.")
    if not comment.strip():
        raise PolicyError("Say why the policy is retired.", field="comment")
    _check_password(user, password, address)
    with transaction.atomic():
        if not Policy.objects.filter(pk=policy.pk, retired_at=None).update(
            retired_at=timezone.now()
        ):
            raise PolicyError("This policy is retired already.")
        for version in policy.versions.filter(state=VersionState.APPROVED):
            _transition(
                version, [VersionState.APPROVED], VersionState.RETIRED, user, "retire", comment
            )
        audit.record(actor=user, action="policy.retire", obj=policy, details={"comment": comment})


def record_export(*, version: PolicyVersion, user, kind: str) -> None:
    if version.state != VersionState.APPROVED:
        raise PolicyError("Only an approved version can be exported.")
    signed_body(version)
    audit.record(
        actor=user,
        action="policy.export",
        obj=version,
        details={"kind": kind, "digest": version.digest},
    )
