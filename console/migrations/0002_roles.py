"""The role groups: analyst, approver, auditor (see console/roles.py)."""

from django.db import migrations


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # permissions of this app exist only after post_migrate; create them now
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    from console.roles import ensure_roles

    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
