"""Chat bodies, one request a line: OpenAI chat, Anthropic Messages and OpenAI Responses,
told apart line by line (a file may mix them), at the top level or under
`request`/`body`; rendered as metrics.md section 7 says (tools, tool calls, sessions)."""

from __future__ import annotations

from analysis.dedupe import SeenIds
from analysis.errors import ErrorLog, LineError
from analysis.readers.fields import as_str, first, tenant_and_user, token_count
from analysis.readers.messages import Findings, read_messages, system_message
from analysis.readers.records import ChatRequest, Message
from analysis.readers.render import place_tools
from analysis.readers.responses import SHAPE as RESPONSES_SHAPE, responses_messages
from analysis.readers.usage import Usage, reported_usage
from analysis.timestamps import NO_ZONE_NOTE, check_plausible, now_us, parse_timestamp

# Where a line's body may be: at the top level, or under `request` / `body` (the shapes a
# gateway or a batch file wraps it in); detect_format looks there too
BODY_PATHS = ((), ("request",), ("body",))
MESSAGE_PATHS = tuple((*path, "messages") for path in BODY_PATHS)
RESPONSES_PATHS = tuple((*path, key) for path in BODY_PATHS for key in ("input", "instructions"))
# metrics.md section 7: a request's session id, the first of these present
SESSION_PATHS = (("session_id",), ("conversation_id",), ("prompt_cache_key",),
                 ("metadata", "session_id"), ("metadata", "conversation_id"))  # fmt: skip
OUTPUT_PATHS = (("usage", "completion_tokens"), ("usage", "output_tokens"),
                ("response", "usage", "completion_tokens"),
                ("response", "usage", "output_tokens"), ("output_tokens",))  # fmt: skip


class ChatReader:
    name = "chat"

    def __init__(self, errors: ErrorLog, tools_position: str = "auto"):
        self._errors = errors
        self._tools_position = tools_position
        self._ids = SeenIds()
        self._unknown_parts: set[str] = set()
        self._now = now_us()
        self._usage_left_out = 0
        self._first_left_out = ""
        self._usage_note = ""

    def parse(self, obj: dict, line: int) -> ChatRequest:
        if "timestamp" not in obj:
            raise LineError("no timestamp")
        t_us, assumed_utc = parse_timestamp(obj["timestamp"])
        check_plausible(t_us, obj["timestamp"], self._now)
        if assumed_utc:
            self._errors.note(NO_ZONE_NOTE)
        body = _body(obj)
        model = as_str(first(obj, ("model",), ("request", "model"), ("body", "model")))
        found = Findings(cache_control="cache_control" in body or "cache_control" in obj)
        try:
            messages = self._messages(body, found)
            self._place_tools(obj, body, messages, model, found)
        except RecursionError:  # (valid JSON can nest deeper than a reader recurses)
            raise LineError(f"{_shape(body)} body: nested too deeply") from None
        output_tokens = token_count(first(obj, *OUTPUT_PATHS), "output token count")
        usage = self._usage(obj, line)
        self._claim_id(first(obj, ("id",), ("request_id",), ("custom_id",)))
        self._note_unknown_parts(found.unknown_parts, line)
        tenant, user = tenant_and_user(obj)
        return ChatRequest(
            line=line,
            t_us=t_us,
            tenant=tenant,
            user=user,
            model=model,
            messages=messages,
            output_tokens=output_tokens,
            session=_session(obj, body),
            cache_control=found.cache_control,
            reported_prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
        )

    def _usage(self, obj: dict, line: int) -> Usage:
        """What the response reported. A usage that is no count, or claims more cached
        tokens than its prompt, is left out (noted): the request itself is kept."""
        try:
            usage = reported_usage(obj)
        except LineError as exc:
            self._leave_out_usage(line, str(exc))
            return Usage()
        if not usage.consistent:
            self._leave_out_usage(line, "more cached tokens than prompt tokens")
            return Usage()
        return usage

    def _leave_out_usage(self, line: int, why: str) -> None:
        """One note for every usage left out, its count and the first line's reason."""
        self._usage_left_out += 1
        if self._usage_left_out == 1:
            self._first_left_out = f"line {line}: {why}"
        old = self._usage_note
        self._usage_note = (f"{self._usage_left_out:,} line(s) report a usage kvscope cannot "
                            f"use (first, {self._first_left_out}); their usage is left out, "
                            "the requests kept")  # fmt: skip
        self._errors.renote(old, self._usage_note)

    def _place_tools(
        self, obj: dict, body: dict, messages: list[Message], model: str, found: Findings
    ) -> None:
        """The tool definitions (the body's, else the line's) as the tools segment."""
        tools = _tools_of(body)
        if tools is None and body is not obj:
            tools = _tools_of(obj)
        if tools is None:
            return
        if not isinstance(tools, list):
            raise LineError(f"{_shape(body)} body: tools is not a list")
        if tools:
            found.cache_control |= any(isinstance(t, dict) and "cache_control" in t
                                       for t in tools)  # fmt: skip
            place_tools(messages, tools, model, self._tools_position)

    def _messages(self, body: dict, found: Findings) -> list[Message]:
        shape = _shape(body)
        if shape == RESPONSES_SHAPE:
            return responses_messages(body, found)
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise LineError(f"{shape} body: no messages (looked at messages, request.messages, "
                            "body.messages, and for a Responses body input)")  # fmt: skip
        messages = read_messages(raw, shape, found)
        system = body.get("system")
        first_message = system_message(system, shape, found) if system is not None else None
        if first_message is not None:  # Anthropic's top-level system prompt
            messages.insert(0, first_message)
        return messages

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


def _body(obj: dict) -> dict:
    """The request body of a line: where its messages are, else its Responses input."""
    if "messages" in obj:  # (the common case, first)
        return obj
    nodes = [node for node in (first(obj, path) if path else obj for path in BODY_PATHS)
             if isinstance(node, dict)]  # fmt: skip
    for keys in (("messages",), ("input", "instructions")):
        for node in nodes:
            if any(key in node for key in keys):
                return node
    return obj


_SESSION_KEYS = frozenset(path[0] for path in SESSION_PATHS if len(path) == 1)
_METADATA_SESSION_KEYS = frozenset(path[1] for path in SESSION_PATHS if len(path) == 2)


def _may_name_session(node: dict) -> bool:
    if not _SESSION_KEYS.isdisjoint(node):
        return True
    metadata = node.get("metadata")
    return isinstance(metadata, dict) and not _METADATA_SESSION_KEYS.isdisjoint(metadata)


def _tools_of(node: dict) -> object:
    """A node's tool definitions: `tools`, else the legacy `functions` (None: neither)."""
    tools = node.get("tools")
    return tools if tools is not None else node.get("functions")


def _shape(body: dict) -> str:
    """The body's shape as errors name it (a file may mix them, line by line)."""
    if "messages" not in body and ("input" in body or "instructions" in body):
        return RESPONSES_SHAPE
    if "system" in body or "anthropic_version" in body:
        return "Anthropic Messages"
    return "OpenAI chat"


def _session(obj: dict, body: dict) -> str:
    """The line's session id (metrics.md section 7): the first of SESSION_PATHS, in their
    order, on the line or in its body, that holds one (an empty string or an object is
    none: gateways write empty keys)."""
    nodes = (obj, body) if body is not obj else (obj,)
    if not _may_name_session(obj) and (body is obj or not _may_name_session(body)):
        return ""  # (most lines: a set test)
    for path in SESSION_PATHS:
        for node in nodes:
            value = node.get(path[0])
            if len(path) == 2:
                value = value.get(path[1]) if isinstance(value, dict) else None
            if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
                return str(value)
    return ""
