"""Upload handling: files stream to disk, with a size cap from settings."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


class SizeLimitedUploadHandler(TemporaryFileUploadHandler):
    """Every file goes to a temporary file on disk (never whole into memory), and the
    request stops being read once it passes KVSCOPE_UPLOAD_MAX_BYTES. The view then finds
    `request.upload_too_large` set and says so."""

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        # No refusal on Content-Length here: Django does not catch StopUpload at this point
        # (a 500); counting chunks below stops the read just as early, on disk only.
        self._seen = 0
        return super().handle_raw_input(input_data, META, content_length, boundary, encoding)

    def receive_data_chunk(self, raw_data, start):
        self._seen += len(raw_data)
        if self._seen > settings.KVSCOPE_UPLOAD_MAX_BYTES:
            self._refuse()
        return super().receive_data_chunk(raw_data, start)

    def _refuse(self):
        self.request.upload_too_large = True
        raise StopUpload(connection_reset=False)
