"""Retention policies: the audit trail, a hash chain that cannot be cut or changed quietly,
and what was signed stays signed."""

from __future__ import annotations

import copy
import io
import itertools
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.urls import reverse

from console.management.commands.flush import guards_off
from console.models import (
    AuditEvent,
    AuditHead,
    Policy,
    PolicyVersion,
    VersionState,
)
from console.policies import audit, chain
from console.policies.body import digest
from console.policies.models import AppendOnlyError
from console.policies.services import (
    PolicyError,
    policy_create,
    policy_retire,
    version_approve,
)
from console.policies.signed_exports import export_text
from tests.console.factories import (
    PASSWORD,
    approved_version,
    make_user,
    submitted_version,
)
from tests.console.waiting import settled, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
# the events of the `analysis` fixture's upload, before any policy's (#17: every action on
# data is recorded): the upload, its ingest, its first analysis, its raw file deleted
FIXTURE_ACTIONS = ["upload.create", "ingest.done", "analysis.done", "raw.delete"]
N = len(FIXTURE_ACTIONS)
# a policy drafted from the analysis re-runs it with its own lifetime and scope, asked for
# and ended (#17); the drafts after it with the same lifetime and scope reuse that re-run
RERUN = ["analysis.create", "analysis.done"]


# --- audit ---------------------------------------------------------------------------------
def test_every_change_is_in_an_intact_hash_chain(analysis, analyst, approver):
    version = submitted_version(analysis, analyst)
    version_approve(version=version, user=approver, password=PASSWORD, comment="ok")
    wait_for(settled)  # (a real worker ends the re-runs meanwhile: their events interleave)
    actions = list(AuditEvent.objects.values_list("action", flat=True))
    assert actions[:N] == FIXTURE_ACTIONS
    ours = actions[N:]
    assert [a for a in ours if a.startswith("policy.")] == [
        "policy.create", "policy.edit", "policy.submit", "policy.approve"]  # fmt: skip
    # the edit (a complete body: another lifetime) re-runs it again
    assert sorted(a for a in ours if not a.startswith("policy.")) == sorted(RERUN * 2)
    events = list(AuditEvent.objects.order_by("pk"))
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(events))
    result = audit.verify()
    assert result.ok and result.events == len(events)
    call_command("verify_audit")


def test_a_tampered_row_is_detected(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    events = list(AuditEvent.objects.order_by("pk"))
    with pytest.raises(AppendOnlyError):
        events[0].save()
    with pytest.raises(AppendOnlyError):
        events[0].delete()
    # someone with raw database access edits the details (triggers off, as an owner could)
    _raw_tamper(events[0].pk)
    result = audit.verify()
    assert not result.ok and result.broken_at == events[0].pk
    assert "content does not match its hash" in result.reason
    with pytest.raises(CommandError, match=f"broken at event {events[0].pk}"):
        call_command("verify_audit")


def _raw_tamper(pk: int) -> None:
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER kvscope_audit_append_only")
            cursor.execute(f"UPDATE {table} SET details = %s WHERE id = %s",
                           [json.dumps({"policy": "forged"}), pk])  # fmt: skip
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER kvscope_audit_append_only")
        else:
            cursor.execute("DROP TRIGGER kvscope_audit_no_update")
            cursor.execute(f"UPDATE {table} SET details = %s WHERE id = %s",
                           [json.dumps({"policy": "forged"}), pk])  # fmt: skip
            cursor.execute(
                "CREATE TRIGGER kvscope_audit_no_update BEFORE UPDATE ON console_auditevent "
                "BEGIN SELECT RAISE(ABORT, 'audit events are append-only (UPDATE refused)'); END"
            )


def test_the_database_refuses_to_update_or_delete_audit_rows(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    event = AuditEvent.objects.get(action="policy.create")
    table = AuditEvent._meta.db_table
    statements = [f"UPDATE {table} SET action = 'x' WHERE id = %s"]
    if connection.vendor == "postgresql":  # the app's database user cannot delete either
        statements.append(f"DELETE FROM {table} WHERE id = %s")
    for sql in statements:
        with (
            pytest.raises(DatabaseError, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql, [event.pk])
    assert AuditEvent.objects.get(pk=event.pk).action == "policy.create"


# --- the audit trail cannot be cut quietly -------------------------------------------------
def _as_owner(sql: str, params: list | None = None) -> None:
    """Raw SQL with kvscope's triggers off inside one transaction — what a table owner on
    PostgreSQL (or anyone holding the SQLite file) can do."""
    with transaction.atomic(), guards_off(connection), connection.cursor() as cursor:
        cursor.execute(sql, params)


def _refused(sql: str, params: list | None = None) -> None:
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, params)


def test_the_database_refuses_to_cut_the_audit_trail_or_move_its_head(analysis, analyst):
    for name in ("p1", "p2", "p3"):
        policy_create(name=name, user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    events = AuditEvent.objects.count()
    assert events == N + 3 + len(RERUN)  # (after the fixture's; p1's re-run)
    trail, head = AuditEvent._meta.db_table, AuditHead._meta.db_table
    statements = [
        f"DELETE FROM {trail}",
        f"DELETE FROM {trail} WHERE id = (SELECT max(id) FROM {trail})",  # the newest
        f"DELETE FROM {head}",
        f"UPDATE {head} SET events = events - 1",
        f"UPDATE {head} SET events = events + 1, last_id = last_id + 1",
    ]
    if connection.vendor == "postgresql":
        statements += [
            f"TRUNCATE {trail}",
            f"TRUNCATE {trail} CASCADE",
            f"TRUNCATE {head}",
            "TRUNCATE console_policy CASCADE",  # would cascade to versions and sign-offs
            "TRUNCATE console_signoff",
        ]
    for sql in statements:
        _refused(sql)
    result = audit.verify()
    assert result.ok and result.events == events == result.head_events
    assert result.head_hash == AuditEvent.objects.latest("pk").hash


def test_a_cut_tail_is_detected_named_and_nothing_is_recorded_on_top(analysis, analyst):
    for name in ("p1", "p2", "p3", "p4"):
        policy_create(name=name, user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    events = list(AuditEvent.objects.order_by("pk"))
    assert len(events) == N + 4 + len(RERUN)  # (after the fixture's; p1's re-run)
    kept = len(events) - 2  # the newest two cut
    _as_owner(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id > %s", [events[kept - 1].pk])
    result = audit.verify()  # those left still verify as a chain: the head shows the cut
    assert not result.ok and result.events == kept and result.broken_at is None
    assert result.reason == (
        f"the newest 2 events are missing after #{events[kept - 1].pk}: the head records "
        f"{len(events)} events ending at #{events[-1].pk}"
    )
    with pytest.raises(CommandError, match=f"broken after {kept} events: the newest 2 events"):
        call_command("verify_audit", stdout=io.StringIO())
    with pytest.raises(PolicyError, match="does not end where its head says"):
        policy_create(name="p5", user=analyst, analysis=analysis)
    assert AuditEvent.objects.count() == kept
    assert not Policy.objects.filter(name="p5").exists()


def test_a_removed_or_reordered_event_in_the_middle_is_named(analysis, analyst):
    """Behind the guards, as an owner could: one event removed from the middle of the
    chain, then (on a fresh chain of the same events) two neighbours swapped. Either way
    the event after the gap, or the first of the swapped pair, is named."""
    for name in ("p1", "p2", "p3", "p4"):
        policy_create(name=name, user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    events = list(AuditEvent.objects.order_by("pk"))
    table = AuditEvent._meta.db_table
    gone, after = events[-3], events[-2]
    _as_owner(f"DELETE FROM {table} WHERE id = %s", [gone.pk])
    result = audit.verify()
    assert not result.ok and result.broken_at == after.pk
    assert "previous-hash does not match the event before it" in result.reason
    with pytest.raises(CommandError, match=f"broken at event {after.pk} "):
        call_command("verify_audit", stdout=io.StringIO())
    # put it back, then swap the contents of the last two rows (their numbers exchanged)
    columns = ["at", "actor_id", "actor_name", "action", "object_type", "object_id",
               "details", "prev_hash", "hash"]  # fmt: skip
    rows = {e.pk: e for e in events}
    first, second = events[-2].pk, events[-1].pk
    with transaction.atomic(), guards_off(connection), connection.cursor() as cursor:
        names = ", ".join(["id", *columns])
        cursor.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * 10)})",
                       [gone.pk, *_values(gone, columns)])  # fmt: skip
    assert audit.verify().ok  # the chain is whole again
    with transaction.atomic(), guards_off(connection), connection.cursor() as cursor:
        sets = ", ".join(f"{c} = %s" for c in columns[:-1])  # the hash: unique, set apart
        for pk, other in ((first, second), (second, first)):
            cursor.execute(f"UPDATE {table} SET {sets}, hash = %s WHERE id = %s",
                           [*_values(rows[other], columns[:-1]), f"swap-{pk}", pk])  # fmt: skip
        for pk, other in ((first, second), (second, first)):
            cursor.execute(f"UPDATE {table} SET hash = %s WHERE id = %s",
                           [rows[other].hash, pk])  # fmt: skip
    result = audit.verify()
    assert not result.ok and result.broken_at == first
    assert "previous-hash does not match the event before it" in result.reason


def _values(event: AuditEvent, columns: list[str]) -> list:
    """An event's stored values for `columns`, as raw SQL takes them."""
    out = []
    for column in columns:
        value = getattr(event, column)
        out.append(json.dumps(value) if column == "details" else value)
    return out


def test_a_trail_emptied_behind_the_guards_is_not_intact(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    last = AuditEvent.objects.latest("pk")
    table = AuditEvent._meta.db_table
    _as_owner(f"TRUNCATE {table}" if connection.vendor == "postgresql" else f"DELETE FROM {table}")
    result = audit.verify()
    assert not result.ok and result.events == 0
    recorded = N + 2 + len(RERUN)  # the fixture's events, the two policies', p1's re-run
    assert result.reason == (
        f"the newest {recorded} events are missing (all of them): the head records "
        f"{recorded} events ending at #{last.pk}"
    )
    with pytest.raises(CommandError, match=f"the newest {recorded} events are missing"):
        call_command("verify_audit", stdout=io.StringIO())


def test_verify_audit_prints_the_head_to_keep_elsewhere(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    last = AuditEvent.objects.latest("pk")
    out = io.StringIO()
    call_command("verify_audit", stdout=out)
    recorded = N + 2 + len(RERUN)  # the fixture's events, the two policies', p1's re-run
    assert out.getvalue().splitlines() == [
        f"audit head: {recorded} events, last #{last.pk} sha256 {last.hash}",
        f"audit chain intact: {recorded} events",
    ]


def test_flush_empties_the_trail_and_its_guards_come_back(analysis, analyst):
    policy_create(name="p1", user=analyst, analysis=analysis)
    call_command("flush", interactive=False, verbosity=0)
    assert not AuditEvent.objects.exists() and not AuditHead.objects.exists()
    assert not PolicyVersion.objects.exists()
    again = make_user("ana-after-flush", "analyst")  # the flush removed the users too
    policy_create(name="after the flush", user=again)
    assert audit.verify() == audit.ChainCheck(
        True, 1, head_events=1, head_id=AuditEvent.objects.get().pk,
        head_hash=AuditEvent.objects.get().hash)  # fmt: skip
    _refused(f"DELETE FROM {AuditEvent._meta.db_table}")
    if connection.vendor == "postgresql":
        _refused(f"TRUNCATE {AuditEvent._meta.db_table}")


# --- what was signed stays signed ----------------------------------------------------------
def _forged(version: PolicyVersion, gib: float = 4096) -> dict:
    body = copy.deepcopy(version.body)
    body["tiers"]["cpu_ram"]["size_gib"] = gib
    return body


def test_the_database_refuses_to_change_a_signed_version(analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    forged = _forged(version)
    table = PolicyVersion._meta.db_table
    for sql, params in [
        (f"UPDATE {table} SET body = %s WHERE id = %s", [json.dumps(forged), version.pk]),
        (f"UPDATE {table} SET digest = %s WHERE id = %s", [digest(forged), version.pk]),
        (f"UPDATE {table} SET state = 'draft' WHERE id = %s", [version.pk]),
        (f"UPDATE {table} SET number = 9 WHERE id = %s", [version.pk]),
        (f"DELETE FROM {table} WHERE id = %s", [version.pk]),
        (
            "UPDATE console_signoff SET digest = %s WHERE version_id = %s",
            [digest(forged), version.pk],
        ),
        ("DELETE FROM console_signoff WHERE version_id = %s", [version.pk]),
    ]:
        _refused(sql, params)
    stored = PolicyVersion.objects.get(pk=version.pk)
    assert stored.body["tiers"]["cpu_ram"]["size_gib"] == 8.0
    assert stored.digest == stored.signoff.digest == digest(stored.body)
    # what must still work: deleting the people (their names stay) and retiring
    type(analyst).objects.filter(pk__in=[analyst.pk, approver.pk]).delete()
    stored = PolicyVersion.objects.get(pk=version.pk)
    assert stored.author_id is None and stored.signoff.approver_id is None
    assert stored.signoff.approver_name == "appr"
    approver2 = make_user("appr2", "approver")
    policy_retire(policy=stored.policy, user=approver2, password=PASSWORD, comment="gone")
    assert PolicyVersion.objects.get(pk=version.pk).state == VersionState.RETIRED


def test_exports_and_the_sign_off_page_refuse_a_body_changed_after_approval(
    client, analysis, analyst, approver
):
    version = approved_version(analysis, analyst, approver)
    signed = version.digest
    forged = _forged(version)  # 8 -> 4096 GiB, written behind the guards
    _as_owner(f"UPDATE {PolicyVersion._meta.db_table} SET body = %s WHERE id = %s",
              [json.dumps(forged), version.pk])  # fmt: skip
    version = PolicyVersion.objects.get(pk=version.pk)
    assert version.body["tiers"]["cpu_ram"]["size_gib"] == 4096 and version.digest == signed
    message = f"it hashes to {digest(forged)}, but {signed} was signed"
    for name in ("lmcache", "vllm", "helm"):
        with pytest.raises(PolicyError, match=message):
            export_text(version, name)
    client.force_login(analyst)
    events = AuditEvent.objects.count()
    for kind in ("lmcache.yaml", "vllm-serve.sh", "helm-values.yaml"):
        response = client.get(reverse("policy_export", args=[version.pk, kind]))
        assert response.status_code == 302  # back to the page, nothing served
        assert response["Location"] == reverse("policy_version", args=[version.pk])
    assert AuditEvent.objects.count() == events  # and no export recorded
    page = client.get(reverse("policy_version", args=[version.pk])).content.decode()
    assert message in page and reverse("policy_export", args=[version.pk, "vllm-serve.sh"]) \
        not in page  # fmt: skip
    signoff = client.get(reverse("policy_signoff", args=[version.pk]))
    assert signoff.status_code == 409
    text = signoff.content.decode()
    assert message in text and "<strong>Approved</strong> by" not in text


def test_the_migration_anchors_a_chain_written_before_the_head_existed(analysis, analyst):
    from django.db.migrations.executor import MigrationExecutor

    policy_create(name="p1", user=analyst, analysis=analysis)
    policy_create(name="p2", user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    last = AuditEvent.objects.latest("pk")
    try:
        # back to before 0013: no head table, no new guards
        MigrationExecutor(connection).migrate([("console", "0012_job_heartbeat")])
        assert "console_audithead" not in connection.introspection.table_names()
    finally:  # forward to every latest migration (later ones included)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    head = AuditHead.objects.get()
    recorded = N + 2 + len(RERUN)  # the fixture's events, the two policies', p1's re-run
    assert (head.events, head.last_id, head.last_hash) == (recorded, last.pk, last.hash)
    assert audit.verify().ok
    _refused(f"DELETE FROM {AuditHead._meta.db_table}")  # guarded again


def test_pages_say_so_when_the_trail_is_cut(client, analysis, analyst, approver):
    version = approved_version(analysis, analyst, approver)
    wait_for(settled)  # its re-runs ended: the newest event is the last one there will be
    newest = AuditEvent.objects.latest("pk")
    previous = AuditEvent.objects.filter(pk__lt=newest.pk).latest("pk")
    _as_owner(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", [newest.pk])
    client.force_login(analyst)
    trail = client.get(reverse("audit_log")).content.decode()
    assert (f"<strong>The chain is broken:</strong> the newest 1 event is missing after "
            f"#{previous.pk}") in trail  # fmt: skip
    response = client.post(reverse("policy_new"), {"name": "after the cut"})
    assert response.status_code == 200  # the form again, the reason above it, not a 500
    page = response.content.decode()
    assert re.search(r'<div class="error-box" role="alert"><p>The audit trail does not end '
                     r"where its head says", page)  # fmt: skip
    assert not Policy.objects.filter(name="after the cut").exists()
    # an export must be recorded: with no way to record it, nothing is served
    left = AuditEvent.objects.count()
    response = client.get(reverse("policy_export", args=[version.pk, "vllm-serve.sh"]))
    assert response.status_code == 302
    assert response["Location"] == reverse("policy_version", args=[version.pk])
    assert AuditEvent.objects.count() == left


def test_the_audit_page_hashes_only_new_events_yet_reports_a_changed_old_one(
    client, analysis, analyst, monkeypatch
):
    for name in ("p1", "p2", "p3"):
        policy_create(name=name, user=analyst, analysis=analysis)
    wait_for(settled)  # p1's re-run ended
    hashed = []
    event_hash = chain.event_hash

    def counted(*args):
        hashed.append(args)
        return event_hash(*args)

    monkeypatch.setattr(chain, "event_hash", counted)  # what the walk hashes with
    client.force_login(analyst)

    def page() -> str:
        hashed.clear()
        return client.get(reverse("audit_log")).content.decode()

    # the fixture's events, the three policies', p1's re-run and the sign-in (force_login)
    events = N + 3 + len(RERUN) + 1
    assert f"Hash chain intact: {events} events verified." in page() and len(hashed) == events
    assert f"Hash chain intact: {events} events verified." in page() and hashed == []  # none new
    policy_create(name="p4", user=analyst, analysis=analysis)
    assert f"Hash chain intact: {events + 1} events verified." in page()
    assert len(hashed) == 1  # the new one
    oldest = AuditEvent.objects.order_by("pk").first()
    _raw_tamper(oldest.pk)  # the head does not move: the rows themselves show the change
    trail = page()
    assert f"<strong>The chain is broken at event {oldest.pk}:</strong> its content does " \
        "not match its hash" in trail  # fmt: skip
    assert page().count("The chain is broken at event") == 1  # still, on every view
