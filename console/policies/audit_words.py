"""An audit event in words for the audit page: a label per action and its details as
labelled values — sizes in binary units, version numbers as "v3", ids of objects as links
while the object exists — never a Python dict or list as text. A key or action nobody
named here is still shown, its name turned into words."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from console.audit_actions import ACTIONS
from console.policies.deployed import FORMATS
from console.policies.models import VersionState
from console.templatetags.kvscope import bytes_h, num

# action -> what the page calls it (console.audit_actions, the vocabulary audit.record
# keeps to); an action missing there (an older kvscope's) reads as its name in words
# ("benchmark_run.delete" -> "Benchmark run: delete")
ACTION_LABELS: Mapping[str, str] = {
    action: known.label[:1].upper() + known.label[1:] for action, known in ACTIONS.items()
}

# detail key -> its label; others read as their name in words ("old_name" -> "Old name")
DETAIL_LABELS = {
    "to": "To state",
    "from": "From version",
    "number": "Version",
    "kind": "File",
    "raw_names": "Raw files",
    "bytes": "Size",
    "digest": "Digest (SHA-256)",
    "version": "Checked against",  # a drift check's version (its id, linked)
    "kinds": "Kinds of difference",
    "sha256": "File SHA-256",
    "manifest_sha256": "Manifest SHA-256",
    "pack_sha256": "Pack SHA-256",
}
# detail keys holding the id of an object (or a list of them): linked while it exists
ID_KEYS = {
    "analysis": "Analysis",
    "analyses": "Analysis",
    "upload": "Upload",
    "uploads": "Upload",
    "policy_version": "PolicyVersion",
    "version_id": "PolicyVersion",
    "version": "PolicyVersion",  # a drift check's: the version it was checked against
    "benchmark_run": "BenchRun",
    "benchmark_runs": "BenchRun",
    "run": "BenchRun",
}
SIZE_KEYS = {"bytes", "size_bytes", "raw_bytes"}
VERSION_NUMBER_KEYS = {"number", "from"}
OBJECT_NAMES = {"PolicyVersion": "Policy version", "BenchRun": "Benchmark run",
                "DriftCheck": "Drift check"}  # fmt: skip

# (object type, object id) -> the object's page, "" when it is gone (or has none)
UrlFor = Callable[[str, str], str]


@dataclass(frozen=True)
class Piece:
    """A value shown as text, a link when `url` is set."""

    text: str
    url: str = ""


@dataclass(frozen=True)
class Detail:
    label: str
    pieces: tuple[Piece, ...]


def words(name: str) -> str:
    """An identifier read aloud: "benchmark_run" -> "Benchmark run"."""
    text = name.replace("_", " ").replace("-", " ").strip()
    return text[:1].upper() + text[1:] if text else "(unnamed)"


def action_label(action: str, labels: Mapping[str, str] = ACTION_LABELS) -> str:
    """The page's name for an action: the mapping's, else "Kind: verb" in words."""
    if action in labels:
        return labels[action]
    kind, _, verb = action.partition(".")
    return f"{words(kind)}: {words(verb).lower()}" if verb else words(kind)


def object_name(object_type: str) -> str:
    """ "PolicyVersion" -> "Policy version"."""
    return OBJECT_NAMES.get(object_type, object_type)


def value_text(value: object) -> str:
    """Any JSON value as text people read: yes/no, a dash for none, numbers with
    separators, a mapping as "Label: value; …", a list as "a, b"."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return num(value)
    if isinstance(value, Mapping):
        if not value:
            return "none"
        # by key: PostgreSQL's jsonb keeps no order of its own, so the page reads alike
        # on either database
        return "; ".join(f"{words(str(k))}: {value_text(value[k])}" for k in sorted(value))
    if isinstance(value, list | tuple):
        return ", ".join(value_text(v) for v in value) if value else "none"
    text = str(value)
    return text if text else "(empty)"


def _pieces(key: str, value: object, url_for: UrlFor) -> tuple[Piece, ...]:
    """One detail's value: ids of objects linked, the rest as text."""
    object_type = ID_KEYS.get(key)
    if object_type is not None:
        ids = value if isinstance(value, list) else [value]
        if ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return tuple(Piece(f"#{i}", url_for(object_type, str(i))) for i in ids)
    if key in SIZE_KEYS and isinstance(value, int | float) and not isinstance(value, bool):
        return (Piece(bytes_h(value)),)
    if key in VERSION_NUMBER_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return (Piece(f"v{value}"),)
    if key == "format" and value in FORMATS:  # a drift check's: the page's name for it
        return (Piece(FORMATS[value]),)
    if key == "to" and value in VersionState.values:
        return (Piece(VersionState(value).label),)
    return (Piece(value_text(value)),)


def details_of(details: Mapping, url_for: UrlFor) -> list[Detail]:
    """An event's details, one labelled value per key, in the order the database returns
    them (as recorded on SQLite; jsonb's own on PostgreSQL)."""
    if not isinstance(details, Mapping):  # (a row written by hand: still readable)
        return [Detail("Details", (Piece(value_text(details)),))]
    return [
        Detail(DETAIL_LABELS.get(str(key), words(str(key))), _pieces(str(key), value, url_for))
        for key, value in details.items()
    ]


@dataclass(frozen=True)
class AuditRow:
    """One event as the page's table shows it."""

    pk: int
    at: object  # the moment (the page writes it with its zone)
    actor: str
    action: str
    label: str
    object_text: str
    object_url: str
    details: list[Detail]
    hash: str


def row_of(event, url_for: UrlFor) -> AuditRow:
    """An AuditEvent in words, its objects linked while they exist."""
    return AuditRow(
        pk=event.pk,
        at=event.at,
        actor=event.actor_name,
        action=event.action,
        label=action_label(event.action),
        object_text=f"{object_name(event.object_type)} #{event.object_id}",
        object_url=url_for(event.object_type, event.object_id),
        details=details_of(event.details, url_for),
        hash=event.hash,
    )
