"""The audit trail: append an event to the hash chain; verify the chain."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson
from django.db import connection, transaction
from django.db.models import F
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


def verify() -> ChainCheck:
    """Recompute every hash in order and report the first break; then check that the
    chain ends where its head says (a removed tail leaves a chain that verifies)."""
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    anchor = {}
    if head is not None:
        anchor = {"head_events": head.events, "head_id": head.last_id, "head_hash": head.last_hash}
    prev = GENESIS
    count = 0
    last_pk = 0
    for event in AuditEvent.objects.order_by("pk").iterator():
        count += 1
        if event.prev_hash != prev:
            return ChainCheck(
                False,
                count,
                event.pk,
                "its previous-hash does not match the "
                "event before it (an event was removed or reordered)",
                **anchor,
            )
        expected = _event_hash(
            prev,
            event.at.isoformat(),
            event.actor_name,
            event.action,
            event.object_type,
            event.object_id,
            event.details,
        )
        if event.hash != expected:
            return ChainCheck(
                False,
                count,
                event.pk,
                "its content does not match its hash (the event was changed)",
                **anchor,
            )
        prev = event.hash
        last_pk = event.pk
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
