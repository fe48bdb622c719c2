"""The audit trail as a file a reviewer checks offline (manage.py verify_audit --file):
every event of the chain in order up to the head as the database records it at export —
the selected ones with their whole content, the others as links only (number, previous
hash, hash), so a removed, reordered or changed event anywhere still shows.

JSON: {"format", "exported_at", "filter", "head": {events, last_id, last_hash} or null,
"events": [...]}. CSV: a first line "# " followed by the same header as JSON text
(format, exported_at, filter, head), then a header row and one row per event (COLUMNS;
the content cells of an unselected event empty, details as canonical JSON: sorted keys).
A cell a spreadsheet would run as a formula is prefixed with a single quote
(console.downloads.csv_cell), which the reader takes off again.

Both are streamed row by row: the file has no size limit and the server holds one chunk
of rows at a time."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import orjson
from django.db.models import BooleanField, ExpressionWrapper, Q, Value
from django.utils import timezone

from console.downloads import csv_cell
from console.policies.audit import HEAD_ID
from console.policies.chain import CONTENT_FIELDS
from console.policies.models import AuditEvent, AuditHead

FORMAT = "kvscope-audit/1"
COLUMNS = ("pk", *CONTENT_FIELDS, "prev_hash", "hash", "selected")
_CHUNK = 2000  # rows read from the database at a time


def header(filters: dict[str, str]) -> dict:
    """What the file says of itself, the head read now (the events end there)."""
    head = AuditHead.objects.filter(pk=HEAD_ID).first()
    return {
        "format": FORMAT,
        "exported_at": timezone.now().isoformat(),
        "filter": filters,
        "head": None
        if head is None
        else {"events": head.events, "last_id": head.last_id, "last_hash": head.last_hash},
    }


def _rows(selected: Q, head: dict | None) -> Iterator:
    """Every event up to the head in order, each marked selected or not. With no head
    every event is written (the file then shows what the database shows: no anchor)."""
    mark = ExpressionWrapper(selected, BooleanField()) if selected else Value(True)
    rows = AuditEvent.objects.order_by("pk").annotate(selected=mark)
    if head is not None:  # events appended while the file streams are not in its head
        rows = rows.filter(pk__lte=head["last_id"])
    return rows.values_list(*COLUMNS, named=True).iterator(chunk_size=_CHUNK)


def _event(row) -> dict:
    """An event as the file holds it: its content ("at" in ISO 8601, as hashed) only
    when selected."""
    event = {"pk": row.pk, "prev_hash": row.prev_hash, "hash": row.hash}
    if row.selected:
        event.update({field: getattr(row, field) for field in CONTENT_FIELDS})
        event["at"] = row.at.isoformat()
    return event


def json_chunks(selected: Q, head_of_file: dict) -> Iterator[bytes]:
    """The JSON file, an event a line."""
    opening = orjson.dumps(head_of_file)[:-1]  # the header without its closing brace
    yield opening + b',"events":[\n'
    for n, row in enumerate(_rows(selected, head_of_file["head"])):
        yield (b",\n" if n else b"") + orjson.dumps(_event(row), option=orjson.OPT_SORT_KEYS)
    yield b"\n]}\n"


class _Line:
    """What csv.writer writes to: hands back each line instead of keeping it."""

    def write(self, text: str) -> str:
        return text


def csv_chunks(selected: Q, head_of_file: dict) -> Iterator[str]:
    """The CSV file: the header as a comment line, the column names, an event a row."""
    writer = csv.writer(_Line())
    yield "# " + orjson.dumps(head_of_file).decode() + "\r\n"
    yield writer.writerow(COLUMNS)
    for row in _rows(selected, head_of_file["head"]):
        event = _event(row)
        cells = [event.get(field, "") for field in COLUMNS[:-1]]
        if "details" in event:
            cells[COLUMNS.index("details")] = orjson.dumps(
                event["details"], option=orjson.OPT_SORT_KEYS
            ).decode()
        yield writer.writerow([csv_cell(c) for c in cells] + ["yes" if row.selected else "no"])
