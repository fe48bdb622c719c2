"""Hand-made block streams for the fleet's tests: each request a time, its block keys
(one letter per block, every block B tokens) and optionally a session."""

from __future__ import annotations

import numpy as np

from analysis.stream import BlockStream, StreamHeader

B = 4  # tokens per block
# a pre-hashed trace has no segment view
NO_SEGMENTS = {
    "id": np.zeros(0, dtype=np.uint64),
    "role_class": np.zeros(0, dtype=np.int8),
    "tokens": np.zeros(0, dtype=np.int32),
    "label": [],
}
NO_OCCURRENCES = {
    "req": np.zeros(0, dtype=np.int32),
    "seg": np.zeros(0, dtype=np.int32),
    "offset": np.zeros(0, dtype=np.int64),
}


def stream_of(requests: list[tuple[float, str, str | None]]) -> BlockStream:
    """A pre-hashed stream from (time s, block letters, session or None): "ab" is a
    request of two blocks keyed a and b; the same letter is the same key."""
    n = len(requests)
    keys = [ord(letter) for _, blocks, _ in requests for letter in blocks]
    sessions = [0 if s is None else 1000 + ord(s[0]) * 31 + len(s) for _, _, s in requests]
    blocks = np.asarray([len(b) for _, b, _ in requests], dtype=np.int64)
    header = StreamHeader(source_format="mooncake", log_format="mooncake", block_tokens=B,
                          tenants=[""], users=[""], routes=[""], files=["hand.jsonl"])  # fmt: skip
    return BlockStream.from_columns(
        header,
        requests={
            "t_us": np.asarray([round(t * 1e6) for t, _, _ in requests], dtype=np.int64),
            "tenant": np.zeros(n, dtype=np.int32),
            "user": np.zeros(n, dtype=np.int32),
            "route": np.zeros(n, dtype=np.int32),
            "prompt_tokens": blocks * B,
            "output_tokens": np.full(n, -1, dtype=np.int64),
            "line": np.arange(1, n + 1, dtype=np.int64),
            "file": np.zeros(n, dtype=np.int16),
            "session": np.asarray(sessions, dtype=np.uint64),
            "cache_control": np.zeros(n, dtype=np.int8),
            "blocks": blocks,
        },
        refs={
            "key": np.asarray(keys, dtype=np.uint64),
            "tokens": np.full(len(keys), B, dtype=np.int32),
        },
        segments=NO_SEGMENTS,
        occurrences=NO_OCCURRENCES,
    )
