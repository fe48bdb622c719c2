"""Audit rows are append-only in the database too, and the roles get the policy
permissions.

PostgreSQL: a trigger refuses UPDATE and DELETE on audit rows for every role that is not
a superuser-owned maintenance path (TRUNCATE, which test teardown uses, stays possible for
the table owner). SQLite: UPDATE is refused by a trigger; DELETE stays possible because
Django's test flush deletes rows — the model refuses it, and the hash chain shows it.
"""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION kvscope_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only (% refused)', TG_OP;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER kvscope_audit_append_only
    BEFORE UPDATE OR DELETE ON console_auditevent
    FOR EACH ROW EXECUTE FUNCTION kvscope_audit_append_only();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS kvscope_audit_append_only ON console_auditevent;
DROP FUNCTION IF EXISTS kvscope_audit_append_only();
"""
SQLITE_FORWARD = """
CREATE TRIGGER kvscope_audit_no_update BEFORE UPDATE ON console_auditevent
BEGIN SELECT RAISE(ABORT, 'audit events are append-only (UPDATE refused)'); END;
"""
SQLITE_BACKWARD = "DROP TRIGGER IF EXISTS kvscope_audit_no_update;"


def guard(apps, schema_editor):
    sql = {"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql, params=None)  # no placeholders: % is plpgsql text


def unguard(apps, schema_editor):
    sql = {"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}.get(
        schema_editor.connection.vendor
    )
    if sql:
        schema_editor.execute(sql, params=None)  # no placeholders: % is plpgsql text


def roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    from console.roles import ensure_roles

    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [("console", "0003_policies")]

    operations = [
        migrations.RunPython(guard, unguard),
        migrations.RunPython(roles, migrations.RunPython.noop),
    ]
