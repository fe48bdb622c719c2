"""StreamBuilder: requests in, one request by one (or a trace file column-wise), block
streams out, one per block size, sharing the request and segment tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.errors import ErrorLog, LineError, UnusableInput
from analysis.hashing import KeyedHasher, token_bytes
from analysis.hf_tokenizer import load_tokenizer_file
from analysis.ingest.chain import Piece, PrefixChain
from analysis.ingest.notes import out_of_order_note
from analysis.ingest.options import STREAM_KIND, IngestOptions, block_sizes
from analysis.ingest.order import reorder_occurrences, reorder_refs, reorder_requests, time_order
from analysis.ingest.tables import BlockColumns, Occurrences, RequestTable, SegmentTable
from analysis.readers import (
    MAX_PROMPT_TOKENS,
    ChatRequest,
    Message,
    TraceColumns,
    TraceRequest,
    detect_format,
)
from analysis.spill import SpillColumns
from analysis.stream import BlockStream, StreamHeader
from analysis.tokens import EncodingUnavailable, SegmentTokenizer, load_encoding

_SEEN_BY_TEXT = 1 << 16  # longer message texts are memoised by their digest, not held

# a message text's memo key: (role, text), or (role, its digest) for a long text
_MemoKey = tuple[str, str | bytes]


# A message of a request being added, tokenized but not yet recorded: the message, its
# memo key, its text's digest (b"" when the memo knew the text itself), its tokens, its
# segment (-1 when the memo did not know it: recorded, then)
_Tokenized = tuple[Message, _MemoKey, bytes, np.ndarray, int]


class StreamBuilder:
    """Collects requests one by one, then orders them by time into block streams, one
    per block size (sharing the request and segment tables)."""

    def __init__(
        self,
        log_format: str,
        block_sizes: tuple[int, ...],
        options: IngestOptions,
        spill: SpillColumns | None = None,
    ):
        source_format = STREAM_KIND[log_format]
        if source_format == "mooncake" and len(block_sizes) != 1:
            raise ValueError("a pre-hashed trace has one block size: its own")
        if any(b < 1 for b in block_sizes):
            raise ValueError("block sizes must be positive")
        self.source_format = source_format
        self.log_format = log_format
        self.tools_position = options.tools_position if source_format == "chat" else ""
        self.block_sizes = block_sizes
        self.block_tokens = block_sizes[0]
        self._hasher = KeyedHasher(options.hash_key)
        self._tokenizer: SegmentTokenizer | None = None
        # the tokenizer.json used instead of tiktoken, by name ("": tiktoken), for the notes
        self.tokenizer_file = ""
        if source_format == "chat":
            self._tokenizer = _segment_tokenizer(options)
            self.tokenizer_file = self._tokenizer.name if options.tokenizer_file else ""
        self.request_table = RequestTable()
        partial_cached = options.trace_partial_cached
        self._blocks = {b: BlockColumns(b, partial_cached) for b in block_sizes}
        self._chains = {b: PrefixChain(self._hasher, b) for b in block_sizes}
        self._segments = SegmentTable(options.previews)
        # (role, text) -> (segment index, token ids): a repeated message costs one dict
        # lookup. Holds each distinct text once, for the ingest only (never stored).
        self._seen: dict[_MemoKey, tuple[int, np.ndarray]] = {}
        # each role's header tokens (count, bytes) and the newline's, as add_chat uses them
        self._headers: dict[str, tuple[int, bytes]] = {}
        newline = self._tokenizer.newline if self._tokenizer is not None else np.zeros(0, np.uint32)
        self._newline = (newline.size, token_bytes(newline).tobytes())
        self._occurrences = Occurrences()
        self.tokens_total = 0  # every message of every request, as rendered
        # with a spill, block keys and occurrences go to disk as they grow: memory then
        # follows the distinct content, not the length of the log
        self._spill = spill

    @classmethod
    def for_request(
        cls,
        first: dict,
        options: IngestOptions,
        spill: SpillColumns | None,
        log_format: str | None = None,
    ) -> StreamBuilder:
        """The builder for a log whose first request is `first`; `log_format`: what its
        file was read as, when the file said it and not `first` (a gateway CSV file)."""
        fmt = log_format or (options.format if options.format != "auto" else detect_format(first))
        return cls(fmt, block_sizes(fmt, options), options, spill)

    @property
    def requests(self) -> int:
        return len(self.request_table)

    @property
    def inexact_texts(self) -> int:
        return self._tokenizer.inexact_texts if self._tokenizer else 0

    @property
    def distinct_tokens(self) -> int:
        return self._tokenizer.distinct_tokens if self._tokenizer else 0

    # --- adding ------------------------------------------------------------------------
    def add_trace_columns(self, cols: TraceColumns, file_index: int) -> None:
        """A whole trace file read column-wise (analysis.readers.columns)."""
        self.request_table.add_columns(cols, file_index)
        self._blocks[self.block_tokens].add_columns(cols.nblocks, cols.keys, cols.last_tokens)
        self._spill_if_full()

    def add_trace(self, request: TraceRequest, file_index: int) -> None:
        session = self._hasher.session_key(request.session) if request.session else 0
        self.request_table.add(request, file_index, session)
        self.request_table.columns["prompt_tokens"].append(request.input_length)
        blocks = request.hash_ids.size
        # the last id holds what is left of the prompt (see BlockColumns.settle)
        last = request.input_length - self.block_tokens * (blocks - 1)
        keys = request.hash_ids if blocks else np.zeros(0, np.uint64)
        self._blocks[self.block_tokens].add(keys, last)
        self._spill_if_full()

    def add_chat(self, request: ChatRequest, file_index: int) -> None:
        """Tokenize, then record. A prompt longer than any model's context raises
        LineError before anything is recorded (the line is skipped, nothing half-added).
        Runs for every request of a log: a message seen before costs a memo lookup and a
        few appends, hence the loops written out (no call or object per message)."""
        tokenized = self._tokenize(request)
        session = self._hasher.session_key(request.session) if request.session else 0
        index = self.request_table.add(request, file_index, session)
        headers, (newline_size, newline) = self._headers, self._newline
        pieces: list[Piece] = []
        segments: list[int] = []
        offsets: list[int] = []
        offset = 0
        for message, key, digest, tokens, seg in tokenized:
            if seg < 0 or message.is_document or message.label:
                seg = self._record(message, key, digest, tokens)
            header_size, header = headers[message.role]
            segments.append(seg)
            offsets.append(offset + header_size)
            pieces.append((header, tokens, newline))
            offset += header_size + tokens.size + newline_size
        self._occurrences.add_request(index, segments, offsets)
        self.request_table.columns["prompt_tokens"].append(offset)
        self.tokens_total += offset
        for size, columns in self._blocks.items():
            columns.add(self._chains[size].keys(segments, pieces))
        self._spill_if_full()

    def _tokenize(self, request: ChatRequest) -> list[_Tokenized]:
        """Each message's tokens (a text seen before: from the memo, with its segment);
        LineError for a prompt no model's context holds."""
        seen, headers = self._seen, self._headers
        newline_size = self._newline[0]
        found: list[_Tokenized] = []
        total = 0
        for message in request.messages:
            role, text = message.role, message.text
            header = headers.get(role) or self._role_header(role)
            known = seen.get((role, text)) if len(text) <= _SEEN_BY_TEXT else None
            if known is not None:  # (its tokens fitted a prompt when it was recorded)
                seg, tokens = known
                found.append((message, (role, text), b"", tokens, seg))
            else:
                item = self._tokens_of(message)
                tokens = item[3]
                if tokens.size > MAX_PROMPT_TOKENS:
                    raise LineError(f"message {len(found)} alone is more than "
                                    f"{MAX_PROMPT_TOKENS:,} tokens, more than any model's "
                                    "context")  # fmt: skip
                found.append(item)
            total += header[0] + tokens.size + newline_size
        if total > MAX_PROMPT_TOKENS:
            raise LineError(f"the prompt is {total:,} tokens, more than any model's context "
                            f"({MAX_PROMPT_TOKENS:,})")  # fmt: skip
        return found

    def _role_header(self, role: str) -> tuple[int, bytes]:
        """A role's header tokens, as add_chat uses them: (their count, their bytes)."""
        tokenizer = self._tokenizer
        assert tokenizer is not None
        tokens = tokenizer.role_header(role)
        header = (tokens.size, token_bytes(tokens).tobytes())
        self._headers[role] = header
        return header

    def _tokens_of(self, message: Message) -> _Tokenized:
        """A message whose text is not in the memo by itself: a new text, or a long one
        (remembered by its digest: the memo must not keep the text)."""
        tokenizer = self._tokenizer
        assert tokenizer is not None
        text = message.text
        key: _MemoKey = (message.role, text)
        digest = self._hasher.text_digest(text)
        if len(text) > _SEEN_BY_TEXT:
            key = (message.role, digest)
            known = self._seen.get(key)
            if known is not None:
                return (message, key, digest, known[1], known[0])
        return (message, key, digest, tokenizer.text(digest, text, MAX_PROMPT_TOKENS), -1)

    def _record(self, message: Message, key: _MemoKey, digest: bytes, tokens: np.ndarray) -> int:
        """The message's segment, added to the table and the memo on its first time."""
        known = self._seen.get(key)  # (an earlier message of this request added it)
        if known is None:
            seg_id = self._hasher.segment_id(message.role, digest)
            seg = self._segments.add(seg_id, message.role, tokens.size, message)
            self._seen[key] = (seg, tokens)
            return seg
        seg = known[0]
        if message.is_document or message.label:
            self._segments.note_document(seg, message)
        return seg

    def _spill_if_full(self, force: bool = False) -> None:
        if self._spill is None:
            return
        for columns in self._blocks.values():
            columns.spill(self._spill, force)
        self._occurrences.spill(self._spill, force)

    # --- the streams -------------------------------------------------------------------
    def write(self, folders: dict[int, Path], files: list[str], log: ErrorLog) -> dict[int, Path]:
        """Write each block stream to its folder. With a spill and requests in time order,
        references and occurrences are copied from disk in chunks, never all in memory (a
        log out of time order is sorted in memory: finish, then save)."""
        if self._spill is None or self.request_table.out_of_order():
            streams = self.finish(files, log)
            return {size: streams[size].save(folders[size]) for size in streams}
        self._spill_if_full(force=True)
        headers = self.finish(files, log, columns=False)
        return {
            size: stream.save(
                folders[size],
                refs=self._blocks[size].ref_chunks(self._spill, stream.req_ref_start),
                occurrences=self._occurrences.chunks(self._spill),
            )
            for size, stream in headers.items()
        }

    def finish(
        self, files: list[str], log: ErrorLog, columns: bool = True
    ) -> dict[int, BlockStream]:
        """One BlockStream per block size, requests in time order (ties: file order).
        columns=False: requests and segments only (references and occurrences empty), for
        `write` to fill from the spill; the request columns are then views of the builder's
        own arrays, not copies."""
        requests = self.request_table.arrays(copy=columns)
        occurrences = self._occurrences.arrays(self._spill) if columns else Occurrences.empty()
        order = time_order(requests["t_us"])
        if order is not None:
            log.note(out_of_order_note(int(np.count_nonzero(order != np.arange(order.size)))))
            requests = reorder_requests(requests, order)
            occurrences = reorder_occurrences(occurrences, order)
        header = self._header(files, log)
        segments = self._segments.arrays()
        streams = {}
        for size, blocks in self._blocks.items():
            refs = self._refs(blocks, columns)
            start = blocks.ref_start()
            if order is not None:
                start, refs = reorder_refs(start, order, refs)
            streams[size] = BlockStream.from_columns(
                _at_size(header, size), {**requests, "ref_start": start}, refs, segments,
                occurrences,
            )  # fmt: skip
        return streams

    def _refs(self, blocks: BlockColumns, columns: bool) -> dict[str, np.ndarray]:
        if not columns:
            return {"key": np.zeros(0, np.uint64), "tokens": np.zeros(0, np.int32)}
        keys = blocks.all_keys(self._spill)
        return {"key": keys, "tokens": blocks.ref_tokens(blocks.ref_start(), 0, keys.size)}

    def _header(self, files: list[str], log: ErrorLog) -> StreamHeader:
        table = self.request_table
        fit = log.fit()
        return StreamHeader(
            source_format=self.source_format,
            block_tokens=self.block_tokens,
            tenants=table.tenants.values,
            users=table.users.values,
            routes=table.routes.values,
            files=files,
            errors=log.errors,
            skipped_lines=log.skipped_lines,
            notes=log.notes,
            stats={
                "tokens_rendered": int(self.tokens_total),
                "tokens_tokenized": int(self.distinct_tokens),
            },
            trace_fit=fit.to_dict() if fit is not None else None,
            log_format=self.log_format,
            tools_position=self.tools_position,
            tokenizer=self._tokenizer.name if self._tokenizer is not None else "",
        )


def _segment_tokenizer(options: IngestOptions) -> SegmentTokenizer:
    """The model's own tokenizer.json when one is given, else the tiktoken encoding."""
    if options.tokenizer_file:
        try:
            encoder = load_tokenizer_file(options.tokenizer_file, options.tokenizer_name)
        except EncodingUnavailable as exc:  # the user's file, not the server's set-up
            raise UnusableInput(str(exc)) from None
        return SegmentTokenizer(encoder, encoder.cut_is_exact)
    return SegmentTokenizer(load_encoding(options.encoding, options.tiktoken_dir))


def _at_size(header: StreamHeader, block_tokens: int) -> StreamHeader:
    """The header of the stream at this block size (the tables are shared, not copied)."""
    return StreamHeader(**{**vars(header), "block_tokens": block_tokens})
