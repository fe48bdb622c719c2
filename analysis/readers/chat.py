"""Chat-completion JSONL: OpenAI chat `messages`, at the top level or under
`request`/`body`, one request a line."""

from __future__ import annotations

from analysis.dedupe import SeenIds
from analysis.errors import ErrorLog, LineError
from analysis.readers.fields import as_str, first, tenant_and_user, token_count
from analysis.readers.records import ChatRequest, Message
from analysis.timestamps import NO_ZONE_NOTE, check_plausible, now_us, parse_timestamp

# Where a line's messages may be (detect_format looks there too).
MESSAGE_PATHS = (("messages",), ("request", "messages"), ("body", "messages"))
TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
# Parts known to carry no prompt text (images, audio, refusals): ignored without a word.
NON_TEXT_PART_TYPES = frozenset({"image_url", "input_image", "image", "input_audio", "audio",
                                 "output_audio", "refusal", "video_url", "image_file"})  # fmt: skip
# Roles of the chat-completion formats (OpenAI, Llama's ipython); any other is a bad line.
KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function",
                         "ipython"})  # fmt: skip
# Parts that carry a document's text explicitly: the message counts as a document.
DOCUMENT_PART_TYPES = frozenset({"document", "file", "input_file"})
# Roles whose content is an instruction (metrics.md section 1).
INSTRUCTION_ROLES = frozenset({"system", "developer"})


class ChatReader:
    name = "chat"

    def __init__(self, errors: ErrorLog):
        self._errors = errors
        self._ids = SeenIds()
        self._unknown_parts: set[str] = set()
        self._now = now_us()

    def parse(self, obj: dict, line: int) -> ChatRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us, assumed_utc = parse_timestamp(obj["timestamp"])
        check_plausible(t_us, obj["timestamp"], self._now)
        if assumed_utc:
            self._errors.note(NO_ZONE_NOTE)
        raw_messages = first(obj, *MESSAGE_PATHS)
        if not isinstance(raw_messages, list) or not raw_messages:
            raise LineError("no messages (looked at messages, request.messages, body.messages)")
        unknown: list[str] = []
        messages = [_message(item, index, unknown) for index, item in enumerate(raw_messages)]
        output = first(
            obj,
            ("usage", "completion_tokens"),
            ("response", "usage", "completion_tokens"),
            ("output_tokens",),
        )
        output_tokens = token_count(output, "output token count")
        self._claim_id(first(obj, ("id",), ("request_id",), ("custom_id",)))
        self._note_unknown_parts(unknown, line)
        tenant, user = tenant_and_user(obj)
        return ChatRequest(
            line=line,
            t_us=t_us,
            tenant=tenant,
            user=user,
            model=as_str(first(obj, ("model",), ("request", "model"), ("body", "model"))),
            messages=messages,
            output_tokens=output_tokens,
        )

    def _claim_id(self, request_id: object) -> None:
        """The line's request id, refused when an earlier line had it. Checked last: a line
        refused for another reason does not claim its id."""
        if (isinstance(request_id, str | int) and not isinstance(request_id, bool)
                and not self._ids.add(str(request_id))):  # fmt: skip
            raise LineError(f"request id {str(request_id)[:80]!r} was already used by an "
                            "earlier line (logged twice?); the first was kept")  # fmt: skip

    def _note_unknown_parts(self, unknown: list[str], line: int) -> None:
        for kind in unknown:
            if kind not in self._unknown_parts:
                self._unknown_parts.add(kind)
                self._errors.note(f"content parts of unknown type {kind[:40]!r} were ignored "
                                  f"(first on line {line})")  # fmt: skip


def _message(item: object, index: int, unknown: list[str]) -> Message:
    """One message; the types of content parts it ignored without knowing them go to
    `unknown`."""
    if not isinstance(item, dict):
        raise LineError(f"message {index} is not an object")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise LineError(f"message {index} has no role")
    if role not in KNOWN_ROLES:
        raise LineError(f"message {index} has the unknown role {role[:40]!r} "
                        f"(known: {', '.join(sorted(KNOWN_ROLES))})")  # fmt: skip
    content = item.get("content")
    if content is None or isinstance(content, str):
        return Message(role=role, text=content or "")
    if not isinstance(content, list):
        raise LineError(f"message {index} content is neither text nor a list of parts")
    texts: list[str] = []
    is_document = False
    label = ""
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if not isinstance(kind, str):
            unknown.append(repr(kind)[:40])
            continue
        if kind in TEXT_PART_TYPES and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in DOCUMENT_PART_TYPES:
            text, part_label = _document_part(part)
            if text is not None:
                texts.append(text)
                is_document = True
                label = label or part_label
        elif kind not in NON_TEXT_PART_TYPES and kind not in TEXT_PART_TYPES | DOCUMENT_PART_TYPES:
            unknown.append(kind)
        # Parts that carry no prompt text (images, audio, ...) are ignored.
    return Message(role=role, text="".join(texts), is_document=is_document, label=label)


def _document_part(part: dict) -> tuple[str | None, str]:
    """Text and label of a document/file part: {"type": "document", "text": ..., "title": ...}
    or the same fields nested under the part's type key ({"type": "file", "file": {...}})."""
    for node in (part, part.get(part.get("type", ""))):
        if isinstance(node, dict) and isinstance(node.get("text"), str):
            label = next(
                (node[k] for k in ("title", "name", "filename") if isinstance(node.get(k), str)),
                "",
            )
            return node["text"], label
    return None, ""
