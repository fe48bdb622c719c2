"""What every wing's views share: ids from query strings, downloads, the 403 page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render

from console.policies import audit


def is_id(value: str) -> bool:
    """A primary key from a query string: ASCII digits that fit a 64-bit integer."""
    return value.isascii() and value.isdigit() and len(value) <= 18


def attachment(response: HttpResponseBase, filename: str) -> HttpResponseBase:
    """Mark a response as a file the browser saves (not shows)."""
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def download(content: str | bytes, filename: str, content_type: str) -> HttpResponse:
    """A file the browser saves (not shows)."""
    response = HttpResponse(content, content_type=content_type)
    attachment(response, filename)
    return response


def record_forbidden(request: HttpRequest, reason: str) -> None:
    """auth.forbidden: a page refused (403) to the user signed in, named by its URL name
    (the path, with its ids, in the details)."""
    match = request.resolver_match
    page = match.url_name if match is not None and match.url_name else request.path
    user = request.user if request.user.is_authenticated else None
    details = {"path": request.path[:300], "method": request.method, "reason": reason}
    audit.record_unless_broken(actor=user, action="auth.forbidden", object_type="Page",
                               object_id=page, details=details)  # fmt: skip


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """The 403 page with the reason in words (recorded in the audit trail)."""
    record_forbidden(request, message)
    return render(request, "403.html", {"exception": message}, status=403)
