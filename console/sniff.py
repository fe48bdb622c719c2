"""What an uploaded file must look like before it is stored: a log's name and its first
bytes (JSON lines or a gateway CSV, plain or gzip), a tokenizer's size and JSON. Anything
else is refused at the form, with the reason."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from analysis.hf_tokenizer import check_tokenizer_json
from analysis.readers import GZIP_MAGIC
from analysis.tokens import EncodingUnavailable

LOG_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".log", ".txt", ".trace", ".csv")
UTF8_BOM = b"\xef\xbb\xbf"
# the column of a gateway export that holds each request's body (metrics.md section 7)
CSV_BODY_COLUMN = b"request_json"


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
    if base.endswith(".csv"):
        return _csv_refusal(name, text)
    if not text.startswith(b"{"):
        shown = text[:12].decode("utf-8", "replace")
        return (f"{name}: does not look like JSON lines (it starts with {shown!r}, not "
                "with a JSON object)")  # fmt: skip
    return None


def _csv_refusal(name: str, text: bytes) -> str | None:
    """A gateway CSV's header must name its request_json column (a header longer than the
    bytes read is left to the reader)."""
    header, newline, _ = text.partition(b"\n")
    if newline and CSV_BODY_COLUMN not in header.lower():
        shown = header.strip()[:60].decode("utf-8", "replace")
        return (f"{name}: a gateway CSV needs a request_json column holding each request's "
                f"body; its header is {shown!r}")  # fmt: skip
    return None


# a tokenizer.json holds its vocabulary and merges: Llama 3's is 9 MB, Qwen 2.5's 7 MB
TOKENIZER_MAX_BYTES = 50 << 20


def tokenizer_refusal(name: str, size: int, read: Callable[[], bytes]) -> str | None:
    """Why the file named `name`, of `size` bytes, is not a Hugging Face tokenizer.json
    (None: fine); `read` gives its bytes, called only when the size is fine."""
    if size > TOKENIZER_MAX_BYTES:
        return (f"{name}: {size / (1 << 20):,.1f} MB is more than a tokenizer.json holds "
                f"(at most {TOKENIZER_MAX_BYTES >> 20} MB)")  # fmt: skip
    raw = read()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"{name}: not a tokenizer.json: it is not JSON ({exc})"
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        return (f"{name}: not a tokenizer.json: a Hugging Face tokenizer is a JSON object "
                "with a \"model\" entry (the file saved by tokenizer.save())")  # fmt: skip
    try:  # what the ingest will read it with: valid JSON with a "model" may be no tokenizer
        check_tokenizer_json(raw.decode("utf-8"), name)  # (orjson has checked the UTF-8)
    except EncodingUnavailable as exc:
        return str(exc)
    return None
