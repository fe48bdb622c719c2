"""The growing tables of an ingest: requests, segments, occurrences and block references,
appended to compact arrays (and, with a spill, sent to disk as they grow)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from analysis.readers import (
    INSTRUCTION_ROLES,
    TOOLS_ROLE,
    ChatRequest,
    Message,
    TraceColumns,
    TraceRequest,
)
from analysis.spill import SPILL_ROWS, SpillColumns
from analysis.stream import ROLE_DOCUMENT_PART, ROLE_INSTRUCTION, ROLE_OTHER, ROLE_TOOLS

_PREVIEW_CHARS = 200


def as_array(values: array, dtype: type, copy: bool = True) -> np.ndarray:
    """The array's values; copy=False: a view (the builder must not grow it any more)."""
    if not len(values):
        return np.zeros(0, dtype=dtype)
    view: np.ndarray = np.frombuffer(values, dtype=dtype)
    return view.copy() if copy else view


class Codes:
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

    def codes(self, values: list[str]) -> np.ndarray:
        """code() of each value, numbered in order of first appearance as code() numbers
        them; the distinct values looked up once (a trace's column is often one value)."""
        for value in dict.fromkeys(values):
            self.code(value)
        return np.fromiter(map(self.index.__getitem__, values), np.int32, len(values))


class RequestTable:
    """One row per request, in file order; BlockStream.request_columns' names."""

    # the columns' array typecodes and their dtypes ("prompt_tokens" is set by the caller)
    _TYPES = {"t_us": ("q", np.int64), "tenant": ("i", np.int32), "user": ("i", np.int32),
              "route": ("i", np.int32), "prompt_tokens": ("q", np.int64),
              "output_tokens": ("q", np.int64), "line": ("q", np.int64),
              "file": ("h", np.int16), "session": ("Q", np.uint64),
              "cache_control": ("b", np.int8), "reported_prompt_tokens": ("q", np.int64),
              "cached_tokens": ("q", np.int64)}  # fmt: skip

    def __init__(self) -> None:
        self.tenants, self.users, self.routes = Codes(), Codes(), Codes()
        self.columns = {name: array(code) for name, (code, _) in self._TYPES.items()}

    def __len__(self) -> int:
        return len(self.columns["t_us"])

    def add(self, request: ChatRequest | TraceRequest, file_index: int, session_key: int) -> int:
        """A request's row but its prompt tokens (`session_key`: its session id, keyed);
        its index."""
        index = len(self)
        cols = self.columns
        cols["t_us"].append(request.t_us)
        cols["tenant"].append(self.tenants.code(request.tenant))
        cols["user"].append(self.users.code(request.user))
        cols["route"].append(self.routes.code(request.model))
        cols["output_tokens"].append(request.output_tokens)
        cols["line"].append(request.line)
        cols["file"].append(file_index)
        cols["session"].append(session_key)
        cols["cache_control"].append(int(request.cache_control))
        cols["reported_prompt_tokens"].append(request.reported_prompt_tokens)
        cols["cached_tokens"].append(request.cached_tokens)
        return index

    def add_columns(self, trace: TraceColumns, file_index: int) -> None:
        """A whole trace file read column-wise."""
        n = trace.t_us.size
        values = {
            "t_us": trace.t_us,
            "tenant": self.tenants.codes(trace.tenant),
            "user": self.users.codes(trace.user),
            "route": self.routes.codes(trace.model),
            "prompt_tokens": trace.input_length,
            "output_tokens": trace.output_tokens,
            # rows, counted as lines (a clean file: blank lines are the only difference)
            "line": np.arange(1, n + 1, dtype=np.int64),
            "file": np.full(n, file_index, np.int16),
            "session": np.zeros(n, np.uint64),  # (Mooncake traces name no session)
            "cache_control": np.zeros(n, np.int8),
            "reported_prompt_tokens": np.full(n, -1, np.int64),  # (no response usage)
            "cached_tokens": np.full(n, -1, np.int64),
        }
        for name, column in values.items():
            self.columns[name].frombytes(column.tobytes())

    def column(self, name: str, copy: bool = True) -> np.ndarray:
        return as_array(self.columns[name], self._TYPES[name][1], copy)

    def arrays(self, copy: bool = True) -> dict[str, np.ndarray]:
        """Every column (copy=False: views, t_us always a view)."""
        return {name: self.column(name, copy and name != "t_us") for name in self._TYPES}

    def out_of_order(self) -> bool:
        t = self.column("t_us", copy=False)
        return bool(t.size > 1 and np.any(t[1:] < t[:-1]))


class SegmentTable:
    """The distinct message texts: keyed id, role class, tokens, label (and preview)."""

    def __init__(self, previews: bool) -> None:
        self._index: dict[int, int] = {}  # segment id -> row
        self._id = array("Q")
        self._role = array("b")
        self._tokens = array("i")
        self._label: list[str] = []
        self._preview: list[str] | None = [] if previews else None

    def add(self, seg_id: int, role: str, tokens: int, message: Message) -> int:
        """The segment's row, added on its first occurrence."""
        found = self._index.get(seg_id)
        if found is not None:
            self.note_document(found, message)
            return found
        found = self._index[seg_id] = len(self._id)
        self._id.append(seg_id)
        if role == TOOLS_ROLE:
            role_class = ROLE_TOOLS
        elif role in INSTRUCTION_ROLES:
            role_class = ROLE_INSTRUCTION
        elif message.is_document:
            role_class = ROLE_DOCUMENT_PART
        else:
            role_class = ROLE_OTHER
        self._role.append(role_class)
        self._tokens.append(tokens)
        self._label.append(message.label)
        if self._preview is not None:
            self._preview.append(message.text[:_PREVIEW_CHARS])
        return found

    def note_document(self, seg: int, message: Message) -> None:
        """The kind must not depend on line order: any occurrence typed as a document
        makes the segment a document, and the first label found names it."""
        if message.is_document and self._role[seg] == ROLE_OTHER:
            self._role[seg] = ROLE_DOCUMENT_PART
        if message.label and not self._label[seg]:
            self._label[seg] = message.label

    def arrays(self) -> dict[str, Any]:
        segments: dict[str, Any] = {
            "id": as_array(self._id, np.uint64),
            "role_class": as_array(self._role, np.int8),
            "tokens": as_array(self._tokens, np.int32),
            "label": self._label,
        }
        if self._preview is not None:
            segments["preview"] = self._preview
        return segments


class Occurrences:
    """Each request's segments with their token offset, in file order."""

    _TYPES = {"req": ("i", np.int32), "seg": ("i", np.int32), "offset": ("q", np.int64)}

    def __init__(self) -> None:
        self._columns = {name: array(code) for name, (code, _) in self._TYPES.items()}

    def add_request(self, req: int, segs: list[int], offsets: list[int]) -> None:
        """A request's segments, each with its token offset in the prompt."""
        self._columns["req"].extend([req] * len(segs))
        self._columns["seg"].extend(segs)
        self._columns["offset"].extend(offsets)

    def spill(self, spill: SpillColumns, force: bool) -> None:
        if not force and len(self._columns["req"]) < SPILL_ROWS:
            return
        for name, values in self._columns.items():
            if len(values):
                spill.append(self._spill_name(name), as_array(values, self._TYPES[name][1]))
                del values[:]

    def arrays(self, spill: SpillColumns | None) -> dict[str, np.ndarray]:
        """Every occurrence in file order: what was spilled, then what is in memory."""
        out = {}
        for name, values in self._columns.items():
            parts = [as_array(values, self._TYPES[name][1])]
            spilled = spill.load(self._spill_name(name)) if spill is not None else None
            if spilled is not None:
                parts.insert(0, spilled)
            out[name] = np.concatenate(parts)
        return out

    @staticmethod
    def empty() -> dict[str, np.ndarray]:
        return {name: np.zeros(0, dtype) for name, (_, dtype) in Occurrences._TYPES.items()}

    def chunks(self, spill: SpillColumns) -> Iterator[pa.Table]:
        """The spilled occurrences (all of them: spill with force first), in chunks."""
        names = list(self._TYPES)
        columns = (spill.chunks(self._spill_name(n)) for n in names)
        for values in zip(*columns, strict=True):
            yield pa.table(dict(zip(names, values, strict=True)))

    @staticmethod
    def _spill_name(name: str) -> str:
        return f"occ_{name}"


class BlockColumns:
    """Block references of one block size, request by request.

    Traces also keep each request's tokens in its last block (every other is full). With
    `partial_cached` False a partial last block is an uncached tail: `settle` takes it
    out of the requests added since it last ran, whichever reader added them.
    """

    def __init__(self, block_tokens: int, partial_cached: bool = True) -> None:
        self.block_tokens = block_tokens
        self.nblocks = array("q")
        self.last_tokens = array("q")  # traces only
        self.keys: list[np.ndarray] = []  # not yet spilled
        self.buffered = 0
        self.spill_name = f"keys-{block_tokens}"
        self._partial_cached = partial_cached
        self._settled = 0  # requests whose partial last block has been seen to

    def add(self, keys: np.ndarray, last_tokens: int | None = None) -> None:
        self.nblocks.append(keys.size)
        if last_tokens is not None:
            self.last_tokens.append(last_tokens)
        if keys.size:
            self.keys.append(keys)
            self.buffered += keys.size

    def add_columns(self, nblocks: np.ndarray, keys: np.ndarray, last: np.ndarray) -> None:
        self.nblocks.frombytes(nblocks.tobytes())
        if keys.size:
            self.keys.append(keys)
            self.buffered += keys.size
        self.last_tokens.frombytes(last.tobytes())

    def settle(self) -> None:
        """Drop the partial last blocks of the requests added since the last settle (the
        buffered keys are theirs: settle runs before every spill)."""
        if self._partial_cached or not len(self.last_tokens):
            return
        nblocks = as_array(self.nblocks, np.int64)[self._settled :]
        last = as_array(self.last_tokens, np.int64)[self._settled :]
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, np.uint64)
        nblocks, keys, last = drop_partial_blocks(nblocks, keys, last, self.block_tokens)
        del self.nblocks[self._settled :], self.last_tokens[self._settled :]
        self.nblocks.frombytes(nblocks.tobytes())
        self.last_tokens.frombytes(last.tobytes())
        self.keys, self.buffered = ([keys] if keys.size else []), keys.size
        self._settled = len(self.nblocks)

    def spill(self, spill: SpillColumns, force: bool) -> None:
        if not force and self.buffered < SPILL_ROWS:
            return
        self.settle()
        if self.keys:
            spill.append(self.spill_name, np.concatenate(self.keys).astype(np.uint64, copy=False))
            self.keys, self.buffered = [], 0

    def all_keys(self, spill: SpillColumns | None) -> np.ndarray:
        self.settle()
        spilled = spill.load(self.spill_name) if spill is not None else None
        parts = ([] if spilled is None else [spilled]) + self.keys
        if len(parts) == 1:
            return parts[0]
        keys = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
        if spilled is None:  # the joined keys replace their parts: one copy held, not two
            self.keys = [keys] if keys.size else []
        return keys

    def ref_start(self) -> np.ndarray:
        nblocks = as_array(self.nblocks, np.int64)
        start = np.zeros(nblocks.size + 1, dtype=np.int64)
        np.cumsum(nblocks, out=start[1:])
        return start

    def ref_tokens(self, start: np.ndarray, first: int, count: int) -> np.ndarray:
        """The tokens of the references [first, first + count): full blocks, but for a
        trace's last blocks (`start`: each request's first reference)."""
        tokens = np.full(count, self.block_tokens, dtype=np.int32)
        if len(self.last_tokens):
            has_blocks = np.diff(start) > 0
            last_at = start[1:][has_blocks] - 1
            last_tokens = as_array(self.last_tokens, np.int64)[has_blocks]
            lo, hi = np.searchsorted(last_at, [first, first + count])
            tokens[last_at[lo:hi] - first] = last_tokens[lo:hi]
        return tokens

    def ref_chunks(self, spill: SpillColumns, start: np.ndarray) -> Iterator[pa.Table]:
        """The spilled references (all of them: spill with force first), in chunks."""
        offset = 0
        for keys in spill.chunks(self.spill_name):
            yield pa.table({"key": keys, "tokens": self.ref_tokens(start, offset, keys.size)})
            offset += keys.size


def drop_partial_blocks(
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
