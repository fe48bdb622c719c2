"""Uploads of request logs and the analyses run on their block streams."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from analysis.params import DEFAULTS
from console.uploads.fleet_words import fleet_label


class JobStatus(models.TextChoices):
    PENDING = "pending", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    PARTIAL = "partial", "Done, some lines skipped"
    FAILED = "failed", "Failed"


FINISHED = (JobStatus.DONE, JobStatus.PARTIAL, JobStatus.FAILED)


def stall_cutoff() -> dt.datetime:
    """A running job with no sign of life since this moment has lost its worker."""
    return timezone.now() - dt.timedelta(seconds=settings.KVSCOPE_STALL_SECONDS)


def stalled_q() -> Q:
    """Running jobs whose worker stopped beating (rows from before heartbeats: by start)."""
    cutoff = stall_cutoff()
    return Q(status=JobStatus.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


class Job(models.Model):
    """Progress of a background step, written by the task and polled by the page."""

    status = models.CharField(max_length=10, choices=JobStatus.choices, default="pending")
    stage = models.CharField(max_length=20, blank=True)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True)
    processed_by = models.CharField(max_length=200, blank=True)  # host:pid of the worker
    # the running task's last sign of life: a running job whose beat is older than
    # KVSCOPE_STALL_SECONDS has lost its worker (stalled: Retry, or taken over on redelivery)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # the task could not be handed to the broker: queued again when a worker starts, or by
    # the Retry button
    dispatch_failed = models.BooleanField(default=False)

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def stalled(self) -> bool:
        """Running, but its worker gave no sign of life for KVSCOPE_STALL_SECONDS (killed,
        or its machine gone): the page offers Retry instead of waiting for the broker."""
        last = self.heartbeat_at or self.started_at
        return self.status == JobStatus.RUNNING and last is not None and last < stall_cutoff()

    @property
    def status_label(self) -> str:
        """The status as badges say it: a stalled job is not shown as running."""
        return "Stalled" if self.stalled else self.get_status_display()

    @property
    def badge(self) -> str:
        """The badge's CSS class (a stalled job looks like the failure it is)."""
        return "stalled" if self.stalled else self.status


class Upload(Job):
    name = models.CharField(max_length=200)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # what was asked for at upload time
    format = models.CharField(max_length=10, default="auto")
    block_sizes = models.JSONField(default=list, blank=True)  # [] = the format's default
    previews = models.BooleanField(default=False)
    # pre-hashed traces: a partial last block is cached (Mooncake) or an uncached tail
    # (vLLM; kvscope's own replay exports)
    trace_partial_cached = models.BooleanField(default=True)
    # chat bodies: where tool definitions go in the prompt (analysis.readers.TOOLS_POSITIONS)
    tools_position = models.CharField(max_length=20, default="auto")
    # the model's own Hugging Face tokenizer.json, stored beside the raw files under a
    # generated name and deleted with them (""; none given, or deleted: cl100k_base counts)
    tokenizer_path = models.CharField(max_length=500, blank=True)
    tokenizer_name = models.CharField(max_length=300, blank=True)  # as uploaded, for display
    # >1: the ingest is split into this many line-aligned parts, one Celery task each
    ingest_parts = models.PositiveSmallIntegerField(default=1)
    keep_raw_until = models.DateField(null=True, blank=True)
    # raw files under generated names in MEDIA_ROOT/raw; emptied once deleted
    raw_paths = models.JSONField(default=list, blank=True)
    raw_names = models.JSONField(default=list, blank=True)  # names as uploaded, for display
    raw_size = models.BigIntegerField(default=0)
    # ingest counters for the progress view
    requests_done = models.BigIntegerField(default=0)
    skipped_so_far = models.BigIntegerField(default=0)
    # what the ingest produced
    source_format = models.CharField(max_length=10, blank=True)  # the stream kind
    # what the reader read: "chat", "csv", "mooncake" or "bailian" (the streams' header;
    # "" for an upload ingested before it was kept: its source_format says as much)
    log_format = models.CharField(max_length=10, blank=True)
    streams = models.JSONField(default=dict, blank=True)  # {"256": "/artifacts/.../b256"}
    requests = models.BigIntegerField(default=0)
    skipped_lines = models.BigIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)
    notes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("analyze_upload", "Can upload logs and run analyses")]

    def __str__(self) -> str:
        return self.name

    @property
    def available_block_sizes(self) -> list[int]:
        return sorted(int(b) for b in self.streams)


class Analysis(Job):
    """One parameter set run on one of an upload's block streams."""

    upload = models.ForeignKey(Upload, on_delete=models.CASCADE, related_name="analyses")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    block_tokens = models.PositiveIntegerField()
    # the user's own name for it ("" until renamed): shown before its summary
    label = models.CharField(max_length=200, blank=True)
    params = models.JSONField(default=dict)  # the form's values (console.uploads.analysis_forms)
    report = models.JSONField(null=True, blank=True)
    # the Plotly figures drawn from the report, as [name, figure] pairs in drawing order,
    # built once when it is written: a page view reads them, it never recomputes anything
    figures = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name_plural = "analyses"

    def __str__(self) -> str:
        return f"{self.upload} #{self.pk}"

    @property
    def title(self) -> str:
        """What lists call it: the user's label when given, else its parameters' summary."""
        return self.label or self.summary

    @property
    def summary(self) -> str:
        """A short label of the parameters, for lists and comparisons."""
        p = self.params
        parts = [p.get("model", "?"), p.get("scope", "global"), f"B={self.block_tokens}"]
        if p.get("kv_dtype"):
            parts.insert(1, p["kv_dtype"])
        if p.get("lifetime"):
            parts.append(f"lifetime {p['lifetime']:g}s")
        if p.get("tp", 1) != 1:
            parts.append(f"TP{p['tp']}")
        # the sizing choices a re-analysis most often changes, when not the defaults: two
        # analyses of one log that differ only there were named alike
        for name, words in (("target", "target"), ("headroom", "headroom")):
            if p.get(name) is not None and p[name] != getattr(DEFAULTS, name):
                parts.append(f"{words} {p[name] * 100:g} %")
        if p.get("warmup"):
            parts.append(f"warm-up {p['warmup'] * 100:g} %")
        if p.get("host_ram_gib") is not None:  # (0 GiB is a host budget too)
            parts.append(f"host {p['host_ram_gib']:,.10g} GiB")
        if fleet := fleet_label(p):  # a fleet (metrics.md section 8)
            parts.append(fleet)
        if p.get("gpu_cache_gib"):
            parts.append(f"GPU cache {p['gpu_cache_gib']:g} GiB")
        if (p.get("store_threshold") or 1) != 1:
            parts.append(f"store at use {p['store_threshold']}")
        return " · ".join(str(x) for x in parts)


# Policies live in their own module; importing them here registers them with the app.
from console.benchmarks.models import BenchRun, ReplayExport, Tier  # noqa: E402
from console.policies.models import (  # noqa: E402
    AuditEvent,
    AuditHead,
    DriftCheck,
    Policy,
    PolicyVersion,
    Review,
    SignOff,
    VersionState,
)
from console.signin import SignInFailure  # noqa: E402

__all__ = [
    "Analysis",
    "AuditEvent",
    "AuditHead",
    "BenchRun",
    "DriftCheck",
    "Job",
    "JobStatus",
    "Policy",
    "PolicyVersion",
    "ReplayExport",
    "Review",
    "SignInFailure",
    "SignOff",
    "Tier",
    "Upload",
    "VersionState",
]
