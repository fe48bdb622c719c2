"""What an uploaded file must look like before it is stored: a log's name and its first
bytes (JSON lines, plain or gzip). Anything else is refused at the form, with the reason."""

from __future__ import annotations

from analysis.readers import GZIP_MAGIC

LOG_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".log", ".txt", ".trace")
UTF8_BOM = b"\xef\xbb\xbf"


def refusal(name: str, head: bytes) -> str | None:
    """Why a file named `name` starting with `head` is not a log we read (None: fine)."""
    lower = name.lower()
    base = lower[:-3] if lower.endswith(".gz") else lower
    if not base.endswith(LOG_EXTENSIONS):
        return (f"{name}: not a log file name (expected {', '.join(LOG_EXTENSIONS)}, "
                "optionally followed by .gz)")  # fmt: skip
    if head.startswith(GZIP_MAGIC):
        return None
    if lower.endswith(".gz"):
        return f"{name}: named .gz but not gzip-compressed"
    text = head.removeprefix(UTF8_BOM).lstrip(b" \t\r\n")
    if not text:
        return None if not head.strip() else f"{name}: holds only blank space"
    if not text.startswith(b"{"):
        shown = text[:12].decode("utf-8", "replace")
        return (f"{name}: does not look like JSON lines (it starts with {shown!r}, not "
                "with a JSON object)")  # fmt: skip
    return None
