"""Chained block keys of a chat prompt, message by message, memoised by prefix."""

from __future__ import annotations

import numpy as np

from analysis.hashing import KeyedHasher


class PrefixChain:
    """Chained block keys of one block size, computed message by message and memoised by
    the sequence of segments so far: a system prompt + document prefix sent by 10,000
    requests is hashed once, not 10,000 times. Gives exactly the keys of hashing each
    whole prompt (each message's tokens depend only on its segment).

    Memory is bounded: past `max_states` remembered prefixes the memo starts over.
    """

    _ROOT = 0

    def __init__(self, hasher: KeyedHasher, block_tokens: int, max_states: int = 200_000):
        self.block_tokens = block_tokens
        self._hasher = hasher
        self._max_states = max_states
        self._reset()

    def _reset(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}
        # state id -> (keys this message completed, tokens left over after the last full
        # block, the last key's digest: the chain continues from it)
        self._states: list[tuple[np.ndarray, np.ndarray, bytes]] = [
            (np.zeros(0, np.uint64), np.zeros(0, np.uint32), b"")
        ]

    def keys(self, segments: list[int], pieces: list[tuple[np.ndarray, ...]]) -> np.ndarray:
        if len(self._states) > self._max_states:
            self._reset()
        state = self._ROOT
        found: list[np.ndarray] = []
        for seg, piece in zip(segments, pieces, strict=True):
            following = self._ids.get((state, seg))
            if following is None:
                following = self._extend(state, seg, piece)
            state = following
            new_keys = self._states[state][0]
            if new_keys.size:
                found.append(new_keys)
        if not found:
            return np.zeros(0, np.uint64)
        return found[0] if len(found) == 1 else np.concatenate(found)

    def _extend(self, state: int, seg: int, piece: tuple[np.ndarray, ...]) -> int:
        _, leftover, last = self._states[state]
        b = self.block_tokens
        header, text, newline = piece
        lead = np.concatenate((leftover, header))
        # the text's full blocks are hashed in place, not copied into one prompt array
        # (a long text's tokens would be held twice); the chain continues across the
        # three parts, so the keys are those of hashing the concatenation
        cut = min(text.size, -lead.size % b)
        cut += (text.size - cut) // b * b
        if cut <= -lead.size % b:  # a short text: one small concatenation, as ever
            parts = [np.concatenate((lead, text, newline))]
        else:
            first = -lead.size % b
            parts = [np.concatenate((lead, text[:first])), text[first:cut],
                     np.concatenate((text[cut:], newline))]  # fmt: skip
        found = []
        for part in parts[:-1]:  # multiples of b: nothing left over
            keys = self._hasher.block_keys(part, b, salt=last)
            if keys.size:
                last = int(keys[-1]).to_bytes(8, "little")
                found.append(keys)
        tail = parts[-1]
        keys = self._hasher.block_keys(tail, b, salt=last)
        if keys.size:
            last = int(keys[-1]).to_bytes(8, "little")
            found.append(keys)
        all_keys = found[0] if len(found) == 1 else np.concatenate(found or [keys])
        new = len(self._states)
        self._states.append((all_keys, tail[keys.size * b :].copy(), last))
        self._ids[(state, seg)] = new
        return new
