"""Response headers the whole console shares, and static files with long-lived caching."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware

from console.staticfinders import STATIC_PATH

# Scripts only from the console itself: no inline <script> and no on*= handlers (the
# templates keep data in json_script blocks, which are not executed, and behaviour in
# static/js). plotly.js sets style attributes and adds <style> elements as it draws, hence
# 'unsafe-inline' for styles (styles cannot run code); the favicon is a data: URL.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class ContentSecurityPolicyMiddleware:
    """Content-Security-Policy on every response: pages, downloads, static files, errors
    (listed first in MIDDLEWARE, so whitenoise's static responses pass through it too)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response


class ServerTimingMiddleware:
    """`Server-Timing: app;dur=<ms>` on every response: the time the console spent on the
    request (a streamed body's generation not included), which browsers' developer tools
    show beside the network's, and the load benchmark reads beside its clients' latency."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        spent_ms = (time.perf_counter() - start) * 1000
        response.headers.setdefault("Server-Timing", f"app;dur={spent_ms:.1f}")
        return response


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise, plus: plotly.js is immutable under its versioned name in development
    too. Production's manifest storage hashes every name (whitenoise's own test knows
    those); in development (DEBUG, files found by the finders) names are plain, and only
    plotly's carries the plotly version, so a browser may keep its 4.8 MB forever."""

    def immutable_file_test(self, path: str, url: str) -> bool:
        plotly = url == self.static_prefix + STATIC_PATH
        return plotly or super().immutable_file_test(path, url)
