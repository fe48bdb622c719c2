"""A raw line to the JSON object on it: long lines refused from their bytes before they
are parsed (precheck_line), the parse, and the format the first object's shape says."""

from __future__ import annotations

import json

import orjson

from analysis.errors import LineError
from analysis.readers.chat import MESSAGE_PATHS, RESPONSES_PATHS
from analysis.readers.fields import first
from analysis.readers.lines import content_start
from analysis.readers.trace_rules import MAX_PROMPT_TOKENS, max_blocks

# More messages than any conversation an engine takes: refused before the line is
# parsed, since parsing them is where the memory goes (~1 kB a message).
MAX_MESSAGES = 100_000
# Lines longer than this are counted before they are parsed (precheck_line)
PRECHECK_BYTES = 1 << 20


def precheck_line(raw: bytes | bytearray, trace_block_tokens: int | None) -> None:
    """Refuse a long line before parsing it when counting its bytes already shows it is
    implausible (parsing is what costs the memory): more than MAX_MESSAGES messages, or,
    in a trace (trace_block_tokens: its block size), more hash_ids than max_blocks.
    Counts are upper bounds (a \"role\" key or a comma per item), so nothing valid is
    refused."""
    if len(raw) <= PRECHECK_BYTES:
        return
    messages = raw.count(b'"role"')
    if messages > MAX_MESSAGES:
        raise LineError(f"about {messages:,} messages in one request, more than "
                        f"{MAX_MESSAGES:,}; not read")  # fmt: skip
    if trace_block_tokens is not None:
        items = raw.count(b",") + 1
        if items > max_blocks(trace_block_tokens) + 16:  # (room for the other fields)
            raise LineError(
                f"about {items:,} hash_ids, more blocks than any model's context holds "
                f"({MAX_PROMPT_TOKENS:,} tokens = {max_blocks(trace_block_tokens):,} blocks "
                f"of {trace_block_tokens}); not read"
            )


def decode_line(raw: bytes | bytearray | LineError) -> dict | None:
    """The JSON object on a line; None for a blank line. Raises LineError."""
    if isinstance(raw, LineError):
        raise raw
    start = content_start(raw)  # a byte-order mark may start any line
    if start == len(raw):
        return None
    data = memoryview(raw)[start:] if start else raw
    if len(raw) > PRECHECK_BYTES:
        obj = _decode_long(data)
    else:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise LineError(f"not valid JSON ({exc.args[0].split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise LineError(f"a JSON {type(obj).__name__}, not an object")
    return obj


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")  # as orjson: NaN and Infinity are not JSON


def _finite_float(text: str) -> float:
    """A JSON number as a float, refused past float range (1e400), as orjson refuses it."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def _decode_long(data: bytes | bytearray | memoryview) -> object:
    """A long line through the standard library's parser: orjson peaks at ~13 bytes per
    byte of a long string (208 MB for a 16 MB one), json at 2. Same strictness where it
    matters: NaN and Infinity are refused; too-big integers are refused by the fields."""
    try:
        # decoded as UTF-8 here: json.loads(bytes) would guess UTF-16 or -32 from nulls
        return json.loads(str(data, "utf-8"), parse_constant=_no_constants,
                          parse_float=_finite_float)  # fmt: skip
    except UnicodeDecodeError:
        raise LineError("not valid JSON (str is not valid UTF-8)") from None
    except ValueError as exc:  # JSONDecodeError, and _no_constants
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise LineError(f"not valid JSON ({reason})") from None
    except RecursionError:
        raise LineError("not valid JSON (nested too deeply)") from None


def detect_format(obj: dict) -> str:
    """'mooncake', 'bailian' or 'chat' from the first valid line's shape."""
    if "hash_ids" in obj:
        # Bailian's traces are Mooncake's fields and a chat_id (and its parent_chat_id)
        return "bailian" if "chat_id" in obj else "mooncake"
    if first(obj, *MESSAGE_PATHS, *RESPONSES_PATHS) is not None:
        return "chat"
    raise LineError(
        "neither a chat request (messages, or a Responses input) nor a pre-hashed trace (hash_ids)"
    )
