"""Log readers: lines in, one request record per usable line out, streamed.

Two formats share one interface (`Reader.parse(obj, line)`):
- chat-completion JSONL (OpenAI chat `messages`, at the top level or under `request`/`body`);
- pre-hashed traces in Mooncake's format (`timestamp` ms, `input_length`, `output_length`,
  `hash_ids`).
Files may be plain or gzip; gzip is recognised by its magic bytes, not by the name.
"""

from __future__ import annotations

import io
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

import numpy as np
import orjson

from analysis.dedupe import SeenIds
from analysis.errors import ErrorLog, LineError, UnusableInput
from analysis.timestamps import NO_ZONE_NOTE, check_plausible, ms_to_us, now_us, parse_timestamp

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
# The longest context any model offers (Llama 4 Scout: 10 M tokens): a longer prompt is
# not a request an engine served. Bounds a trace line's input_length and hash_ids.
MAX_PROMPT_TOKENS = 10_000_000
# More messages than any conversation an engine takes: refused before the line is
# parsed, since parsing them is where the memory goes (~1 kB a message).
MAX_MESSAGES = 100_000
# Lines longer than this are counted before they are parsed (precheck_line)
PRECHECK_BYTES = 1 << 20
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
    # blank lines allowed beyond one per line with content (None: any number); reading
    # them is cheap, but a file that is mostly blank is not a log
    max_blank_lines: int | None = 1_000_000


class InflateLimit(UnusableInput):
    """A gzip log that decompresses past the limits (a zip bomb): read no further."""


class InflateGuard(io.RawIOBase):
    """Gzip decompression (concatenated members too) that raises InflateLimit as soon as
    it has produced more than the limits allow, so a zip bomb is stopped early, never
    inflated whole. Unlike gzip.GzipFile it hands out everything before a cut, then
    raises EOFError, so a truncated log keeps all its complete lines."""

    def __init__(
        self,
        raw: IO[bytes],
        path: Path,
        limits: ReadLimits,
        owns_raw: bool = False,
        name: str | None = None,
    ):
        self._raw = raw
        self._owns_raw = owns_raw
        self._name = name or path.name
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


def open_gzip(
    path: Path, limits: ReadLimits, raw: IO[bytes] | None = None, name: str | None = None
) -> InflateGuard:
    """A gzip file, decompressed under the inflate limits (`raw`: already open, at 0;
    `name`: the file's name as the user knows it, for the messages)."""
    if raw is None:
        return InflateGuard(open(path, "rb"), path, limits, owns_raw=True, name=name)
    return InflateGuard(raw, path, limits, name=name)


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


class BlankLineLimit(UnusableInput):
    """A log that is mostly blank lines (whitespace only) past the budget: read no further.
    _read turns it into TooManyBadLines carrying what was skipped so far."""


_BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark: some tools write one per file, some per line
# bytes.isspace's set, so a line is blank exactly when bytes.strip() empties it
_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")
_CHUNK = 1 << 20  # bytes read at a time: blank runs are skipped a chunk at a time, in C


class LogFile:
    """A log opened for streaming: yields (line number, raw bytes) and reports progress
    in bytes of the file on disk (compressed bytes for gzip). With a ByteRange, only the
    lines that start inside it (plain files only). `name` is the file's name as the user
    knows it (the console stores uploads under generated names); every message uses it.

    Blank (whitespace-only) lines are never handed out: they are counted (blank_lines),
    skipped a chunk at a time, and past limits.max_blank_lines more than the lines with
    content the file is refused (BlankLineLimit). A UTF-8 byte-order mark at the start
    of the file or of any line is dropped."""

    def __init__(
        self,
        path: str | Path,
        byte_range: ByteRange | None = None,
        limits: ReadLimits | None = None,
        name: str | None = None,
    ):
        self.path = Path(path)
        self.name = name or self.path.name
        self.byte_range = byte_range
        self.limits = limits or ReadLimits()
        total = self.path.stat().st_size
        self.size = total if byte_range is None else byte_range.end - byte_range.start
        self._raw: IO[bytes] | None = None
        # set when a gzip stream ended early: (first line not read, reason)
        self.truncated: tuple[int, str] | None = None
        self.blank_lines = 0
        self.content_lines = 0
        # called after each chunk read, so progress moves even through a file of
        # nothing but blank lines (where no line is ever handed out)
        self.on_chunk: Callable[[], None] | None = None

    def lines(self) -> Iterator[tuple[int, bytes | bytearray | LineError]]:
        """(line number, raw line); a line over the length limit comes as a LineError
        (decode_line raises it), read past without holding it."""
        self.blank_lines = self.content_lines = 0
        if self.byte_range is not None:
            yield from self._range_lines(self.byte_range)
            return
        self.truncated = None
        with open(self.path, "rb") as raw:
            self._raw = raw
            if raw.read(2) == GZIP_MAGIC:
                raw.seek(0)
                stream = io.BufferedReader(open_gzip(self.path, self.limits, raw, self.name),
                                           _CHUNK)  # fmt: skip
                yield from self._gzip_lines(stream)
            else:
                raw.seek(0)
                yield from self._split(raw, 1)
            self._raw = None

    def _gzip_lines(self, stream: IO[bytes]) -> Iterator[tuple[int, bytes | bytearray | LineError]]:
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

    def _blank(self, count: int, number: int) -> None:
        self.blank_lines += count
        budget = self.limits.max_blank_lines
        if budget is not None and self.blank_lines > budget + self.content_lines:
            raise BlankLineLimit(
                f"{self.name}: stopped at line {number:,}: {self.blank_lines:,} blank "
                f"(whitespace-only) lines against {self.content_lines:,} with content, past "
                f"the budget of {budget:,} more blank lines than lines with content; "
                "is this a log?"
            )

    def _split(
        self, stream: IO[bytes], first: int, stop: int | None = None
    ) -> Iterator[tuple[int, bytes | bytearray | LineError]]:
        """Lines read a chunk at a time. Runs of whitespace between lines are skipped by one
        regex match each (a GiB of newlines is a thousand chunks, not a billion Python
        iterations) and counted as blank lines. `stop`: only lines that start before this
        offset of the stream (a byte range)."""
        cap = self.limits.max_line_bytes
        number = first  # the number of the line being read
        offset = 0  # of `data` in the stream
        carry: bytearray | None = None  # a line begun in an earlier chunk
        over = -1  # >= 0: the length so far of a line over the cap, being read past
        data = b""
        while True:
            offset += len(data)
            # read1: at most one read of the stream below, so a gzip cut or damage loses
            # nothing InflateGuard has handed out (read() would drop a half-filled chunk)
            data = stream.read1(_CHUNK)  # type: ignore[attr-defined]
            if self.on_chunk is not None:
                self.on_chunk()
            if not data:
                break
            pos, size = 0, len(data)
            if over >= 0 or carry is not None:
                newline = data.find(b"\n")
                end = size if newline < 0 else newline + 1
                # the cap is on the content; the length said counts the newline too
                if over < 0 and carry is not None and len(carry) + (newline if newline >= 0
                                                                    else size) > cap:  # fmt: skip
                    over, carry = len(carry), None
                if over >= 0:
                    over += end
                    if newline < 0:
                        continue
                    yield number, LineError(f"the line is {over:,} bytes, over the limit of "
                                            f"{cap:,}")  # fmt: skip
                    self.content_lines += 1
                    over = -1
                else:
                    assert carry is not None
                    carry += data[:end]
                    if newline < 0:
                        continue
                    line, carry = carry, None
                    if _blank_line(line):
                        self._blank(1, number)
                    else:
                        self.content_lines += 1
                        yield number, line
                number += 1
                pos = end
            while pos < size:
                # the whitespace (and byte-order marks) before the next content: blank lines
                end = _SPACE.match(data, pos).end()  # type: ignore[union-attr]
                while data.startswith(_BOM, end):
                    end = _SPACE.match(data, end + 3).end()  # type: ignore[union-attr]
                if stop is not None and offset + end >= stop:
                    blank = data.count(b"\n", pos, max(stop - offset, pos))
                    if blank:
                        self._blank(blank, number + blank - 1)
                    return
                blank = data.count(b"\n", pos, end)
                if blank:
                    number += blank
                    self._blank(blank, number - 1)  # (names the last blank line)
                pos = end
                if pos == size:
                    break
                newline = data.find(b"\n", pos)
                if newline < 0:  # the line goes on in the next chunk
                    if size - pos > cap:
                        over = size - pos  # read past, never held
                    else:
                        carry = bytearray(data[pos:])
                    break
                if newline - pos > cap:
                    line: bytes | LineError = LineError(
                        f"the line is {newline + 1 - pos:,} bytes, over the limit of {cap:,}"
                    )
                else:
                    line = data[pos : newline + 1]
                self.content_lines += 1
                yield number, line
                number += 1
                pos = newline + 1
        if over >= 0:
            self.content_lines += 1
            yield number, LineError(f"the line is {over:,} bytes, over the limit of {cap:,}")
        elif carry is not None and (stop is None or offset < stop):
            if _blank_line(carry):
                self._blank(1, number)
            else:
                self.content_lines += 1
                yield number, carry

    def _range_lines(self, part: ByteRange) -> Iterator[tuple[int, bytes | bytearray | LineError]]:
        with open(self.path, "rb") as raw:
            raw.seek(part.start)
            yield from self._split(raw, part.first_line, part.end - part.start)

    def bytes_read(self) -> int:
        raw = self._raw
        return raw.tell() if raw is not None and not raw.closed else self.size


def _content_start(line: bytes | bytearray) -> int:
    """Where a line's content starts, past whitespace and byte-order marks (no copy)."""
    end = _SPACE.match(line).end()  # type: ignore[union-attr]
    while line.startswith(_BOM, end):
        end = _SPACE.match(line, end + 3).end()  # type: ignore[union-attr]
    return end


def _blank_line(line: bytes | bytearray) -> bool:
    """Whitespace and byte-order marks only."""
    return _content_start(line) == len(line)


def decode_line(raw: bytes | bytearray | LineError) -> dict | None:
    """The JSON object on a line; None for a blank line. Raises LineError."""
    if isinstance(raw, LineError):
        raise raw
    start = _content_start(raw)  # a byte-order mark may start any line
    if start == len(raw):
        return None
    data = memoryview(raw)[start:] if start else raw
    if len(raw) > PRECHECK_BYTES:
        obj = _decode_long(data)
    else:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise LineError(f"not valid JSON ({exc.args[0].split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise LineError(f"a JSON {type(obj).__name__}, not an object")
    return obj


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")  # as orjson: NaN and Infinity are not JSON


def _decode_long(data: bytes | bytearray | memoryview) -> object:
    """A long line through the standard library's parser: orjson peaks at ~13 bytes per
    byte of a long string (208 MB for a 16 MB one), json at 2. Same strictness where it
    matters: NaN and Infinity are refused; too-big integers are refused by the fields."""
    try:
        # decoded as UTF-8 here: json.loads(bytes) would guess UTF-16 or -32 from nulls
        return json.loads(str(data, "utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise LineError("not valid JSON (str is not valid UTF-8)") from None
    except ValueError as exc:  # JSONDecodeError, and _no_constants
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise LineError(f"not valid JSON ({reason})") from None
    except RecursionError:
        raise LineError("not valid JSON (nested too deeply)") from None


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
        self._now = now_us()

    def parse(self, obj: dict, line: int) -> ChatRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us, assumed_utc = parse_timestamp(obj["timestamp"])
        check_plausible(t_us, obj["timestamp"], self._now)
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


@dataclass(frozen=True)
class TraceFit:
    """What a pre-hashed trace's lines say about the size its hash_ids were made with, as
    data (so the parts of a split ingest can be put together before it is worded): the
    size asked for, the other sizes every line read fits (TRACE_BLOCK_SIZES' order), and
    how many lines contradict the size asked for."""

    block_tokens: int
    fitting: tuple[int, ...]
    contradictions: int = 0

    def advice(self) -> str:
        """What mends the contradicting lines, when one other block size fits every line
        read ("" when none does, or nothing contradicts)."""
        if not self.contradictions or not self.fitting:
            return ""
        size = self.fitting[0]  # the format's own when it fits (TRACE_BLOCK_SIZES' order)
        own = ", or leave the block size to the format" if size == TRACE_BLOCK_TOKENS else ""
        lines = f"{self.contradictions:,} line{'s' if self.contradictions != 1 else ''}"
        return (f"hash_ids contradict input_length on {lines} at {self.block_tokens} tokens "
                f"per block; they fit {size}: retry with {size}{own}")  # fmt: skip

    def to_dict(self) -> dict:
        return {"block_tokens": self.block_tokens, "fitting": list(self.fitting),
                "contradictions": self.contradictions}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict | None) -> TraceFit | None:
        if not data:
            return None
        return cls(int(data["block_tokens"]), tuple(int(b) for b in data["fitting"]),
                   int(data["contradictions"]))  # fmt: skip

    @classmethod
    def combine(cls, fits: Iterable[TraceFit | None]) -> TraceFit | None:
        """The fit of the parts of one log read together: the sizes every part fits (in
        TRACE_BLOCK_SIZES' order), the parts' contradictions summed. None when no part
        read a trace line (or, never in one ingest, the parts asked for different sizes)."""
        found = [f for f in fits if f is not None]
        if not found or len({f.block_tokens for f in found}) != 1:
            return None
        fitting = tuple(b for b in TRACE_BLOCK_SIZES if all(b in f.fitting for f in found))
        return cls(found[0].block_tokens, fitting, sum(f.contradictions for f in found))


class MooncakeReader:
    name = "mooncake"

    def __init__(self, errors: ErrorLog, block_tokens: int):
        self._errors = errors
        self._block_tokens = block_tokens
        self._now = now_us()
        # the other sizes every line's hash_ids fit so far, and how many lines contradict
        # the size asked for: when all of them fit another size, the errors say so
        self._fitting = [b for b in TRACE_BLOCK_SIZES if b != block_tokens]
        self._contradictions = 0
        errors.advisor = self.fit

    def fit(self) -> TraceFit:
        """The lines read so far, as data (see TraceFit)."""
        return TraceFit(self._block_tokens, tuple(self._fitting), self._contradictions)

    def advice(self) -> str:
        """What mends the contradicting lines, when one other block size fits every line
        read ("" when none does, or nothing contradicts)."""
        return self.fit().advice()

    def parse(self, obj: dict, line: int) -> TraceRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us = check_plausible(ms_to_us(obj["timestamp"]), obj["timestamp"], self._now, True)
        input_length = _token_count(obj.get("input_length"), "input_length")
        if input_length < 0:
            raise LineError("no input_length")
        _plausible_prompt(input_length, obj.get("hash_ids"), self._block_tokens)
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


def max_blocks(block_tokens: int) -> int:
    """The most hash_ids a trace line may have: MAX_PROMPT_TOKENS in blocks."""
    return -(-MAX_PROMPT_TOKENS // block_tokens)


def _plausible_prompt(input_length: int, hash_ids: object, block_tokens: int) -> None:
    """A trace line's prompt must fit the longest context a model has (checked before
    the ids are converted: 200,000 of them would be 12 TiB of KV cache recommended)."""
    if input_length > MAX_PROMPT_TOKENS:
        raise LineError(f"input_length {input_length:,} is more than any model's context "
                        f"({MAX_PROMPT_TOKENS:,} tokens)")  # fmt: skip
    if isinstance(hash_ids, list) and len(hash_ids) > max_blocks(block_tokens):
        raise LineError(
            f"{len(hash_ids):,} hash_ids are more blocks than any model's context holds "
            f"({MAX_PROMPT_TOKENS:,} tokens = {max_blocks(block_tokens):,} blocks of "
            f"{block_tokens})"
        )


def precheck_line(raw: bytes | bytearray, trace_block_tokens: int | None) -> None:
    """Refuse a long line before parsing it when counting its bytes already shows it is
    implausible (parsing is what costs the memory): more than MAX_MESSAGES messages, or,
    in a trace (trace_block_tokens: its block size), more hash_ids than max_blocks.
    Counts are upper bounds (a \"role\" key or a comma per item), so nothing valid is
    refused."""
    if len(raw) <= PRECHECK_BYTES:
        return
    messages = raw.count(b'"role"')
    if messages > MAX_MESSAGES:
        raise LineError(f"about {messages:,} messages in one request, more than "
                        f"{MAX_MESSAGES:,}; not read")  # fmt: skip
    if trace_block_tokens is not None:
        items = raw.count(b",") + 1
        if items > max_blocks(trace_block_tokens) + 16:  # (room for the other fields)
            raise LineError(
                f"about {items:,} hash_ids, more blocks than any model's context holds "
                f"({MAX_PROMPT_TOKENS:,} tokens = {max_blocks(trace_block_tokens):,} blocks "
                f"of {trace_block_tokens}); not read"
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
