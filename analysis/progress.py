"""How a long step (ingest, analysis) says what it has done so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """What a long step has done so far; the console writes it to the job row."""

    stage: str  # "reading" (parse + tokenize + hash, streamed together) | "analyzing" ...
    done: int  # bytes of the log files read (analysis: steps done)
    total: int
    requests: int = 0
    skipped: int = 0


ProgressFn = Callable[[Progress], None]
