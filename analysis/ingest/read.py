"""One pass over the files of a log: each file read column-wise when it is a clean trace,
row by row when it is a gateway CSV log, else line by line into a StreamBuilder; bad
lines skipped and listed, progress reported, and the log refused when nothing in it is
usable."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import ExitStack, closing
from itertools import chain
from pathlib import Path
from typing import cast

from analysis.collector import collector_paused
from analysis.errors import ErrorLog, LineError, TooManyBadLines, UnusableInput
from analysis.ingest.builder import StreamBuilder
from analysis.ingest.formats import (
    Line,
    columns_fit,
    decode,
    detect_format_or_none,
    fast_trace,
    head,
    reader_for,
    same_format,
)
from analysis.ingest.notes import (
    blank_lines_note,
    inexact_texts_note,
    made_at_another_size,
    span_note,
    with_advice,
)
from analysis.ingest.options import FORMATS, IngestOptions
from analysis.progress import Progress, ProgressFn
from analysis.readers import (
    BlankLineLimit,
    ByteRange,
    LogFile,
    Reader,
    TraceFit,
    TraceRequest,
    gateway_rows,
    sniff_format,
)
from analysis.spill import SpillColumns


def read_log(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None,
    byte_range: ByteRange | None,
    spill: SpillColumns | None,
    names: Sequence[str] | None = None,
) -> tuple[StreamBuilder, list[str], ErrorLog]:
    """The builder holding every usable request, each file's name, and what was skipped
    or noted. Raises UnusableInput (see ingest_streams)."""
    if options.format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    if byte_range is not None and len(paths) != 1:
        raise ValueError("a byte range is part of one file")
    if names is not None and len(names) != len(paths):
        raise ValueError("one name per path")
    with collector_paused():
        return _LogReading(paths, options, progress, byte_range, spill, names).run()


def _lines(log_file: LogFile) -> Generator[Line, None, None]:
    # LogFile.lines is a generator: it holds the file open until it is closed
    return cast(Generator[Line, None, None], log_file.lines())


class _LogReading:
    """The state of one pass: the files, the builder (made at the first request), the
    reader (one for all the files: a request id repeated in another file is a duplicate
    too), each file's format and the fits of the trace files read column-wise."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        options: IngestOptions,
        progress: ProgressFn | None,
        byte_range: ByteRange | None,
        spill: SpillColumns | None,
        names: Sequence[str] | None,
    ) -> None:
        self.options, self.progress, self.spill = options, progress, spill
        # a part of a split ingest: no column-wise path, and no refusal for a trace's
        # block size (merge_parts decides, from every part's lines)
        self.whole_log = byte_range is None
        self.log = ErrorLog(max_listed=options.max_listed_errors,
                            max_bad_lines=options.max_bad_lines)  # fmt: skip
        self.files = [LogFile(p, byte_range, options.limits, names[i] if names else None)
                      for i, p in enumerate(paths)]  # fmt: skip
        self.names = [f.name for f in self.files]
        self.total_bytes = sum(f.size for f in self.files) or 1
        self.done_bytes = 0
        self._furthest = 0
        self.builder: StreamBuilder | None = None
        self.log.requests_read = lambda: self.builder.requests if self.builder else 0
        self.reader: Reader | None = None
        self.formats: dict[int, str] = {}  # each file's own format, from its first valid line
        # the sizes each trace file read column-wise fits: its lines may veto the size that
        # another file's contradictions fit (a clean file never reaches the line reader)
        self.fast_fits: list[TraceFit] = []

    def run(self) -> tuple[StreamBuilder, list[str], ErrorLog]:
        try:
            for file_index, log_file in enumerate(self.files):
                self._file(file_index, log_file)
            builder = self._usable()
        finally:
            # the log outlives this pass (in an error too): it must not hold it (nor,
            # through it, the builder's columns) in a reference cycle, freed only when the
            # collector next runs
            requests = self.builder.requests if self.builder is not None else 0
            self.log.requests_read = lambda: requests
        if builder.inexact_texts:
            self.log.note(inexact_texts_note(builder.inexact_texts, builder.tokenizer_file))
        self._report(self.total_bytes)
        return builder, self.names, self.log

    def _report(self, done: int) -> None:
        if self.progress is None:
            return
        # never backwards, when a trace Arrow refused is read again line by line
        self._furthest = max(self._furthest, done)
        requests = self.builder.requests if self.builder is not None else 0
        self.progress(Progress("reading", self._furthest, self.total_bytes, requests,
                               self.log.skipped_lines))  # fmt: skip

    def _file(self, file_index: int, log_file: LogFile) -> None:
        # bytes read so far, after every chunk: progress moves before the first request
        # too, and through a file of blank lines (where no line is ever handed out)
        before = self.done_bytes
        log_file.on_chunk = lambda: self._report(before + log_file.bytes_read())
        # closed on every way out: an error raised mid-file must not leave the file open;
        # the callback dropped, so the file and this pass hold no cycle
        with ExitStack() as open_lines:
            open_lines.callback(setattr, log_file, "on_chunk", None)
            try:
                if self._is_gateway_csv(log_file):
                    rows = open_lines.enter_context(closing(gateway_rows(log_file)))
                    for line_no, row in rows:
                        self._request(file_index, line_no, row, "csv")
                elif (lines := self._lines(file_index, log_file, open_lines)) is None:
                    self.done_bytes += log_file.size  # read column-wise
                    self._report(self.done_bytes)
                    return
                else:
                    for line_no, raw in lines:
                        self._line(file_index, line_no, raw)
            except BlankLineLimit as exc:
                raise TooManyBadLines(str(exc), self.log.errors, self.log.skipped_lines) from None
        multi = len(self.files) > 1
        if log_file.truncated is not None:
            line_no, reason = log_file.truncated
            self.log.skip(line_no, reason, self.names[file_index] if multi else None)
        self.done_bytes += log_file.size
        if log_file.blank_lines:
            where = f" in {log_file.name}" if multi else ""
            self.log.note(blank_lines_note(log_file.blank_lines, where))

    def _is_gateway_csv(self, log_file: LogFile) -> bool:
        """Read row by row as gateway CSV: asked for, or (auto) its first line is a CSV
        header naming request_json. Each file on its own: a CSV file and a JSONL chat log
        hold the same bodies, so one upload may have both."""
        fmt = self.options.format
        return fmt == "csv" or (
            fmt == "auto" and sniff_format(log_file.path, self.options.limits) == "csv"
        )

    def _lines(self, file_index: int, log_file: LogFile, stack: ExitStack) -> Iterator[Line] | None:
        """The file's lines to parse; None when it was read column-wise (a clean trace)."""
        gen = stack.enter_context(closing(_lines(log_file)))
        builder = self.builder
        # only Mooncake's format has a column-wise path (fast_trace)
        if not self.whole_log or self.options.format not in ("auto", "mooncake"):
            return gen
        if builder is not None and builder.log_format != "mooncake":
            return gen
        # the lines up to the first request tell whether this is a trace; the line path
        # goes on from them (one pass over a file of blank lines)
        first_lines, first = head(gen, builder, self.options)
        if first is not None:
            same_format(self.formats, file_index, self.names, first)
        fast = fast_trace(log_file, first, builder, self.options, self.spill)
        if fast is not None:
            gen.close()
            self.builder, cols = fast
            self.builder.add_trace_columns(cols, file_index)
            self.fast_fits.append(columns_fit(cols, self.builder.block_tokens))
            return None
        if first is not None and detect_format_or_none(first) == "mooncake":
            gen.close()  # a trace Arrow refused: read it again, line by line
            return stack.enter_context(closing(_lines(log_file)))
        return chain(first_lines, gen)

    def _line(self, file_index: int, line_no: int, raw: bytes | bytearray | LineError) -> None:
        obj: dict | LineError | None
        try:
            obj = decode(raw, self.builder, self.options)
        except LineError as exc:
            obj = exc
        if obj is not None:
            self._request(file_index, line_no, obj)

    def _request(
        self, file_index: int, line_no: int, obj: dict | LineError, log_format: str | None = None
    ) -> None:
        """One line's (or CSV row's) object into the builder, or its error into the log.
        `log_format`: what the file was read as, when its lines do not say (CSV)."""
        try:
            if isinstance(obj, LineError):
                raise obj
            if file_index not in self.formats:
                same_format(self.formats, file_index, self.names, obj)
            if self.builder is None:
                self.builder = self._new_builder(obj, log_format)
            builder = self.builder
            request = self._reader(builder).parse(obj, line_no)
            if isinstance(request, TraceRequest):
                builder.add_trace(request, file_index)
            else:
                builder.add_chat(request, file_index)
        except LineError as exc:
            multi = len(self.files) > 1
            self.log.skip(line_no, str(exc), self.names[file_index] if multi else None)
            exc.detached()  # (its traceback holds the frames that hold it: `obj`)

    def _new_builder(self, first: dict, log_format: str | None) -> StreamBuilder:
        builder = StreamBuilder.for_request(first, self.options, self.spill, log_format)
        if builder.log_format == "bailian" and not self.whole_log:
            # a turn's parent may be in an earlier part: its session would be lost
            raise ValueError(f"{', '.join(self.names)}: a Bailian trace is read whole, not "
                             "in byte-range parts (a turn's parent_chat_id may be in an "
                             "earlier part)")  # fmt: skip
        return builder

    def _reader(self, builder: StreamBuilder) -> Reader:
        if self.reader is None:
            self.reader = reader_for(builder, self.log)
            own = self.log.advisor
            if own is not None:  # a trace: its fit, with the clean files'
                fast_fits = self.fast_fits

                def advisor() -> TraceFit:
                    combined = TraceFit.combine([own(), *fast_fits])
                    assert combined is not None  # (one ingest: one block size)
                    return combined

                self.log.advisor = advisor
        return self.reader

    def _usable(self) -> StreamBuilder:
        """The builder, unless nothing usable was read or the trace was made at another
        block size (both raise UnusableInput)."""
        log, builder = self.log, self.builder
        fit = log.fit()  # a trace read at the wrong block size: name the one that fits
        if builder is None or not builder.requests:
            blank = sum(f.blank_lines for f in self.files)
            empty = f"only blank lines: {blank:,}" if blank else "the file is empty"
            reason = log.errors[0]["reason"] if log.errors else empty
            first = f" (line {log.errors[0]['line']}: {reason})" if log.errors else f" ({reason})"
            message = with_advice(f"no usable request in {', '.join(self.names)}{first}", fit)
            raise UnusableInput(message, log.errors, log.skipped_lines, fit=fit)
        if fit is not None and fit.advice():
            if self.whole_log:  # every contradicting line fits one other size
                raise made_at_another_size(self.names, builder.block_tokens, builder.requests,
                                           log.errors, log.skipped_lines, fit)  # fmt: skip
            log.note(fit.advice())  # a part: merge_parts decides, from every part's lines
        table = builder.request_table
        note = span_note(table.column("t_us", copy=False), table.column("line", copy=False),
                         table.column("file", copy=False), self.names)  # fmt: skip
        if note:
            log.note(note)
        return builder
