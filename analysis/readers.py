"""Log readers: lines in, one request record per usable line out, streamed.

Two formats share one interface (`Reader.parse(obj, line)`):
- chat-completion JSONL (OpenAI chat `messages`, at the top level or under `request`/`body`);
- pre-hashed traces in Mooncake's format (`timestamp` ms, `input_length`, `output_length`,
  `hash_ids`).
Files may be plain or gzip; gzip is recognised by its magic bytes, not by the name.
"""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import numpy as np
import orjson

from analysis.errors import ErrorLog, LineError, UnusableInput
from analysis.timestamps import NO_ZONE_NOTE, ms_to_us, parse_timestamp

GZIP_MAGIC = b"\x1f\x8b"
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
# Parts that carry a document's text explicitly: the message counts as a document.
DOCUMENT_PART_TYPES = frozenset({"document", "file", "input_file"})
# Roles whose content is an instruction (metrics.md section 1).
INSTRUCTION_ROLES = frozenset({"system", "developer"})
# No model has a context anywhere near this; larger counts are corrupt, not traffic.
MAX_TOKENS = 1 << 40


@dataclass(slots=True)
class Message:
    role: str
    text: str
    is_document: bool = False
    label: str = ""


@dataclass(slots=True)
class ChatRequest:
    line: int
    t_us: int
    tenant: str
    user: str
    model: str
    messages: list[Message]
    output_tokens: int  # -1 when the log does not say


@dataclass(slots=True)
class TraceRequest:
    line: int
    t_us: int
    tenant: str
    user: str
    model: str
    input_length: int
    output_tokens: int
    hash_ids: np.ndarray  # uint64 keys


Request = ChatRequest | TraceRequest


class Reader(Protocol):
    name: str

    def parse(self, obj: dict, line: int) -> Request: ...


# --- lines -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ByteRange:
    """Part of a plain log: the lines that start in [start, end); the first is line
    `first_line` of the file (so errors name the file's own line numbers)."""

    start: int
    end: int
    first_line: int


def split_lines(path: str | Path, parts: int, chunk: int = 1 << 20) -> list[ByteRange]:
    """About equal, line-aligned byte ranges of a plain (not gzip) file, for parallel
    ingest. One read of the file, counting newlines."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if fh.read(2) == GZIP_MAGIC:
            raise ValueError(f"{path.name}: a gzip file cannot be split; ingest it whole")
    targets = [size * i // parts for i in range(1, parts)]
    bounds, lines_before = [0], [1]
    offset, lines = 0, 0
    with open(path, "rb") as fh:
        while targets and (data := fh.read(chunk)):
            while targets:
                at = max(targets[0] - offset, 0)
                newline = data.find(b"\n", at)
                if newline < 0:
                    break
                cut = offset + newline + 1
                targets.pop(0)
                if cut > bounds[-1] and cut < size:
                    bounds.append(cut)
                    lines_before.append(lines + data.count(b"\n", 0, newline + 1) + 1)
            lines += data.count(b"\n")
            offset += len(data)
    bounds.append(size)
    return [ByteRange(bounds[i], bounds[i + 1], lines_before[i]) for i in range(len(bounds) - 1)]


class LogFile:
    """A log opened for streaming: yields (line number, raw bytes) and reports progress
    in bytes of the file on disk (compressed bytes for gzip). With a ByteRange, only the
    lines that start inside it (plain files only)."""

    def __init__(self, path: str | Path, byte_range: ByteRange | None = None):
        self.path = Path(path)
        self.byte_range = byte_range
        total = self.path.stat().st_size
        self.size = total if byte_range is None else byte_range.end - byte_range.start
        self._raw: IO[bytes] | None = None

    def lines(self) -> Iterator[tuple[int, bytes]]:
        if self.byte_range is not None:
            yield from self._range_lines(self.byte_range)
            return
        with open(self.path, "rb") as raw:
            self._raw = raw
            stream: IO[bytes] = raw
            if raw.read(2) == GZIP_MAGIC:
                raw.seek(0)
                stream = io.BufferedReader(gzip.GzipFile(fileobj=raw))  # type: ignore[arg-type]
            else:
                raw.seek(0)
            try:
                yield from enumerate(stream, 1)
            except (OSError, EOFError) as exc:  # truncated or corrupt gzip
                raise UnusableInput(f"{self.path.name}: cannot decompress: {exc}") from None
            finally:
                self._raw = None

    def _range_lines(self, part: ByteRange) -> Iterator[tuple[int, bytes]]:
        with open(self.path, "rb") as raw:
            raw.seek(part.start)
            position = part.start
            for number, line in enumerate(raw, part.first_line):
                if position >= part.end:
                    break
                yield number, line
                position += len(line)

    def bytes_read(self) -> int:
        raw = self._raw
        return raw.tell() if raw is not None and not raw.closed else self.size


def decode_line(raw: bytes) -> dict | None:
    """The JSON object on a line; None for a blank line. Raises LineError."""
    if not raw.strip():
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise LineError(f"not valid JSON ({exc.args[0].split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise LineError(f"a JSON {type(obj).__name__}, not an object")
    return obj


# --- field helpers ---------------------------------------------------------------------
def _first(obj: dict, *paths: tuple[str, ...]) -> object:
    """The first present, non-null value among dotted paths."""
    for path in paths:
        node: object = obj
        for key in path:
            if not isinstance(node, dict) or key not in node:
                node = None
                break
            node = node[key]
        if node is not None:
            return node
    return None


def _as_str(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _token_count(value: object, what: str) -> int:
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int):
        raise LineError(f"{what} {value!r} is not a whole number")
    if value < 0:
        raise LineError(f"{what} {value} is negative")
    if value > MAX_TOKENS:
        raise LineError(f"{what} {value} is absurd (more than {MAX_TOKENS:,})")
    return value


# --- chat-completion JSONL -------------------------------------------------------------
class ChatReader:
    name = "chat"

    def __init__(self, errors: ErrorLog):
        self._errors = errors

    def parse(self, obj: dict, line: int) -> ChatRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us, assumed_utc = parse_timestamp(obj["timestamp"])
        if assumed_utc:
            self._errors.note(NO_ZONE_NOTE)
        raw_messages = _first(obj, ("messages",), ("request", "messages"), ("body", "messages"))
        if not isinstance(raw_messages, list) or not raw_messages:
            raise LineError("no messages (looked at messages, request.messages, body.messages)")
        messages = [_message(item, index) for index, item in enumerate(raw_messages)]
        output = _first(
            obj,
            ("usage", "completion_tokens"),
            ("response", "usage", "completion_tokens"),
            ("output_tokens",),
        )
        return ChatRequest(
            line=line,
            t_us=t_us,
            tenant=_as_str(_first(obj, ("tenant",), ("metadata", "tenant"))),
            user=_as_str(_first(obj, ("user",), ("metadata", "user"))),
            model=_as_str(_first(obj, ("model",), ("request", "model"), ("body", "model"))),
            messages=messages,
            output_tokens=_token_count(output, "output token count"),
        )


def _message(item: object, index: int) -> Message:
    if not isinstance(item, dict):
        raise LineError(f"message {index} is not an object")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise LineError(f"message {index} has no role")
    content = item.get("content")
    if content is None or isinstance(content, str):
        return Message(role=role, text=content or "")
    if not isinstance(content, list):
        raise LineError(f"message {index} content is neither text nor a list of parts")
    texts: list[str] = []
    is_document = False
    label = ""
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in DOCUMENT_PART_TYPES:
            text, part_label = _document_part(part)
            if text is not None:
                texts.append(text)
                is_document = True
                label = label or part_label
        # Other parts (images, audio, ...) carry no prompt text: ignored.
    return Message(role=role, text="".join(texts), is_document=is_document, label=label)


def _document_part(part: dict) -> tuple[str | None, str]:
    """Text and label of a document/file part: {"type": "document", "text": ..., "title": ...}
    or the same fields nested under the part's type key ({"type": "file", "file": {...}})."""
    for node in (part, part.get(part.get("type", ""))):
        if isinstance(node, dict) and isinstance(node.get("text"), str):
            label = next(
                (node[k] for k in ("title", "name", "filename") if isinstance(node.get(k), str)),
                "",
            )
            return node["text"], label
    return None, ""


# --- Mooncake pre-hashed traces --------------------------------------------------------
class MooncakeReader:
    name = "mooncake"

    def __init__(self, errors: ErrorLog, block_tokens: int):
        self._errors = errors
        self._block_tokens = block_tokens

    def parse(self, obj: dict, line: int) -> TraceRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us = ms_to_us(obj["timestamp"])
        input_length = _token_count(obj.get("input_length"), "input_length")
        if input_length < 0:
            raise LineError("no input_length")
        hash_ids = _hash_ids(obj.get("hash_ids"))
        blocks = hash_ids.size
        # The last id holds input_length - B*(blocks-1) tokens, which must be 1..B.
        last = input_length - self._block_tokens * (blocks - 1)
        if blocks and not 0 < last <= self._block_tokens:
            raise LineError(
                f"{blocks} hash_ids contradict input_length {input_length} at "
                f"{self._block_tokens} tokens per block"
            )
        if not blocks and input_length > 0:
            raise LineError(f"no hash_ids for input_length {input_length}")
        return TraceRequest(
            line=line,
            t_us=t_us,
            tenant=_as_str(_first(obj, ("tenant",), ("metadata", "tenant"))),
            user=_as_str(_first(obj, ("user",), ("metadata", "user"))),
            model=_as_str(obj.get("model")),
            input_length=input_length,
            output_tokens=_token_count(obj.get("output_length"), "output_length"),
            hash_ids=hash_ids,
        )


_KEY_MASK = (1 << 64) - 1


def _hash_ids(value: object) -> np.ndarray:
    """hash_ids as 64-bit keys (signed ids keep their two's-complement bits)."""
    if not isinstance(value, list):
        raise LineError("hash_ids is not a list of integers")
    if not value:
        return np.zeros(0, dtype=np.uint64)
    ids = np.array(value)  # C speed; the dtype tells whether they were all integers
    if ids.dtype.kind == "i" and ids.ndim == 1:
        return ids.astype(np.int64, copy=False).view(np.uint64)
    if ids.dtype.kind == "u" and ids.ndim == 1:
        return ids.astype(np.uint64, copy=False)
    # mixed sizes beyond int64, or not integers at all: check one by one
    if all(isinstance(h, int) and not isinstance(h, bool) and -(1 << 63) <= h <= _KEY_MASK
           for h in value):  # fmt: skip
        return np.array([h & _KEY_MASK for h in value], dtype=np.uint64)
    raise LineError("hash_ids is not a list of 64-bit integers")


def detect_format(obj: dict) -> str:
    """'mooncake' or 'chat' from the first valid line's shape."""
    if "hash_ids" in obj:
        return "mooncake"
    if _first(obj, ("messages",), ("request", "messages"), ("body", "messages")) is not None:
        return "chat"
    raise LineError("neither a chat request (messages) nor a pre-hashed trace (hash_ids)")
