"""The audit trail: append an event to the hash chain; verify the chain."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import F, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from console.policies.models import AuditEvent, AuditHead, PolicyError

GENESIS = "0" * 64
HEAD_ID = 1  # the head is one row
_LOCK_KEY = 0x6B7673636F7065  # "kvscope": serializes appends on PostgreSQL


def _event_hash(
    prev_hash: str,
    at: str,
    actor_name: str,
    action: str,
    object_type: str,
    object_id: str,
    details: dict,
) -> str:
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


class AuditTrailBroken(PolicyError):
    """The chain does not end where its head says: nothing more is recorded on top of it
    (every policy change needs its event, so policy changes stop until it is resolved)."""


def record(*, actor, action: str, obj, details: dict | None = None) -> AuditEvent:
    """Append one event and move the head onto it. Runs inside the caller's transaction,
    so the event exists exactly when the change it describes does."""
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
        object_type, object_id = type(obj).__name__, str(obj.pk)
        event = AuditEvent(
            at=at,
            actor=actor,
            actor_name=actor_name,
            action=action,
            object_type=object_type,
            object_id=object_id,
            details=details,
            prev_hash=prev,
            hash=_event_hash(
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
class VerifiedPrefix:
    """Events up to #last_id, `events` of them, verified hash by hash, the last one's
    hash being `last_hash`. `fingerprint` is the SHA-256 of those rows exactly as the
    database stores them: a row changed behind the app's back (which leaves the head
    where it was) changes it."""

    last_id: int
    events: int
    last_hash: str
    fingerprint: str


# where verify_cached() keeps the prefix it verified last (Django's cache: per process
# with the default local-memory cache, which only means each process verifies once)
VERIFIED_PREFIX_KEY = "kvscope:audit:verified-prefix"
_PREV_MISMATCH = (
    "its previous-hash does not match the event before it (an event was removed or reordered)"
)
_CONTENT_MISMATCH = "its content does not match its hash (the event was changed)"
# a row as the database stores it (the fingerprint), and as Django reads it (the hash)
_STORED_COLUMNS = ("pk", "prev_hash", "hash", "stored_at", "actor_name", "action",
                   "object_type", "object_id", "stored_details")  # fmt: skip
_HASHED_COLUMNS = ("pk", "prev_hash", "hash", "at", "actor_name", "action", "object_type",
                   "object_id", "details")  # fmt: skip


@dataclass
class _Scan:
    """Every stored row read once, as the database stores it (no hashing per event)."""

    events: int
    last_id: int
    fingerprint: str
    trusted_holds: bool  # the trusted prefix's rows fingerprint as they did


def _scan(trusted: VerifiedPrefix | None) -> _Scan:
    """Fingerprint every row in order, noting the fingerprint where `trusted` ends."""
    fingerprint, events, last_id = hashlib.sha256(), 0, 0
    at_trusted_end: tuple | None = None  # (last id, events, fingerprint) at its end
    rows = (
        AuditEvent.objects.order_by("pk")
        .annotate(stored_at=Cast("at", TextField()), stored_details=Cast("details", TextField()))
        .values_list(*_STORED_COLUMNS)
    )
    for row in rows.iterator():
        if trusted is not None and at_trusted_end is None and row[0] > trusted.last_id:
            at_trusted_end = (last_id, events, fingerprint.hexdigest())
        fingerprint.update(orjson.dumps(row))
        events, last_id = events + 1, row[0]
    if at_trusted_end is None:
        at_trusted_end = (last_id, events, fingerprint.hexdigest())
    expected = None if trusted is None else (trusted.last_id, trusted.events, trusted.fingerprint)
    return _Scan(events, last_id, fingerprint.hexdigest(), at_trusted_end == expected)


@dataclass
class _Walk:
    """The chain followed event by event, hashing each: from the genesis or from the end
    of a prefix verified before."""

    prev: str = GENESIS
    count: int = 0
    last_pk: int = 0
    broken: tuple[int, str] | None = None  # (pk, why) of the first bad event

    def run(self, upto: int | None = None) -> _Walk:
        """Follow the events after last_pk (up to #upto) until the first bad one."""
        events = AuditEvent.objects.filter(pk__gt=self.last_pk).order_by("pk")
        if upto is not None:
            events = events.filter(pk__lte=upto)
        for event in events.values_list(*_HASHED_COLUMNS, named=True).iterator():
            self.count += 1
            self.broken = self._fault(event)
            if self.broken is not None:
                break
            self.prev, self.last_pk = event.hash, event.pk
        return self

    def _fault(self, event) -> tuple[int, str] | None:
        """Why this event does not continue the chain (None when it does)."""
        if event.prev_hash != self.prev:
            return event.pk, _PREV_MISMATCH
        expected = _event_hash(
            self.prev,
            event.at.isoformat(),
            event.actor_name,
            event.action,
            event.object_type,
            event.object_id,
            event.details,
        )
        return (event.pk, _CONTENT_MISMATCH) if event.hash != expected else None


def _conclude(walk: _Walk, head: AuditHead | None) -> ChainCheck:
    """The walk's first bad event; else whether the chain ends where its head says (a
    removed tail leaves a chain that verifies)."""
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
    return _conclude(_Walk().run(), head)


def verify_cached() -> ChainCheck:
    """verify()'s answer without hashing again what an earlier call verified. Every row
    is still read and fingerprinted as stored, so a changed, removed or reordered old
    event makes it hash the whole chain again (and report the event, as verify() does);
    else only the events after the verified prefix are hashed. The head is read and
    compared every time."""
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    trusted = cache.get(VERIFIED_PREFIX_KEY)
    scan = _scan(trusted if isinstance(trusted, VerifiedPrefix) else None)
    walk = _Walk()
    if scan.trusted_holds:
        walk = _Walk(trusted.last_hash, trusted.events, trusted.last_id)
    walk.run(upto=scan.last_id)
    if walk.broken is None and walk.count == scan.events and scan.events:
        verified = VerifiedPrefix(scan.last_id, scan.events, walk.prev, scan.fingerprint)
        cache.set(VERIFIED_PREFIX_KEY, verified, timeout=None)
    return _conclude(walk, head)
