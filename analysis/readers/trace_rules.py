"""The rules a pre-hashed trace record (Mooncake's format, and Bailian's: the same fields,
timestamps in seconds) must keep, written once for every reader: a line reader words the
first rule a line breaks, the column reader hands a batch in which any row breaks one to
the line reader (see analysis.errors.Refuse)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, overload

import numpy as np

from analysis.errors import LineError, Refuse
from analysis.readers.fields import check_count
from analysis.timestamps import TraceClock, check_plausible, check_trace_time

# The longest context any model offers (Llama 4 Scout: 10 M tokens): a longer prompt is
# not a request an engine served. Bounds a trace line's input_length and hash_ids.
MAX_PROMPT_TOKENS = 10_000_000

# One value for a line, an array of them for a batch.
Count = int | np.ndarray


@overload
def blocks_fit(input_length: int, nblocks: int, block_tokens: int) -> bool: ...
@overload
def blocks_fit(input_length: np.ndarray, nblocks: np.ndarray, block_tokens: int) -> np.ndarray: ...
@overload
def blocks_fit(input_length: Count, nblocks: Count, block_tokens: int) -> bool | np.ndarray: ...
def blocks_fit(input_length: Count, nblocks: Count, block_tokens: int) -> bool | np.ndarray:
    """Whether `nblocks` hash_ids cover `input_length` (>= 0) tokens at `block_tokens` per
    block: all full but the last, which holds 1..B tokens; no ids only for no tokens. For
    ints (a line) and arrays (columns): one rule on both paths."""
    return ((nblocks - 1) * block_tokens < input_length) & (input_length <= nblocks * block_tokens)


def _not(value: bool | np.ndarray) -> bool | np.ndarray:
    """Not, for a bool and a bool array alike (~ on a bool is bitwise: ~True == -2); the
    numpy functions would take both, but at a microsecond a call on a line's numbers."""
    return value ^ True


def max_blocks(block_tokens: int) -> int:
    """The most hash_ids a trace line may have: MAX_PROMPT_TOKENS in blocks."""
    return -(-MAX_PROMPT_TOKENS // block_tokens)


class TraceFields(Protocol):
    """A trace record's fields, fetched in the order the rules need them: a line's (a
    missing field or one of the wrong type is refused as it is fetched) or a batch's
    columns (the Arrow schema fixed the types; a missing value is refused)."""

    clock: TraceClock  # the unit of its timestamps

    def timestamp(self) -> float | np.ndarray: ...  # in the clock's unit
    def t_us(self) -> Count: ...  # the timestamp fetched, rounded to microseconds
    def input_length(self) -> Count: ...
    # how many hash_ids, counted before they are converted (None: not a list)
    def listed_blocks(self) -> Count | None: ...
    def nblocks(self) -> Count: ...  # the hash_ids converted to keys
    def output_length(self) -> Count | None: ...  # None (NaN in a column): not given


# Told of each record's prompt, once its hash_ids are converted: input_length, the number
# of hash_ids, and whether they contradict the block size asked for.
BlocksSeen = Callable[[Count, Count, bool | np.bool_ | np.ndarray], None]


def check_trace(
    record: TraceFields,
    block_tokens: int,
    now: int,
    refuse: Refuse,
    blocks_seen: BlocksSeen | None = None,
) -> None:
    """Refuse a record that breaks a rule, in the order a line's problems are worded."""
    value = record.timestamp()
    check_trace_time(value, record.clock, refuse)
    check_plausible(record.t_us(), value, now, True, refuse)
    length = record.input_length()
    check_count(length, "input_length", refuse)
    if refuse(length > MAX_PROMPT_TOKENS):
        raise LineError(f"input_length {length:,} is more than any model's context "
                        f"({MAX_PROMPT_TOKENS:,} tokens)")  # fmt: skip
    # counted before the ids are converted: 200,000 of them would be 12 TiB of KV cache
    listed = record.listed_blocks()
    if listed is not None and refuse(listed > max_blocks(block_tokens)):
        raise LineError(
            f"{listed:,} hash_ids are more blocks than any model's context holds "
            f"({MAX_PROMPT_TOKENS:,} tokens = {max_blocks(block_tokens):,} blocks of "
            f"{block_tokens})"
        )
    blocks = record.nblocks()
    # The last id holds input_length - B*(blocks-1) tokens, which must be 1..B.
    contradicts = (blocks > 0) & _not(blocks_fit(length, blocks, block_tokens))
    if blocks_seen is not None:
        blocks_seen(length, blocks, contradicts)
    if refuse(contradicts):
        raise LineError(f"{blocks} hash_ids contradict input_length {length} at "
                        f"{block_tokens} tokens per block")  # fmt: skip
    if refuse((blocks == 0) & (length > 0)):
        raise LineError(f"no hash_ids for input_length {length}")
    output = record.output_length()
    if output is not None:
        check_count(output, "output_length", refuse)
