"""manage.py flush (what pytest-django runs after every transactional test) against a
session that writes meanwhile, as a real worker does: PostgreSQL aborts the flush to break
their deadlock, and the flush tries again and empties every table."""

from __future__ import annotations

import io
import re
import threading
import time

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection, connections

from console.models import AuditEvent
from console.policies import audit

pytestmark = pytest.mark.django_db(transaction=True)
POSTGRES = connection.vendor == "postgresql"


def _session() -> psycopg.Connection:
    """A connection of its own to the test database (a worker's, in effect)."""
    s = connection.settings_dict
    return psycopg.connect(dbname=s["NAME"], user=s["USER"], password=s["PASSWORD"] or None,
                           host=s["HOST"] or None, port=s["PORT"] or None)  # fmt: skip


@pytest.mark.skipif(not POSTGRES, reason="two sessions' deadlock: the PostgreSQL run's")
def test_a_flush_that_loses_a_deadlock_tries_again(analyst):
    audit.record(actor=analyst, action="auth.sign_in", obj=analyst, details={})
    # the tables in the order the flush's TRUNCATE locks them (this process's order: the
    # flush runs in it too); it holds the first while it waits for the last
    (truncate,) = [sql for sql in sql_flush(no_style(), connection) if sql.startswith("TRUNCATE")]
    tables = re.findall(r'"([^"]+)"', truncate)
    # before the TRUNCATE the flush switches the audit guards off (an ALTER TABLE on each
    # guarded table): the table it waits for must be past those, in the TRUNCATE itself
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c "
                       "ON c.oid = t.tgrelid WHERE t.tgname LIKE 'kvscope\\_%'")  # fmt: skip
        guarded = {name for (name,) in cursor.fetchall()}
    assert guarded and len(tables) > 10
    first, later = tables[0], [t for t in tables if t not in guarded][-1]
    worker = _session()
    worker.execute(f'LOCK TABLE "{later}" IN ROW EXCLUSIVE MODE')  # a write in progress
    said, failed = io.StringIO(), []

    def flush() -> None:
        try:
            # as pytest-django calls it: ids go on (the data folder a real worker shares
            # across tests holds the earlier uploads' folders, by id)
            call_command("flush", interactive=False, stderr=said, verbosity=0,
                         reset_sequences=False)  # fmt: skip
        except Exception as exc:  # (said by the assertion below)
            failed.append(exc)
        finally:
            connections.close_all()

    flushing = threading.Thread(target=flush)
    flushing.start()
    with _session() as watcher:  # until the flush waits for the worker's table
        for _ in range(300):
            row = watcher.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                [f'"{later}"']).fetchone()  # fmt: skip
            if row[0]:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the flush never waited for the worker's table")
    # the worker now reads the audit trail the flush holds: a deadlock, which PostgreSQL
    # breaks by aborting the session that waited first, the flush
    worker.execute(f'SELECT count(*) FROM "{first}"').fetchone()
    worker.commit()
    worker.close()
    flushing.join(timeout=60)
    assert not flushing.is_alive() and failed == []
    assert "lost a deadlock" in said.getvalue() and "trying again" in said.getvalue()
    assert AuditEvent.objects.count() == 0  # emptied after all
