"""Uploads of request logs and the analyses run on them."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Upload(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        PARTIAL = "partial", "Done, some lines skipped"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # what was asked for at upload time
    format = models.CharField(max_length=10, default="auto")
    block_tokens = models.PositiveIntegerField(null=True, blank=True)
    previews = models.BooleanField(default=False)
    keep_raw_until = models.DateField(null=True, blank=True)
    # the raw file, under a generated name in MEDIA_ROOT; emptied once deleted
    raw_path = models.CharField(max_length=500, blank=True)
    raw_size = models.BigIntegerField(default=0)
    original_name = models.CharField(max_length=300, blank=True)
    # ingest progress, written by the task, polled by the page
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    stage = models.CharField(max_length=20, blank=True)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True)
    processed_by = models.CharField(max_length=200, blank=True)
    # what the ingest produced
    source_format = models.CharField(max_length=10, blank=True)
    artifact_path = models.CharField(max_length=500, blank=True)
    requests = models.BigIntegerField(default=0)
    skipped_lines = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.name


class Analysis(models.Model):
    """One parameter set run on an upload's block stream; holds the report JSON."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="analyses")
    created_at = models.DateTimeField(auto_now_add=True)
    params = models.JSONField(default=dict)
    report = models.JSONField(default=dict)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "analyses"

    def __str__(self) -> str:
        return f"{self.upload} / {self.params.get('scope', 'global')}"
