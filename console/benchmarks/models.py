"""A benchmark run: one result file as uploaded, and what it was run on."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from analysis.benchmarks.results import BenchResult, result_from_json


class Tier(models.TextChoices):
    NONE = "none", "No offload"
    RAM = "ram", "CPU RAM"
    RAM_DISK = "ram_disk", "RAM + disk"


class ReplayExport(models.Model):
    """A replay trace as downloaded from an upload (analysis.replay): what was selected and
    the SHA-256 of the file's bytes, so a benchmark run can name the trace it replayed and
    be predicted for exactly it. Equal selections give equal files: one row each."""

    upload = models.ForeignKey("console.Upload", on_delete=models.CASCADE,
                               related_name="replay_exports")  # fmt: skip
    block_tokens = models.PositiveIntegerField()
    options = models.JSONField(default=dict)  # ReplayOptions as asked for (time range, ...)
    requests = models.PositiveIntegerField()
    sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "console"
        ordering = ["-pk"]
        constraints = [
            models.UniqueConstraint(fields=["upload", "sha256"], name="one_export_per_trace")
        ]

    def __str__(self) -> str:
        return (f"export x{self.pk} of “{self.upload.name}” · {self.block_tokens}-token "
                f"blocks · {self.requests:,} requests · sha256 {self.sha256[:12]}…")  # fmt: skip

    @property
    def file_name(self) -> str:
        return f"kvscope-replay-upload{self.upload_id}-b{self.block_tokens}-x{self.pk}.jsonl"


class BenchRun(models.Model):
    name = models.CharField(max_length=300)  # the file's name as uploaded
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    raw = models.JSONField()  # the result file itself, kept as it came
    tool = models.CharField(max_length=10, default="vllm")  # vllm bench serve or aiperf
    # the numbers read from `raw` on upload, so pages need not read the file again
    numbers = models.JSONField(default=dict)
    model_name = models.CharField(max_length=200)
    # the serving configuration (the matrix's tier): KV tiers, RAM size, KV dtype; weights
    # offload is kept apart (it is not KV offload)
    tier = models.CharField(max_length=10, choices=Tier.choices)
    ram_gib = models.FloatField(null=True, blank=True)
    kv_dtype = models.CharField(max_length=20, blank=True)
    weights_offload = models.BooleanField(default=False)
    context_tokens = models.PositiveIntegerField()
    concurrency = models.PositiveIntegerField()
    request_rate = models.FloatField(null=True, blank=True)  # None: unlimited
    warm = models.BooleanField(default=False)  # the cache was warmed before the run
    versions = models.JSONField(default=dict, blank=True)  # driver, cuda, engine, ...
    topology = models.TextField(blank=True)  # nvidia-smi topo -m, numactl --hardware
    numa_binding = models.CharField(max_length=200, blank=True)
    # the engine's /metrics scraped just before and just after the run ({"before": text,
    # "after": text}; {}: none given), and the hit ratio their counters measured
    # (analysis.benchmarks.scrapes.MeasuredHits.to_dict(); {}: none)
    scrapes = models.JSONField(default=dict, blank=True)
    measured = models.JSONField(default=dict, blank=True)
    # the replay export the run replayed, and how it was served, per replica: kvscope's
    # prediction for exactly that trace (analysis.benchmarks.prediction)
    replay_export = models.ForeignKey(ReplayExport, null=True, blank=True,
                                      on_delete=models.SET_NULL, related_name="runs")  # fmt: skip
    replicas = models.PositiveIntegerField(default=1)
    router = models.CharField(max_length=20, default="round_robin")
    gpu_cache_gib = models.FloatField(null=True, blank=True)  # per replica; None: not given
    # Prediction.to_dict() once computed ({}: none, or not yet); prediction_note says why
    # there is none (no export named, still computing, or what went wrong)
    predicted = models.JSONField(default=dict, blank=True)
    prediction_note = models.TextField(blank=True)
    # the last change of the row (a prediction arrives after the run is stored): the
    # matrix's cached figures are keyed by it
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "console"
        ordering = ["model_name", "tier", "context_tokens", "concurrency", "pk"]

    def __str__(self) -> str:
        return f"{self.model_name} {self.tier_label} ctx {self.context_tokens} x{self.concurrency}"

    @property
    def result(self) -> BenchResult:
        return result_from_json(self.numbers)

    @property
    def offload(self) -> bool:
        return self.tier != Tier.NONE

    @property
    def tier_label(self) -> str:
        label = self.get_tier_display()
        if self.ram_gib:
            label += f" {self.ram_gib:g} GiB"
        if self.kv_dtype:
            label += f", KV {self.kv_dtype}"
        if self.weights_offload:
            label += ", weights offloaded"
        return label
