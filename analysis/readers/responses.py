"""An OpenAI Responses body (`instructions`, `input`) to the (role, text) messages of
metrics.md section 7."""

from __future__ import annotations

from analysis.errors import LineError
from analysis.readers.messages import Findings, read_messages
from analysis.readers.records import Message
from analysis.readers.render import json_text

SHAPE = "OpenAI Responses"
# input items that carry no prompt text the engine renders (reasoning is dropped by the
# chat templates; hosted tool calls run outside the prompt): ignored silently
_SILENT_ITEMS = frozenset({"reasoning", "web_search_call", "file_search_call",
                           "computer_call", "image_generation_call", "item_reference"})  # fmt: skip


def responses_messages(body: dict, found: Findings) -> list[Message]:
    """`instructions` as a first system message, then the messages of `input`."""
    messages: list[Message] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append(Message(role="system", text=instructions))
    elif instructions is not None and not isinstance(instructions, str):
        raise LineError(f"{SHAPE} body: instructions is not text")
    given = body.get("input")
    if isinstance(given, str):
        messages.append(Message(role="user", text=given))
    elif isinstance(given, list):
        for index, item in enumerate(given):
            message = _item(item, index, found)
            if message is not None:
                messages.append(message)
    elif given is not None:
        raise LineError(f"{SHAPE} body: input is neither text nor a list of items")
    if not messages:
        raise LineError(f"{SHAPE} body: no input (and no instructions)")
    return messages


def _item(item: object, index: int, found: Findings) -> Message | None:
    if not isinstance(item, dict):
        raise LineError(f"{SHAPE} body: input item {index} is not an object")
    kind = item.get("type")
    if kind == "function_call":
        call = {"name": item.get("name"), "arguments": item.get("arguments")}
        return Message(role="assistant", text=json_text(call))
    if kind == "function_call_output":
        return Message(role="tool", text=_output_text(item.get("output"), index))
    if kind in (None, "message"):
        if "role" not in item:
            raise LineError(f"{SHAPE} body: input item {index} has no type or role")
        return _renumbered(item, index, found)
    if isinstance(kind, str) and kind in _SILENT_ITEMS:
        return None
    found.unknown_parts.append(f"input item {str(kind)[:40]}")
    return None


def _renumbered(item: dict, index: int, found: Findings) -> Message:
    """The message item as a chat message, its errors naming the input item."""
    try:
        return read_messages([item], SHAPE, found)[0]
    except LineError as exc:
        raise LineError(str(exc).replace("message 0", f"input item {index}", 1)) from None


def _output_text(output: object, index: int) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):  # content parts
        return "".join(p["text"] for p in output
                       if isinstance(p, dict) and isinstance(p.get("text"), str))  # fmt: skip
    if output is None:
        return ""
    raise LineError(f"{SHAPE} body: input item {index} output is neither text nor parts")
