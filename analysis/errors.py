"""Input problems: one bad line never stops an ingest, it is recorded and skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from analysis.readers import TraceFit


class LineError(ValueError):
    """A line that cannot be used; the message says why, in words a user can act on."""

    def detached(self) -> LineError:
        """This error without its traceback and the exception it replaced, to be kept or
        dropped: what a bad line leaves is its reason. The frames (and the line's bytes
        they hold) go, and no reference cycle is left for the collector, which is paused
        while a log is read (analysis/collector.py)."""
        self.__traceback__ = self.__context__ = None
        return self


# A rule on input is checked as `if refuse(broken): raise LineError(words)`. `broken` is a
# bool for one line, or an array of them for a batch read column-wise: a line's refuse is
# `bool` (a broken rule is worded); a batch's raises when any row breaks the rule, since
# the batch then goes to the line reader, which words it (a function call, no closure:
# the line reader checks a dozen rules on every line).
Refuse = Callable[[bool | np.bool_ | np.ndarray], bool]
refuse_line: Refuse = bool


class UnusableInput(ValueError):
    """Nothing usable came out of the input (empty file, no valid line, mixed formats...).

    Carries what was skipped, so a caller can still write the details: the requests read
    before it stopped, and `advice` when one change of settings would mend the input (a
    trace read at another block size than its own: the input is not lost, so keep it).
    `fit` is that advice as data (the sizes that fit, the lines that contradict), for the
    parts of a split ingest to be put together before it is worded; `advice` defaults to
    its wording."""

    def __init__(
        self,
        message: str,
        errors: list[dict] | None = None,
        skipped_lines: int = 0,
        *,
        advice: str = "",
        fit: TraceFit | None = None,
        requests: int = 0,
    ):
        super().__init__(message)
        self.errors = errors or []
        self.skipped_lines = skipped_lines
        self.fit = fit
        self.advice = advice or (fit.advice() if fit is not None else "")
        self.requests = requests

    @property
    def reason(self) -> str:
        """The message without its advice (for one worded from several parts' fits)."""
        message = str(self)
        tail = f"; {self.advice}"
        return message[: -len(tail)] if self.advice and message.endswith(tail) else message


class TooManyBadLines(UnusableInput):
    """Past the error budget: a report from what is left would mislead, so none is made."""


class WorkerStopped(RuntimeError):
    """A worker process reading a part of the log stopped before its part was read
    (killed, or out of memory): nothing of the log is kept, and reading it in one process
    is what is left to do."""


@dataclass
class ErrorLog:
    """Skipped lines and warnings. Lists the first `max_listed` errors, counts them all;
    past `max_bad_lines` (None: no budget) the ingest stops with TooManyBadLines."""

    max_listed: int = 1000
    max_bad_lines: int | None = None
    errors: list[dict] = field(default_factory=list)
    skipped_lines: int = 0
    notes: list[str] = field(default_factory=list)
    # what the lines seen so far say about a trace's block size (a reader sets it: a trace
    # read at the wrong block size is mended by the one that fits); None: nothing known
    advisor: Callable[[], TraceFit] | None = None
    # the requests read so far (the ingest sets it), for a budget stop to report them
    requests_read: Callable[[], int] | None = None

    def fit(self) -> TraceFit | None:
        return self.advisor() if self.advisor is not None else None

    def advice(self) -> str:
        fit = self.fit()
        return fit.advice() if fit is not None else ""

    def skip(self, line: int, reason: str, file: str | None = None) -> None:
        self.skipped_lines += 1
        if len(self.errors) < self.max_listed:
            entry: dict = {"line": line, "reason": reason}
            if file is not None:
                entry["file"] = file
            self.errors.append(entry)
        if self.max_bad_lines is not None and self.skipped_lines > self.max_bad_lines:
            where = f"{file}, line {line}" if file else f"line {line}"
            read = self.requests_read() if self.requests_read is not None else 0
            raise over_budget(self.skipped_lines, self.max_bad_lines, where, reason, self.errors,
                              self.fit(), read)  # fmt: skip

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def renote(self, old: str, new: str) -> None:
        """A note worded again in its place (a count that grew); added when `old` is not
        a note yet."""
        if old in self.notes:
            self.notes[self.notes.index(old)] = new
        else:
            self.note(new)


def over_budget(
    count: int,
    budget: int,
    where: str,
    reason: str,
    errors: list[dict],
    fit: TraceFit | None = None,
    requests: int = 0,
) -> TooManyBadLines:
    advice = fit.advice() if fit is not None else ""
    return TooManyBadLines(
        f"stopped after {count:,} bad lines, past the budget of {budget:,} (the last: {where}: "
        f"{reason}); a report from the rest would mislead" + (f"; {advice}" if advice else ""),
        errors,
        count,
        fit=fit,
        requests=requests,
    )
