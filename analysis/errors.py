"""Input problems: one bad line never stops an ingest, it is recorded and skipped."""

from __future__ import annotations

from dataclasses import dataclass, field


class LineError(ValueError):
    """A line that cannot be used; the message says why, in words a user can act on."""


class UnusableInput(ValueError):
    """Nothing usable came out of the input (empty file, no valid line, mixed formats...).

    Carries what was skipped, so a caller can still write the details."""

    def __init__(self, message: str, errors: list[dict] | None = None, skipped_lines: int = 0):
        super().__init__(message)
        self.errors = errors or []
        self.skipped_lines = skipped_lines


@dataclass
class ErrorLog:
    """Skipped lines and warnings. Lists the first `max_listed` errors, counts them all."""

    max_listed: int = 1000
    errors: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)

    def skip(self, line: int, reason: str, file: str | None = None) -> None:
        self.skipped_lines += 1
        if len(self.errors) < self.max_listed:
            entry: dict = {"line": line, "reason": reason}
            if file is not None:
                entry["file"] = file
            self.errors.append(entry)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)
