from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0015_upload_tools_position_and_tokenizer"),
    ]

    operations = [
        migrations.AddField(
            model_name="upload",
            name="log_format",
            field=models.CharField(blank=True, max_length=10),
        ),
    ]
