"""What an evidence pack is, and its check without the database (manage.py verify_pack).

A pack (console.policies.evidence_pack builds it) is a ZIP of: policy.json (the canonical
body bytes the approver signed) and policy.sha256 (their SHA-256, as `sha256sum -c`
reads it); signoff.json; the analyses and benchmark runs it rests on; the engine exports;
audit.json (the policy's audit events with their content and every other event from the
first of them to the head as links, console.policies.chain's event shape); README.txt;
and manifest.json, which lists every other file's size and SHA-256 and seals itself with
the SHA-256 of its own canonical JSON. The check names the first problem it finds; the
last one, a byte-for-byte rewrite of the archive (console.policies.pack_zip), catches a
byte changed anywhere else in the ZIP.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import struct
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from console.downloads import json_file
from console.policies.body import canonical_json
from console.policies.chain import CONTENT_FIELDS, LinkCheck, has_content
from console.policies.pack_zip import dos_stamp, first_difference, region_of, zip_bytes

FORMAT = "kvscope-evidence/1"
MANIFEST = "manifest.json"
POLICY = "policy.json"
POLICY_SHA = "policy.sha256"
SIGNOFF = "signoff.json"
AUDIT = "audit.json"
README = "README.txt"
SEAL = "sha256"  # the manifest's own field: the SHA-256 of the rest of it, canonical
APPROVE = "policy.approve"  # the audit action of a sign-off (console.policies.services)
EVENT_FIELDS = ("pk", "prev_hash", "hash", *CONTENT_FIELDS)  # an event with its content


# what zipfile raises on a damaged archive (a flag, a method, a size or an offset changed)
_UNREADABLE = (ValueError, NotImplementedError, RuntimeError, EOFError, OSError, OverflowError,
               zlib.error, lzma.LZMAError, struct.error, zipfile.LargeZipFile)  # fmt: skip


class PackProblem(ValueError):
    """What is wrong with a pack, naming the file and the reason."""


@dataclass(frozen=True)
class PackSummary:
    policy: str
    version: int
    digest: str
    approver: str
    approved_at: str
    files: int  # the files the manifest lists and the pack holds, the manifest too
    events: int  # audit events whose content was hashed again
    links: int  # events followed by their links only
    head_id: int
    head_hash: str

    def __str__(self) -> str:
        return (
            f"evidence pack verified: policy {self.policy!r} v{self.version}, approved by "
            f"{self.approver} at {self.approved_at}, sha256 {self.digest}; {self.files} files, "
            f"{self.events} audit events verified (and {self.links} links), ending at the "
            f"head #{self.head_id} sha256 {self.head_hash}"
        )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_seal(manifest: Mapping) -> str:
    """The SHA-256 of the manifest's canonical JSON without its seal."""
    return sha256_hex(canonical_json({k: v for k, v in manifest.items() if k != SEAL}))


def manifest_bytes(manifest: Mapping) -> bytes:
    """manifest.json as a pack holds it (and must hold it, byte for byte)."""
    return json_file(manifest)


def policy_sha_text(digest: str) -> bytes:
    """policy.sha256: the line `sha256sum -c policy.sha256` checks."""
    return f"{digest}  {POLICY}\n".encode()


def check_pack(raw: bytes) -> PackSummary:
    """Every check, in order; PackProblem at the first that fails."""
    members, stamp = _members(raw)
    manifest = _manifest(members)
    _files(members, manifest)
    digest = _policy(members, manifest)
    signoff = _signoff(members, manifest, digest)
    chain = _audit(members, manifest, digest)
    _layout(raw, members, stamp)
    return PackSummary(
        policy=manifest["policy"], version=manifest["version"], digest=digest,
        approver=signoff["approver"], approved_at=signoff["at"], files=len(members),
        events=chain[0], links=chain[1], head_id=chain[2], head_hash=chain[3],
    )  # fmt: skip


def _members(raw: bytes) -> tuple[dict[str, bytes], tuple[int, int]]:
    """The files in archive order, and the date they carry (as ZIP headers hold it)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, *_UNREADABLE) as exc:
        raise PackProblem(f"the file is not a readable ZIP archive ({exc})") from None
    members: dict[str, bytes] = {}
    infos = archive.infolist()
    for info in infos:
        if info.filename in members:
            raise PackProblem(f"{info.filename}: the ZIP holds two files of this name")
        try:
            members[info.filename] = archive.read(info)
        except zipfile.BadZipFile as exc:
            if "CRC" in str(exc):
                raise PackProblem(f"{info.filename}: its bytes were changed (they do not "
                                  "match the CRC-32 the ZIP records for it)") from None  # fmt: skip
            raise PackProblem(f"{info.filename}: the ZIP's entry is damaged ({exc})") from None
        except _UNREADABLE as exc:
            raise PackProblem(f"{info.filename}: cannot be read from the ZIP ({exc})") from None
    if not infos:
        raise PackProblem("the ZIP archive holds no files")
    return members, dos_stamp(infos[0].date_time)


def _json(members: Mapping[str, bytes], name: str) -> dict:
    if name not in members:
        raise PackProblem(f"{name}: missing from the pack")
    try:
        value = orjson.loads(members[name])
    except orjson.JSONDecodeError as exc:
        raise PackProblem(f"{name}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise PackProblem(f"{name}: not a JSON object")
    return value


def _field(obj: Mapping, key: str, where: str, kind: type | tuple[type, ...] = str):
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise PackProblem(f"{where}: {key!r} is missing or not what a pack holds there")
    return value


def _manifest(members: Mapping[str, bytes]) -> dict:
    """manifest.json, once it is exactly as kvscope writes it, of this format, sealed."""
    manifest = _json(members, MANIFEST)
    written = manifest_bytes(manifest)
    if written != members[MANIFEST]:
        at = first_difference(written, members[MANIFEST])
        raise PackProblem(f"{MANIFEST}: changed at byte {at} (it is not the JSON kvscope writes)")
    if manifest.get("format") != FORMAT:
        raise PackProblem(f"{MANIFEST}: its format is {manifest.get('format')!r}, not {FORMAT!r}")
    if manifest.get(SEAL) != manifest_seal(manifest):
        raise PackProblem(f"{MANIFEST}: its content does not match its own SHA-256 "
                          f"({SEAL}): the manifest was changed")  # fmt: skip
    for key, kind in (("policy", str), ("version", int), ("version_id", int), ("digest", str)):
        _field(manifest, key, MANIFEST, kind)
    return manifest


def _files(members: Mapping[str, bytes], manifest: Mapping) -> None:
    """Every file the manifest lists is there with its size and SHA-256, and no other."""
    entries = _field(manifest, "files", MANIFEST, list)
    listed = [_field(entry, "name", f"{MANIFEST} files") for entry in entries]
    for name in listed:
        if name not in members:
            raise PackProblem(f"{name}: listed in the manifest but missing from the pack")
    for name in members:
        if name not in listed and name != MANIFEST:
            raise PackProblem(f"{name}: in the pack but not in the manifest (a file was added)")
    for entry, name in zip(entries, listed, strict=True):
        data, size = members[name], _field(entry, "size", f"{MANIFEST}: {name}", int)
        if len(data) != size:
            raise PackProblem(f"{name}: {len(data)} bytes, but the manifest says {size}")
        actual = sha256_hex(data)
        if actual != _field(entry, "sha256", f"{MANIFEST}: {name}"):
            raise PackProblem(f"{name}: its SHA-256 is {actual}, but the manifest says "
                              f"{entry['sha256']} (the file was changed)")  # fmt: skip


def _policy(members: Mapping[str, bytes], manifest: Mapping) -> str:
    """The signed digest: policy.json's SHA-256, as policy.sha256 and the manifest say."""
    body = members.get(POLICY)
    if body is None:
        raise PackProblem(f"{POLICY}: missing from the pack")
    actual = sha256_hex(body)
    stated = members.get(POLICY_SHA, b"").decode("utf-8", "replace").split(" ")[0]
    if stated != actual:
        raise PackProblem(f"{POLICY_SHA}: says {stated!r}, but {POLICY} hashes to {actual}")
    if canonical_json(_json(members, POLICY)) != body:
        raise PackProblem(f"{POLICY}: not in the canonical form (sorted keys, no spaces) "
                          "whose SHA-256 is signed")  # fmt: skip
    if manifest["digest"] != actual:
        raise PackProblem(f"{MANIFEST}: its digest {manifest['digest']} is not the SHA-256 "
                          f"of {POLICY} ({actual})")  # fmt: skip
    return actual


def _signoff(members: Mapping[str, bytes], manifest: Mapping, digest: str) -> dict:
    """signoff.json, once it signs this digest for this version."""
    signoff = _json(members, SIGNOFF)
    if _field(signoff, "digest", SIGNOFF) != digest:
        raise PackProblem(f"{SIGNOFF}: signs {signoff['digest']}, but {POLICY} hashes to {digest}")
    for key in ("policy", "version", "version_id"):
        if signoff.get(key) != manifest[key]:
            raise PackProblem(f"{SIGNOFF}: its {key} is {signoff.get(key)!r}, the "
                              f"manifest's {manifest[key]!r}")  # fmt: skip
    _field(signoff, "approver", SIGNOFF)
    _field(signoff, "at", SIGNOFF)
    return signoff


def _audit(members: Mapping[str, bytes], manifest: Mapping, digest: str) -> tuple:
    """The events walked as a stretch of the chain (console.policies.chain) ending at
    the head recorded: (events hashed again, links followed, head id, head hash)."""
    audit = _json(members, AUDIT)
    events = _field(audit, "events", AUDIT, list)
    head = _field(audit, "head", AUDIT, dict)
    head_id, head_hash = (
        _field(head, "last_id", f"{AUDIT} head", int),
        _field(head, "last_hash", f"{AUDIT} head"),
    )
    for number, event in enumerate(events, 1):
        for key, kind in (("pk", int), ("prev_hash", str), ("hash", str)):
            _field(event, key, f"{AUDIT}: event {number} in order", kind)
    if not events:
        raise PackProblem(f"{AUDIT}: holds no events")
    first = events[0]
    walk = LinkCheck(prev=first["prev_hash"], last_pk=first["pk"] - 1).run(events)
    if walk.broken is not None:
        raise PackProblem(f"{AUDIT}: event #{walk.broken[0]}: {walk.broken[1]}")
    if (walk.last_pk, walk.prev) != (head_id, head_hash):
        raise PackProblem(f"{AUDIT}: the events end at #{walk.last_pk} sha256 {walk.prev}, "
                          f"but the head recorded is #{head_id} sha256 {head_hash}")  # fmt: skip
    content = [event for event in events if has_content(event)]
    _about_the_policy(audit, content, manifest, digest)
    return len(content), len(events) - len(content), head_id, head_hash


def _about_the_policy(audit: Mapping, content: list, manifest: Mapping, digest: str) -> None:
    """The events with content are the policy's, and one of them signs off this digest."""
    policy_id = str(_field(audit, "policy_id", AUDIT, int))
    versions = {str(pk) for pk in _field(audit, "version_ids", AUDIT, list)}
    name = manifest["policy"]
    for event in content:
        ours = (event["object_type"], event["object_id"]) == ("Policy", policy_id) or (
            event["object_type"] == "PolicyVersion"
            and (event["object_id"] in versions or _deleted_draft_of(event, name))
        )
        if not ours:
            raise PackProblem(f"{AUDIT}: event #{event['pk']} is about {event['object_type']} "
                              f"{event['object_id']}, not this policy")  # fmt: skip
    version_id = str(manifest["version_id"])
    if version_id not in versions:
        raise PackProblem(f"{AUDIT}: version {version_id} is not among the policy's versions")
    if not any(_signs(event, version_id, digest) for event in content):
        raise PackProblem(f"{AUDIT}: no {APPROVE} event of version {version_id} signing {digest}")


def _deleted_draft_of(event: Mapping, name: str) -> bool:
    details = event["details"]
    return (
        event["action"] == "policy.delete_draft"
        and isinstance(details, Mapping)
        and (details.get("policy") == name)
    )


def _signs(event: Mapping, version_id: str, digest: str) -> bool:
    details = event["details"]
    return (
        (event["action"], event["object_type"], event["object_id"])
        == (APPROVE, "PolicyVersion", version_id)
        and isinstance(details, Mapping)
        and details.get("digest") == digest
    )


def _layout(raw: bytes, members: Mapping[str, bytes], stamp: tuple[int, int]) -> None:
    """The archive is exactly what its files make (pack_zip): nothing changed, added or
    hidden in the ZIP's own headers, directory or between its files."""
    files = list(members.items())
    again = zip_bytes(files, stamp)
    if again != raw:
        at = first_difference(again, raw)
        raise PackProblem(f"the ZIP's own bytes were changed at byte {at} "
                          f"({region_of(files, at)}), outside its files' content")  # fmt: skip
