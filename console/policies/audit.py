"""The audit trail: append an event to the hash chain; verify the chain."""

from __future__ import annotations

import hashlib
import logging
import threading
from dataclasses import dataclass

import orjson
from django.db import connection, transaction
from django.db.models import F, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from console.audit_actions import ACTIONS
from console.policies.chain import GENESIS, LinkCheck, event_hash
from console.policies.models import AuditEvent, AuditHead, PolicyError

log = logging.getLogger(__name__)
HEAD_ID = 1  # the head is one row
_LOCK_KEY = 0x6B7673636F7065  # "kvscope": serializes appends on PostgreSQL


class AuditTrailBroken(PolicyError):
    """The chain does not end where its head says: nothing more is recorded on top of it
    (every policy change needs its event, so policy changes stop until it is resolved)."""


def record(
    *,
    actor,
    action: str,
    obj=None,
    details: dict | None = None,
    object_type: str = "",
    object_id: str | int | None = None,
) -> AuditEvent:
    """Append one event and move the head onto it. Runs inside the caller's transaction,
    so the event exists exactly when the change it describes does. The event names `obj`
    (a model row); an event about no row (a sign-in refused for a username, a page refused)
    names what it is about with `object_type` and `object_id` instead."""
    if action not in ACTIONS:  # the audit page labels every action from that list
        raise ValueError(f"{action!r} is not in console.audit_actions.ACTIONS")
    if obj is not None:
        object_type, object_id = type(obj).__name__, obj.pk
    elif not object_type or object_id is None:
        raise ValueError("an audit event names its object: obj, or object_type and object_id")
    object_id = str(object_id)[: AuditEvent._meta.get_field("object_id").max_length]
    details = orjson.loads(orjson.dumps(details or {}))  # JSON-normal, as it will be read back
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # one appender at a time: no forked chain
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        head = AuditHead.objects.select_for_update().filter(pk=HEAD_ID).first()
        last = AuditEvent.objects.order_by("-pk").values_list("pk", "hash").first()
        expected = (head.last_id, head.last_hash) if head is not None else None
        if last != expected:  # a cut tail, or events without their head
            raise AuditTrailBroken(
                "The audit trail does not end where its head says; nothing can be recorded "
                "until it is resolved (run manage.py verify_audit)."
            )
        prev = head.last_hash if head is not None else GENESIS
        at = timezone.now()
        actor_name = actor.get_username() if actor is not None else "system"
        event = AuditEvent(
            at=at,
            actor=actor,
            actor_name=actor_name,
            action=action,
            object_type=object_type,
            object_id=object_id,
            details=details,
            prev_hash=prev,
            hash=event_hash(
                prev, at.isoformat(), actor_name, action, object_type, object_id, details
            ),
        )
        event.save()
        if head is None:  # the first event ever (or of a flushed test database)
            AuditHead.objects.create(
                pk=HEAD_ID, events=1, last_id=event.pk, last_hash=event.hash, at=at
            )
        else:
            AuditHead.objects.filter(pk=HEAD_ID).update(
                events=F("events") + 1, last_id=event.pk, last_hash=event.hash, at=at
            )
    return event


def record_unless_broken(**event) -> AuditEvent | None:
    """record(event), or None (logged as an error) when the trail is broken: for the events
    of signing in and of refusals, which must not lock everyone out (an administrator
    signs in to see the break) while nothing else can be recorded."""
    try:
        return record(**event)
    except AuditTrailBroken:
        log.error("not recorded, the audit trail is broken: %s", event.get("action"))
        return None


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    events: int
    broken_at: int | None = None  # pk of the first event that does not verify
    reason: str = ""
    # the anchor as stored: what ops should copy to a log outside the database
    head_events: int | None = None
    head_id: int | None = None
    head_hash: str = ""


@dataclass(frozen=True)
class Anchor:
    """The head as a file records it (the database's is an AuditHead row)."""

    events: int
    last_id: int
    last_hash: str


@dataclass(frozen=True)
class VerifiedPrefix:
    """Events up to #last_id, `events` of them, verified hash by hash, the last one's
    hash being `last_hash`. `fingerprint` is the SHA-256 of those rows exactly as the
    database stores them: a row changed behind the app's back (which leaves the head
    where it was) changes it."""

    last_id: int
    events: int
    last_hash: str
    fingerprint: str

    def key(self) -> tuple[int, int, str]:
        """What the rows up to last_id must show again for the prefix to still hold."""
        return (self.last_id, self.events, self.fingerprint)


# the prefix verify_cached() verified last: in this process's memory, never in a cache
# another process could write (it is what the audit page trusts); each process verifies
# the whole chain once
_verified: dict[str, VerifiedPrefix] = {}
_verified_lock = threading.Lock()
# a row as the database stores it (the fingerprint), and as Django reads it (the hash)
_STORED_COLUMNS = ("pk", "prev_hash", "hash", "stored_at", "actor_name", "action",
                   "object_type", "object_id", "stored_details")  # fmt: skip
_HASHED_COLUMNS = ("pk", "prev_hash", "hash", "at", "actor_name", "action", "object_type",
                   "object_id", "details")  # fmt: skip


class _Walk(LinkCheck):
    """The chain followed event by event, hashing each: from the genesis or from the end
    of a prefix verified before."""

    def run(self, upto: int | None = None) -> _Walk:  # type: ignore[override]
        """Follow the events after last_pk (up to #upto) until the first bad one."""
        events = AuditEvent.objects.filter(pk__gt=self.last_pk).order_by("pk")
        if upto is not None:
            events = events.filter(pk__lte=upto)
        for event in events.values_list(*_HASHED_COLUMNS, named=True).iterator():
            if not self.step(event):
                break
        return self

    def step(self, event) -> bool:  # type: ignore[override]
        """Follow one row as Django reads it (its time a datetime)."""
        return super().step(event_of_row(event))


def event_of_row(row) -> dict:
    """A row read as named tuple (its `at` a datetime) as console.policies.chain reads an
    event: its time as the ISO text hashed. The database walk and the evidence pack use it."""
    event = row._asdict()
    event["at"] = row.at.isoformat()
    return event


def conclude(walk: LinkCheck, head: AuditHead | Anchor | None) -> ChainCheck:
    """The walk's first bad event; else whether the chain ends where its head says (a
    removed tail leaves a chain that verifies). The walk may be over the database's rows
    or over an exported file's events, the head its row or the file's copy of it."""
    count, last_pk, prev = walk.count, walk.last_pk, walk.prev
    anchor = {}
    if head is not None:
        anchor = {"head_events": head.events, "head_id": head.last_id, "head_hash": head.last_hash}
    if walk.broken is not None:
        return ChainCheck(False, count, walk.broken[0], walk.broken[1], **anchor)
    if head is None:
        if count:
            return ChainCheck(False, count, None,
                              f"the chain has {count} events but its head anchor is missing "
                              "(the anchor was deleted)")  # fmt: skip
        return ChainCheck(True, 0)
    if (count, last_pk, prev) == (head.events, head.last_id, head.last_hash):
        return ChainCheck(True, count, **anchor)
    if count < head.events:
        missing = head.events - count
        where = f"after #{last_pk}" if count else "(all of them)"
        return ChainCheck(
            False,
            count,
            None,
            f"the newest {missing} event{'s are' if missing != 1 else ' is'} missing "
            f"{where}: the head records {head.events} events ending at #{head.last_id}",
            **anchor,
        )
    return ChainCheck(
        False,
        count,
        None,
        f"the chain ends at #{last_pk} after {count} events, but its head records "
        f"{head.events} events ending at #{head.last_id} (the head or the chain was rewritten)",
        **anchor,
    )


def verify() -> ChainCheck:
    """Recompute every hash in order and report the first break; then check that the
    chain ends where its head says (a removed tail leaves a chain that verifies)."""
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    return conclude(_Walk().run(), head)


def verify_cached() -> ChainCheck:
    """verify()'s answer without hashing again what an earlier call verified. One query
    reads every row both as the database stores it (fingerprinted) and as Django reads it
    (hashed after the verified prefix): when the prefix's rows no longer fingerprint as
    they did (an old event changed, removed or reordered behind the app's back, which
    leaves the head where it was), the whole chain is hashed again in a pass of its own
    and reported as verify() reports it. The head is read and compared every time."""
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    with _verified_lock:
        trusted = _verified.get("prefix")
    walk = _verify_after(trusted)
    if walk is None:  # the prefix no longer holds: trust nothing
        walk = _verify_after(None)
        assert walk is not None  # with nothing trusted, nothing can fail to hold
    return conclude(walk, head)


def _verify_after(trusted: VerifiedPrefix | None) -> _Walk | None:
    """The chain walked from the end of `trusted` (hashing only the events after it),
    fingerprinting every row of the same query; None when the rows up to its end no
    longer fingerprint as they did. A chain that verifies whole becomes the trusted
    prefix of the next call."""
    rows = (
        AuditEvent.objects.order_by("pk")
        .annotate(stored_at=Cast("at", TextField()), stored_details=Cast("details", TextField()))
        .values_list(*_HASHED_COLUMNS, "stored_at", "stored_details", named=True)
    )
    fingerprint, events, last_id = hashlib.sha256(), 0, 0
    walk = _Walk() if trusted is None else _Walk(trusted.last_hash, trusted.events, trusted.last_id)
    for row in rows.iterator():
        if trusted is not None and row.pk > trusted.last_id:
            if (last_id, events, fingerprint.hexdigest()) != trusted.key():
                return None
            trusted = None  # held: hash from here on
        fingerprint.update(orjson.dumps([getattr(row, c) for c in _STORED_COLUMNS]))
        events, last_id = events + 1, row.pk
        if trusted is None and not walk.step(row):
            return walk
    if trusted is not None and (last_id, events, fingerprint.hexdigest()) != trusted.key():
        return None
    if walk.count == events and events:
        verified = VerifiedPrefix(last_id, events, walk.prev, fingerprint.hexdigest())
        with _verified_lock:
            _verified["prefix"] = verified
    return walk
