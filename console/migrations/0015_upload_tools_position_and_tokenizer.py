from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0014_one_analyst_permission"),
    ]

    operations = [
        migrations.AddField(
            model_name="upload",
            name="tools_position",
            field=models.CharField(default="auto", max_length=20),
        ),
        migrations.AddField(
            model_name="upload",
            name="tokenizer_path",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="upload",
            name="tokenizer_name",
            field=models.CharField(blank=True, max_length=300),
        ),
    ]
