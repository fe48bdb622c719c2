"""The analysis page's report-derived sections (templates/uploads/_report.html): the first
screen, the traffic, the charts, the fleet and admission, the prompts carried, the cost and
offload forms, the hot segments.

A view that asks the page no question (what a size buys, prices, an offload estimate) shows
what the finished analysis and the reader's role alone decide, so it is rendered once and
read from the page cache (selectors.analysis_report_html): Django's template engine over
the report's tables, and reading ~0.3 MB of report and figures, were most of the page's
server time. A view that asks is rendered for its question."""

from __future__ import annotations

from django.http import HttpRequest
from django.template.loader import render_to_string

from analysis.offload import offload_payoff
from console.models import Analysis
from console.roles import can_analyze
from console.uploads import selectors
from console.uploads.analysis_forms import AnalysisForm
from console.uploads.figures import page_figures
from console.uploads.fleet_view import fleet_page
from console.uploads.page_forms import OffloadForm
from console.uploads.planner_views import planner_page
from console.uploads.prompts import TOOLS_POSITION_WHY, prompt_facts

# the query keys of the section's own forms: the ask form, the cost form, the offload form
QUESTIONS = ("buy_gib", "ram_price", "prefill_tokens_per_s")


def report_html(request: HttpRequest, analysis: Analysis, form: AnalysisForm | None) -> str:
    """The sections as this view shows them; `analysis` may have deferred its report and
    figures, which are read only when the sections are rendered."""
    analyst = can_analyze(request.user)
    query = request.GET
    if any(key in query for key in QUESTIONS):
        return _rendered(analysis, query, form is not None, analyst)
    variant = (form is not None, analyst)  # all that differs between readers
    return selectors.analysis_report_html(
        analysis, variant, lambda: _rendered(analysis, {}, form is not None, analyst)
    )


def _rendered(analysis: Analysis, query, has_form: bool, analyst: bool) -> str:
    """The sections rendered from the analysis's report and figures for `query`."""
    if {"report", "figures"} & analysis.get_deferred_fields():
        analysis.refresh_from_db(fields=["report", "figures"])  # one query, not two
    report = analysis.report
    offload_form = OffloadForm(query if "prefill_tokens_per_s" in query else None)
    offload = None
    try:
        offload = offload_payoff(report, **offload_form.estimate_args())
    except ValueError as exc:
        offload_form.add_error(None, str(exc))
    context = {
        "analysis": analysis,
        "report": report,
        # the figures, and the fleet's and admission's sections in words
        **fleet_page(report, page_figures(analysis)),
        "form": has_form,  # (the sections only ask whether there is one)
        "can_analyze": analyst,
        "offload_form": offload_form,
        "offload": offload,
        "carried": prompt_facts(report, analysis.upload.log_format),
        **planner_page(report, query),
        "tools_why": TOOLS_POSITION_WHY,
    }
    return render_to_string("uploads/_report.html", context)
