"""The benchmarks pages: the runs and their upload form; the matrix of one model; runs side
by side; the downloads (a model's runs as CSV, a run's file as uploaded). What a page
draws is computed once per set of runs (console.benchmarks.selectors)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import slugify

from analysis.benchmarks.slo import Slo
from console.benchmarks.exports import runs_csv
from console.benchmarks.forms import BenchUploadForm, SloForm
from console.benchmarks.models import BenchRun
from console.benchmarks.predictions import PENDING, comparison
from console.benchmarks.selectors import compare_page, matrix_page
from console.benchmarks.services import (
    EVERY_RATE,
    BenchUploadError,
    bench_runs_create,
    request_rates,
    runs_table,
)
from console.downloads import json_file
from console.policies import audit
from console.roles import can_analyze, reader_required
from console.uploads.limits import files_refused
from console.web import download, forbidden


@reader_required
def benchmark_list(request: HttpRequest) -> HttpResponse:
    """The runs by model; analysts upload more here (the POST)."""
    form = None
    if can_analyze(request.user):
        form = BenchUploadForm(request.POST or None, request.FILES or None)
    elif request.method == "POST":
        return forbidden(request, "Only analysts upload runs.")
    if request.method == "POST" and form is not None and (too_many := files_refused(request)):
        form.is_valid()
        form.add_error("files", too_many)  # the files past it were dropped: store no part
    if request.method == "POST" and form is not None and form.is_valid():
        data = form.cleaned_data
        try:
            runs = bench_runs_create(files=data["files"], tags=data, user=request.user,
                                     scrapes=data["scrapes"])  # fmt: skip
        except BenchUploadError as exc:
            for field, problems in exc.errors.items():
                for problem in problems:
                    form.add_error(field, problem)
        else:
            messages.success(request, f"{len(runs)} run{'s' if len(runs) != 1 else ''} stored.")
            return redirect("evidence_list")
    models = BenchRun.objects.values_list("model_name", flat=True).distinct().order_by()
    runs = list(BenchRun.objects.defer("raw", "topology", "scrapes"))
    return render(request, "benchmarks/list.html", {
        "form": form, "runs": [(run, comparison(run)) for run in runs], "pending": PENDING,
        "models": sorted(set(models), key=str.casefold)})  # fmt: skip


@reader_required
def benchmark_matrix(request: HttpRequest) -> HttpResponse:
    """Context x concurrency per tier, coloured against the SLO, with the boundary."""
    model_name = request.GET.get("model", "")
    slo_form = SloForm(request.GET if "p99_ttft_ms" in request.GET else None,
                       rates=request_rates(model_name))  # fmt: skip
    valid = slo_form.is_bound and slo_form.is_valid()
    data = slo_form.cleaned_data if valid else {"p99_ttft_ms": 2000.0, "p99_itl_ms": 100.0}
    slo = Slo(**{k: data.get(k) for k in ("p99_ttft_ms", "p99_tpot_ms", "p99_itl_ms")})
    grid, figures = matrix_page(model_name, slo, slo_form.chosen_rate() if valid else EVERY_RATE)
    return render(request, "benchmarks/matrix.html", {
        "model": model_name, "slo_form": slo_form, "slo": slo, "grid": grid,
        "figures": figures, "slo_is_default": not valid})  # fmt: skip


@reader_required
def benchmark_compare(request: HttpRequest) -> HttpResponse:
    """Runs of one schedule side by side: cold vs warm, offload off vs on."""
    model_name = request.GET.get("model", "")
    compared, figures = compare_page(model_name)
    return render(request, "benchmarks/compare.html", {
        "model": model_name, "compared": compared, "figures": figures})  # fmt: skip


@reader_required
def benchmark_runs_csv(request: HttpRequest) -> HttpResponse:
    """Every run of one model, tags and numbers, for a spreadsheet."""
    model_name = request.GET.get("model", "")
    rows = runs_table(model_name)
    name = f"kvscope-runs-{slugify(model_name) or 'model'}.csv"
    runs = list(BenchRun.objects.filter(model_name=model_name).values_list("pk", flat=True))
    audit.record(actor=request.user, action="download.benchmark_csv", object_type="BenchModel",
                 object_id=model_name or "-", details={
                     "file": name, "model": model_name, "runs": runs})  # fmt: skip
    return download(runs_csv(rows), name, "text/csv")


@reader_required
def benchmark_run_raw(request: HttpRequest, pk: int) -> HttpResponse:
    """A run's result file as it was uploaded (kept whole)."""
    run = get_object_or_404(BenchRun, pk=pk)
    name = f"kvscope-run-{run.pk}.json"
    audit.record(actor=request.user, action="download.benchmark_raw", obj=run,
                 details={"file": name, "name": run.name})  # fmt: skip
    return download(json_file(run.raw), name, "application/json")


@reader_required
def benchmark_run(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: its tags and numbers, its file, and (for analysts) rename and delete."""
    runs = BenchRun.objects.select_related("created_by", "replay_export__upload")
    run = get_object_or_404(runs.defer("scrapes"), pk=pk)  # (the scrapes' text: not shown)
    return render(request, "benchmarks/run.html", {
        "run": run, "result": run.result, "versus": comparison(run)})  # fmt: skip
