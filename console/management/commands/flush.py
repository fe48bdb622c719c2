"""manage.py flush, with kvscope's database guards switched off for its one transaction.

The audit trail, its head and signed policy versions are refused TRUNCATE (PostgreSQL) and
DELETE (SQLite) by triggers (migrations 0004 and 0013). Django's flush — what
pytest-django runs after every transactional test — must still empty every table, so this
command replaces Django's: inside one transaction it switches kvscope's own triggers off,
flushes, and switches them on again, so no other session ever sees them off and a failed
flush restores them. On PostgreSQL, ALTER TABLE ... DISABLE TRIGGER needs ownership of the
table: the same right that could drop the triggers outright, so this adds no new way
around them; an application role that does not own the tables cannot flush at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.commands import flush
from django.core.management.sql import emit_post_migrate_signal
from django.db import OperationalError, connections, transaction

# A flush TRUNCATEs every table in one statement; a worker writing meanwhile can hold one
# of them while waiting for another, and PostgreSQL then aborts one side (SQLSTATE 40P01).
# The flush is one transaction, so trying it again is safe.
DEADLOCK_SQLSTATE = "40P01"
FLUSH_ATTEMPTS = 5


def _switches(connection, cursor) -> tuple[list[str], list[str]]:
    """The statements that switch kvscope's triggers off, and those that switch them on."""
    quote = connection.ops.quote_name
    if connection.vendor == "postgresql":
        cursor.execute(
            "SELECT c.relname, t.tgname FROM pg_trigger t "
            "JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND t.tgname LIKE 'kvscope\\_%' "
            "AND pg_table_is_visible(c.oid)"
        )
        triggers = [(quote(table), quote(name)) for table, name in cursor.fetchall()]
        return (
            [f"ALTER TABLE {table} DISABLE TRIGGER {name}" for table, name in triggers],
            [f"ALTER TABLE {table} ENABLE TRIGGER {name}" for table, name in triggers],
        )
    if connection.vendor == "sqlite":
        # no ALTER ... DISABLE in SQLite: drop them and create them again from their own
        # stored definitions
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND name LIKE 'kvscope\\_%' ESCAPE '\\'"
        )
        triggers = cursor.fetchall()
        return [f"DROP TRIGGER {quote(name)}" for name, _ in triggers], [sql for _, sql in triggers]
    return [], []


@contextmanager
def guards_off(connection) -> Iterator[None]:
    """kvscope's triggers off until the end of the block (call inside a transaction)."""
    with connection.cursor() as cursor:
        off, on = _switches(connection, cursor)
        for sql in off:
            cursor.execute(sql)
        yield
        for sql in on:
            cursor.execute(sql)


def _deadlocked(exc: BaseException) -> bool:
    """The flush lost a deadlock: Django's flush wraps the database error in a
    CommandError, which wraps the OperationalError, which wraps psycopg's."""
    while exc is not None:
        if isinstance(exc, OperationalError) and (
            getattr(exc.__cause__, "sqlstate", None) == DEADLOCK_SQLSTATE
        ):
            return True
        exc = exc.__cause__
    return False


class Command(flush.Command):
    help = flush.Command.help + " The audit trail's guards are off only inside the flush."

    def handle(self, **options) -> None:
        database = options["database"]
        connection = connections[database]
        if options["interactive"]:
            confirm = input(
                f"This will IRREVERSIBLY DESTROY all data in the "
                f"{connection.settings_dict['NAME']!r} database, the audit trail included.\n"
                "Type 'yes' to continue, or 'no' to cancel: "
            )
            if confirm != "yes":
                self.stdout.write("Flush cancelled.")
                return
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                with transaction.atomic(using=database), guards_off(connection):
                    # post_migrate runs after the triggers are back (it writes rows;
                    # PostgreSQL refuses ALTER TABLE on a table with pending deferred checks)
                    super().handle(
                        **{**options, "interactive": False, "inhibit_post_migrate": True}
                    )
                break
            except Exception as exc:
                if attempt == FLUSH_ATTEMPTS or not _deadlocked(exc):
                    raise
                self.stderr.write(f"The flush lost a deadlock with another session; trying "
                                  f"again ({attempt + 1} of {FLUSH_ATTEMPTS}).")  # fmt: skip
                time.sleep(0.2 * attempt)
        tables = connection.introspection.django_table_names(only_existing=True)
        if tables and not options.get("inhibit_post_migrate", False):
            emit_post_migrate_signal(options["verbosity"], False, database)
