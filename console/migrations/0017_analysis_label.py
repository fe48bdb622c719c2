from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0016_upload_log_format"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysis",
            name="label",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
