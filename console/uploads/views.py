"""The uploads wing's pages. Thin: check the role, validate a form, call a service, render
what a selector reads. Nothing is recomputed per page view: reports and figures are read
from the Analysis rows, what else a page shows is cached (console.uploads.selectors)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from analysis import BlockStream
from analysis.replay import ReplayOptions, replay_lines
from console.benchmarks.predictions import export_record
from console.downloads import json_file
from console.format import bytes_text
from console.models import Analysis, JobStatus, Upload
from console.policies import audit
from console.roles import analyst_required, can_analyze, reader_required
from console.uploads import exports, selectors
from console.uploads.analyses import analysis_create, analysis_retry, default_block_size
from console.uploads.analysis_forms import AnalysisForm, analysis_initial
from console.uploads.comparison import picker_html
from console.uploads.forms import RetryForm, UploadForm, block_sizes_initial
from console.uploads.limits import files_refused
from console.uploads.page_forms import ReplayForm
from console.uploads.report_section import report_html
from console.uploads.services import RetryRefused, upload_create, upload_retry
from console.uploads.storage import StorageError
from console.web import attachment, download


@reader_required
def home(request: HttpRequest) -> HttpResponse:
    """Recent analyses with their headline numbers, newest first, then the uploads."""
    context = {"analyses": selectors.recent_analyses(), "uploads": selectors.home_uploads(),
               "can_analyze": can_analyze(request.user)}  # fmt: skip
    return render(request, "uploads/home.html", context)


@analyst_required
def upload_new(request: HttpRequest) -> HttpResponse:
    limit = bytes_text(settings.KVSCOPE_UPLOAD_MAX_BYTES, digits=1)
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if getattr(request, "upload_too_large", False):
            form = UploadForm(request.POST)
            form.is_valid()
            form.add_error("files", f"The upload is larger than the limit of {limit}.")
        elif too_many := files_refused(request):
            form.is_valid()  # the other fields' errors are shown with it
            form.add_error("files", too_many)
        elif form.is_valid():
            data = form.cleaned_data
            try:
                upload = upload_create(
                    name=data["name"],
                    sources=data["files"],
                    user=request.user,
                    format=data["format"],
                    block_sizes=data["block_sizes"],
                    previews=data["previews"],
                    trace_partial_cached=data["trace_tails"] != "uncached",
                    tools_position=data["tools_position"],
                    tokenizer=data["tokenizer"],
                    keep_raw_until=data["keep_until"],
                )
            # (a broken audit trail: no upload without its event; its files, stored first,
            # are purged as no upload's)
            except (StorageError, audit.AuditTrailBroken) as exc:
                form.add_error(None, str(exc))
            else:
                return redirect("upload_detail", pk=upload.pk)
    else:
        form = UploadForm()
    return render(request, "uploads/upload_new.html", {
        "form": form, "limit": limit, "max_files": settings.KVSCOPE_UPLOAD_MAX_FILES})  # fmt: skip


def _job_json(job, **extra) -> dict:
    return {
        "status": job.status,
        "status_display": job.get_status_display(),
        "finished": job.finished,
        "stage": job.stage,
        "done": job.progress_done,
        "total": job.progress_total,
        "started_at": job.started_at.isoformat() if job.started_at else None,
        "message": job.message,
        "stalled": job.stalled,
        "heartbeat_at": job.heartbeat_at.isoformat() if job.heartbeat_at else None,
        **extra,
    }


SAMPLE_LOG = settings.BASE_DIR / "sample" / "chat-sample.jsonl.gz"


@require_POST
@analyst_required
def upload_sample(request: HttpRequest) -> HttpResponse:
    """One click to a recommendation: ingest the bundled generated sample log, and land on
    its analysis's recommendation: at once if the ingest ran in the request, else when the
    upload's page sees it finish (progress.js carries the #recommendation over)."""
    upload = upload_create(
        name="Sample: 2,000 generated chat requests",
        sources=[SAMPLE_LOG],
        user=request.user,
        block_sizes=[256],
        sample=True,
    )
    upload.refresh_from_db()
    landing = selectors.landing_analysis(upload)
    if landing:
        return redirect(reverse("analysis_detail", args=[landing]) + "#recommendation")
    return redirect(reverse("upload_detail", args=[upload.pk]) + "#recommendation")


@reader_required
def upload_status(request: HttpRequest, pk: int) -> JsonResponse:
    """The ingest's progress; once it is done, `analysis_url`: where the page goes then."""
    upload = get_object_or_404(Upload, pk=pk)
    landing = selectors.landing_analysis(upload)
    return JsonResponse(_job_json(
        upload, requests=upload.requests_done, skipped=upload.skipped_so_far,
        analysis_url=reverse("analysis_detail", args=[landing]) if landing else None,
    ))  # fmt: skip


@reader_required
def upload_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _upload_page(request, get_object_or_404(Upload, pk=pk))


def _upload_page(
    request: HttpRequest, upload: Upload, retry_form: RetryForm | None = None, status: int = 200
) -> HttpResponse:
    """The upload's page; for a failed ingest with its raw files, Retry with the block
    sizes offered again (prefilled with those chosen), or `retry_form` with its errors."""
    analyses = selectors.upload_analyses(upload)
    if retry_form is None and upload.status == JobStatus.FAILED and upload.raw_paths:
        retry_form = RetryForm(initial={"block_sizes": block_sizes_initial(upload.block_sizes)})
    form = None
    if upload.streams and can_analyze(request.user):
        latest = next((a for a in analyses if a.status == JobStatus.DONE), None)
        initial = (
            analysis_initial(latest.params, latest.block_tokens)
            if latest
            else {"block_tokens": default_block_size(upload)}
        )
        form = AnalysisForm(initial=initial, block_sizes=upload.available_block_sizes)
    return render(
        request,
        "uploads/upload_detail.html",
        {
            "upload": upload,
            "analyses": analyses,
            "form": form,
            "fields_html": selectors.analysis_fields_html(form) if form else None,
            "retry_form": retry_form,
            "can_analyze": can_analyze(request.user),
        },
        status=status,
    )


@require_POST
@analyst_required
def upload_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Retry; from the page's form (`sizes_shown`) with the block sizes ticked there, else
    (a bare POST) with the sizes chosen before."""
    upload = get_object_or_404(Upload, pk=pk)
    block_sizes = None
    if request.POST.get("sizes_shown"):
        form = RetryForm(request.POST)
        if not form.is_valid():
            return _upload_page(request, upload, retry_form=form, status=400)
        block_sizes = form.cleaned_data["block_sizes"]
    try:
        retried = upload_retry(upload=upload, block_sizes=block_sizes, user=request.user)
    except RetryRefused as exc:
        messages.error(request, str(exc))
    else:
        if retried.status == JobStatus.RUNNING and retried.started_at == upload.started_at:
            # its worker still beats (the page was stale): a live ingest is never restarted
            messages.info(request, "The ingest is still running: nothing to retry.")
        else:
            messages.success(request, "The ingest is queued again.")
    return redirect("upload_detail", pk=pk)


@require_POST
@analyst_required
def analysis_retry_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Run a failed or stalled analysis again (a live one is left alone)."""
    analysis = analysis_retry(analysis=get_object_or_404(Analysis, pk=pk), user=request.user)
    if analysis.status == JobStatus.FAILED or analysis.stalled:
        messages.error(request, "The analysis could not be queued again.")
    return redirect("analysis_detail", pk=pk)


@require_POST
@analyst_required
def analysis_new(request: HttpRequest, pk: int) -> HttpResponse:
    upload = get_object_or_404(Upload, pk=pk)
    form = AnalysisForm(request.POST, request.FILES, block_sizes=upload.available_block_sizes)
    if form.is_valid():
        try:
            analysis = analysis_create(
                upload=upload,
                block_tokens=form.cleaned_data["block_tokens"],
                params=form.params(),
                user=request.user,
            )
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("analysis_detail", pk=analysis.pk)
    return render(
        request,
        "uploads/upload_detail.html",
        {
            "upload": upload,
            "analyses": selectors.upload_analyses(upload),
            "form": form,
            "can_analyze": True,
        },
        status=400,
    )


@reader_required
def analysis_status(request: HttpRequest, pk: int) -> JsonResponse:
    # polled every few seconds by an open page: the job's state only, not its report and
    # figures (~0.3 MB to read and parse on a 3,000-request log)
    job = get_object_or_404(Analysis.objects.defer("report", "figures", "params"), pk=pk)
    return JsonResponse(_job_json(job))


@reader_required
def analysis_detail(request: HttpRequest, pk: int) -> HttpResponse:
    analysis = selectors.analysis_page_row(pk)
    analyst = can_analyze(request.user)
    form = None
    if analyst and analysis.upload.streams:
        form = AnalysisForm(
            initial=analysis_initial(analysis.params, analysis.block_tokens),
            block_sizes=analysis.upload.available_block_sizes,
        )
    context = {
        "analysis": analysis,
        "upload": analysis.upload,
        "has_report": analysis.has_report,
        "form": form,
        "fields_html": selectors.analysis_fields_html(form) if form else None,
        "can_analyze": analyst,
    }
    if analysis.has_report:
        context["report_html"] = report_html(
            analysis, request.GET, has_form=form is not None, analyst=analyst
        )
        # compare with analyses of any upload, this one ticked and the baseline
        context["picker_html"] = picker_html([analysis.pk], analysis.pk,
                                             "Compare with other analyses")  # fmt: skip
    return render(request, "uploads/analysis_detail.html", context)


@reader_required
def analysis_download(request: HttpRequest, pk: int, what: str) -> HttpResponse:
    analysis = get_object_or_404(Analysis, pk=pk, status=JobStatus.DONE)
    stem = f"kvscope-analysis-{analysis.pk}"
    if what == "report.json":
        body = json_file(analysis.report)
        audit.record(actor=request.user, action="download.report", obj=analysis,
                     details={"file": f"{stem}.json", "upload": analysis.upload_id})  # fmt: skip
        return download(body, f"{stem}.json", "application/json")
    builders = {
        "curve.csv": exports.curve_csv,
        "windows.csv": exports.windows_csv,
        "series.csv": exports.series_csv,
        "segments.csv": exports.segments_csv,
        "fleet.csv": exports.fleet_csv,
    }
    if what not in builders:
        return HttpResponse(status=404)
    body = builders[what](analysis.report)
    audit.record(actor=request.user, action="download.csv", obj=analysis,
                 details={"file": f"{stem}-{what}", "upload": analysis.upload_id})  # fmt: skip
    return download(body, f"{stem}-{what}", "text/csv")


def _replay_form(request: HttpRequest, pk: int) -> tuple[Upload, ReplayForm]:
    """The upload and its export form (bound to the defaults when nothing was asked)."""
    upload = get_object_or_404(Upload, pk=pk)
    if not upload.streams:
        raise Http404("This upload has no stored block stream.")
    sizes = upload.available_block_sizes
    data = request.GET if "block_tokens" in request.GET else {
        "block_tokens": sizes[0], "time_scale": 1.0}  # fmt: skip
    return upload, ReplayForm(data, block_sizes=sizes, tenants=selectors.replay_tenants(upload))


def _replay_options(request: HttpRequest, form: ReplayForm) -> ReplayOptions:
    """The form's options; tenant and user labels only for analysts (user names are
    shown nowhere else)."""
    options = form.options()
    if not can_analyze(request.user):
        options["labels"] = False
    return ReplayOptions(**options)


@reader_required
def upload_replay(request: HttpRequest, pk: int) -> HttpResponse:
    """The replay-trace export: choose what to include, see how to replay it."""
    upload, form = _replay_form(request, pk)
    info = None
    if form.is_valid():
        block_tokens = form.cleaned_data["block_tokens"]
        options = _replay_options(request, form)
        info = selectors.replay_trace_summary(upload, block_tokens, options)
    # read back as this upload was read: a trace read with partial blocks cached keeps them
    cached = upload.source_format == "mooncake" and upload.trace_partial_cached
    return render(request, "uploads/upload_replay.html", {
        "upload": upload, "form": form, "info": info,
        "model": selectors.replay_model_name(upload),
        "readback_tails": "cached" if cached else "uncached",
        "query": request.GET.urlencode(), "exports": upload.replay_exports.all(),
    })  # fmt: skip


@reader_required
def upload_replay_download(request: HttpRequest, pk: int) -> HttpResponse:
    """The replay trace itself, streamed (JSON lines, Mooncake format)."""
    upload, form = _replay_form(request, pk)
    if not form.is_valid():
        return HttpResponse(f"Invalid export: {form.errors.as_text()}", status=400,
                            content_type="text/plain")  # fmt: skip
    stream = BlockStream.load(upload.streams[str(form.cleaned_data["block_tokens"])])
    options = _replay_options(request, form)
    # its id and digest first (one pass), so a benchmark run can name the trace it replayed
    export = export_record(upload, stream, options, request.user)
    response = StreamingHttpResponse(replay_lines(stream, options),
                                     content_type="application/jsonl")  # fmt: skip
    # recorded when it starts streaming: what was asked for, as the form chose it
    audit.record(actor=request.user, action="download.replay", obj=upload, details={
        "file": export.file_name, "block_tokens": stream.block_tokens, "labels": options.labels,
        "tenants": list(options.tenants) if options.tenants else None,
        "start_s": options.start_s, "end_s": options.end_s, "time_scale": options.time_scale,
        "export": export.pk, "sha256": export.sha256,
    })  # fmt: skip
    return attachment(response, export.file_name)
