"""What the uploads wing's pages read: rows, and the few things computed from stored files
or reports, each computed once and cached by the ids and versions of the rows it comes
from (console.caching), so no page view repeats engine work."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from analysis import BlockStream
from analysis.replay import ReplayOptions, ReplaySummary, summary as replay_summary
from analysis.stream import stream_meta
from console.caching import computed_once
from console.models import Analysis, JobStatus, Upload
from console.policies.reruns import label_reruns
from console.uploads.analysis_forms import AnalysisForm
from console.uploads.charts import CHARTS_VERSION, compare_figure

HOME_UPLOADS = 100  # the newest ones, on the home page
HOME_ANALYSES = 20  # the newest analyses, above them
MAX_COMPARED = 4
PICKER_UPLOADS = 30  # the newest uploads with a finished analysis, offered to compare


def _row_version(row: Upload | Analysis) -> tuple:
    """What tells one state of a job's row from another: a retried job is claimed and
    finished again, and a test database may hand a deleted row's id to a new one."""
    return (type(row).__name__, row.pk, row.created_at, row.started_at, row.finished_at)


def home_uploads() -> QuerySet[Upload]:
    return Upload.objects.select_related("created_by")[:HOME_UPLOADS]


def recent_analyses() -> list[Analysis]:
    """The newest analyses of every upload, for the home page: with their recommendation
    (`recommendation`, the report's few headline numbers, read out of the report in the
    database: the report itself, curves and all, is never loaded) and, for a policy's
    re-run, its versions (console.policies.reruns)."""
    rows = (
        Analysis.objects.select_related("upload")
        .defer("report", "figures", "upload__errors", "upload__notes", "upload__streams")
        .annotate(recommendation=KeyTransform("recommendation", "report"))
    )
    return label_reruns(list(rows[:HOME_ANALYSES]))


def landing_analysis(upload: Upload) -> int | None:
    """The id of the analysis a finished ingest lands on: its automatic first analysis
    (written with the done state, console.uploads.outcome); None before the ingest is
    done, or when it failed."""
    if upload.status not in (JobStatus.DONE, JobStatus.PARTIAL):
        return None
    return upload.analyses.order_by("created_at", "pk").values_list("pk", flat=True).first()


def upload_analyses(upload: Upload) -> list[Analysis]:
    """An upload's analyses, newest first, a policy's re-runs said as such: of each report
    only its recommendation and its fleet's replicas (`recommendation`, `fleet_replicas`:
    None without a fleet), not the whole report and its figures (~0.3 MB a row on a
    3,000-request log, half the page's server time)."""
    rows = (
        upload.analyses.select_related("created_by")
        .defer("report", "figures")
        .annotate(recommendation=KeyTransform("recommendation", "report"),
                  fleet_replicas=KeyTransform("replicas", KeyTransform("fleet", "report")))
    )  # fmt: skip
    return label_reruns(list(rows))


def analysis_page_row(pk: int) -> Analysis:
    """The analysis of its page, with its upload and `has_report`, but not its report and
    figures: they are read only if the report's sections are rendered for the view
    (console.uploads.report_section); most views read those from the page cache. (A report
    is written whole or not at all: never stored empty.)"""
    rows = Analysis.objects.select_related("upload").defer("report", "figures")
    has_report = ExpressionWrapper(Q(report__isnull=False), output_field=BooleanField())
    return get_object_or_404(rows.annotate(has_report=has_report), pk=pk)


def analysis_report_html(
    analysis: Analysis, variant: tuple, render: Callable[[], SafeString]
) -> SafeString:
    """The analysis page's report-derived sections as `render` draws them, rendered once
    per state of the analysis's row, version of the charts and `variant` (what differs
    between readers), and kept in the page cache (settings.CACHES["pages"]): a finished
    analysis's report and figures never change, and a job run again is finished again."""
    parts = (_row_version(analysis), CHARTS_VERSION, variant)
    return computed_once("analysis-report", parts, render, alias="pages")


def compare_choices() -> list[tuple[Upload, list[Analysis]]]:
    """The finished analyses a reader may compare (every role reads every upload), grouped
    by upload: the newest PICKER_UPLOADS uploads that have one, newest first, each with
    its analyses newest first. Reports and figures are not read; three queries in all."""
    uploads = list(Upload.objects.filter(analyses__status=JobStatus.DONE).distinct()
                   .only("pk", "name", "created_at")[:PICKER_UPLOADS])  # fmt: skip
    done = Analysis.objects.filter(upload__in=uploads, status=JobStatus.DONE).only(
        "pk", "upload_id", "block_tokens", "params", "label", "created_at"
    )
    groups: dict[int, list[Analysis]] = {upload.pk: [] for upload in uploads}
    for analysis in label_reruns(list(done)):  # (their re-runs in one query, not one a group)
        groups[analysis.upload_id].append(analysis)
    return [(upload, groups[upload.pk]) for upload in uploads]


def compared_analyses(ids: list[int]) -> list[Analysis]:
    """The finished analyses of `ids` (the first MAX_COMPARED), in the order asked."""
    ids = ids[:MAX_COMPARED]
    done = Analysis.objects.select_related("upload").filter(pk__in=ids, status=JobStatus.DONE)
    return label_reruns(sorted(done, key=lambda a: ids.index(a.pk)))


def comparison_figure(analyses: list[Analysis]) -> dict:
    """The compare page's figure: the analyses' hit-ratio curves overlaid, drawn once per
    set of finished analyses and version of the charts."""
    # (a label is the curve's name: a renamed analysis is drawn again)
    versions = (CHARTS_VERSION, *((*_row_version(a), a.label) for a in analyses))
    return computed_once("compare", versions, lambda: compare_figure(
        [(f"#{a.pk} {a.title}", a.report) for a in analyses]))  # fmt: skip


def replay_tenants(upload: Upload) -> list[str]:
    """The tenants of an upload's traffic (the replay form's choices), from its stored
    stream's small table."""
    first = str(upload.available_block_sizes[0])
    return computed_once("replay-tenants", (_row_version(upload),),
                         lambda: stream_meta(upload.streams[first])["tenants"])  # fmt: skip


def replay_trace_summary(
    upload: Upload, block_tokens: int, options: ReplayOptions
) -> ReplaySummary:
    """How many requests, block ids and milliseconds the replay trace of these options
    holds: the stream is loaded once per upload's ingest, block size and options."""

    def compute() -> ReplaySummary:
        return replay_summary(BlockStream.load(upload.streams[str(block_tokens)]), options)

    return computed_once("replay-summary", (_row_version(upload), block_tokens, options), compute)


def replay_model_name(upload: Upload) -> str:
    """The model the replay commands name: the upload's first finished analysis's, or a
    placeholder to replace."""
    done = upload.analyses.filter(status=JobStatus.DONE).first()
    return done.report["model"]["name"] if done and done.report else "MODEL"


def analysis_fields_html(form: AnalysisForm) -> str:
    """The re-analysis form's fields, unbound (on an analysis's page its parameters as the
    initial values, on an upload's its latest analysis's), rendered once per initial values
    and block-size choices, which are all it shows: its forty-odd widgets were a third of
    an analysis page's server time and half an upload page's. Errors never show here (a
    bound form re-renders)."""
    choices = tuple(form.fields["block_tokens"].choices)
    parts = (repr(sorted(form.initial.items())), repr(choices))
    return computed_once("analysis-fields", parts,
                         lambda: render_to_string("uploads/_analysis_fields.html",
                                                  {"form": form}))  # fmt: skip
