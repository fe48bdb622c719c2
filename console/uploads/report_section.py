"""The analysis page's report-derived sections (templates/uploads/_report.html): the first
screen, the traffic, the charts, the fleet and admission, the prompts carried, the cost and
offload forms, the hot segments.

A view that asks the page no question (what a size buys, prices, an offload estimate) shows
what the finished analysis and the reader's role alone decide, so it is rendered once and
read from the page cache (selectors.analysis_report_html): Django's template engine over
the report's tables, and reading ~0.3 MB of report and figures, were most of the page's
server time. A view that asks is rendered for its question."""

from __future__ import annotations

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from analysis.offload import offload_payoff
from console.models import Analysis
from console.uploads import selectors
from console.uploads.figures import page_figures
from console.uploads.fleet_view import fleet_page
from console.uploads.page_forms import OffloadForm
from console.uploads.planner_forms import AskForm, CostForm
from console.uploads.planner_views import planner_page
from console.uploads.prompts import TOOLS_POSITION_WHY, prompt_facts

# the query keys that make the sections' own forms read the query
QUESTIONS = tuple(form.asked_by for form in (AskForm, CostForm, OffloadForm))
# every field of those forms: a form sends the others' answers on as hidden fields, so
# pricing the sizes does not clear an offload estimate, nor the other way round
QUESTION_FIELDS = tuple(
    name for form in (AskForm, CostForm, OffloadForm) for name in form.base_fields
)


def report_html(
    analysis: Analysis, query: QueryDict, *, has_form: bool, analyst: bool
) -> SafeString:
    """The sections as this view shows them: `has_form`, whether the page offers the
    re-analysis form; `analyst`, whether the reader may analyze. `analysis` may have
    deferred its report and figures, which are read only when the sections are rendered."""
    if any(key in query for key in QUESTIONS):
        return _render_sections(analysis, query, has_form, analyst)
    return selectors.analysis_report_html(
        analysis,
        (has_form, analyst),  # all that differs between readers
        lambda: _render_sections(analysis, QueryDict(), has_form, analyst),
    )


def _render_sections(
    analysis: Analysis, query: QueryDict, has_form: bool, analyst: bool
) -> SafeString:
    """The sections rendered from the analysis's report and figures for `query`."""
    if {"report", "figures"} & analysis.get_deferred_fields():
        analysis.refresh_from_db(fields=["report", "figures"])  # one query, not two
    report = analysis.report
    offload_form = OffloadForm.from_query(query)
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
        "kept_query": [(key, value) for key in QUESTION_FIELDS for value in query.getlist(key)],
        "offload": offload,
        "carried": prompt_facts(report, analysis.upload.log_format),
        **planner_page(report, query),
        "tools_why": TOOLS_POSITION_WHY,
    }
    return render_to_string("uploads/_report.html", context)
