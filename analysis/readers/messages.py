"""A `messages` list to the (role, text) messages of metrics.md section 7, for OpenAI chat
bodies and Anthropic Messages bodies alike: their shared vocabulary (role + string or
list of parts) is read one way, and each one's own parts (OpenAI `tool_calls`, Anthropic
`tool_use` / `tool_result` / text-source `document` blocks) where they appear.

What a body tells about itself on the way (parts of unknown type, `cache_control` marks)
is gathered in a Findings beside the messages."""

from __future__ import annotations

from dataclasses import dataclass, field

from analysis.errors import LineError
from analysis.readers.records import Message
from analysis.readers.render import json_text

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
# Parts known to carry no prompt text (images, audio, refusals, reasoning): ignored silently.
NON_TEXT_PART_TYPES = frozenset({"image_url", "input_image", "image", "input_audio", "audio",
                                 "output_audio", "refusal", "video_url", "image_file",
                                 "thinking", "redacted_thinking", "search_result",
                                 "server_tool_use", "web_search_tool_result"})  # fmt: skip
# Roles of the chat formats (OpenAI, Anthropic, Llama's ipython); any other is a bad line.
KNOWN_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function",
                         "ipython"})  # fmt: skip
# Parts that carry a document's text explicitly: the message counts as a document.
DOCUMENT_PART_TYPES = frozenset({"document", "file", "input_file"})
# Roles whose content is an instruction (metrics.md section 1).
INSTRUCTION_ROLES = frozenset({"system", "developer"})


@dataclass
class Findings:
    """What reading a body's messages noticed besides them."""

    unknown_parts: list[str] = field(default_factory=list)  # part types never heard of
    cache_control: bool = False  # an explicit cache breakpoint (Anthropic, some gateways)


def read_messages(raw: list, shape: str, found: Findings) -> list[Message]:
    """Every message of a non-empty `messages` list (`shape` names the body in errors)."""
    return [_message(item, index, shape, found) for index, item in enumerate(raw)]


def system_message(system: object, shape: str, found: Findings) -> Message | None:
    """Anthropic's top-level `system` (a string or text blocks) as a first message; None
    when it is empty (as a Responses body's empty instructions)."""
    if isinstance(system, str):
        text = system
    elif isinstance(system, list):
        text = _parts_text(system, found).text
    else:
        raise LineError(f"{shape} body: system is neither text nor a list of blocks")
    return Message(role="system", text=text) if text else None


def _message(item: object, index: int, shape: str, found: Findings) -> Message:
    if not isinstance(item, dict):
        raise LineError(f"{shape} body: message {index} is not an object")
    role = item.get("role")
    if not isinstance(role, str) or not role:
        raise LineError(f"{shape} body: message {index} has no role")
    if role not in KNOWN_ROLES:
        raise LineError(f"{shape} body: message {index} has the unknown role {role[:40]!r} "
                        f"(known: {', '.join(sorted(KNOWN_ROLES))})")  # fmt: skip
    if "cache_control" in item:
        found.cache_control = True
    content = item.get("content")
    # (every message of every line passes here: the plain-text case allocates nothing more)
    has_calls = "tool_calls" in item or "function_call" in item
    calls = _tool_calls_text(item, index, shape) if has_calls else ""
    if content is None or isinstance(content, str):
        return Message(role=role, text=(content or "") + calls)
    if not isinstance(content, list):
        raise LineError(f"{shape} body: message {index} content is neither text nor a list "
                        "of parts")  # fmt: skip
    parts = _parts_text(content, found)
    return Message(role=role, text=parts.text + calls, is_document=parts.is_document,
                   label=parts.label)  # fmt: skip


def _tool_calls_text(item: dict, index: int, shape: str) -> str:
    """J(tool_calls) of an assistant message (legacy: J(function_call)); "" for none."""
    calls = item.get("tool_calls")
    if calls is None:
        calls = item.get("function_call")
        if calls is None:
            return ""
        if not isinstance(calls, dict):
            raise LineError(f"{shape} body: message {index} function_call is not an object")
        return json_text(calls)
    if not isinstance(calls, list):
        raise LineError(f"{shape} body: message {index} tool_calls is not a list")
    return json_text(calls) if calls else ""


@dataclass
class _Parts:
    texts: list[str]
    is_document: bool = False
    label: str = ""

    @property
    def text(self) -> str:
        return "".join(self.texts)


def _parts_text(content: list, found: Findings, in_result: bool = False) -> _Parts:
    """The text of a list of parts (OpenAI content parts or Anthropic content blocks);
    `in_result`: the content of a tool_result, where another tool_result is not a block
    the API takes (and would let a line nest the reader as deep as it likes)."""
    parts = _Parts(texts=[])
    for part in content:
        if isinstance(part, str):
            parts.texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        if "cache_control" in part:
            found.cache_control = True
        kind = part.get("type")
        if not isinstance(kind, str):
            found.unknown_parts.append(repr(kind)[:40])
        elif kind in TEXT_PART_TYPES:
            if isinstance(part.get("text"), str):
                parts.texts.append(part["text"])
        elif kind in DOCUMENT_PART_TYPES:
            _add_document(parts, part)
        elif kind == "tool_use":
            parts.texts.append(json_text({"name": part.get("name"), "input": part.get("input")}))
        elif kind == "tool_result" and not in_result:
            parts.texts.append(_tool_result_text(part.get("content"), found))
        elif kind not in NON_TEXT_PART_TYPES:
            found.unknown_parts.append(kind)
    return parts


def _tool_result_text(content: object, found: Findings) -> str:
    """An Anthropic tool_result's content: a string, or the text of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return _parts_text(content, found, in_result=True).text
    return ""


def _add_document(parts: _Parts, part: dict) -> None:
    text, label = document_part(part)
    if text is not None:
        parts.texts.append(text)
        parts.is_document = True
        parts.label = parts.label or label


def document_part(part: dict) -> tuple[str | None, str]:
    """Text and label of a document/file part: {"type": "document", "text": ..., "title":
    ...}, the same fields nested under the part's type key ({"type": "file", "file":
    {...}}), or an Anthropic document with a text source ({"source": {"type": "text",
    "data": ...}}). None for a document without text (a PDF, an image)."""
    source = part.get("source")
    if isinstance(source, dict) and source.get("type") == "text":
        data = source.get("data")
        return (data, _label(part)) if isinstance(data, str) else (None, "")
    if isinstance(part.get("text"), str):
        return part["text"], _label(part)
    nested = part.get(part.get("type", ""))
    if isinstance(nested, dict) and isinstance(nested.get("text"), str):
        return nested["text"], _label(nested) or _label(part)
    return None, ""


def _label(node: dict) -> str:
    for key in ("title", "name", "filename"):
        value = node.get(key)
        if isinstance(value, str):
            return value
    return ""
