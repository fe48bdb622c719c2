"""What every wing's views share: ids from query strings, downloads, the 403 page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render


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


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """The 403 page with the reason in words."""
    return render(request, "403.html", {"exception": message}, status=403)
