"""A part's folder, as a split ingest leaves it for the process that merges: its block
streams in b<size>/, or PART_NOTE when it had no usable line. Light on purpose: the
caller that waits for worker processes reads their folders without importing the
reading half of the engine (ingest/processes.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from analysis.errors import TooManyBadLines, UnusableInput
from analysis.readers.traces import TraceFit
from analysis.stream import BlockStream

PART_NOTE = "part-note.json"  # in a part's folder: why the part had no usable line


@dataclass
class PartResult:
    """One part of a split ingest: its block streams by block size (the main size first
    when it was read in this process), or why it had none."""

    streams: dict[int, BlockStream] = field(default_factory=dict)
    unusable: UnusableInput | None = None


def load_part(folder: str | Path) -> PartResult | None:
    """What ingest_part_to_folder left in `folder`; None when it left nothing (the part
    never ran, or did not finish)."""
    folder = Path(folder)
    note_file = folder / PART_NOTE
    if note_file.exists():
        note = orjson.loads(note_file.read_bytes())
        kind = TooManyBadLines if note.get("budget") else UnusableInput
        return PartResult(unusable=kind(note["reason"], note["errors"], note["skipped_lines"],
                                        advice=note.get("advice", ""),
                                        fit=TraceFit.from_dict(note.get("fit")),
                                        requests=note.get("requests", 0)))  # fmt: skip
    streams = sorted(folder.glob("b*")) if folder.is_dir() else []
    if not streams:
        return None
    return PartResult({int(sub.name[1:]): BlockStream.load(sub) for sub in streams})
