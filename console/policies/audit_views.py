"""The audit trail's page (filtered, paged, in words, objects linked) and its export as a
file that manage.py verify_audit --file checks offline."""

from __future__ import annotations

from django.conf import settings
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.policies.audit import record_unless_broken, verify_cached
from console.policies.audit_export import csv_chunks, header, json_chunks
from console.policies.audit_filters import AuditFilterForm
from console.policies.audit_links import ObjectLinks
from console.policies.audit_words import row_of
from console.policies.models import AuditEvent
from console.roles import reader_required
from console.web import attachment

PER_PAGE = 100
EXPORTS = {"json": (json_chunks, "application/json"), "csv": (csv_chunks, "text/csv")}


def _page(request: HttpRequest, form: AuditFilterForm, status: int = 200) -> HttpResponse:
    """The newest events first, PER_PAGE a page; none while the filters are not valid."""
    events = AuditEvent.objects.none()
    if form.is_valid():
        events = AuditEvent.objects.filter(form.condition()).order_by("-pk")
    page = Paginator(events, PER_PAGE).get_page(request.GET.get("page"))
    links = ObjectLinks(page.object_list)
    query = request.GET.copy()
    query.pop("page", None)  # the pager's links add their own
    context = {
        "form": form,
        "page": page,
        "rows": [row_of(event, links.url) for event in page.object_list],
        "filtered": form.is_valid() and bool(form.chosen()),
        "query": query.urlencode(),
        "zone": settings.TIME_ZONE,
        "chain": verify_cached(),
    }
    return render(request, "policies/audit.html", context, status=status)


@reader_required
def audit_log(request: HttpRequest) -> HttpResponse:
    return _page(request, AuditFilterForm(request.GET))


@reader_required
def audit_export(request: HttpRequest, fmt: str) -> HttpResponse | StreamingHttpResponse:
    """The whole chain up to the head, the filtered events with their content (see
    console.policies.audit_export for the file's layout)."""
    if fmt not in EXPORTS:
        raise Http404("The audit trail downloads as .json or .csv.")
    form = AuditFilterForm(request.GET)
    if not form.is_valid():  # the page again, the reason at its field
        return _page(request, form, status=400)
    chunks, content_type = EXPORTS[fmt]
    # recorded first: the file's head then ends at this download, which it carries; a
    # broken trail still downloads (it is what a reviewer looks into), the event logged
    record_unless_broken(actor=request.user, action="download.audit", obj=None,
                 object_type="AuditTrail", object_id=fmt, details=form.chosen())  # fmt: skip
    response = StreamingHttpResponse(
        chunks(form.condition(), header(form.chosen())), content_type=content_type
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    attachment(response, f"kvscope-audit-{stamp}.{fmt}")
    return response
