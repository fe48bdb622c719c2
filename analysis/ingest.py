"""Ingest: log files -> BlockStream. Reading, tokenizing (once per distinct text) and
hashing, streamed line by line; progress reported through a callback."""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa

from analysis.errors import ErrorLog, LineError, TooManyBadLines, UnusableInput, over_budget
from analysis.hashing import KeyedHasher
from analysis.readers import (
    INSTRUCTION_ROLES,
    MAX_PROMPT_TOKENS,
    PRECHECK_BYTES,
    TRACE_BLOCK_SIZES,
    TRACE_BLOCK_TOKENS,
    BlankLineLimit,
    ByteRange,
    ChatReader,
    ChatRequest,
    LogFile,
    Message,
    MooncakeReader,
    Reader,
    ReadLimits,
    TraceColumns,
    TraceFit,
    TraceRequest,
    blocks_fit,
    decode_line,
    detect_format,
    precheck_line,
    read_trace,
    split_lines,
)
from analysis.spill import SPILL_ROWS, SpillColumns
from analysis.stream import (
    ROLE_DOCUMENT_PART,
    ROLE_INSTRUCTION,
    ROLE_OTHER,
    BlockStream,
)
from analysis.timestamps import MAX_PLAUSIBLE_SPAN_US
from analysis.tokens import PIECE_CHARS, SegmentTokenizer, load_encoding


@dataclass(frozen=True)
class Progress:
    """What a long step has done so far; the console writes it to the job row."""

    stage: str  # "reading" (parse + tokenize + hash, streamed together) | "analyzing" ...
    done: int  # bytes of the log files read (analysis: steps done)
    total: int
    requests: int = 0
    skipped: int = 0


ProgressFn = Callable[[Progress], None]

DEFAULT_BLOCK_TOKENS = {"chat": 256, "mooncake": TRACE_BLOCK_TOKENS}
FORMATS = ("auto", "chat", "mooncake")
_PREVIEW_CHARS = 200
_SEEN_BY_TEXT = 1 << 16  # longer message texts are memoised by their digest, not held


@dataclass(frozen=True)
class IngestOptions:
    hash_key: bytes
    format: str = "auto"
    block_tokens: int | None = None  # None: 256 for chat, 512 for traces
    # more block sizes to key in the same pass (chat logs): token ids are never kept, so
    # every size an analysis may want must be chosen at ingest
    extra_block_tokens: tuple[int, ...] = ()
    encoding: str = "cl100k_base"
    tiktoken_dir: str | None = None
    previews: bool = False  # keep the first characters of each segment's text
    max_listed_errors: int = 1000
    # past this many bad lines the ingest stops (None: no budget)
    max_bad_lines: int | None = 10_000
    limits: ReadLimits = field(default_factory=ReadLimits)
    # pre-hashed traces: a last block holding fewer than B tokens is cached (Mooncake's
    # convention, metrics.md) or, False, an uncached tail like a chat prompt's (vLLM's);
    # kvscope's own replay exports are read back exactly with False
    trace_partial_cached: bool = True


class _Codes:
    """Strings to dense integer codes (tenants, users, routes)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def code(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found


class PrefixChain:
    """Chained block keys of one block size, computed message by message and memoised by
    the sequence of segments so far: a system prompt + document prefix sent by 10,000
    requests is hashed once, not 10,000 times. Gives exactly the keys of hashing each
    whole prompt (each message's tokens depend only on its segment).

    Memory is bounded: past `max_states` remembered prefixes the memo starts over.
    """

    _ROOT = 0

    def __init__(self, hasher: KeyedHasher, block_tokens: int, max_states: int = 200_000):
        self.block_tokens = block_tokens
        self._hasher = hasher
        self._max_states = max_states
        self._reset()

    def _reset(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}
        # state id -> (keys this message completed, tokens left over after the last full
        # block, the last key's digest: the chain continues from it)
        self._states: list[tuple[np.ndarray, np.ndarray, bytes]] = [
            (np.zeros(0, np.uint64), np.zeros(0, np.uint32), b"")
        ]

    def keys(self, segments: list[int], pieces: list[tuple[np.ndarray, ...]]) -> np.ndarray:
        if len(self._states) > self._max_states:
            self._reset()
        state = self._ROOT
        found: list[np.ndarray] = []
        for seg, piece in zip(segments, pieces, strict=True):
            following = self._ids.get((state, seg))
            if following is None:
                following = self._extend(state, seg, piece)
            state = following
            new_keys = self._states[state][0]
            if new_keys.size:
                found.append(new_keys)
        if not found:
            return np.zeros(0, np.uint64)
        return found[0] if len(found) == 1 else np.concatenate(found)

    def _extend(self, state: int, seg: int, piece: tuple[np.ndarray, ...]) -> int:
        _, leftover, last = self._states[state]
        b = self.block_tokens
        header, text, newline = piece
        lead = np.concatenate((leftover, header))
        # the text's full blocks are hashed in place, not copied into one prompt array
        # (a long text's tokens would be held twice); the chain continues across the
        # three parts, so the keys are those of hashing the concatenation
        cut = min(text.size, -lead.size % b)
        cut += (text.size - cut) // b * b
        if cut <= -lead.size % b:  # a short text: one small concatenation, as ever
            parts = [np.concatenate((lead, text, newline))]
        else:
            first = -lead.size % b
            parts = [np.concatenate((lead, text[:first])), text[first:cut],
                     np.concatenate((text[cut:], newline))]  # fmt: skip
        found = []
        for part in parts[:-1]:  # multiples of b: nothing left over
            keys = self._hasher.block_keys(part, b, salt=last)
            if keys.size:
                last = int(keys[-1]).to_bytes(8, "little")
                found.append(keys)
        tail = parts[-1]
        keys = self._hasher.block_keys(tail, b, salt=last)
        if keys.size:
            last = int(keys[-1]).to_bytes(8, "little")
            found.append(keys)
        all_keys = found[0] if len(found) == 1 else np.concatenate(found or [keys])
        new = len(self._states)
        self._states.append((all_keys, tail[keys.size * b :].copy(), last))
        self._ids[(state, seg)] = new
        return new


class _BlockColumns:
    """Block references of one block size, request by request."""

    def __init__(self, block_tokens: int, chain: PrefixChain | None = None) -> None:
        self.block_tokens = block_tokens
        self.chain = chain
        self.nblocks = array("q")
        self.keys: list[np.ndarray] = []  # not yet spilled
        self.buffered = 0
        self.spill_name = f"keys-{block_tokens}"
        # traces: tokens in each request's last block (every other block is full)
        self.last_tokens = array("q")

    def add(self, keys: np.ndarray) -> None:
        self.nblocks.append(keys.size)
        if keys.size:
            self.keys.append(keys)
            self.buffered += keys.size

    def spill(self, spill: SpillColumns) -> None:
        if self.keys:
            spill.append(self.spill_name, np.concatenate(self.keys).astype(np.uint64, copy=False))
            self.keys, self.buffered = [], 0

    def all_keys(self, spill: SpillColumns | None) -> np.ndarray:
        parts = (
            [] if spill is None or self.spill_name not in spill else [spill.load(self.spill_name)]
        )
        parts += self.keys
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


class StreamBuilder:
    """Collects requests one by one, then orders them by time into block streams, one
    per block size (sharing the request and segment tables)."""

    def __init__(
        self,
        source_format: str,
        block_sizes: tuple[int, ...],
        options: IngestOptions,
        spill: SpillColumns | None = None,
    ):
        if source_format == "mooncake" and len(block_sizes) != 1:
            raise ValueError("a pre-hashed trace has one block size: its own")
        if any(b < 1 for b in block_sizes):
            raise ValueError("block sizes must be positive")
        self.source_format = source_format
        self.block_sizes = block_sizes
        self.block_tokens = block_sizes[0]
        self._hasher = KeyedHasher(options.hash_key)
        self._previews = options.previews
        self._partial_cached = options.trace_partial_cached
        self._tokenizer: SegmentTokenizer | None = None
        if source_format == "chat":
            self._tokenizer = SegmentTokenizer(
                load_encoding(options.encoding, options.tiktoken_dir)
            )
        self._tenants, self._users, self._routes = _Codes(), _Codes(), _Codes()
        self._t = array("q")
        self._tenant = array("i")
        self._user = array("i")
        self._route = array("i")
        self._prompt = array("q")
        self._output = array("q")
        self._line = array("q")
        self._file = array("h")
        self._blocks = {b: _BlockColumns(b, PrefixChain(self._hasher, b)) for b in block_sizes}
        self._segments: dict[int, int] = {}  # segment id -> index in the table
        # (role, text) -> (segment index, token ids): a repeated message costs one dict
        # lookup. Holds each distinct text once, for the ingest only (never stored).
        self._seen: dict[tuple[str, str | bytes], tuple[int, np.ndarray]] = {}
        self._seg_id = array("Q")
        self._seg_role = array("b")
        self._seg_tokens = array("i")
        self._seg_label: list[str] = []
        self._seg_preview: list[str] = []
        self._occ_req = array("i")
        self._occ_seg = array("i")
        self._occ_offset = array("q")
        self.tokens_total = 0  # every message of every request, as rendered
        # with a spill, block keys and occurrences go to disk as they grow: memory then
        # follows the distinct content, not the length of the log
        self._spill = spill

    def _add_request(self, request: ChatRequest | TraceRequest, file_index: int) -> int:
        index = len(self._t)
        self._t.append(request.t_us)
        self._tenant.append(self._tenants.code(request.tenant))
        self._user.append(self._users.code(request.user))
        self._route.append(self._routes.code(request.model))
        self._output.append(request.output_tokens)
        self._line.append(request.line)
        self._file.append(file_index)
        return index

    def add_trace_columns(self, cols: TraceColumns, file_index: int) -> None:
        """A whole trace file read column-wise (analysis.fasttrace)."""
        n = cols.t_us.size
        self._t.frombytes(cols.t_us.tobytes())
        for column, values, codes in (
            (self._tenant, cols.tenant, self._tenants),
            (self._user, cols.user, self._users),
            (self._route, cols.model, self._routes),
        ):
            column.frombytes(np.array([codes.code(v) for v in values], np.int32).tobytes())
        self._output.frombytes(cols.output_tokens.tobytes())
        # rows, counted as lines (a clean file: blank lines are the only difference)
        self._line.frombytes(np.arange(1, n + 1, dtype=np.int64).tobytes())
        self._file.frombytes(np.full(n, file_index, np.int16).tobytes())
        self._prompt.frombytes(cols.input_length.tobytes())
        columns = self._blocks[self.block_tokens]
        nblocks, keys, last = cols.nblocks, cols.keys, cols.last_tokens
        if not self._partial_cached:
            nblocks, keys, last = _drop_partial_blocks(nblocks, keys, last, self.block_tokens)
        columns.nblocks.frombytes(nblocks.tobytes())
        if keys.size:
            columns.keys.append(keys)
            columns.buffered += keys.size
        columns.last_tokens.frombytes(last.tobytes())
        self._spill_if_full()

    def add_trace(self, request: TraceRequest, file_index: int) -> None:
        self._add_request(request, file_index)
        ids = request.hash_ids
        blocks = len(ids)
        self._prompt.append(request.input_length)
        columns = self._blocks[self.block_tokens]
        # the last id holds what is left of the prompt (all of a trace's blocks count,
        # unless partial last blocks are read as uncached tails)
        last = request.input_length - self.block_tokens * (blocks - 1)
        if blocks and last < self.block_tokens and not self._partial_cached:
            ids, blocks, last = ids[:-1], blocks - 1, self.block_tokens
        columns.add(ids if blocks else np.zeros(0, np.uint64))
        columns.last_tokens.append(last)
        self._spill_if_full()

    def add_chat(self, request: ChatRequest, file_index: int) -> None:
        """Tokenize, then record. A prompt longer than any model's context raises
        LineError before anything is recorded (the line is skipped, nothing half-added)."""
        tokenizer = self._tokenizer
        assert tokenizer is not None
        seen = self._seen
        # (message, memo key, digest, memo entry or None, its tokens)
        found: list[tuple[Message, tuple[str, str | bytes], bytes, tuple | None, np.ndarray]] = []
        total = 0
        for message in request.messages:
            text = message.text
            # a long text is remembered by its digest: the memo must not keep the text
            key: tuple[str, str | bytes] | None = (
                (message.role, text) if len(text) <= _SEEN_BY_TEXT else None
            )
            known = seen.get(key) if key is not None else None
            digest = b""
            if known is None:
                digest = self._hasher.text_digest(text)
                if key is None:
                    key = (message.role, digest)
                    known = seen.get(key)
            if known is not None:
                text_tokens = known[1]
            else:
                text_tokens = tokenizer.text(digest, text, MAX_PROMPT_TOKENS)
                if text_tokens.size > MAX_PROMPT_TOKENS:
                    raise LineError(f"message {len(found)} alone is more than "
                                    f"{MAX_PROMPT_TOKENS:,} tokens, more than any model's "
                                    "context")  # fmt: skip
            assert key is not None
            found.append((message, key, digest, known, text_tokens))
            total += tokenizer.role_header(message.role).size + text_tokens.size
            total += tokenizer.newline.size
        if total > MAX_PROMPT_TOKENS:
            raise LineError(f"the prompt is {total:,} tokens, more than any model's context "
                            f"({MAX_PROMPT_TOKENS:,})")  # fmt: skip
        index = self._add_request(request, file_index)
        pieces: list[tuple[np.ndarray, ...]] = []
        segments: list[int] = []
        offset = 0
        for message, key, digest, known, text_tokens in found:
            known = known or seen.get(key)  # (an earlier message of this request added it)
            if known is None:
                seg = self._segment(message.role, digest, text_tokens.size, message)
                seen[key] = (seg, text_tokens)
            else:
                seg = known[0]
                if message.is_document or message.label:
                    self._note_document(seg, message)
            header = tokenizer.role_header(message.role)
            segments.append(seg)
            self._occ_req.append(index)
            self._occ_seg.append(seg)
            self._occ_offset.append(offset + header.size)
            pieces.append((header, text_tokens, tokenizer.newline))
            offset += header.size + text_tokens.size + tokenizer.newline.size
        self._prompt.append(offset)
        self.tokens_total += offset
        for columns in self._blocks.values():
            keys = columns.chain.keys(segments, pieces)
            columns.add(keys)
        self._spill_if_full()

    _OCCURRENCES = (("occ_req", "_occ_req", np.int32), ("occ_seg", "_occ_seg", np.int32),
                    ("occ_offset", "_occ_offset", np.int64))  # fmt: skip

    def _spill_if_full(self, force: bool = False) -> None:
        if self._spill is None:
            return
        for columns in self._blocks.values():
            if force or columns.buffered >= SPILL_ROWS:
                columns.spill(self._spill)
        if force or len(self._occ_req) >= SPILL_ROWS:
            for name, attr, dtype in self._OCCURRENCES:
                values = getattr(self, attr)
                if len(values):
                    self._spill.append(name, np.frombuffer(values, dtype=dtype))
                    del values[:]

    def _occurrences(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every occurrence in file order: what was spilled, then what is in memory."""
        out = []
        for name, attr, dtype in self._OCCURRENCES:
            parts = [_np(getattr(self, attr), dtype)]
            if self._spill is not None and name in self._spill:
                parts.insert(0, self._spill.load(name))
            out.append(np.concatenate(parts))
        return out[0], out[1], out[2]

    def _segment(self, role: str, digest: bytes, tokens: int, message) -> int:
        seg_id = self._hasher.segment_id(role, digest)
        found = self._segments.get(seg_id)
        if found is not None:
            self._note_document(found, message)
            return found
        found = self._segments[seg_id] = len(self._seg_id)
        self._seg_id.append(seg_id)
        if role in INSTRUCTION_ROLES:
            role_class = ROLE_INSTRUCTION
        elif message.is_document:
            role_class = ROLE_DOCUMENT_PART
        else:
            role_class = ROLE_OTHER
        self._seg_role.append(role_class)
        self._seg_tokens.append(tokens)
        self._seg_label.append(message.label)
        if self._previews:
            self._seg_preview.append(message.text[:_PREVIEW_CHARS])
        return found

    def _note_document(self, seg: int, message) -> None:
        """The kind must not depend on line order: any occurrence typed as a document
        makes the segment a document, and the first label found names it."""
        if message.is_document and self._seg_role[seg] == ROLE_OTHER:
            self._seg_role[seg] = ROLE_DOCUMENT_PART
        if message.label and not self._seg_label[seg]:
            self._seg_label[seg] = message.label

    @property
    def inexact_texts(self) -> int:
        return self._tokenizer.inexact_texts if self._tokenizer else 0

    @property
    def distinct_tokens(self) -> int:
        return self._tokenizer.distinct_tokens if self._tokenizer else 0

    @property
    def requests(self) -> int:
        return len(self._t)

    def write(self, folders: dict[int, Path], files: list[str], log: ErrorLog) -> dict[int, Path]:
        """Write each block stream to its folder. With a spill and requests in time order,
        references and occurrences are copied from disk in chunks, never all in memory (a
        log out of time order is sorted in memory: finish, then save)."""
        if self._spill is None or self._out_of_order():
            streams = self.finish(files, log)
            return {size: streams[size].save(folders[size]) for size in streams}
        self._spill_if_full(force=True)
        headers = self.finish(files, log, columns=False)
        return {
            size: stream.save(
                folders[size],
                refs=self._ref_chunks(self._blocks[size], stream.req_ref_start),
                occurrences=self._occurrence_chunks(),
            )
            for size, stream in headers.items()
        }

    def _out_of_order(self) -> bool:
        t = np.frombuffer(self._t, dtype=np.int64) if self._t else np.zeros(0, np.int64)
        return bool(t.size > 1 and np.any(t[1:] < t[:-1]))

    def _ref_chunks(self, columns: _BlockColumns, start: np.ndarray) -> Iterator[pa.Table]:
        assert self._spill is not None
        last_at = last_tokens = None
        if len(columns.last_tokens):  # traces: each request's last block holds the rest
            has_blocks = np.diff(start) > 0
            last_at = start[1:][has_blocks] - 1
            last_tokens = _np(columns.last_tokens, np.int64)[has_blocks]
        offset = 0
        for keys in self._spill.chunks(columns.spill_name):
            tokens = np.full(keys.size, columns.block_tokens, dtype=np.int32)
            if last_at is not None:
                lo, hi = np.searchsorted(last_at, [offset, offset + keys.size])
                tokens[last_at[lo:hi] - offset] = last_tokens[lo:hi]
            offset += keys.size
            yield pa.table({"key": keys, "tokens": tokens})

    def _occurrence_chunks(self) -> Iterator[pa.Table]:
        assert self._spill is not None
        names = [name for name, _, _ in self._OCCURRENCES]
        for req, seg, offset in zip(*(self._spill.chunks(n) for n in names), strict=True):
            yield pa.table({"req": req, "seg": seg, "offset": offset})

    def finish(
        self, files: list[str], log: ErrorLog, columns: bool = True
    ) -> dict[int, BlockStream]:
        """One BlockStream per block size, requests in time order (ties: file order).
        columns=False: requests and segments only (references and occurrences empty), for
        `write` to fill from the spill; the request columns are then views of the builder's
        own arrays, not copies."""
        t = np.frombuffer(self._t, dtype=np.int64) if self._t else np.zeros(0, np.int64)
        n = t.size
        if columns:
            occ_req, occ_seg, occ_offset = self._occurrences()
        else:
            occ_req, occ_seg, occ_offset = (np.zeros(0, d) for _, _, d in self._OCCURRENCES)
        order = np.argsort(t, kind="stable")
        req_cols = [
            t,
            _np(self._tenant, np.int32, copy=columns),
            _np(self._user, np.int32, copy=columns),
            _np(self._route, np.int32, copy=columns),
            _np(self._prompt, np.int64, copy=columns),
            _np(self._output, np.int64, copy=columns),
            _np(self._line, np.int64, copy=columns),
            _np(self._file, np.int16, copy=columns),
        ]
        reordered = bool(n and np.any(order != np.arange(n)))
        if reordered:
            moved = int(np.count_nonzero(order != np.arange(n)))
            log.note(f"{moved} requests were out of time order; they were sorted by timestamp")
            req_cols = [c[order] for c in req_cols]
            rank = np.empty(n, dtype=np.int32)
            rank[order] = np.arange(n, dtype=np.int32)
            occ_req = rank[occ_req]
            occ_order = np.argsort(occ_req, kind="stable")
            occ_req, occ_seg, occ_offset = (
                occ_req[occ_order],
                occ_seg[occ_order],
                occ_offset[occ_order],
            )
        stats = {
            "tokens_rendered": int(self.tokens_total),
            "tokens_tokenized": int(self.distinct_tokens),
        }
        streams = {}
        for size, block_columns in self._blocks.items():
            keys = block_columns.all_keys(self._spill) if columns else None
            start, keys, tokens = _block_arrays(block_columns, keys, order if reordered else None)
            streams[size] = BlockStream(
                source_format=self.source_format,
                block_tokens=size,
                req_t_us=req_cols[0],
                req_tenant=req_cols[1],
                req_user=req_cols[2],
                req_route=req_cols[3],
                req_prompt_tokens=req_cols[4],
                req_output_tokens=req_cols[5],
                req_line=req_cols[6],
                req_file=req_cols[7],
                req_ref_start=start,
                tenants=self._tenants.values,
                users=self._users.values,
                routes=self._routes.values,
                files=files,
                ref_key=keys,
                ref_tokens=tokens,
                seg_id=_np(self._seg_id, np.uint64),
                seg_role_class=_np(self._seg_role, np.int8),
                seg_tokens=_np(self._seg_tokens, np.int32),
                seg_label=self._seg_label,
                seg_preview=self._seg_preview if self._previews else None,
                occ_req=occ_req,
                occ_seg=occ_seg,
                occ_offset=occ_offset,
                errors=log.errors,
                skipped_lines=log.skipped_lines,
                notes=log.notes,
                stats=stats,
                trace_fit=fit.to_dict() if (fit := log.fit()) is not None else None,
            )
        return streams


def _drop_partial_blocks(
    nblocks: np.ndarray, keys: np.ndarray, last: np.ndarray, block_tokens: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A trace's columns without the partial last blocks (read as uncached tails)."""
    partial = (nblocks > 0) & (last < block_tokens)
    if not partial.any():
        return nblocks, keys, last
    ends = np.cumsum(nblocks) - 1  # index of each request's last key
    keep = np.ones(keys.size, dtype=bool)
    keep[ends[partial]] = False
    nblocks = nblocks - partial
    last = np.where(partial, block_tokens, last)
    return nblocks, keys[keep], last


def _np(values: array, dtype: type, copy: bool = True) -> np.ndarray:
    """The array's values; copy=False: a view (the builder must not grow it any more)."""
    if not len(values):
        return np.zeros(0, dtype=dtype)
    view = np.frombuffer(values, dtype=dtype)
    return view.copy() if copy else view


def _block_arrays(
    columns: _BlockColumns, keys: np.ndarray | None, order: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per-request start offsets, keys, tokens), reordered by request `order` if given.
    keys=None: the offsets only (keys and tokens empty)."""
    nblocks = _np(columns.nblocks, np.int64)
    start = np.zeros(nblocks.size + 1, dtype=np.int64)
    np.cumsum(nblocks, out=start[1:])
    if keys is None:
        return start, np.zeros(0, np.uint64), np.zeros(0, np.int32)
    tokens = np.full(keys.size, columns.block_tokens, dtype=np.int32)
    if len(columns.last_tokens):
        has_blocks = nblocks > 0
        tokens[start[1:][has_blocks] - 1] = _np(columns.last_tokens, np.int64)[has_blocks]
    if order is not None:
        ref_index = _gather_ranges(start, order)
        keys, tokens = keys[ref_index], tokens[ref_index]
        np.cumsum(nblocks[order], out=start[1:])
    return start, keys, tokens


def _gather_ranges(start: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Indices of the ranges [start[i], start[i+1]) for i in `order`, concatenated."""
    lengths = (start[1:] - start[:-1])[order]
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    new_start = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=new_start[1:])
    shift = np.repeat(start[:-1][order] - new_start, lengths)
    return np.arange(total, dtype=np.int64) + shift


def ingest(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None = None,
    names: Sequence[str] | None = None,
) -> BlockStream:
    """Read every log into one block stream (options.block_tokens)."""
    streams = ingest_streams(paths, options, progress, names=names)
    return next(iter(streams.values()))


def ingest_streams(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None = None,
    byte_range: ByteRange | None = None,
    names: Sequence[str] | None = None,
) -> dict[int, BlockStream]:
    """Read every log once into block streams, one per block size (the first is
    options.block_tokens or the format's default, then options.extra_block_tokens).

    Bad lines are skipped and listed; a log with no usable line at all raises
    UnusableInput with a one-line reason, and so does a whole trace whose contradicting
    lines all fit one other block size (TraceFit.advice: it was made at that size).
    `names`: each path's name as the user knows it (default: the path's own), used in
    every error, note and skipped-line entry.
    """
    builder, names, log = _read(paths, options, progress, byte_range, spill=None, names=names)
    return builder.finish(names, log)


def ingest_to_folders(
    paths: Sequence[str | Path],
    options: IngestOptions,
    root: str | Path,
    progress: ProgressFn | None = None,
    byte_range: ByteRange | None = None,
    names: Sequence[str] | None = None,
) -> dict[int, Path]:
    """ingest_streams, written straight to `root`/b<size> (one folder per block size).
    Block references and occurrences are spilled to disk as they grow, so the memory
    used follows the distinct content of the logs, not their length."""
    root = Path(root)
    with SpillColumns(root) as spill:
        builder, names, log = _read(paths, options, progress, byte_range, spill, names)
        if progress is not None:
            progress(Progress("writing", 1, 1, builder.requests, log.skipped_lines))
        return builder.write({size: root / f"b{size}" for size in builder.block_sizes}, names, log)


def _read(
    paths: Sequence[str | Path],
    options: IngestOptions,
    progress: ProgressFn | None,
    byte_range: ByteRange | None,
    spill: SpillColumns | None,
    names: Sequence[str] | None = None,
) -> tuple[StreamBuilder, list[str], ErrorLog]:
    if options.format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}")
    if byte_range is not None and len(paths) != 1:
        raise ValueError("a byte range is part of one file")
    if names is not None and len(names) != len(paths):
        raise ValueError("one name per path")
    log = ErrorLog(max_listed=options.max_listed_errors, max_bad_lines=options.max_bad_lines)
    files = [LogFile(p, byte_range, options.limits, names[i] if names else None)
             for i, p in enumerate(paths)]  # fmt: skip
    total_bytes = sum(f.size for f in files) or 1
    done_bytes = 0
    builder: StreamBuilder | None = None
    log.requests_read = lambda: builder.requests if builder is not None else 0
    names = [f.name for f in files]
    multi = len(files) > 1
    formats: dict[int, str] = {}  # each file's own format, from its first valid line
    # the sizes each trace file read column-wise fits: its lines may veto the size that
    # another file's contradictions fit (a clean file never reaches the line reader)
    fast_fits: list[TraceFit] = []

    furthest = 0

    def report(done: int) -> None:
        nonlocal furthest
        if progress is not None:
            # never backwards, when a trace Arrow refused is read again line by line
            furthest = max(furthest, done)
            requests = builder.requests if builder is not None else 0
            progress(Progress("reading", furthest, total_bytes, requests, log.skipped_lines))

    # one reader for all the files: a request id repeated in another file is a duplicate too
    reader: Reader | None = None
    for file_index, log_file in enumerate(files):
        # bytes read so far, after every chunk: progress moves before the first request
        # too, and through a file of blank lines (where no line is ever handed out)
        log_file.on_chunk = lambda f=log_file, before=done_bytes: report(before + f.bytes_read())
        whole = byte_range is None
        # closed on every way out: an error raised mid-file must not leave the file open
        gen = log_file.lines()
        try:
            lines: Iterator[tuple[int, bytes | bytearray | LineError]] = gen
            if (
                whole
                and options.format != "chat"
                and (builder is None or builder.source_format == "mooncake")
            ):
                # the lines up to the first request tell whether this is a trace; the
                # line path goes on from them (one pass over a file of blank lines)
                head, first = _head(gen, builder, options)
                if first is not None:
                    _same_format(formats, file_index, names, first)
                fast = _fast_trace(log_file, first, builder, options, spill)
                if fast is not None:
                    gen.close()
                    builder, cols = fast
                    builder.add_trace_columns(cols, file_index)
                    fast_fits.append(_columns_fit(cols, builder.block_tokens))
                    done_bytes += log_file.size
                    report(done_bytes)
                    continue
                if first is not None and detect_format_or_none(first) == "mooncake":
                    gen.close()  # a trace Arrow refused: read it again, line by line
                    lines = gen = log_file.lines()
                else:
                    lines = chain(head, gen)
            for line_no, raw in lines:
                try:
                    if not isinstance(raw, LineError) and len(raw) > PRECHECK_BYTES:
                        precheck_line(raw, _trace_block_tokens(builder, options, raw))
                    obj = decode_line(raw)
                    if obj is None:
                        continue
                    if file_index not in formats:
                        _same_format(formats, file_index, names, obj)
                    if builder is None:
                        builder = _builder(obj, options, spill)
                    if reader is None:
                        reader = _reader(builder, log)
                        if log.advisor is not None:  # a trace: its fit, with the clean files'
                            log.advisor = lambda own=log.advisor: TraceFit.combine(
                                [own(), *fast_fits]
                            )
                    request = reader.parse(obj, line_no)
                    if isinstance(request, TraceRequest):
                        builder.add_trace(request, file_index)
                    else:
                        builder.add_chat(request, file_index)
                except LineError as exc:
                    log.skip(line_no, str(exc), names[file_index] if multi else None)
        except BlankLineLimit as exc:
            raise TooManyBadLines(str(exc), log.errors, log.skipped_lines) from None
        finally:
            gen.close()
        if log_file.truncated is not None:
            line_no, reason = log_file.truncated
            log.skip(line_no, reason, names[file_index] if multi else None)
        done_bytes += log_file.size
        if log_file.blank_lines:
            where = f" in {log_file.name}" if multi else ""
            log.note(f"{log_file.blank_lines:,} blank lines{where} were ignored")
    fit = log.fit()  # a trace read at the wrong block size: name the one that fits
    # a part of a split ingest never stops for it: its requests may still count, when
    # another part's lines fit no other size (merge_parts)
    whole_log = byte_range is None
    advice = fit.advice() if fit is not None else ""
    if builder is None or not builder.requests:
        blank = sum(f.blank_lines for f in files)
        empty = f"only blank lines: {blank:,}" if blank else "the file is empty"
        reason = log.errors[0]["reason"] if log.errors else empty
        first = f" (line {log.errors[0]['line']}: {reason})" if log.errors else f" ({reason})"
        raise UnusableInput(
            f"no usable request in {', '.join(names)}{first}" + (f"; {advice}" if advice else ""),
            log.errors,
            log.skipped_lines,
            fit=fit,
        )
    if advice and whole_log:
        # every contradicting line fits one other size: the trace was made at that size,
        # and the lines that also fit this one are a biased sample of it (a trace's short
        # prompts); no analysis at this size means anything, so none is made. The input is
        # not lost: the advice says which size reads it
        raise UnusableInput(
            _made_at_another_size(names, builder.block_tokens, builder.requests, advice),
            log.errors,
            log.skipped_lines,
            fit=fit,
            requests=builder.requests,
        )
    if advice:  # a part of a split ingest: merge_parts decides, from every part's lines
        log.note(advice)
    _note_span(builder, log, names)
    if builder.inexact_texts:
        log.note(f"{builder.inexact_texts:,} texts hold a run of more than {PIECE_CHARS:,} "
                 "characters without a space; they were tokenized in pieces, so their token "
                 "counts may differ from tiktoken's by a token or two per piece")  # fmt: skip
    report(total_bytes)
    return builder, names, log


def _note_span(builder: StreamBuilder, log: ErrorLog, names: list[str]) -> None:
    note = _span_note(_np(builder._t, np.int64, copy=False),
                      _np(builder._line, np.int64, copy=False),
                      _np(builder._file, np.int16, copy=False), names)  # fmt: skip
    if note:
        log.note(note)


_SPAN_NOTE = "the requests span "


def _span_note(t: np.ndarray, lines: np.ndarray, files: np.ndarray, names: list[str]) -> str:
    """A note when the requests span more than a year ("" if not): a few lines with a
    wrong unit, a wrong clock or a placeholder (0, year 9999) stretch every time-based
    figure."""
    if t.size < 2:
        return ""
    first, last = int(t.argmin()), int(t.argmax())
    span = int(t[last] - t[first])
    if span <= MAX_PLAUSIBLE_SPAN_US:
        return ""

    def where(i: int) -> str:
        return (f"{names[int(files[i])]} " if len(names) > 1 else "") + f"line {int(lines[i])}"

    return (f"{_SPAN_NOTE}{span / 86_400e6:,.0f} days (the earliest on {where(first)}, the "
            f"latest on {where(last)}): timestamps this far apart usually mean a wrong unit, "
            "clock or placeholder (such as 0); check them")  # fmt: skip


_BLANK_NOTE = re.compile(r"^([\d,]+) blank lines were ignored$")


def _made_at_another_size(names: Sequence[str], block_tokens: int, requests: int, advice: str):
    """Why a trace whose contradicting lines all fit one other size is not analyzed."""
    kept = f"{requests:,} request{'s' if requests != 1 else ''}"
    return (f"{', '.join(names)} was made at another block size than {block_tokens} tokens: "
            f"an analysis of the {kept} that also fit {block_tokens} would be biased; "
            f"{advice}")  # fmt: skip


def _columns_fit(cols: TraceColumns, block_tokens: int) -> TraceFit:
    """The other sizes every line of a trace file read column-wise fits (none contradicts
    `block_tokens`: the column-wise reader takes only such a file)."""
    fitting = tuple(b for b in TRACE_BLOCK_SIZES if b != block_tokens
                    and bool(np.all(blocks_fit(cols.input_length, cols.nblocks, b))))  # fmt: skip
    return TraceFit(block_tokens, fitting, 0)


def _trace_block_tokens(
    builder: StreamBuilder | None, options: IngestOptions, raw: bytes | bytearray
) -> int | None:
    """The block size if this line is to be read as a pre-hashed trace line, else None."""
    if builder is not None:
        return builder.block_tokens if builder.source_format == "mooncake" else None
    if options.format == "chat":
        return None
    if options.format == "mooncake" or (b'"hash_ids"' in raw and b'"messages"' not in raw):
        return options.block_tokens or DEFAULT_BLOCK_TOKENS["mooncake"]
    return None


_HEAD_LINES = 1000  # lines with content looked at for a first request (the fast path)


def _head(
    lines: Iterator[tuple[int, bytes | bytearray | LineError]],
    builder: StreamBuilder | None,
    options: IngestOptions,
) -> tuple[list[tuple[int, bytes | bytearray | LineError]], dict | None]:
    """The lines up to and including the first that decodes, and its object (None if
    none did among the first _HEAD_LINES). A line precheck_line refuses is not parsed;
    a bad line is kept as its error, not its bytes (a thousand 60 MB lines of garbage
    must not be held at once)."""
    head: list[tuple[int, bytes | bytearray | LineError]] = []
    for number, raw in lines:
        try:
            if not isinstance(raw, LineError) and len(raw) > PRECHECK_BYTES:
                precheck_line(raw, _trace_block_tokens(builder, options, raw))
            obj = decode_line(raw)
        except LineError as exc:
            head.append((number, exc))
        else:
            head.append((number, raw))
            if obj is not None:
                return head, obj
        if len(head) >= _HEAD_LINES:
            break
    return head, None


def _fast_trace(
    log_file: LogFile,
    first: dict | None,
    builder: StreamBuilder | None,
    options: IngestOptions,
    spill: SpillColumns | None,
) -> tuple[StreamBuilder, TraceColumns] | None:
    """The column-wise path for a clean pre-hashed trace, if this file is one (its first
    request is `first`)."""
    if first is None or detect_format_or_none(first) != "mooncake":
        return None
    if builder is None:
        builder = _builder(first, options, spill)
    cols = read_trace(log_file.path, builder.block_tokens, options.limits, log_file.name)
    return (builder, cols) if cols is not None else None


_FORMAT_NAMES = {"chat": "a chat log", "mooncake": "a pre-hashed (Mooncake) trace"}


def _same_format(formats: dict[int, str], index: int, names: list[str], first: dict) -> None:
    """Record a file's format (from its first valid line); a multi-file upload whose files
    differ cannot be read as one log: say so, naming both files and what each is."""
    found = detect_format_or_none(first)
    if found is None:
        return  # not a request of either kind: its lines are skipped one by one
    formats[index] = found
    other = next(((i, f) for i, f in formats.items() if f != found), None)
    if other is not None:
        raise UnusableInput(
            f"the files are in different formats: {names[other[0]]} is "
            f"{_FORMAT_NAMES[other[1]]}, {names[index]} is {_FORMAT_NAMES[found]}; upload "
            "each kind on its own"
        )


def detect_format_or_none(obj: dict) -> str | None:
    try:
        return detect_format(obj)
    except LineError:
        return None


def _builder(first: dict, options: IngestOptions, spill: SpillColumns | None) -> StreamBuilder:
    fmt = options.format if options.format != "auto" else detect_format(first)
    first = options.block_tokens if options.block_tokens is not None else DEFAULT_BLOCK_TOKENS[fmt]
    if fmt == "mooncake" and DEFAULT_BLOCK_TOKENS[fmt] in options.extra_block_tokens:
        # a trace has one block size: with several chosen, its own when it is among them
        first = DEFAULT_BLOCK_TOKENS[fmt]
    sizes = (first,)
    if fmt == "chat":
        sizes += tuple(b for b in dict.fromkeys(options.extra_block_tokens) if b not in sizes)
    return StreamBuilder(fmt, sizes, options, spill)


def _reader(builder: StreamBuilder, log: ErrorLog) -> Reader:
    if builder.source_format == "mooncake":
        return MooncakeReader(log, builder.block_tokens)
    return ChatReader(log)


def merge_streams(parts: Sequence[BlockStream]) -> BlockStream:
    """One block stream from the streams of consecutive parts of one log (parallel ingest),
    exactly as if the log had been read in one pass: codes and segment indices are remapped
    by value, requests are put in time order (ties: file order)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    if any(p.block_tokens != first.block_tokens or p.source_format != first.source_format
           for p in parts):  # fmt: skip
        raise ValueError("parts differ in block size or format")
    tenants, users, routes = _Codes(), _Codes(), _Codes()

    def remap(codes: _Codes, values: list[str], column: np.ndarray) -> np.ndarray:
        table = np.array([codes.code(v) for v in values], dtype=np.int32)
        return table[column] if column.size else column.astype(np.int32)

    seg_index: dict[int, int] = {}
    seg_id, seg_role, seg_tokens, seg_label, seg_preview = [], [], [], [], []
    previews = first.seg_preview is not None
    req_cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "t", "tenant", "user", "route", "prompt", "output", "line", "file", "blocks")}  # fmt: skip
    keys, occ_req, occ_seg, occ_offset = [], [], [], []
    offset = 0
    for part in parts:
        req_cols["t"].append(part.req_t_us)
        req_cols["tenant"].append(remap(tenants, part.tenants, part.req_tenant))
        req_cols["user"].append(remap(users, part.users, part.req_user))
        req_cols["route"].append(remap(routes, part.routes, part.req_route))
        req_cols["prompt"].append(part.req_prompt_tokens)
        req_cols["output"].append(part.req_output_tokens)
        req_cols["line"].append(part.req_line)
        req_cols["file"].append(part.req_file)
        req_cols["blocks"].append(np.diff(part.req_ref_start))
        keys.append(part.ref_key)
        mapping = np.empty(part.seg_id.size, dtype=np.int32)
        for i, sid in enumerate(part.seg_id.tolist()):
            found = seg_index.get(sid)
            if found is None:
                found = seg_index[sid] = len(seg_id)
                seg_id.append(sid)
                seg_role.append(int(part.seg_role_class[i]))
                seg_tokens.append(int(part.seg_tokens[i]))
                seg_label.append(part.seg_label[i])
                if previews:
                    seg_preview.append(part.seg_preview[i])
            else:  # any part typing it as a document makes it one (ROLE_DOCUMENT_PART < OTHER)
                seg_role[found] = min(seg_role[found], int(part.seg_role_class[i]))
                seg_label[found] = seg_label[found] or part.seg_label[i]
            mapping[i] = found
        occ_req.append(part.occ_req.astype(np.int64) + offset)
        occ_seg.append(mapping[part.occ_seg] if part.occ_seg.size else part.occ_seg)
        occ_offset.append(part.occ_offset)
        offset += part.requests
    cat = {k: np.concatenate(v) for k, v in req_cols.items()}
    start = np.zeros(cat["t"].size + 1, dtype=np.int64)
    np.cumsum(cat["blocks"], out=start[1:])
    key_column = np.concatenate(keys)
    token_column = np.concatenate([p.ref_tokens for p in parts])
    occ = (np.concatenate(occ_req), np.concatenate(occ_seg).astype(np.int32),
           np.concatenate(occ_offset))  # fmt: skip
    order = np.argsort(cat["t"], kind="stable")
    notes = list(dict.fromkeys(n for p in parts for n in p.notes))
    if np.any(order != np.arange(order.size)):
        ref_index = _gather_ranges(start, order)
        key_column, token_column = key_column[ref_index], token_column[ref_index]
        cat = {k: v[order] for k, v in cat.items()}
        np.cumsum(cat["blocks"], out=start[1:])
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        occ_req_sorted = rank[occ[0]]
        occ_order = np.argsort(occ_req_sorted, kind="stable")
        occ = (occ_req_sorted[occ_order], occ[1][occ_order], occ[2][occ_order])
    # requests out of order are counted against the file's own order, as one pass counts them;
    # blank lines and the span are the whole log's too
    blank = sum(int(m[1].replace(",", "")) for p in parts for n in p.notes
                if (m := _BLANK_NOTE.match(n)))  # fmt: skip
    notes = [n for n in notes if "out of time order" not in n and not _BLANK_NOTE.match(n)
             and not n.startswith((_SPAN_NOTE, _FIT_NOTE))]  # fmt: skip
    if blank:
        notes.append(f"{blank:,} blank lines were ignored")
    if span := _span_note(cat["t"], cat["line"], cat["file"], first.files):
        notes.append(span)
    in_file = cat["t"][np.argsort(cat["line"], kind="stable")]
    file_order = np.argsort(in_file, kind="stable")
    moved = int(np.count_nonzero(file_order != np.arange(file_order.size)))
    if moved:
        notes.append(f"{moved} requests were out of time order; they were sorted by timestamp")
    # a trace's block-size advice: worded once, from every part's lines
    fit = TraceFit.combine(TraceFit.from_dict(p.trace_fit) for p in parts)
    if fit is not None and (advice := fit.advice()):
        notes.append(advice)
    stats = {k: sum(p.stats.get(k, 0) for p in parts) for k in first.stats}
    return BlockStream(
        source_format=first.source_format,
        block_tokens=first.block_tokens,
        req_t_us=cat["t"],
        req_tenant=cat["tenant"],
        req_user=cat["user"],
        req_route=cat["route"],
        req_prompt_tokens=cat["prompt"],
        req_output_tokens=cat["output"],
        req_line=cat["line"],
        req_file=cat["file"],
        req_ref_start=start,
        tenants=tenants.values,
        users=users.values,
        routes=routes.values,
        files=first.files,
        ref_key=key_column,
        ref_tokens=token_column,
        seg_id=np.array(seg_id, dtype=np.uint64),
        seg_role_class=np.array(seg_role, dtype=np.int8),
        seg_tokens=np.array(seg_tokens, dtype=np.int32),
        seg_label=seg_label,
        seg_preview=seg_preview if previews else None,
        occ_req=occ[0].astype(np.int32),
        occ_seg=occ[1],
        occ_offset=occ[2],
        errors=[e for p in parts for e in p.errors],
        skipped_lines=sum(p.skipped_lines for p in parts),
        notes=notes,
        stats=stats,
        trace_fit=fit.to_dict() if fit is not None else None,
    )


def ingest_in_parts(
    path: str | Path, options: IngestOptions, parts: int, name: str | None = None
) -> BlockStream:
    """The single-process form of parallel ingest: split one plain log into line-aligned
    byte ranges, ingest each on its own, merge. (Celery runs the same pieces as a chord.)
    A part with no usable line contributes its errors only."""
    streams: list[BlockStream] = []
    skipped: list[UnusableInput] = []
    for byte_range in split_lines(path, parts):
        try:
            streams.append(next(iter(ingest_streams(
                [path], options, byte_range=byte_range, names=[name] if name else None
            ).values())))  # fmt: skip
        except UnusableInput as exc:
            skipped.append(exc)
    return merge_parts(streams, skipped, options.max_bad_lines)


def merge_parts(
    streams: list[BlockStream], unusable: list[UnusableInput], max_bad_lines: int | None = None
) -> BlockStream:
    """merge_streams, plus the parts that had no usable line: their bad lines are listed
    too, in file order. Raises UnusableInput when no part had a usable line, and
    TooManyBadLines when a part, or all of them together, went past the error budget.

    A trace read at another block size than its own is advised once for the whole log:
    the sizes every part fits, the contradicting lines of all parts (each part's own
    advice counts its lines only, and a part whose lines all fit may still veto a size).
    When that advice names a size, the log is unusable at this one, as on one pass (the
    parts never stop for it themselves: their requests count when no size mends all)."""
    fit = TraceFit.combine([*(TraceFit.from_dict(s.trace_fit) for s in streams),
                            *(x.fit for x in unusable)])  # fmt: skip
    advice = fit.advice() if fit is not None else ""
    for exc in unusable:
        if isinstance(exc, TooManyBadLines):
            raise _advised(exc, fit, TooManyBadLines)
    if not streams:
        errors = [e for exc in unusable for e in exc.errors]
        skipped = sum(x.skipped_lines for x in unusable)
        raise _advised(UnusableInput(unusable[0].reason, errors, skipped), fit, UnusableInput)
    merged = merge_streams(streams)
    if unusable:  # their lines count too: the advice is worded again with them
        merged.notes = [n for n in merged.notes if not n.startswith(_FIT_NOTE)]
        merged.notes += [advice] if advice else []
        merged.trace_fit = fit.to_dict() if fit is not None else None
        merged.errors = sorted([*merged.errors, *(e for x in unusable for e in x.errors)],
                               key=lambda e: e["line"])  # fmt: skip
        merged.skipped_lines += sum(x.skipped_lines for x in unusable)
    if max_bad_lines is not None and merged.skipped_lines > max_bad_lines:
        last = merged.errors[-1] if merged.errors else {"line": "?", "reason": "?"}
        raise over_budget(merged.skipped_lines, max_bad_lines, f"line {last['line']}",
                          last["reason"], merged.errors, fit, merged.requests)  # fmt: skip
    if advice:  # every contradicting line of every part fits one other size: as one pass
        raise UnusableInput(
            _made_at_another_size(merged.files, merged.block_tokens, merged.requests, advice),
            merged.errors,
            merged.skipped_lines,
            fit=fit,
            requests=merged.requests,
        )
    return merged


# how a trace's block-size advice (TraceFit.advice) begins: a part's own, in its notes,
# gives way to the one worded for the whole log
_FIT_NOTE = "hash_ids contradict input_length on "


def _advised(exc: UnusableInput, fit: TraceFit | None, kind: type[UnusableInput]):
    """`exc` (a part's, or all parts' together) with the whole log's advice in place of
    the part's own."""
    advice = fit.advice() if fit is not None else ""
    return kind(exc.reason + (f"; {advice}" if advice else ""), exc.errors, exc.skipped_lines,
                fit=fit, requests=exc.requests)  # fmt: skip
