"""The audit chain's head anchor, and database guards for what an approval signs.

- console_audithead: one row (id 1) with the event count and the last event's id and
  hash, moved forward by audit.record() in the same transaction as each append. Existing
  chains get their head here. A chain that ends before its head has lost events.
- The head may only move forward by exactly one event that exists and links to the
  previous head; it cannot be deleted.
- Signed policy versions (approved, superseded, retired): body, digest, number, policy
  and evidence are fixed; the state may only go approved -> superseded | retired; the row
  cannot be deleted. Sign-offs cannot be changed or deleted. (author/approver/constrained
  re-run may only become NULL: deleting a user or an analysis sets them NULL.)
- PostgreSQL: TRUNCATE of the audit trail, its head and the policy tables is refused.
  SQLite has no TRUNCATE; DELETE of audit rows and of the head is refused there now too.

Django's test flush (TRUNCATE on PostgreSQL, DELETE on SQLite) goes through kvscope's own
`flush` command (console/management/commands/flush.py), which switches these triggers off
inside its one transaction: on PostgreSQL that needs table ownership, the same right that
could drop the triggers, so it opens no new way around them.
"""

from django.db import migrations, models

GENESIS = "0" * 64
SIGNED = "('approved', 'superseded', 'retired')"
NO_TRUNCATE = (
    "console_auditevent",
    "console_audithead",
    "console_signoff",
    "console_review",
    "console_policyversion",
    "console_policy",
)

PG_FORWARD = (
    """
CREATE OR REPLACE FUNCTION kvscope_refuse_truncate() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only (TRUNCATE refused)', TG_TABLE_NAME;
END
$$ LANGUAGE plpgsql;
"""
    + "".join(
        f"CREATE TRIGGER kvscope_no_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION kvscope_refuse_truncate();\n"
        for table in NO_TRUNCATE
    )
    + """
CREATE OR REPLACE FUNCTION kvscope_audit_head_forward() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'the audit head is append-only (DELETE refused)';
    END IF;
    IF TG_OP = 'INSERT' THEN
        -- the first append creates it: one row, matching the whole chain
        IF NEW.id <> 1
           OR NEW.events <> (SELECT count(*) FROM console_auditevent)
           OR NOT EXISTS (SELECT 1 FROM console_auditevent e
                          WHERE e.id = NEW.last_id AND e.hash = NEW.last_hash) THEN
            RAISE EXCEPTION 'the audit head is append-only (INSERT of a head that does not match the chain refused)';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.id <> OLD.id OR NEW.events <> OLD.events + 1 OR NEW.last_id <= OLD.last_id
       OR NOT EXISTS (SELECT 1 FROM console_auditevent e WHERE e.id = NEW.last_id
                      AND e.hash = NEW.last_hash AND e.prev_hash = OLD.last_hash) THEN
        RAISE EXCEPTION 'the audit head is append-only: it moves forward one event at a time (UPDATE refused)';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER kvscope_audit_head_forward
    BEFORE INSERT OR UPDATE OR DELETE ON console_audithead
    FOR EACH ROW EXECUTE FUNCTION kvscope_audit_head_forward();

CREATE OR REPLACE FUNCTION kvscope_signed_version() RETURNS trigger AS $$
BEGIN
    IF OLD.state NOT IN """
    + SIGNED
    + """ THEN
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'signed policy versions are append-only (DELETE refused)';
    END IF;
    IF NEW.body IS DISTINCT FROM OLD.body OR NEW.digest IS DISTINCT FROM OLD.digest
       OR NEW.policy_id IS DISTINCT FROM OLD.policy_id OR NEW.number IS DISTINCT FROM OLD.number
       OR NEW.created_at IS DISTINCT FROM OLD.created_at
       OR NEW.analysis_id IS DISTINCT FROM OLD.analysis_id
       OR (NEW.author_id IS DISTINCT FROM OLD.author_id AND NEW.author_id IS NOT NULL)
       OR (NEW.constrained_analysis_id IS DISTINCT FROM OLD.constrained_analysis_id
           AND NEW.constrained_analysis_id IS NOT NULL)
       OR NOT (NEW.state = OLD.state
               OR (OLD.state = 'approved' AND NEW.state IN ('superseded', 'retired'))) THEN
        RAISE EXCEPTION 'signed policy versions are append-only: what was signed cannot change (UPDATE refused)';
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER kvscope_signed_version
    BEFORE UPDATE OR DELETE ON console_policyversion
    FOR EACH ROW EXECUTE FUNCTION kvscope_signed_version();

CREATE OR REPLACE FUNCTION kvscope_signoff_fixed() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.approver_id IS NULL
       AND (NEW.id, NEW.version_id, NEW.approver_name, NEW.at, NEW.comment, NEW.digest)
           IS NOT DISTINCT FROM
           (OLD.id, OLD.version_id, OLD.approver_name, OLD.at, OLD.comment, OLD.digest) THEN
        RETURN NEW;  -- the approver's account was deleted; approver_name keeps who it was
    END IF;
    RAISE EXCEPTION 'sign-offs are append-only (% refused)', TG_OP;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER kvscope_signoff_fixed
    BEFORE UPDATE OR DELETE ON console_signoff
    FOR EACH ROW EXECUTE FUNCTION kvscope_signoff_fixed();
"""
)
PG_BACKWARD = (
    "".join(f"DROP TRIGGER IF EXISTS kvscope_no_truncate ON {table};\n" for table in NO_TRUNCATE)
    + """
DROP FUNCTION IF EXISTS kvscope_refuse_truncate();
DROP TRIGGER IF EXISTS kvscope_audit_head_forward ON console_audithead;
DROP FUNCTION IF EXISTS kvscope_audit_head_forward();
DROP TRIGGER IF EXISTS kvscope_signed_version ON console_policyversion;
DROP FUNCTION IF EXISTS kvscope_signed_version();
DROP TRIGGER IF EXISTS kvscope_signoff_fixed ON console_signoff;
DROP FUNCTION IF EXISTS kvscope_signoff_fixed();
"""
)

# SQLite: one statement per trigger (executed one by one)
SQLITE_FORWARD = [
    """CREATE TRIGGER kvscope_audit_no_delete BEFORE DELETE ON console_auditevent
BEGIN SELECT RAISE(ABORT, 'audit events are append-only (DELETE refused)'); END""",
    """CREATE TRIGGER kvscope_audit_head_no_delete BEFORE DELETE ON console_audithead
BEGIN SELECT RAISE(ABORT, 'the audit head is append-only (DELETE refused)'); END""",
    """CREATE TRIGGER kvscope_audit_head_insert BEFORE INSERT ON console_audithead
WHEN NEW.id <> 1
  OR NEW.events <> (SELECT count(*) FROM console_auditevent)
  OR NOT EXISTS (SELECT 1 FROM console_auditevent e
                 WHERE e.id = NEW.last_id AND e.hash = NEW.last_hash)
BEGIN SELECT RAISE(ABORT, 'the audit head is append-only (INSERT of a head that does not match the chain refused)'); END""",
    """CREATE TRIGGER kvscope_audit_head_forward BEFORE UPDATE ON console_audithead
WHEN NEW.id <> OLD.id OR NEW.events <> OLD.events + 1 OR NEW.last_id <= OLD.last_id
  OR NOT EXISTS (SELECT 1 FROM console_auditevent e WHERE e.id = NEW.last_id
                 AND e.hash = NEW.last_hash AND e.prev_hash = OLD.last_hash)
BEGIN SELECT RAISE(ABORT, 'the audit head is append-only: it moves forward one event at a time (UPDATE refused)'); END""",
    f"""CREATE TRIGGER kvscope_signed_version_no_update BEFORE UPDATE ON console_policyversion
WHEN OLD.state IN {SIGNED} AND (
     NEW.body IS NOT OLD.body OR NEW.digest IS NOT OLD.digest
  OR NEW.policy_id IS NOT OLD.policy_id OR NEW.number IS NOT OLD.number
  OR NEW.created_at IS NOT OLD.created_at OR NEW.analysis_id IS NOT OLD.analysis_id
  OR (NEW.author_id IS NOT OLD.author_id AND NEW.author_id IS NOT NULL)
  OR (NEW.constrained_analysis_id IS NOT OLD.constrained_analysis_id
      AND NEW.constrained_analysis_id IS NOT NULL)
  OR NOT (NEW.state = OLD.state
          OR (OLD.state = 'approved' AND NEW.state IN ('superseded', 'retired'))))
BEGIN SELECT RAISE(ABORT, 'signed policy versions are append-only: what was signed cannot change (UPDATE refused)'); END""",
    f"""CREATE TRIGGER kvscope_signed_version_no_delete BEFORE DELETE ON console_policyversion
WHEN OLD.state IN {SIGNED}
BEGIN SELECT RAISE(ABORT, 'signed policy versions are append-only (DELETE refused)'); END""",
    """CREATE TRIGGER kvscope_signoff_no_update BEFORE UPDATE ON console_signoff
WHEN NOT (NEW.approver_id IS NULL AND NEW.id IS OLD.id AND NEW.version_id IS OLD.version_id
          AND NEW.approver_name IS OLD.approver_name AND NEW.at IS OLD.at
          AND NEW.comment IS OLD.comment AND NEW.digest IS OLD.digest)
BEGIN SELECT RAISE(ABORT, 'sign-offs are append-only (UPDATE refused)'); END""",
    """CREATE TRIGGER kvscope_signoff_no_delete BEFORE DELETE ON console_signoff
BEGIN SELECT RAISE(ABORT, 'sign-offs are append-only (DELETE refused)'); END""",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        "kvscope_audit_no_delete",
        "kvscope_audit_head_no_delete",
        "kvscope_audit_head_insert",
        "kvscope_audit_head_forward",
        "kvscope_signed_version_no_update",
        "kvscope_signed_version_no_delete",
        "kvscope_signoff_no_update",
        "kvscope_signoff_no_delete",
    )
]


def anchor_existing_chain(apps, schema_editor):
    """A chain written before the anchor existed gets its head now (as it stands)."""
    event_model = apps.get_model("console", "AuditEvent")
    head_model = apps.get_model("console", "AuditHead")
    last = event_model.objects.order_by("-pk").first()
    if last is not None:
        head_model.objects.create(
            id=1,
            events=event_model.objects.count(),
            last_id=last.pk,
            last_hash=last.hash,
            at=last.at,
        )


def guard(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)  # no placeholders: % is plpgsql text
    elif vendor == "sqlite":
        for sql in SQLITE_FORWARD:
            schema_editor.execute(sql, params=None)


def unguard(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)
    elif vendor == "sqlite":
        for sql in SQLITE_BACKWARD:
            schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("console", "0012_job_heartbeat")]

    operations = [
        migrations.CreateModel(
            name="AuditHead",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("events", models.BigIntegerField()),
                ("last_id", models.BigIntegerField()),
                ("last_hash", models.CharField(max_length=64)),
                ("at", models.DateTimeField()),
            ],
        ),
        migrations.RunPython(anchor_existing_chain, migrations.RunPython.noop),
        migrations.RunPython(guard, unguard),
    ]
