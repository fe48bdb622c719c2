"""The console's words for what a log's prompts carry (metrics.md section 7): the log
formats and tool placements the upload form offers, and the analysis page's "What the
prompts carry" block, read from the report (shares of its own counts, nothing else)."""

from __future__ import annotations

from dataclasses import dataclass

from analysis.ingest import FORMATS, IngestOptions
from analysis.ingest.options import STREAM_KIND
from analysis.readers import TOOLS_POSITIONS
from analysis.readers.render import position_for
from console.format import percent_text

# the formats as people name their logs, in the engine's order (FORMATS)
FORMAT_LABELS = {
    "auto": "Detect automatically",
    "chat": "Chat bodies (OpenAI chat, Anthropic Messages, OpenAI Responses; JSONL)",
    "csv": "Gateway CSV (request_json column)",
    "mooncake": "Mooncake trace",
    "bailian": "Bailian trace",
}
FORMAT_CHOICES = [(name, FORMAT_LABELS.get(name, name)) for name in FORMATS]
# what every page calls the format the reader read (the stream header's log_format,
# Upload.log_format; "chat" is also what an upload stored before that field read)
LOG_FORMAT_NAMES = {
    "chat": "chat bodies (JSONL)",
    "csv": "gateway CSV",
    "mooncake": "Mooncake trace",
    "bailian": "Bailian trace",
}
# the formats whose logs are pre-hashed traces (no text: no tools, no tokenizer)
PRE_HASHED = frozenset(name for name, kind in STREAM_KIND.items() if kind == "mooncake")
# the routes the page names with their tools placement (auto); the rest are counted
PLACED_ROUTES_SHOWN = 6

TOOLS_POSITION_LABELS = {
    "auto": "By model route: first for Claude and GPT, before the last user turn for "
    "Mistral, after the system prompt for the rest (Llama, Qwen, DeepSeek…)",
    "first": "First, before every message",
    "after_system": "After the system prompt",
    "before_last_user": "Just before the last user message",
}
TOOLS_POSITION_CHOICES = [(name, TOOLS_POSITION_LABELS.get(name, name)) for name in TOOLS_POSITIONS]
# where the page says the tools went, after "Tool definitions placed"
TOOLS_POSITION_PLACED = {
    "auto": "by model route (each request's chat template)",
    "first": "first, before every message",
    "after_system": "after the system prompt",
    "before_last_user": "just before the last user message",
}
# why the placement matters, in one sentence (the form's help and the page say it)
TOOLS_POSITION_WHY = (
    "A prefix cache shares only the leading blocks requests have in common: tool "
    "definitions placed before everything that varies are shared by every request that "
    "carries them, placed after the conversation they are computed again each time."
)
DEFAULT_TOKENIZER = IngestOptions.encoding  # (reports stored before they named one)


@dataclass(frozen=True)
class PromptFacts:
    """The block's lines, as the page shows them ("" for a line that does not apply)."""

    log_format: str
    pre_hashed: bool
    tokenizer: str
    tool_share: str  # of prompt tokens
    tool_requests: str  # "12 of 40 requests"
    tools_placed: str
    session_share: str  # of requests
    cache_control_share: str  # of requests
    cache_control_requests: int


def log_format_name(code: str) -> str:
    """A log format's code ("csv", "bailian"...) in people's words ("" for none)."""
    return LOG_FORMAT_NAMES.get(code, code)


def upload_log_format(upload) -> str:
    """What the reader read of an upload, in words: its log_format, or for an upload
    stored before that field its stream kind (source_format); "" before the ingest."""
    return log_format_name(upload.log_format or upload.source_format)


def _placed_by_route(report: dict) -> str:
    """Auto placement, route by route (position_for on each of the report's routes):
    "claude-sonnet-4 → first, qwen2.5-72b → after the system prompt"."""
    routes = [row.get("route") or "" for row in report.get("routes") or []]
    named = [
        f"{route or '(no route)'} → {TOOLS_POSITION_PLACED[position_for(route, 'auto')]}"
        for route in routes[:PLACED_ROUTES_SHOWN]
    ]
    if len(routes) > PLACED_ROUTES_SHOWN:
        named.append(f"{len(routes) - PLACED_ROUTES_SHOWN:,} more")
    return ", ".join(named)


def _tools_placed(report: dict, position: str, with_tools: int) -> str:
    """Where the tools went, in words; for auto, route by route when any request has tools
    (a log without them placed none)."""
    placed = TOOLS_POSITION_PLACED.get(position, "")
    by_route = _placed_by_route(report) if position == "auto" and with_tools else ""
    return f"by model route: {by_route}" if by_route else placed


def _of_requests(count: int, requests: int) -> str:
    noun = "request" if requests == 1 else "requests"
    return f"{count:,} of {requests:,} {noun}"


def prompt_facts(report: dict, log_format: str = "") -> PromptFacts | None:
    """The block of a report, None for one stored before its keys existed. `log_format`:
    what the reader read, if known (the upload's: the report says "chat" for JSONL and
    CSV alike, their reports being the same)."""
    if "session_share" not in report or "tools" not in report:
        return None
    requests = report.get("requests") or 0
    tools = report["tools"] or {}
    cache_control = report.get("cache_control_requests") or 0
    log_format = log_format or report.get("log_format") or report.get("source_format") or ""
    pre_hashed = log_format in PRE_HASHED or report.get("source_format") == "mooncake"
    with_tools = tools.get("requests_with_tools") or 0
    return PromptFacts(
        log_format=log_format_name(log_format),
        pre_hashed=pre_hashed,
        tokenizer="" if pre_hashed else report.get("tokenizer") or DEFAULT_TOKENIZER,
        tool_share=percent_text(tools.get("prompt_share") or 0.0),
        tool_requests=_of_requests(with_tools, requests),
        tools_placed=_tools_placed(report, tools.get("position") or "", with_tools),
        session_share=percent_text(report["session_share"]),
        cache_control_share=percent_text(cache_control / requests if requests else 0.0),
        cache_control_requests=cache_control,
    )


__all__ = [
    "FORMAT_CHOICES",
    "TOOLS_POSITION_CHOICES",
    "TOOLS_POSITION_WHY",
    "PromptFacts",
    "log_format_name",
    "prompt_facts",
    "upload_log_format",
]
