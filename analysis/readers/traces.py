"""Pre-hashed traces in Mooncake's format (`timestamp` ms, `input_length`,
`output_length`, `hash_ids`), read line by line: each bad line is named, and what the
lines say about the block size their hash_ids were made with is kept (TraceFit). The
reading every pre-hashed format shares (TraceReader, TraceLine) is here too."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from analysis.errors import ErrorLog, LineError, refuse_line
from analysis.readers.fields import as_str, tenant_and_user, whole_number
from analysis.readers.records import TraceRequest
from analysis.readers.trace_rules import Count, blocks_fit, check_trace
from analysis.timestamps import MILLISECONDS, TraceClock, as_trace_time, now_us, trace_time_us

# A pre-hashed trace's own block size: Mooncake's hash_ids are 512-token prefix blocks.
TRACE_BLOCK_TOKENS = 512
# Alibaba's Bailian traces (ATC'25): 16-token blocks, vLLM's block size
BAILIAN_BLOCK_TOKENS = 16
# Sizes a trace's hash_ids may have been made with, tried when they contradict input_length
# at the size asked for: the formats' own and the usual cache blocks and chunks (vLLM 16,
# LMCache 256, ...), in the order trace_block_sizes gives.
TRACE_BLOCK_SIZES = (TRACE_BLOCK_TOKENS, 16, 32, 64, 128, 256, 1024, 2048)


def trace_block_sizes(own: int) -> tuple[int, ...]:
    """TRACE_BLOCK_SIZES in the order tried for a format whose own size is `own`: that one
    first (the advice prefers it), then smallest first."""
    return (own, *sorted(b for b in TRACE_BLOCK_SIZES if b != own))


@dataclass(frozen=True)
class TraceFit:
    """What a pre-hashed trace's lines say about the size its hash_ids were made with, as
    data (so the parts of a split ingest can be put together before it is worded): the
    size asked for, the other sizes every line read fits (trace_block_sizes' order), how
    many lines contradict the size asked for, and the format's own size."""

    block_tokens: int
    fitting: tuple[int, ...]
    contradictions: int = 0
    own: int = TRACE_BLOCK_TOKENS  # 512 for Mooncake's format, 16 for Bailian's

    def advice(self) -> str:
        """What mends the contradicting lines, when one other block size fits every line
        read ("" when none does, or nothing contradicts)."""
        if not self.contradictions or not self.fitting:
            return ""
        size = self.fitting[0]  # the format's own when it fits (trace_block_sizes' order)
        own = ", or leave the block size to the format" if size == self.own else ""
        lines = f"{self.contradictions:,} line{'s' if self.contradictions != 1 else ''}"
        return (f"hash_ids contradict input_length on {lines} at {self.block_tokens} tokens "
                f"per block; they fit {size}: retry with {size}{own}")  # fmt: skip

    def to_dict(self) -> dict:
        return {"block_tokens": self.block_tokens, "fitting": list(self.fitting),
                "contradictions": self.contradictions, "own": self.own}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict | None) -> TraceFit | None:
        if not data:
            return None
        # (fits stored before Bailian's traces were read are all Mooncake's)
        own = int(data.get("own", TRACE_BLOCK_TOKENS))
        return cls(int(data["block_tokens"]), tuple(int(b) for b in data["fitting"]),
                   int(data["contradictions"]), own)  # fmt: skip

    @classmethod
    def combine(cls, fits: Iterable[TraceFit | None]) -> TraceFit | None:
        """The fit of the parts of one log read together: the sizes every part fits (in
        trace_block_sizes' order), the parts' contradictions summed. None when no part
        read a trace line (or, never in one ingest, the parts asked for different sizes
        or were of different formats)."""
        found = [f for f in fits if f is not None]
        if not found or len({(f.block_tokens, f.own) for f in found}) != 1:
            return None
        own = found[0].own
        fitting = tuple(b for b in trace_block_sizes(own) if all(b in f.fitting for f in found))
        return cls(found[0].block_tokens, fitting, sum(f.contradictions for f in found), own)


class TraceReader:
    """What the readers of pre-hashed traces share: what the lines say about the block size
    their hash_ids were made with (a format's own size is `own_block_tokens`)."""

    own_block_tokens = TRACE_BLOCK_TOKENS

    def __init__(self, errors: ErrorLog, block_tokens: int):
        self._errors = errors
        self._block_tokens = block_tokens
        self._now = now_us()
        # the other sizes every line's hash_ids fit so far, and how many lines contradict
        # the size asked for: when all of them fit another size, the errors say so
        sizes = trace_block_sizes(self.own_block_tokens)
        self._fitting = [b for b in sizes if b != block_tokens]
        self._contradictions = 0
        errors.advisor = self.fit

    def fit(self) -> TraceFit:
        """The lines read so far, as data (see TraceFit)."""
        return TraceFit(self._block_tokens, tuple(self._fitting), self._contradictions,
                        self.own_block_tokens)  # fmt: skip

    def advice(self) -> str:
        """What mends the contradicting lines, when one other block size fits every line
        read ("" when none does, or nothing contradicts)."""
        return self.fit().advice()

    def _blocks_seen(
        self, input_length: Count, blocks: Count, contradicts: bool | np.bool_ | np.ndarray
    ) -> None:
        if blocks and self._fitting:
            self._fitting = [b for b in self._fitting if blocks_fit(input_length, blocks, b)]
        if contradicts:
            self._contradictions += 1

    def _checked_request(
        self, obj: dict, line: int, clock: TraceClock, route: str, session: str = ""
    ) -> TraceRequest:
        """The line as a request once the trace rules passed (its times read by `clock`)."""
        fields = TraceLine(obj, clock)
        check_trace(fields, self._block_tokens, self._now, refuse_line, self._blocks_seen)
        tenant, user = tenant_and_user(obj)
        return TraceRequest(
            line=line,
            t_us=fields.us,
            tenant=tenant,
            user=user,
            model=route,
            input_length=fields.length,
            output_tokens=fields.output_tokens,
            hash_ids=fields.hash_ids,
            session=session,
        )


class MooncakeReader(TraceReader):
    name = "mooncake"

    def parse(self, obj: dict, line: int) -> TraceRequest:
        return self._checked_request(obj, line, MILLISECONDS, as_str(obj.get("model")))


class TraceLine:
    """A trace line's fields (TraceFields), each refused as it is fetched when it is
    missing or of the wrong type, and kept for the request once the rules passed."""

    __slots__ = ("_obj", "clock", "hash_ids", "length", "output_tokens", "us", "value")
    hash_ids: np.ndarray  # uint64 keys (set by nblocks)

    def __init__(self, obj: dict, clock: TraceClock):
        self._obj = obj
        self.clock = clock
        self.value: int | float = 0  # the timestamp, in the clock's unit
        self.us = 0
        self.length = 0
        self.output_tokens = -1  # when output_length is not given

    def timestamp(self) -> int | float:
        if "timestamp" not in self._obj:
            raise LineError("no timestamp")
        self.value = as_trace_time(self._obj["timestamp"], self.clock)
        return self.value

    def t_us(self) -> int:
        self.us = trace_time_us(self.value, self.clock)
        return self.us

    def input_length(self) -> int:
        value = self._obj.get("input_length")
        if value is None:
            raise LineError("no input_length")
        self.length = whole_number(value, "input_length")
        return self.length

    def listed_blocks(self) -> int | None:
        value = self._obj.get("hash_ids")
        return len(value) if isinstance(value, list) else None

    def nblocks(self) -> int:
        self.hash_ids = _hash_ids(self._obj.get("hash_ids"))
        return self.hash_ids.size

    def output_length(self) -> int | None:
        value = self._obj.get("output_length")
        if value is None:
            return None
        self.output_tokens = whole_number(value, "output_length")
        return self.output_tokens


_KEY_MASK = (1 << 64) - 1


def _hash_ids(value: object) -> np.ndarray:
    """hash_ids as 64-bit keys (signed ids keep their two's-complement bits)."""
    if not isinstance(value, list):
        raise LineError("hash_ids is not a list of integers")
    if not value:
        return np.zeros(0, dtype=np.uint64)
    try:  # C speed; the dtype tells whether they were all integers
        ids = np.array(value)
    except (ValueError, OverflowError, TypeError):  # ragged lists and the like
        raise LineError("hash_ids is not a list of 64-bit integers") from None
    if ids.dtype.kind == "i" and ids.ndim == 1:
        return ids.astype(np.int64, copy=False).view(np.uint64)
    if ids.dtype.kind == "u" and ids.ndim == 1:
        return ids.astype(np.uint64, copy=False)
    # mixed sizes beyond int64, or not integers at all: check one by one
    if all(isinstance(h, int) and not isinstance(h, bool) and -(1 << 63) <= h <= _KEY_MASK
           for h in value):  # fmt: skip
        return np.array([h & _KEY_MASK for h in value], dtype=np.uint64)
    raise LineError("hash_ids is not a list of 64-bit integers")
