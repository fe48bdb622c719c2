"""What a logged response says its engine reused (#18): the usage's count of the prompt and
of the prompt tokens it served from its prefix cache. Numbers only; never text.

- OpenAI Chat Completions (vLLM with `--enable-prompt-tokens-details`, hosted APIs):
  `usage.prompt_tokens`, and `usage.prompt_tokens_details.cached_tokens` among them.
- OpenAI Responses: `usage.input_tokens`, and `usage.input_tokens_details.cached_tokens`
  among them.
- Anthropic Messages: `usage.input_tokens` counts only the tokens after the last cache
  breakpoint; `cache_read_input_tokens` (served from the cache) and
  `cache_creation_input_tokens` (written to it) come beside it, so the prompt is the sum.
The usage sits at the line's top level or under `response` (a gateway's request/response
pair). A usage that names no cached count says nothing of the cache: unknown, not zero.
"""

from __future__ import annotations

from analysis.readers.fields import first, token_count

USAGE_PATHS = (("usage",), ("response", "usage"))
ANTHROPIC_CACHE = ("cache_read_input_tokens", "cache_creation_input_tokens")
UNKNOWN = -1


class Usage:
    """A response's reported prompt and cached tokens (UNKNOWN where it does not say)."""

    __slots__ = ("cached_tokens", "prompt_tokens")

    def __init__(self, prompt_tokens: int = UNKNOWN, cached_tokens: int = UNKNOWN):
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens

    @property
    def consistent(self) -> bool:
        """Not more cached tokens than the prompt has (when both are known)."""
        return self.cached_tokens <= self.prompt_tokens or UNKNOWN in (
            self.cached_tokens, self.prompt_tokens)  # fmt: skip


def reported_usage(obj: dict) -> Usage:
    """The line's usage (LineError, from token_count, for a count that is no count)."""
    usage = first(obj, *USAGE_PATHS)
    if not isinstance(usage, dict):
        return Usage()
    if any(key in usage for key in ANTHROPIC_CACHE):
        parts = [token_count(usage.get(key), f"usage.{key}")
                 for key in ("input_tokens", *ANTHROPIC_CACHE)]  # fmt: skip
        cached = max(parts[1], 0)  # only a cache write named: nothing was read
        return Usage(sum(part for part in parts if part > 0), cached)
    if "prompt_tokens" in usage:
        return Usage(token_count(usage["prompt_tokens"], "usage.prompt_tokens"),
                     token_count(first(usage, ("prompt_tokens_details", "cached_tokens")),
                                 "usage.prompt_tokens_details.cached_tokens"))  # fmt: skip
    if "input_tokens" in usage:
        return Usage(token_count(usage["input_tokens"], "usage.input_tokens"),
                     token_count(first(usage, ("input_tokens_details", "cached_tokens")),
                                 "usage.input_tokens_details.cached_tokens"))  # fmt: skip
    return Usage()
