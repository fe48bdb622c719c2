"""The evidence pack of a signed version: one ZIP of what its sign-off rests on — the
canonical body as signed and its SHA-256, the sign-off record, the analyses and benchmark
runs it cites, every engine export, and the audit events of the policy with the chain
data to verify them — laid out as console.policies.pack_check reads and checks it.

Built from the database here; checked without it by manage.py verify_pack. A pack is
checked before it is handed out: a version whose body or audit trail no longer verifies
gets a refusal saying why, never a pack that fails its own check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from console.benchmarks.models import BenchRun
from console.downloads import json_file
from console.models import Analysis
from console.policies import exports
from console.policies.audit import HEAD_ID, event_of_row
from console.policies.body import canonical_json
from console.policies.models import AuditEvent, AuditHead, PolicyError, PolicyVersion
from console.policies.pack_check import (
    AUDIT,
    EVENT_FIELDS,
    FORMAT,
    MANIFEST,
    POLICY,
    POLICY_SHA,
    README,
    SEAL,
    SIGNOFF,
    PackProblem,
    PackSummary,
    check_pack,
    manifest_bytes,
    manifest_seal,
    policy_sha_text,
    sha256_hex,
)
from console.policies.pack_zip import dos_stamp, zip_bytes
from console.policies.services import SIGNED, signed_body
from console.policies.signed_exports import export_text

ACTION = "policy.evidence_pack"  # the audit action of a download


@dataclass(frozen=True)
class EvidencePack:
    content: bytes  # the ZIP
    filename: str
    manifest_sha256: str  # of manifest.json as the ZIP holds it
    summary: PackSummary  # what its own check found

    @property
    def sha256(self) -> str:
        return sha256_hex(self.content)

    def audit_details(self) -> dict:
        """What the download's audit event records: enough to recognise this very file."""
        return {"manifest_sha256": self.manifest_sha256, "pack_sha256": self.sha256,
                "bytes": len(self.content), "digest": self.summary.digest}  # fmt: skip


def build_pack(version: PolicyVersion, now: dt.datetime | None = None) -> EvidencePack:
    """The pack of a version that was signed off (approved, superseded or retired);
    PolicyError for any other, or one whose body or audit trail does not verify."""
    if version.state not in SIGNED:
        state = version.get_state_display().lower()
        raise PolicyError(f"v{version.number} was never approved (it is {state}): only a "
                          "signed-off version has an evidence pack.")  # fmt: skip
    body = signed_body(version)  # refused when the body no longer hashes to the signature
    now = now or timezone.now()
    files = [
        (POLICY, canonical_json(body)),
        (POLICY_SHA, policy_sha_text(version.digest)),
        (SIGNOFF, json_file(signoff_record(version))),
        *_analysis_files(version),
        *_benchmark_files(body),
        *_export_files(version),
        (AUDIT, json_file(audit_record(version))),
    ]
    files.insert(0, (README, readme_text(version, [name for name, _ in files]).encode()))
    manifest = _manifest(version, files, now)
    written = manifest_bytes(manifest)
    stamp = dos_stamp(now.astimezone(dt.UTC).timetuple()[:6])
    content = zip_bytes([*files, (MANIFEST, written)], stamp)
    try:
        summary = check_pack(content)
    except PackProblem as exc:  # e.g. an audit trail cut or rewritten in the database
        raise PolicyError(f"The evidence pack of v{version.number} would not verify: {exc}. "
                          "Run manage.py verify_audit.") from None  # fmt: skip
    return EvidencePack(content, f"{_stem(version)}-evidence.zip", sha256_hex(written), summary)


def _stem(version: PolicyVersion) -> str:
    """The downloads' file name start, as the exports name theirs."""
    slug = "".join(c if c.isalnum() else "-" for c in version.policy.name.lower())
    return f"{slug}-v{version.number}"


def _manifest(version: PolicyVersion, files: Iterable[tuple[str, bytes]], now) -> dict:
    manifest = {
        "format": FORMAT,
        "policy": version.policy.name,
        "policy_id": version.policy_id,
        "version": version.number,
        "version_id": version.pk,
        "state": version.state,
        "digest": version.digest,
        "analysis_id": version.analysis_id,
        "constrained_analysis_id": version.constrained_analysis_id,
        "created_at": now.isoformat(),
        "files": [{"name": n, "size": len(d), "sha256": sha256_hex(d)} for n, d in files],
    }
    manifest[SEAL] = manifest_seal(manifest)
    return manifest


def signoff_record(version: PolicyVersion) -> dict:
    """Who signed what when (in the installation's zone, with its offset), and every
    review step before it."""
    signoff = version.signoff
    reviews = version.reviews.select_related("actor")
    return {
        "policy": version.policy.name,
        "version": version.number,
        "version_id": version.pk,
        "state": version.state,
        "approver": signoff.approver_name,
        "at": timezone.localtime(signoff.at).isoformat(),
        "time_zone": settings.TIME_ZONE,
        "comment": signoff.comment,
        "digest": signoff.digest,
        "reviews": [
            {
                "at": timezone.localtime(r.at).isoformat(),
                "action": r.action,
                "actor": r.actor.get_username() if r.actor else None,
                "comment": r.comment,
            }
            for r in reviews
        ],
    }


def _analysis_files(version: PolicyVersion) -> list[tuple[str, bytes]]:
    """The report (as the analysis page downloads it) of the analysis the version links,
    the one its evidence names, and its re-run with the policy's lifetime and scope."""
    evidence = version.body.get("evidence") or {}
    wanted = [version.analysis_id, evidence.get("analysis_id"), version.constrained_analysis_id]
    ids = list(dict.fromkeys(pk for pk in wanted if pk is not None))
    found = Analysis.objects.filter(pk__in=ids).exclude(report=None).in_bulk()
    return [(f"analyses/{pk}.json", json_file(found[pk].report)) for pk in ids if pk in found]


def _benchmark_files(body: dict) -> list[tuple[str, bytes]]:
    """Each cited benchmark run: its tags, the numbers read from it, and its file."""
    cited = [run.get("id") for run in (body.get("evidence") or {}).get("benchmark_runs", [])]
    runs = BenchRun.objects.filter(pk__in=[pk for pk in cited if pk is not None]).order_by("pk")
    return [(f"benchmarks/{run.pk}.json", json_file(_run_record(run))) for run in runs]


def _run_record(run: BenchRun) -> dict:
    return {
        "id": run.pk, "file": run.name, "tool": run.tool, "model": run.model_name,
        "tier": run.tier_label, "context_tokens": run.context_tokens,
        "concurrency": run.concurrency, "request_rate": run.request_rate, "warm": run.warm,
        "versions": run.versions, "numa_binding": run.numa_binding,
        "numbers": run.numbers, "raw": run.raw,
    }  # fmt: skip


def _export_files(version: PolicyVersion) -> list[tuple[str, bytes]]:
    """Every export the version page offers (exports.KINDS), each LMCache file apart."""
    out = []
    for kind, (_, name, _label) in exports.KINDS.items():
        if name != "lmcache":
            out.append((f"exports/{kind}", export_text(version, name).encode()))
            continue
        for filename, routes in exports.lmcache_files(version.body):
            text = export_text(version, name, route=routes[0])
            out.append((f"exports/{filename}", text.encode()))
    return out


def audit_record(version: PolicyVersion) -> dict:
    """The policy's events with their content, every other event from the first of
    them up to the head as links only, and the head as it stands."""
    policy = version.policy
    version_ids = sorted(policy.versions.values_list("pk", flat=True))
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    ours = Q(object_type="Policy", object_id=str(policy.pk)) | Q(
        object_type="PolicyVersion", object_id__in=[str(pk) for pk in version_ids]
    )
    first = AuditEvent.objects.filter(ours).order_by("pk").values_list("pk", flat=True).first()
    if head is None or first is None:
        raise PolicyError("The audit trail holds no event of this policy.")
    drafts = Q(action="policy.delete_draft", details__policy=policy.name)
    mine = set(AuditEvent.objects.filter(ours | drafts, pk__gte=first).values_list("pk", flat=True))
    rows = AuditEvent.objects.filter(pk__gte=first, pk__lte=head.last_id).order_by("pk")
    events = [
        event_of_row(row) if row.pk in mine else {"pk": row.pk, "prev_hash": row.prev_hash,
                                               "hash": row.hash}
        for row in rows.values_list(*EVENT_FIELDS, named=True).iterator()
    ]  # fmt: skip
    return {
        "policy": policy.name,
        "policy_id": policy.pk,
        "version_ids": version_ids,
        "events": events,
        "head": {
            "events": head.events,
            "last_id": head.last_id,
            "last_hash": head.last_hash,
            "at": head.at.isoformat(),
        },
    }


def readme_text(version: PolicyVersion, names: list[str]) -> str:
    listing = "\n".join(f"  {name}" for name in [README, MANIFEST, *names])
    return f"""kvscope evidence pack ({FORMAT}): policy "{version.policy.name}" v{version.number}
signed SHA-256 {version.digest}

Files
{listing}

policy.json is the policy exactly as signed: canonical JSON (sorted keys, no spaces,
UTF-8), whose SHA-256 the approver signed (policy.sha256, signoff.json). analyses/ holds
the reports the policy rests on (the analysis and its re-run with the policy's lifetime
and scope), benchmarks/ each benchmark run it cites, exports/ every engine configuration
made from it. audit.json holds the policy's audit events with their content and every
other event from the first of them to the head as links (number, previous hash, hash).
manifest.json lists every other file's size and SHA-256 and ends with its own SHA-256.

How to check it
  python manage.py verify_pack THIS.zip
checks, without any database: every file against the manifest (present, size, SHA-256,
nothing added), the manifest's own SHA-256, policy.json against policy.sha256 and the
sign-off, the audit events' hashes and links in order up to the head (the approval of
this digest among them), and every byte of the ZIP itself. It prints a summary, or names
the first problem and exits non-zero. By hand: unzip, then `sha256sum -c policy.sha256`.

The pack checks itself; what anchors it outside: compare the SHA-256 above with the
sign-off page and the digest in the deployed exports' header comments, and the head in
audit.json with the line `manage.py verify_audit` printed, kept outside the database.
"""
