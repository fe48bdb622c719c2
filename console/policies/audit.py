"""The audit trail: append an event to the hash chain; verify the chain."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson
from django.db import connection, transaction
from django.utils import timezone

from console.policies.models import AuditEvent

GENESIS = "0" * 64
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


def record(*, actor, action: str, obj, details: dict | None = None) -> AuditEvent:
    """Append one event. Runs inside the caller's transaction, so the event exists exactly
    when the change it describes does."""
    details = orjson.loads(orjson.dumps(details or {}))  # JSON-normal, as it will be read back
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # one appender at a time: no forked chain
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_KEY])
        last = AuditEvent.objects.order_by("-pk").values_list("hash", flat=True).first()
        prev = last or GENESIS
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
    return event


@dataclass(frozen=True)
class ChainCheck:
    ok: bool
    events: int
    broken_at: int | None = None  # pk of the first event that does not verify
    reason: str = ""


def verify() -> ChainCheck:
    """Recompute every hash in order; report the first break."""
    prev = GENESIS
    count = 0
    for event in AuditEvent.objects.order_by("pk").iterator():
        count += 1
        if event.prev_hash != prev:
            return ChainCheck(
                False,
                count,
                event.pk,
                "its previous-hash does not match the "
                "event before it (an event was removed or reordered)",
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
            )
        prev = event.hash
    return ChainCheck(True, count)
