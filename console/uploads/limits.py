"""Upload handling: files stream to disk, with a size cap from settings."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler
from django.http import HttpRequest

# An uploaded file's name is kept to this many characters (most file systems' limit), its
# extension to MAX_EXTENSION_CHARS: a longer one is no log's, and Django names the
# temporary file after it, which the file system then refuses (a 500, not a form error).
MAX_NAME_CHARS = 255
MAX_EXTENSION_CHARS = 16


def safe_file_name(name: str) -> str:
    """`name`, cut to MAX_NAME_CHARS with its extension cut to MAX_EXTENSION_CHARS (the
    end of the stem goes first, so a log's extension survives)."""
    stem, extension = os.path.splitext(name)
    if len(name) <= MAX_NAME_CHARS and len(extension) <= MAX_EXTENSION_CHARS:
        return name
    extension = extension[:MAX_EXTENSION_CHARS]
    return stem[: MAX_NAME_CHARS - len(extension)] + extension


def files_refused(request: HttpRequest) -> str | None:
    """The form error for files past KVSCOPE_UPLOAD_MAX_FILES (none of them was kept)."""
    refused = getattr(request, "upload_files_refused", 0)
    if not refused:
        return None
    limit = settings.KVSCOPE_UPLOAD_MAX_FILES
    files = "file" if limit == 1 else "files"
    return (f"At most {limit:,} {files} per upload; {limit + refused:,} were chosen. Upload "
            "them in several uploads, or join them into fewer files first.")  # fmt: skip


class SizeLimitedUploadHandler(TemporaryFileUploadHandler):
    """Every file goes to a temporary file on disk (never whole into memory), and the
    request stops being read once it passes KVSCOPE_UPLOAD_MAX_BYTES. The view then finds
    `request.upload_too_large` set and says so. Files past KVSCOPE_UPLOAD_MAX_FILES are
    dropped, never stored (counted in `request.upload_files_refused`), and names are made
    safe, so neither is a bare 400 or a 500: the form says what is wrong."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        # No refusal on Content-Length here: Django does not catch StopUpload at this point
        # (a 500); counting chunks below stops the read just as early, on disk only.
        self._seen = 0
        self._files = 0
        self._dropping = False
        return super().handle_raw_input(input_data, META, content_length, boundary, encoding)

    def new_file(self, field_name, file_name, *args, **kwargs):
        self._files += 1
        # past the limit: no temporary file; the bytes still count against the size cap
        # (Django's SkipFile would read them uncounted), then go nowhere
        self._dropping = self._files > settings.KVSCOPE_UPLOAD_MAX_FILES
        if self._dropping:
            self.request.upload_files_refused = self._files - settings.KVSCOPE_UPLOAD_MAX_FILES
            return
        super().new_file(field_name, safe_file_name(file_name), *args, **kwargs)

    def receive_data_chunk(self, raw_data, start):
        self._seen += len(raw_data)
        if self._seen > settings.KVSCOPE_UPLOAD_MAX_BYTES:
            self._refuse()
        if self._dropping:
            return None
        return super().receive_data_chunk(raw_data, start)

    def file_complete(self, file_size):
        return None if self._dropping else super().file_complete(file_size)

    def _refuse(self):
        self.request.upload_too_large = True
        raise StopUpload(connection_reset=False)
