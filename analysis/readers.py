"""Log readers: lines in, one request record per usable line out, streamed.

Two formats share one interface (`Reader.parse(obj, line)`):
- chat-completion JSONL (OpenAI chat `messages`, at the top level or under `request`/`body`);
- pre-hashed traces in Mooncake's format (`timestamp` ms, `input_length`, `output_length`,
  `hash_ids`).
Files may be plain or gzip; gzip is recognised by its magic bytes, not by the name.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import numpy as np
import orjson

from analysis.dedupe import SeenIds
from analysis.errors import ErrorLog, LineError, UnusableInput
from analysis.timestamps import NO_ZONE_NOTE, ms_to_us, parse_timestamp

GZIP_MAGIC = b"\x1f\x8b"
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
# Parts known to carry no prompt text (images, audio, refusals): ignored without a word.
NON_TEXT_PART_TYPES = frozenset({"image_url", "input_image", "image", "input_audio", "audio",
                                 "output_audio", "refusal", "video_url", "image_file"})  # fmt: skip
# Roles of the chat-completion formats (OpenAI, Llama's ipython); any other is a bad line.
KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function",
                         "ipython"})  # fmt: skip
# Parts that carry a document's text explicitly: the message counts as a document.
DOCUMENT_PART_TYPES = frozenset({"document", "file", "input_file"})
# Roles whose content is an instruction (metrics.md section 1).
INSTRUCTION_ROLES = frozenset({"system", "developer"})
# No model has a context anywhere near this; larger counts are corrupt, not traffic.
MAX_TOKENS = 1 << 40
# A pre-hashed trace's own block size: Mooncake's hash_ids are 512-token prefix blocks.
TRACE_BLOCK_TOKENS = 512
# Sizes a trace's hash_ids may have been made with, tried when they contradict input_length
# at the size asked for: the format's own first (the advice prefers it), then the usual
# cache blocks and chunks (vLLM 16, LMCache 256, ...).
TRACE_BLOCK_SIZES = (TRACE_BLOCK_TOKENS, 16, 32, 64, 128, 256, 1024, 2048)


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
class ReadLimits:
    """What a log may cost before reading it stops being worth it (settings in the console)."""

    max_line_bytes: int = 64 << 20  # one request; bigger is a broken or hostile file
    max_inflated_bytes: int = 64 << 30  # a gzip log, decompressed
    max_inflate_ratio: int = 200  # decompressed / compressed: text logs are far below


class InflateLimit(UnusableInput):
    """A gzip log that decompresses past the limits (a zip bomb): read no further."""


class InflateGuard(io.RawIOBase):
    """Gzip decompression (concatenated members too) that raises InflateLimit as soon as
    it has produced more than the limits allow, so a zip bomb is stopped early, never
    inflated whole. Unlike gzip.GzipFile it hands out everything before a cut, then
    raises EOFError, so a truncated log keeps all its complete lines."""

    def __init__(self, raw: IO[bytes], path: Path, limits: ReadLimits, owns_raw: bool = False):
        self._raw = raw
        self._owns_raw = owns_raw
        self._name = path.name
        self._compressed = path.stat().st_size
        self._limits = limits
        self.limit = min(limits.max_inflated_bytes, limits.max_inflate_ratio * self._compressed)
        self.inflated = 0
        self._z = zlib.decompressobj(wbits=31)
        self._input = b""
        self._in_member = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        size = len(buffer)
        while True:
            if not self._input:
                self._input = self._raw.read(1 << 16)
                if not self._input:
                    if self._in_member and not self._z.eof:
                        raise EOFError("the file ends before the gzip end-of-stream marker")
                    return 0
            if self._z.eof:  # another gzip member follows, or zero padding (as gzip allows)
                self._input = self._input.lstrip(b"\x00")
                self._in_member = False
                if not self._input:
                    continue
                self._z = zlib.decompressobj(wbits=31)
            # small pieces: a damaged stream fails at the end of its member (the CRC), and
            # everything handed out before that is kept
            data = self._z.decompress(self._input, min(size, 1 << 16))
            self._in_member = True
            self._input = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
            if data:
                break
        buffer[: len(data)] = data
        self.inflated += len(data)
        if self.inflated > self.limit:
            raise InflateLimit(
                f"{self._name}: decompresses to more than {self.limit:,} bytes "
                f"({self._limits.max_inflate_ratio}x its {self._compressed:,} bytes, at most "
                f"{self._limits.max_inflated_bytes:,}); reading stopped there"
            )
        return len(data)

    def close(self) -> None:
        if self._owns_raw:
            self._raw.close()
        super().close()


def open_gzip(path: Path, limits: ReadLimits, raw: IO[bytes] | None = None) -> InflateGuard:
    """A gzip file, decompressed under the inflate limits (`raw`: already open, at 0)."""
    if raw is None:
        return InflateGuard(open(path, "rb"), path, limits, owns_raw=True)
    return InflateGuard(raw, path, limits)


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

    def __init__(
        self,
        path: str | Path,
        byte_range: ByteRange | None = None,
        limits: ReadLimits | None = None,
    ):
        self.path = Path(path)
        self.byte_range = byte_range
        self.limits = limits or ReadLimits()
        total = self.path.stat().st_size
        self.size = total if byte_range is None else byte_range.end - byte_range.start
        self._raw: IO[bytes] | None = None
        # set when a gzip stream ended early: (first line not read, reason)
        self.truncated: tuple[int, str] | None = None

    def lines(self) -> Iterator[tuple[int, bytes | LineError]]:
        """(line number, raw line); a line over the length limit comes as a LineError
        (decode_line raises it), read past without holding it."""
        if self.byte_range is not None:
            yield from self._range_lines(self.byte_range)
            return
        self.truncated = None
        with open(self.path, "rb") as raw:
            self._raw = raw
            if raw.read(2) == GZIP_MAGIC:
                raw.seek(0)
                stream = io.BufferedReader(open_gzip(self.path, self.limits, raw), 1 << 20)
                yield from self._gzip_lines(stream)
            else:
                raw.seek(0)
                yield from self._split(raw, 1)
            self._raw = None

    def _gzip_lines(self, stream: IO[bytes]) -> Iterator[tuple[int, bytes | LineError]]:
        """Lines of a gzip log (InflateGuard stops a zip bomb); a truncated or corrupt
        stream ends the file: the lines before it are kept, and it is said."""
        number = 0
        lines = self._split(stream, 1)
        while True:
            try:
                number, line = next(lines)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as exc:
                self.truncated = (number + 1, f"the gzip stream is cut or corrupt ({exc}); "
                                  "the lines before it were kept")  # fmt: skip
                return
            yield number, line

    def _split(self, stream: IO[bytes], first: int) -> Iterator[tuple[int, bytes | LineError]]:
        cap = self.limits.max_line_bytes
        number = first
        while line := stream.readline(cap + 1):
            if len(line) > cap and not line.endswith(b"\n"):
                length = len(line)
                while (rest := stream.readline(1 << 20)) and not rest.endswith(b"\n"):
                    length += len(rest)
                length += len(rest)
                line = LineError(f"the line is {length:,} bytes, over the limit of {cap:,}")
            yield number, line
            number += 1

    def _range_lines(self, part: ByteRange) -> Iterator[tuple[int, bytes | LineError]]:
        with open(self.path, "rb") as raw:
            raw.seek(part.start)
            position = raw.tell()
            for number, line in self._split(raw, part.first_line):
                if position >= part.end:
                    break
                yield number, line
                position = raw.tell()

    def bytes_read(self) -> int:
        raw = self._raw
        return raw.tell() if raw is not None and not raw.closed else self.size


def decode_line(raw: bytes | LineError) -> dict | None:
    """The JSON object on a line; None for a blank line. Raises LineError."""
    if isinstance(raw, LineError):
        raise raw
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
        self._ids = SeenIds()
        self._unknown_parts: set[str] = set()

    def parse(self, obj: dict, line: int) -> ChatRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us, assumed_utc = parse_timestamp(obj["timestamp"])
        if assumed_utc:
            self._errors.note(NO_ZONE_NOTE)
        raw_messages = _first(obj, ("messages",), ("request", "messages"), ("body", "messages"))
        if not isinstance(raw_messages, list) or not raw_messages:
            raise LineError("no messages (looked at messages, request.messages, body.messages)")
        unknown: list[str] = []
        messages = [_message(item, index, unknown) for index, item in enumerate(raw_messages)]
        output = _first(
            obj,
            ("usage", "completion_tokens"),
            ("response", "usage", "completion_tokens"),
            ("output_tokens",),
        )
        output_tokens = _token_count(output, "output token count")
        request_id = _first(obj, ("id",), ("request_id",), ("custom_id",))
        # the last check: a line refused for another reason does not claim its id
        if (isinstance(request_id, str | int) and not isinstance(request_id, bool)
                and not self._ids.add(str(request_id))):  # fmt: skip
            raise LineError(f"request id {str(request_id)[:80]!r} was already used by an "
                            "earlier line (logged twice?); the first was kept")  # fmt: skip
        for kind in unknown:
            if kind not in self._unknown_parts:
                self._unknown_parts.add(kind)
                self._errors.note(f"content parts of unknown type {kind[:40]!r} were ignored "
                                  f"(first on line {line})")  # fmt: skip
        return ChatRequest(
            line=line,
            t_us=t_us,
            tenant=_as_str(_first(obj, ("tenant",), ("metadata", "tenant"))),
            user=_as_str(_first(obj, ("user",), ("metadata", "user"))),
            model=_as_str(_first(obj, ("model",), ("request", "model"), ("body", "model"))),
            messages=messages,
            output_tokens=output_tokens,
        )


def _message(item: object, index: int, unknown: list[str]) -> Message:
    """One message; the types of content parts it ignored without knowing them go to
    `unknown`."""
    if not isinstance(item, dict):
        raise LineError(f"message {index} is not an object")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise LineError(f"message {index} has no role")
    if role not in KNOWN_ROLES:
        raise LineError(f"message {index} has the unknown role {role[:40]!r} "
                        f"(known: {', '.join(sorted(KNOWN_ROLES))})")  # fmt: skip
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
        if not isinstance(kind, str):
            unknown.append(repr(kind)[:40])
            continue
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in DOCUMENT_PART_TYPES:
            text, part_label = _document_part(part)
            if text is not None:
                texts.append(text)
                is_document = True
                label = label or part_label
        elif kind not in NON_TEXT_PART_TYPES and kind not in TEXT_PART_TYPES | DOCUMENT_PART_TYPES:
            unknown.append(kind)
        # Parts that carry no prompt text (images, audio, ...) are ignored.
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
def blocks_fit(
    input_length: int | np.ndarray, nblocks: int | np.ndarray, block_tokens: int
) -> bool | np.ndarray:
    """Whether `nblocks` hash_ids cover `input_length` (>= 0) tokens at `block_tokens` per
    block: all full but the last, which holds 1..B tokens; no ids only for no tokens. For
    ints (the line reader) and arrays (analysis.fasttrace): one rule on both paths."""
    return ((nblocks - 1) * block_tokens < input_length) & (input_length <= nblocks * block_tokens)


class MooncakeReader:
    name = "mooncake"

    def __init__(self, errors: ErrorLog, block_tokens: int):
        self._errors = errors
        self._block_tokens = block_tokens
        # the other sizes every line's hash_ids fit so far, and how many lines contradict
        # the size asked for: when all of them fit another size, the errors say so
        self._fitting = [b for b in TRACE_BLOCK_SIZES if b != block_tokens]
        self._contradictions = 0
        errors.advisor = self.advice

    def advice(self) -> str:
        """What mends the contradicting lines, when one other block size fits every line
        read ("" when none does, or nothing contradicts)."""
        if not self._contradictions or not self._fitting:
            return ""
        size = self._fitting[0]  # the format's own when it fits (TRACE_BLOCK_SIZES' order)
        own = ", or leave the block size to the format" if size == TRACE_BLOCK_TOKENS else ""
        lines = f"{self._contradictions:,} line{'s' if self._contradictions != 1 else ''}"
        return (f"hash_ids contradict input_length on {lines} at {self._block_tokens} tokens "
                f"per block; they fit {size}: upload again with {size}{own}")  # fmt: skip

    def parse(self, obj: dict, line: int) -> TraceRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us = ms_to_us(obj["timestamp"])
        input_length = _token_count(obj.get("input_length"), "input_length")
        if input_length < 0:
            raise LineError("no input_length")
        hash_ids = _hash_ids(obj.get("hash_ids"))
        blocks = hash_ids.size
        if blocks and self._fitting:
            self._fitting = [b for b in self._fitting if blocks_fit(input_length, blocks, b)]
        # The last id holds input_length - B*(blocks-1) tokens, which must be 1..B.
        if blocks and not blocks_fit(input_length, blocks, self._block_tokens):
            self._contradictions += 1
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
    try:  # C speed; the dtype tells whether they were all integers
        ids = np.array(value)
    except (ValueError, OverflowError, TypeError):  # ragged lists and the like
        raise LineError("hash_ids is not a list of 64-bit integers") from None
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
