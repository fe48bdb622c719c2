"""What the traffic carries beside its prompts' blocks (metrics.md section 7): tool
definitions, session ids, explicit cache breakpoints."""

from __future__ import annotations

import numpy as np

from analysis.stream import ROLE_TOOLS, BlockStream


def tools_summary(stream: BlockStream) -> dict:
    """Requests carrying tool definitions, their tokens (the tools segment's text, summed
    over requests, metrics.md section 1's count), that as a share of every prompt token,
    and where the ingest placed them ("" for a pre-hashed trace)."""
    is_tools = stream.seg_role_class[stream.occ_seg] == ROLE_TOOLS
    tokens = int(stream.seg_tokens[stream.occ_seg[is_tools]].sum(dtype=np.int64))
    prompt = int(stream.req_prompt_tokens.sum(dtype=np.int64))
    return {
        "requests_with_tools": int(np.unique(stream.occ_req[is_tools]).size),
        "tool_tokens": tokens,
        "prompt_share": tokens / prompt if prompt else 0.0,
        "position": stream.tools_position,
    }


def session_share(stream: BlockStream) -> float:
    """The share of requests that carry a session id."""
    if not stream.requests:
        return 0.0
    return int(np.count_nonzero(stream.req_session)) / stream.requests


def cache_control_requests(stream: BlockStream) -> int:
    return int(np.count_nonzero(stream.req_cache_control))
