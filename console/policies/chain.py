"""The audit hash chain itself, without the database: how one event is hashed, and how a
sequence of events is checked link by link — the same check whether the events come from
the database (console.policies.audit), an exported file (manage.py verify_audit --file) or
an evidence pack (manage.py verify_pack).

An event is a mapping with "pk", "prev_hash" and "hash", and either its whole content
(CONTENT_FIELDS, "at" as ISO 8601 text) or none of it: a link whose content is withheld
(an export filtered to some events still carries every other event's hashes, so a removed
or reordered event anywhere in the chain shows). A link's own hash cannot be recomputed;
its place in the chain still is checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import orjson

GENESIS = "0" * 64
CONTENT_FIELDS = ("at", "actor_name", "action", "object_type", "object_id", "details")
PREV_MISMATCH = (
    "its previous-hash does not match the event before it (an event was removed or reordered)"
)
CONTENT_MISMATCH = "its content does not match its hash (the event was changed)"
ORDER_MISMATCH = "its number is not above the event before it (the events were reordered)"
PARTIAL_CONTENT = "it carries part of an event's content (a field was removed)"


def event_hash(
    prev_hash: str,
    at: str,
    actor_name: str,
    action: str,
    object_type: str,
    object_id: str,
    details: dict,
) -> str:
    """SHA-256 of the event's content and the previous event's hash (sorted-key JSON)."""
    payload = orjson.dumps(
        {
            "prev": prev_hash,
            "at": at,
            "actor": actor_name,
            "action": action,
            "object_type": object_type,
            "object_id": object_id,
            "details": details,
        },
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(payload).hexdigest()


def has_content(event: Mapping) -> bool:
    """Whether the event carries its content (else it is a link only)."""
    return any(field in event for field in CONTENT_FIELDS)


def event_fault(event: Mapping, prev: str, last_pk: int = 0) -> str | None:
    """Why this event does not continue a chain whose last event was #last_pk with hash
    `prev` (None when it does)."""
    if int(event["pk"]) <= last_pk:
        return ORDER_MISMATCH
    if event["prev_hash"] != prev:
        return PREV_MISMATCH
    if not has_content(event):
        return None
    if not all(field in event for field in CONTENT_FIELDS):
        return PARTIAL_CONTENT
    expected = event_hash(prev, *(event[field] for field in CONTENT_FIELDS))
    return CONTENT_MISMATCH if event["hash"] != expected else None


@dataclass
class LinkCheck:
    """A sequence followed from `prev`: how many events, where it ends, the first fault."""

    prev: str = GENESIS
    count: int = 0
    last_pk: int = 0
    broken: tuple[int, str] | None = None  # (pk, why) of the first bad event

    def step(self, event: Mapping) -> bool:
        """Follow one event; False (and `broken` set) when it does not continue the chain."""
        self.count += 1
        why = event_fault(event, self.prev, self.last_pk)
        if why is not None:
            self.broken = (int(event["pk"]), why)
            return False
        self.prev, self.last_pk = event["hash"], int(event["pk"])
        return True

    def run(self, events: Iterable[Mapping]) -> LinkCheck:
        """Follow the events in the order given until the first bad one."""
        for event in events:
            if not self.step(event):
                break
        return self
