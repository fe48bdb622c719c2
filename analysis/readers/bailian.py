"""Alibaba's Bailian traces (ATC'25, qwen-bailian-usagetraces-anon), read line by line:
pre-hashed like Mooncake's (the same rules, 16-token blocks, timestamps in seconds), each
turn naming its parent_chat_id; the root chat_id of that chain is the request's session
and `type` (text, search, image, file) its route (metrics.md section 7)."""

from __future__ import annotations

from analysis.errors import ErrorLog, LineError
from analysis.readers.fields import as_str
from analysis.readers.records import TraceRequest
from analysis.readers.traces import BAILIAN_BLOCK_TOKENS, TraceReader
from analysis.timestamps import SECONDS

SHAPE = "Bailian trace line"  # how its errors name the shape they assumed
# parent_chat_id of a conversation's first turn: the release writes -1 (absent: the same,
# as AIPerf's loader reads it)
_NO_PARENT = (-1, "-1", None)
_ID_BOUNDS = (-(1 << 63), 1 << 64)  # ids are 64-bit, signed or not
_SHOWN = 80  # characters of a string id an error quotes


class BailianReader(TraceReader):
    name = "bailian"
    own_block_tokens = BAILIAN_BLOCK_TOKENS

    def __init__(self, errors: ErrorLog, block_tokens: int):
        super().__init__(errors, block_tokens)
        # every chat_id read -> its chain's root chat_id (a str: ids in the release are
        # integers, and an integer and its digits name the same chat)
        self._roots: dict[str, str] = {}
        self._orphans = 0  # lines whose parent no earlier line has
        self._first_orphan = (0, "")  # the first one's line and parent_chat_id
        self._orphan_note = ""

    def parse(self, obj: dict, line: int) -> TraceRequest:
        try:
            return self._parse(obj, line)
        except LineError as exc:
            raise LineError(f"{SHAPE}: {exc}") from None

    def _parse(self, obj: dict, line: int) -> TraceRequest:
        chat = _chat_key(obj.get("chat_id"), "chat_id")
        if chat == "-1":
            raise LineError("chat_id -1 is parent_chat_id's mark of a first turn, not an id")
        parent = obj.get("parent_chat_id")
        parent_key = None if parent in _NO_PARENT else _chat_key(parent, "parent_chat_id")
        if chat in self._roots:
            raise LineError(f"chat_id {chat[:_SHOWN]} was already used by an earlier line "
                            "(logged twice?); this line is skipped")  # fmt: skip
        # The chain is linked before the line's other fields are checked: a turn whose
        # parent line was refused (say, for its hash_ids) is still of that conversation.
        root = self._roots[chat] = self._root(parent_key, chat, line)
        return self._checked_request(obj, line, SECONDS, as_str(obj.get("type")), root)

    def _root(self, parent: str | None, chat: str, line: int) -> str:
        """The root chat_id of a request's chain: its parent's root, or its own.

        A parent no earlier line has is not an error: the request's prompt and blocks are
        real, only the chain is cut (a trace is a window of a longer recording, so turns
        whose conversation began before it name parents it never had; or its files were
        given out of order). Refusing them would drop real traffic; they start a session
        of their own, and their later turns join it. One note counts them."""
        if parent is None:
            return chat
        root = self._roots.get(parent)
        if root is not None:
            return root
        self._orphans += 1
        if self._orphans == 1:
            self._first_orphan = (line, parent)
        note = _orphans_note(self._orphans, *self._first_orphan)
        self._errors.renote(self._orphan_note, note)
        self._orphan_note = note
        return chat


def _orphans_note(count: int, line: int, parent: str) -> str:
    many = count != 1
    return (f"{count:,} line{'s' if many else ''} name{'' if many else 's'} a "
            "parent_chat_id that no earlier line has as its chat_id (the first: line "
            f"{line}, parent_chat_id {parent[:_SHOWN]}); each starts a session of its own "
            "(the trace may begin after their earlier turns, or its files were given out "
            "of order)")  # fmt: skip


def _chat_key(value: object, what: str) -> str:
    """A chat id (chat_id or parent_chat_id) as the key chains are followed by."""
    if value is None:
        raise LineError(f"no {what}")
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise LineError(f"{what} {str(value)[:_SHOWN]} is neither a whole number nor a string")
    if isinstance(value, int):
        if not _ID_BOUNDS[0] <= value < _ID_BOUNDS[1]:  # (nor would str() take any size)
            raise LineError(f"{what} is not a 64-bit integer")
        return str(value)
    if not value:
        raise LineError(f"{what} is an empty string")
    return value
