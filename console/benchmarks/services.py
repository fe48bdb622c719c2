"""Storing benchmark runs, and the matrix of one model (the engine computes the boundary)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import orjson
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from analysis.benchmarks.comparison import Run, Schedule, SideBySide, side_by_side
from analysis.benchmarks.files import parse_result
from analysis.benchmarks.prediction import compare
from analysis.benchmarks.results import BenchResult, ResultFileError, result_to_json
from analysis.benchmarks.scrapes import ScrapeError, measured_hits, parse_scrape
from analysis.benchmarks.slo import Cell, Slo, degradation_boundary, matrix_axes
from console.benchmarks.models import BenchRun
from console.benchmarks.predictions import PENDING, queue_prediction
from console.format import moment_text
from console.policies import audit

VERSION_KEYS = ("driver", "cuda", "engine", "model_revision", "tokenizer")
MAX_RESULT_BYTES = 64 << 20


class BenchUploadError(ResultFileError):
    """Everything wrong with an upload at once, by the form field to mend."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(m for messages in errors.values() for m in messages))


def bench_runs_create(
    *, files: Sequence[UploadedFile], tags: dict, user=None, scrapes: dict[str, str] | None = None
) -> list[BenchRun]:
    """Read every file first: all are stored, or none (each error names its file).
    `scrapes`: the engine's /metrics text before and after the run ({"before", "after"}),
    for a single file; its counters give the run's measured hit ratio."""
    parsed, errors = [], {}
    measured = _measured(scrapes, errors) if scrapes else {}
    for upload in files:
        try:
            raw, result = _read(upload)
        except ResultFileError as exc:
            errors.setdefault("files", []).append(f"{upload.name}: {exc}")
            continue
        if not (tags.get("concurrency") or result.max_concurrency):
            errors.setdefault("concurrency", []).append(
                f"{upload.name} has no max_concurrency: give the limit it ran with."
            )
        if not (tags.get("model_name") or result.model):
            errors.setdefault("model_name", []).append(
                f"{upload.name} does not name its model: give it.")  # fmt: skip
        parsed.append((upload.name, upload.size, raw, result))
    if errors:
        raise BenchUploadError(errors)
    runs = []
    with transaction.atomic():
        for name, size, raw, result in parsed:
            concurrency = tags.get("concurrency") or result.max_concurrency
            model_name = tags.get("model_name") or result.model
            runs.append(BenchRun.objects.create(
                name=name[:300], created_by=user, raw=raw, tool=result.tool,
                numbers=result_to_json(result),
                model_name=model_name[:200],
                tier=tags["tier"], ram_gib=tags.get("ram_gib"), kv_dtype=tags.get("kv_dtype", ""),
                weights_offload=bool(tags.get("weights_offload")),
                context_tokens=tags["context_tokens"], concurrency=concurrency,
                request_rate=tags.get("request_rate") or _limited_rate(result.request_rate),
                warm=bool(tags.get("warm")),
                versions={k: tags[k] for k in VERSION_KEYS if tags.get(k)},
                topology=tags.get("topology", ""), numa_binding=tags.get("numa_binding", ""),
                scrapes=scrapes or {}, measured=measured,
                replay_export=tags.get("replay_export"), replicas=tags.get("replicas") or 1,
                router=tags.get("router") or "round_robin",
                gpu_cache_gib=tags.get("gpu_cache_gib"),
                prediction_note=PENDING if tags.get("replay_export") else "",
            ))  # fmt: skip
            _record_upload(runs[-1], user, size)
            queue_prediction(runs[-1])
    return runs


def _measured(scrapes: dict[str, str], errors: dict[str, list[str]]) -> dict:
    """The hit ratio the engine's counters measured ({} and the errors noted, by the form
    field to mend: each scrape's own, then the pair's)."""
    for side in ("before", "after"):
        try:
            parse_scrape(scrapes[side], f"the scrape {side} the run")
        except ScrapeError as exc:
            errors.setdefault(f"scrape_{side}", []).append(str(exc))
    if errors:
        return {}
    try:
        return measured_hits(scrapes["before"], scrapes["after"]).to_dict()
    except ScrapeError as exc:
        errors.setdefault("scrape_after", []).append(str(exc))
        return {}


def _record_upload(run: BenchRun, user, size: int) -> None:
    """benchmark.upload: one event per run stored (each file is its own run)."""
    audit.record(actor=user, action="benchmark.upload", obj=run, details={
        "file": run.name, "bytes": size, "tool": run.tool, "model": run.model_name,
        "tiers": run.tier_label, "context_tokens": run.context_tokens,
        "concurrency": run.concurrency, **_measured_details(run)})  # fmt: skip


def _measured_details(run: BenchRun) -> dict:
    """What the audit keeps of a run's scrapes (the engine and its ratio, not the text)
    and of the trace it replayed."""
    details = {}
    if run.measured:
        details |= {"measured_by": run.measured["engine"],
                    "measured_hit_ratio": round(run.measured["hit_ratio"], 6)}  # fmt: skip
    if run.replay_export_id is not None:
        details["replay_export"] = run.replay_export_id
    return details


def _read(upload: UploadedFile) -> tuple[object, BenchResult]:
    if upload.size > MAX_RESULT_BYTES:
        raise ResultFileError(f"larger than {MAX_RESULT_BYTES >> 20} MiB")
    try:
        raw = orjson.loads(upload.read())
    except orjson.JSONDecodeError as exc:
        raise ResultFileError(
            f"not a JSON file (it stops making sense at line {exc.lineno}, column {exc.colno})"
        ) from None
    return raw, parse_result(raw)


def _limited_rate(rate: float | None) -> float | None:
    """vLLM's "inf" (no limit) is stored as no rate."""
    return None if rate is None or math.isinf(rate) else rate


EVERY_RATE = "every"  # the matrix of all runs, whatever their request rate


def request_rates(model_name: str) -> list[float | None]:
    """The request rates a model's runs were made at (None: unlimited), unlimited first."""
    rates = set(BenchRun.objects.filter(model_name=model_name)
                .values_list("request_rate", flat=True))  # fmt: skip
    return sorted(rates, key=lambda r: -1.0 if r is None else r)


def cells_for(model_name: str, rate: float | str | None = EVERY_RATE) -> list[Cell]:
    """Every run of a model (at one request rate, if given); a warm run (cache filled
    first) is its own row beside the cold one, so cold and warm compare side by side."""
    runs = BenchRun.objects.filter(model_name=model_name).defer("raw", "topology", "scrapes")
    if rate != EVERY_RATE:
        runs = runs.filter(request_rate__isnull=True) if rate is None else runs.filter(
            request_rate=rate)  # fmt: skip
    return [
        Cell(run.tier_label + (" · warm" if run.warm else ""), run.context_tokens,
             run.concurrency, run.result, _hits(run))
        for run in runs
    ]  # fmt: skip


def matrix(model_name: str, slo: Slo, rate: float | str | None = EVERY_RATE) -> dict:
    """Per tier: the grid of runs (context rows x concurrency columns) and its boundary."""
    cells = cells_for(model_name, rate)
    boundaries = {b.tier: b for b in degradation_boundary(cells, slo)}
    tiers: dict[str, dict] = {}
    for cell in cells:
        tier = tiers.setdefault(cell.tier, {"cells": {}, "boundary": boundaries[cell.tier]})
        key = (cell.context_tokens, cell.concurrency)
        shown = tier["cells"].get(key)
        misses = slo.misses(cell.result)
        runs = 1 + (shown["runs"] if shown else 0)
        # several runs of one cell: show the worst, as the boundary counts it
        if shown is None or (misses and not shown["misses"]):
            tier["cells"][key] = {"result": cell.result, "misses": misses, "runs": runs,
                                  **cell.hits}  # fmt: skip
        else:
            shown["runs"] = runs
    contexts, concurrencies = matrix_axes(cells)
    for tier in tiers.values():
        tier["rows"] = [
            (context, [tier["cells"].get((context, n)) for n in concurrencies])
            for context in contexts
        ]
    return {"tiers": tiers, "contexts": contexts, "concurrencies": concurrencies}


def _hits(run: BenchRun) -> dict:
    """What a cell shows of its run's hit ratios: the measured one and what it counts, the
    predicted one, and whether they differ (None: not both, or not comparable)."""
    versus = compare(run.predicted, run.measured) if run.predicted and run.measured else None
    return {
        "measured": run.measured.get("hit_ratio"),
        "measured_of": run.measured.get("of_what", ""),
        "predicted": run.predicted.get("hit_ratio"),
        "differs": versus["differs"] if versus and versus["comparable"] else None,
    }


def comparisons(model_name: str) -> list[SideBySide]:
    """Runs of the same schedule side by side: offload off vs on, cold vs warm."""
    return side_by_side(
        (Schedule(run.context_tokens, run.concurrency, run.request_rate),
         Run(run.tier_label, run.offload, run.warm, run.result, name=run.name))
        for run in BenchRun.objects.filter(model_name=model_name).defer("raw", "topology",
                                                                         "scrapes")
    )  # fmt: skip


def runs_table(model_name: str) -> list[dict]:
    """Every run of a model as the CSV download writes it (tags, then the numbers)."""
    rows = []
    for run in BenchRun.objects.filter(model_name=model_name).defer("raw", "topology", "scrapes"):
        result = run.result
        latencies = {f"{key}_ms": value for key, value in result.latencies_ms.items()}
        rows.append({
            "file": run.name, "tool": run.tool, "model": run.model_name,
            "tiers": run.tier_label, "ram_gib": run.ram_gib, "kv_dtype": run.kv_dtype,
            "weights_offload": run.weights_offload, "context_tokens": run.context_tokens,
            "concurrency": run.concurrency, "request_rate": run.request_rate,
            "warm": run.warm, "completed": result.completed, "failed": result.failed,
            **latencies, **result.throughputs, "duration_s": result.duration_s,
            "host_ram_growth_gib": result.ram_growth_gib,
            "measured_hit_ratio": run.measured.get("hit_ratio"),
            "measured_by": run.measured.get("label", ""),
            "measured_of": run.measured.get("of_what", ""),
            "predicted_hit_ratio": run.predicted.get("hit_ratio"),
            "replay_export": run.replay_export_id, **run.versions,
            "numa_binding": run.numa_binding, "uploaded_at": moment_text(run.created_at),
        })  # fmt: skip
    return rows
