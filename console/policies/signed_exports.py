"""An approved version's engine configuration as text: its signed body (refused if the
stored body no longer matches the signed digest) rendered by an export kind's name
(exports.KINDS). The export download and the evidence pack both read it."""

from __future__ import annotations

from console.format import moment_text
from console.policies import exports
from console.policies.models import PolicyVersion
from console.policies.services import signed_body


def export_text(version: PolicyVersion, name: str, route: str | None = None) -> str:
    """An engine configuration of a signed version (refused if its body was changed), by
    its export name (exports.KINDS); for LMCache YAML, the file of `route` (or the only
    one)."""
    body = signed_body(version)
    signoff = version.signoff
    meta = {
        "name": version.policy.name,
        "version": version.number,
        "digest": version.digest,
        "approved_at": moment_text(signoff.at, seconds=True),  # in the header comment
        "approved_by": signoff.approver_name,
        "lifetime_s": body["lifetime_s"],
        "scope": body["scope"],
    }
    return exports.render(name, body, meta, route=route)
