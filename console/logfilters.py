"""Logging filters named by settings.LOGGING."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from django.http import Http404


class ExpectedRefusals(logging.Filter):
    """django.request logs every response to an exception with the exception attached, so a
    page refused to a role (PermissionDenied: 403) or not found (Http404) printed a whole
    traceback. Those are answers, not faults: keep the one warning line ("Forbidden
    (Permission denied): /path"), drop the traceback. Anything else keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied | Http404):
            record.exc_info = None
            record.exc_text = None
        return True
