"""Gateway CSV logs (metrics.md section 7): one request a row, its body (OpenAI chat,
Anthropic Messages or OpenAI Responses) in a `request_json` cell, its time, model and
sender perhaps in columns of their own. Each row becomes the object a JSONL line would
hold, so the ChatReader reads both alike; a row is numbered by its first line (a quoted
cell may hold newlines), as a JSONL log's lines are numbered."""

from __future__ import annotations

import csv
import io
import zlib
from collections.abc import Generator, Iterator

from analysis.errors import LineError, UnusableInput
from analysis.readers.chat import BODY_PATHS, SESSION_PATHS
from analysis.readers.decode import decode_line, precheck_line
from analysis.readers.fields import first
from analysis.readers.inflate import InflateGuard
from analysis.readers.lines import LogFile

REQUEST_COLUMN = "request_json"
TIME_COLUMNS = ("timestamp", "ts", "created_at")  # the first present, non-empty one
# the other columns a row may carry -> the key its object gets when the body has none
# (the key a JSONL line carries), with where the ChatReader looks for it in the body
FILLED_COLUMNS: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    ("model_name", "model", (("model",), ("request", "model"), ("body", "model"))),
    ("tenant", "tenant", (("tenant",), ("metadata", "tenant"))),
    ("user", "user", (("user",), ("metadata", "user"))),
    ("session_id", "session_id", tuple((*b, *p) for b in BODY_PATHS for p in SESSION_PATHS)),
    ("request_id", "request_id", (("id",), ("request_id",), ("custom_id",))),
)
_PREFIX = "gateway CSV row: "
_REPORT_BYTES = 1 << 20  # progress is reported after about this many bytes

# (number of the row's first line, the row's object or why it cannot be used)
Row = tuple[int, dict | LineError]


def column_name(cell: str) -> str:
    """A header cell as a column name: case, spaces and a byte-order mark aside."""
    return cell.strip().lstrip("\ufeff").strip().lower()


def is_gateway_header(line: bytes) -> bool:
    """Whether a file's first line is a CSV header with a request_json column (a JSON
    line that mentions one, say in a prompt, is not)."""
    if line.lstrip().startswith((b"{", b"[")):
        return False
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    try:
        cells = next(csv.reader([text]), [])
    except csv.Error:
        return False
    return any(column_name(cell) == REQUEST_COLUMN for cell in cells)


def gateway_rows(log_file: LogFile) -> Generator[Row, None, None]:
    """Each row with content of a gateway CSV file (plain or gzip, whole), as the object a
    JSONL line would hold or the LineError naming why the row is skipped. Raises
    UnusableInput when the header has no request_json column."""
    if log_file.byte_range is not None:
        raise UnusableInput(f"{log_file.name}: a gateway CSV log cannot be read in byte-range "
                            "parts (a quoted cell may hold newlines); ingest it whole")  # fmt: skip
    # the csv module's own bound on a cell (128 KiB) is far below a long prompt's; the
    # bound that matters is the row's, kept by _Lines (never lowered: it is process-wide)
    csv.field_size_limit(max(csv.field_size_limit(), log_file.limits.max_line_bytes))
    with log_file.stream() as stream:
        lines = _Lines(stream, log_file)
        rows = _cells(lines, log_file)
        header = next(rows, None)
        if header is None:
            return  # nothing but blank lines: the reading says so
        columns = _header(log_file.name, *header)
        for number, cells in rows:
            yield (
                number,
                cells if isinstance(cells, LineError) else _object_or_error(cells, columns),
            )
        lines.report()


def _header(name: str, number: int, cells: list[str] | LineError) -> dict[str, int]:
    """The header's column names -> their index (the first, for a repeated name)."""
    if isinstance(cells, LineError):
        raise UnusableInput(f"{name}: line {number}: the header cannot be read "
                            f"({str(cells).removeprefix(_PREFIX)})")  # fmt: skip
    columns: dict[str, int] = {}
    for index, cell in enumerate(cells):
        columns.setdefault(column_name(cell), index)
    if REQUEST_COLUMN not in columns:
        shown = ", ".join(repr(cell[:40]) for cell in cells[:20])
        more = f" and {len(cells) - 20:,} more" if len(cells) > 20 else ""
        raise UnusableInput(
            f"{name}: not a gateway CSV log: its header (line {number}) has no "
            f"{REQUEST_COLUMN} column, only {shown}{more}; a gateway CSV log holds one "
            f"request body a row in a {REQUEST_COLUMN} column"
        )
    return columns


def _object_or_error(cells: list[str], columns: dict[str, int]) -> dict | LineError:
    try:
        return row_object(cells, columns)
    except LineError as exc:
        return exc


def row_object(cells: list[str], columns: dict[str, int]) -> dict:
    """The object a JSONL line would hold for this row: its body, with the time, model,
    tenant, user, session and request id of the row's columns where the body has none.
    Raises LineError."""
    cell = _cell(cells, columns, REQUEST_COLUMN)
    raw = cell.encode("utf-8")
    try:
        precheck_line(raw, None)
    except LineError as exc:
        raise LineError(f"{_PREFIX}{exc}") from None
    try:
        obj = decode_line(raw)
    except LineError as exc:
        raise LineError(f"{_PREFIX}{REQUEST_COLUMN} is {exc}") from None
    if obj is None:
        raise LineError(f"{_PREFIX}no {REQUEST_COLUMN}")
    if "timestamp" not in obj:
        times = (_cell(cells, columns, name) for name in TIME_COLUMNS)
        when = next((value for value in times if value.strip()), None)
        if when is None:
            raise LineError(f"{_PREFIX}no timestamp (none in the body, nor in a timestamp, "
                            "ts or created_at column)")  # fmt: skip
        obj["timestamp"] = when  # a string: parsed as a JSONL line's (ISO, or epoch s/ms)
    for column, key, paths in FILLED_COLUMNS:
        value = _cell(cells, columns, column)
        if value.strip() and first(obj, *paths) is None:
            obj[key] = value
    return obj


def _cell(cells: list[str], columns: dict[str, int], name: str) -> str:
    index = columns.get(name)
    return cells[index] if index is not None and index < len(cells) else ""


def _cells(lines: _Lines, log_file: LogFile) -> Iterator[tuple[int, list[str] | LineError]]:
    """(first line, cells) of each row with content, or the LineError saying why the row
    cannot be read. After a bad row, reading goes on at the next line from a fresh row,
    as the csv module itself does; a gzip stream cut or damaged ends the file (the rows
    before it kept, the cut said in log_file.truncated)."""
    reader = csv.reader(lines)  # the default dialect: commas, double quotes, "" inside
    cap = log_file.limits.max_line_bytes
    while True:
        number = lines.start_row()
        try:
            cells = next(reader)
        except StopIteration:
            break
        except _RowTooLong:
            yield number, LineError(f"{_PREFIX}longer than the limit of {cap:,} bytes; not read")
            continue
        except csv.Error as exc:
            yield number, LineError(f"{_PREFIX}not CSV ({exc})")
            continue
        if lines.cut:
            break  # a row the cut stream ended early is not a row
        lines_in_row = lines.number - number + 1
        if lines.bad:
            log_file.content_lines += lines_in_row
            yield number, LineError(f"{_PREFIX}{lines.bad}")
        elif any(cell.strip() for cell in cells):
            log_file.content_lines += lines_in_row
            yield number, cells
        else:  # empty cells only: a blank line, as in a JSONL log
            log_file.count_blank(lines_in_row, lines.number)
    if lines.cut:
        log_file.truncated = (number, f"the gzip stream is cut or corrupt ({lines.cut}); "
                              "the rows before it were kept")  # fmt: skip


class _RowTooLong(Exception):
    """A row past the line cap: raised through csv.reader, which starts afresh after it."""


class _Lines:
    """The file's lines (split at newlines, numbered as a JSONL log's are) as text for
    csv.reader, a row's lines together at most the line cap: past it, the rest of the
    line is read past, never held, and _RowTooLong ends the row. A line that is not
    UTF-8 marks its row bad (`bad`), not the file: it goes on with U+FFFD in place of its
    bad bytes, so the quotes after them keep their meaning."""

    def __init__(self, stream: io.BufferedIOBase, log_file: LogFile):
        self._stream = stream
        self._file = log_file
        # a cut or damaged gzip stream ends the file; a plain file's read error is raised
        self._gzip = isinstance(getattr(stream, "raw", None), InflateGuard)
        self.number = 0  # lines read
        self._row_bytes = 0  # of the row being read, its newlines included
        self.bad = ""  # why the row being read cannot be used ("": it can)
        self.cut = ""  # the gzip stream was cut or damaged: the error
        self._unreported = 0

    def __iter__(self) -> _Lines:
        return self

    def start_row(self) -> int:
        """A new row begins: its first line's number."""
        self._row_bytes, self.bad = 0, ""
        return self.number + 1

    def report(self) -> None:
        self._unreported = 0
        if self._file.on_chunk is not None:
            self._file.on_chunk()

    def __next__(self) -> str:
        cap = self._file.limits.max_line_bytes
        # the row's content may reach the cap; its last newline does not count
        room = cap - self._row_bytes
        line = self._read(max(room, 0) + 1)
        if not line:
            if self._row_bytes:  # the row asks for more: a quote is still open
                self.bad = self.bad or "a quoted cell is not closed before the end of the file"
            raise StopIteration
        self.number += 1
        self._row_bytes += len(line)
        if room < 0 or (len(line) > room and not line.endswith(b"\n")):
            while line and not line.endswith(b"\n"):  # read past the rest, never held
                line = self._read(_REPORT_BYTES)
            raise _RowTooLong
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            self.bad = self.bad or f"line {self.number:,} is not valid UTF-8"
            text = line.decode("utf-8", "replace")
        if self._row_bytes == len(line):  # a row's first line: a byte-order mark is no cell
            text = text.removeprefix("\ufeff")
        return text

    def _read(self, limit: int) -> bytes:
        """At most `limit` bytes, up to and including a newline; b"" at the end (or a cut)."""
        try:
            line = self._stream.readline(limit)
        except (OSError, EOFError, zlib.error) as exc:
            if not self._gzip:
                raise
            self.cut = str(exc)
            return b""
        self._unreported += len(line)
        if self._unreported >= _REPORT_BYTES:
            self.report()
        return line
