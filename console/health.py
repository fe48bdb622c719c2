"""The site's health check, outside every wing: is the database reachable from here."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """200 only if this process can reach the database: a web container that cannot serve a
    single page must not be reported healthy (nor kept in a load balancer)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        connection.close()  # the next check reconnects
        return HttpResponse(
            f"database unreachable: {type(exc).__name__}: {exc}".strip()[:500],
            status=503,
            content_type="text/plain",
        )
    return HttpResponse("ok", content_type="text/plain")
