import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0017_analysis_label"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="DriftCheck",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("uploaded_by_name", models.CharField(max_length=150)),
                ("at", models.DateTimeField(auto_now_add=True)),
                ("file_name", models.CharField(max_length=255)),
                ("format", models.CharField(max_length=30)),
                ("route", models.CharField(blank=True, max_length=200)),
                ("deployed", models.JSONField()),
                ("compliant", models.BooleanField()),
                ("differences", models.JSONField(default=list)),
                ("notes", models.JSONField(default=list)),
                ("sha256", models.CharField(max_length=64)),
                (
                    "uploaded_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="drift_checks",
                        to="console.policyversion",
                    ),
                ),
            ],
            options={
                "ordering": ["-at", "-pk"],
            },
        ),
    ]
