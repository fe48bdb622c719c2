"""The compare page: finished analyses of any uploads side by side, against a baseline the
reader chooses (analysis.compare computes every row and difference; this only reads the
query, names each analysis's log and formats), and the picker both the compare page and
the analysis page offer."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString

from analysis.compare import differing_parameters, headline_rows
from console.caching import computed_once
from console.models import Analysis
from console.policies import audit
from console.roles import reader_required
from console.uploads import exports, selectors
from console.uploads.selectors import MAX_COMPARED
from console.web import download, is_id


def compare_picker(chosen: list[int], baseline: int | None) -> dict:
    """The picker's context: every finished analysis a reader may compare, grouped by
    upload, with those of `chosen` ticked and `baseline` as the baseline; `others` says
    whether any analysis besides those is offered."""
    groups = selectors.compare_choices()
    others = any(a.pk not in chosen for _, choices in groups for a in choices)
    return {"groups": groups, "chosen": set(chosen), "baseline": baseline, "others": others,
            "max": MAX_COMPARED}  # fmt: skip


def picker_html(chosen: list[int], baseline: int | None, title: str) -> SafeString:
    """The picker rendered (templates/uploads/_compare_picker.html) once per state of what
    it shows: its rows are read on every view (three small queries), but its thirty-odd
    uploads' fieldsets, most of an analysis page's rendering once a team has uploaded that
    many logs, are rendered only when an upload's name, an analysis's title or re-runs,
    the choice or the title change. `shown` is everything the template reads."""
    picker = compare_picker(chosen, baseline)
    groups = tuple(
        (upload.pk, upload.name, tuple((a.pk, a.title, tuple(a.policy_reruns)) for a in choices))
        for upload, choices in picker["groups"]
    )
    shown = (title, tuple(chosen), baseline, MAX_COMPARED, groups)
    context = {"picker": picker, "title": title}
    return computed_once(
        "compare-picker",
        shown,
        lambda: render_to_string("uploads/_compare_picker.html", context),
        alias="pages",
    )


def source_name(analysis: Analysis) -> str:
    """The log an analysis read, as the comparison's first parameter row names it (two
    uploads may share a name)."""
    return f"{analysis.upload.name} (upload #{analysis.upload.pk})"


def _asked(request: HttpRequest) -> tuple[list[int], int | None]:
    """The analyses asked for, each once and in order, the baseline among them (first
    when it was not ticked: a baseline is compared too), and the baseline's id."""
    ids = [int(x) for x in request.GET.getlist("a") if is_id(x)]
    baseline = request.GET.get("baseline", "")
    baseline_pk = int(baseline) if is_id(baseline) else None
    if baseline_pk is not None and baseline_pk not in ids:
        ids.insert(0, baseline_pk)
    return list(dict.fromkeys(ids)), baseline_pk


def _back(request: HttpRequest) -> HttpResponse:
    """To the page the reader came from (this site's only), else home."""
    back = request.META.get("HTTP_REFERER", "")
    safe = url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure())
    return redirect(back if safe else reverse("home"))


def _columns(analyses: list[Analysis], baseline: int) -> list[dict]:
    """One column per analysis: it, whether it is the baseline, and the query that makes
    it the baseline instead."""
    ids = [a.pk for a in analyses]
    return [{"analysis": a, "is_baseline": i == baseline,
             "baseline_query": urlencode({"a": ids, "baseline": a.pk}, doseq=True)}
            for i, a in enumerate(analyses)]  # fmt: skip


@reader_required
def compare(request: HttpRequest) -> HttpResponse:
    ids, baseline_pk = _asked(request)
    if len(ids) > MAX_COMPARED:
        messages.warning(request, f"Up to {MAX_COMPARED} analyses compare at once: "
                                  f"the first {MAX_COMPARED} asked are shown.")  # fmt: skip
    analyses = selectors.compared_analyses(ids)
    if len(analyses) < 2:
        messages.error(request, "Pick two finished analyses to compare.")
        return _back(request)
    pks = [a.pk for a in analyses]
    baseline = pks.index(baseline_pk) if baseline_pk in pks else 0
    reports = [a.report for a in analyses]
    sources = [source_name(a) for a in analyses]
    rows = headline_rows(reports, baseline, sources)
    if request.GET.get("format") == "csv":
        stem = "kvscope-compare-" + "-".join(str(pk) for pk in pks)
        csv = exports.compare_csv([f"#{pk}" for pk in pks], rows, baseline)
        # about several analyses, no one row: named by their ids, as the file is
        details = {"file": f"{stem}.csv", "analyses": pks, "baseline": pks[baseline]}
        audit.record(actor=request.user, action="download.compare", object_type="Comparison",
                     object_id="-".join(str(pk) for pk in pks), details=details)  # fmt: skip
        return download(csv, f"{stem}.csv", "text/csv")
    context = {
        "analyses": analyses,
        "columns": _columns(analyses, baseline),
        "baseline": baseline,
        "figure": selectors.comparison_figure(analyses),
        "rows": rows,
        "differing": differing_parameters(reports, sources),
        "csv_query": urlencode({"a": pks, "baseline": pks[baseline], "format": "csv"}, doseq=True),
        "picker_html": picker_html(pks, pks[baseline], "Compare other analyses"),
    }
    return render(request, "uploads/compare.html", context)
