"""An exported audit file (console.policies.audit_export) read back and checked without
the database: its events walked with chain.LinkCheck, then the walk's end compared with
the head the file records — the same verdicts as the database check (audit.conclude),
with a removed or a reordered event told apart where the file shows which it was."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from console.downloads import csv_uncell
from console.policies.audit import Anchor, ChainCheck, conclude
from console.policies.audit_export import COLUMNS, FORMAT
from console.policies.chain import CONTENT_FIELDS, PREV_MISMATCH, LinkCheck


class AuditFileError(ValueError):
    """The file is not an audit export kvscope can read (said with its name and line)."""


@dataclass
class AuditFile:
    head: Anchor | None
    events: list[dict] = field(default_factory=list)

    @property
    def with_content(self) -> int:
        return sum(1 for e in self.events if any(f in e for f in CONTENT_FIELDS))


def _anchor(head: object, where: str) -> Anchor | None:
    if head is None:
        return None
    numbers = isinstance(head, Mapping) and all(
        isinstance(head.get(k), int) and not isinstance(head.get(k), bool)
        for k in ("events", "last_id")
    )
    if not numbers or not isinstance(head.get("last_hash"), str):
        raise AuditFileError(f"{where}: the head is not {{events, last_id, last_hash}}")
    return Anchor(head["events"], head["last_id"], head["last_hash"])


def _header(data: object, where: str) -> Anchor | None:
    """The file's head, after checking it is a kvscope audit file."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise AuditFileError(f"{where}: not a kvscope audit export (no format {FORMAT!r})")
    return _anchor(data.get("head"), where)


def _link_fields(event: object, where: str) -> dict:
    if not isinstance(event, dict):
        raise AuditFileError(f"{where}: an event is an object with pk, prev_hash and hash")
    if not isinstance(event.get("pk"), int) or isinstance(event.get("pk"), bool):
        raise AuditFileError(f"{where}: its pk is not a whole number")
    for name in ("prev_hash", "hash"):
        if not isinstance(event.get(name), str):
            raise AuditFileError(f"{where}: it has no {name} (text)")
    return event


def read_json(path: Path, raw: bytes) -> AuditFile:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise AuditFileError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    head = _header(data, str(path))
    events = data.get("events")
    if not isinstance(events, list):
        raise AuditFileError(f"{path}: it has no list of events")
    checked = [_link_fields(e, f"{path}: event {n} in the file") for n, e in enumerate(events, 1)]
    return AuditFile(head, checked)


def _csv_event(row: dict, where: str) -> dict:
    """One row as an event: its link fields, and its content when selected."""
    cells = {k: csv_uncell(v) for k, v in row.items() if k in COLUMNS}
    if not cells["pk"].isascii() or not cells["pk"].isdigit():
        raise AuditFileError(f"{where}: its pk {cells['pk']!r} is not a whole number")
    event = {"pk": int(cells["pk"]), "prev_hash": cells["prev_hash"], "hash": cells["hash"]}
    if cells["selected"] not in ("yes", "no"):
        raise AuditFileError(f"{where}: selected is {cells['selected']!r}, not yes or no")
    if cells["selected"] == "no":
        if any(cells[f] for f in CONTENT_FIELDS):
            raise AuditFileError(f"{where}: an event not selected carries content")
        return event
    event.update({f: cells[f] for f in CONTENT_FIELDS})
    try:
        event["details"] = orjson.loads(cells["details"])
    except orjson.JSONDecodeError as exc:
        raise AuditFileError(f"{where}: its details are not JSON ({exc.msg})") from None
    return event


def read_csv(path: Path, text: str) -> AuditFile:
    lines = io.StringIO(text, newline="")
    first = lines.readline()
    head, offset = None, 0  # no comment line: the file has lost its head
    if first.startswith("#"):
        try:
            head = _header(orjson.loads(first[1:]), f"{path}: line 1")
        except orjson.JSONDecodeError as exc:
            raise AuditFileError(f"{path}: line 1: the header is not JSON ({exc.msg})") from None
        offset = 1
    else:
        lines.seek(0)
    reader = csv.DictReader(lines)
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise AuditFileError(f"{path}: line {offset + 1}: the columns are not {', '.join(COLUMNS)}")
    events = []
    try:
        for row in reader:
            if None in row or None in row.values():
                raise AuditFileError(
                    f"{path}: line {offset + reader.line_num}: not {len(COLUMNS)} cells"
                )
            events.append(_csv_event(row, f"{path}: line {offset + reader.line_num}"))
    except csv.Error as exc:
        raise AuditFileError(f"{path}: line {offset + reader.line_num}: {exc}") from None
    return AuditFile(head, events)


def read_audit_file(path: Path) -> AuditFile:
    """The file (JSON or CSV, told by its first character), or AuditFileError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AuditFileError(f"{path}: cannot be read ({exc.strerror})") from None
    if raw.lstrip()[:1] == b"{":
        return read_json(path, raw)
    try:
        return read_csv(path, raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise AuditFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def _missing_or_moved(events: list[dict], walk: LinkCheck) -> str:
    """Whether the event the chain needed next comes later in the file (reordered) or
    nowhere (removed, or its hash rewritten)."""
    after = f"#{walk.last_pk}" if walk.last_pk else "the chain's start"
    for event in events[walk.count :]:
        if event["prev_hash"] == walk.prev:
            return (
                f"{PREV_MISMATCH}: #{event['pk']}, the event after {after}, comes later "
                "in the file (the events were reordered)"
            )
    return (
        f"{PREV_MISMATCH}: the event after {after} is not in the file (it was removed, "
        "or its hash was rewritten)"
    )


def check_audit_file(audit_file: AuditFile) -> ChainCheck:
    """The file's chain walked and compared with its head, as audit.verify() does."""
    walk = LinkCheck().run(audit_file.events)
    result = conclude(walk, audit_file.head)
    if walk.broken is not None and walk.broken[1] == PREV_MISMATCH:
        reason = _missing_or_moved(audit_file.events, walk)
        return dataclasses.replace(result, reason=reason)
    return result
