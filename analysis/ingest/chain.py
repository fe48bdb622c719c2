"""Chained block keys of a chat prompt, message by message, memoised by prefix."""

from __future__ import annotations

import numpy as np

from analysis.hashing import KEY_DTYPE, KeyedHasher, token_bytes

# A message as the chain hashes it: its role header's tokens as bytes (token_bytes), its
# text's tokens, the newline's tokens as bytes (the two are the same for every message of
# a role: converted once, by the tokenizer)
Piece = tuple[bytes, np.ndarray, bytes]


class PrefixChain:
    """Chained block keys of one block size, computed message by message and memoised by
    the sequence of segments so far: a system prompt + document prefix sent by 10,000
    requests is hashed once, not 10,000 times. Gives exactly the keys of hashing each
    whole prompt (each message's tokens depend only on its segment).

    A prefix's state is kept as bytes (its keys' digests, its leftover tokens): a
    request's keys are then one join of its messages' digests, and a new message one
    walk over its tokens where they lie (the cost of a request is a dict lookup per
    message, not array operations).

    Memory is bounded: past `max_states` remembered prefixes the memo starts over.
    """

    _ROOT = 0

    def __init__(self, hasher: KeyedHasher, block_tokens: int, max_states: int = 200_000):
        self.block_tokens = block_tokens
        self._block_bytes = block_tokens * 4  # (token ids are hashed as uint32)
        self._hasher = hasher
        self._max_states = max_states
        self._reset()

    def _reset(self) -> None:
        # (state << 32 | segment) -> the state that segment leads to
        self._ids: dict[int, int] = {}
        # by state: the digests of the blocks its message completed; the tokens left over
        # after its last full block; its last digest (the chain continues from it)
        self._digests: list[bytes] = [b""]
        self._leftover: list[bytes] = [b""]
        self._last: list[bytes] = [b""]

    def keys(self, segments: list[int], pieces: list[Piece]) -> np.ndarray:
        """The prompt's block keys; `pieces`: each message's Piece, read only for a
        prefix not seen before."""
        if len(self._digests) > self._max_states:
            self._reset()
        ids, digests = self._ids, self._digests
        state = self._ROOT
        found: list[bytes] = []
        for seg, piece in zip(segments, pieces, strict=True):
            following = ids.get(state << 32 | seg)
            if following is None:
                following = self._extend(state, seg, piece)
            state = following
            found.append(digests[state])
        # (a bytearray: the keys are writable, as every other stream column is)
        return np.frombuffer(bytearray().join(found), dtype=KEY_DTYPE)

    def _extend(self, state: int, seg: int, piece: Piece) -> int:
        header, text, newline = piece
        digests, leftover, last = self._hasher.chain_blocks(
            (header, token_bytes(text), newline),
            self._block_bytes,
            self._leftover[state],
            self._last[state],
        )
        new = len(self._digests)
        self._digests.append(digests)
        self._leftover.append(leftover)
        self._last.append(last)
        self._ids[state << 32 | seg] = new
        return new
