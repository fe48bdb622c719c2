"""Request ids already seen in an ingest, in 16 bytes per id (an open-addressing table of
64-bit hashes), so duplicate detection does not make memory follow the log's length."""

from __future__ import annotations

import hashlib

import numpy as np

_EMPTY = 0


class SeenIds:
    """A set of strings by their 64-bit BLAKE2b hash (collisions: ~n²/2⁶⁵, negligible)."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self._table = np.zeros(capacity, dtype=np.uint64)
        self._count = 0

    def add(self, value: str) -> bool:
        """Add `value`; False if it was already there."""
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8)
        key = int.from_bytes(digest.digest(), "little") or 1  # 0 marks an empty slot
        if (self._count + 1) * 2 > self._table.size:
            self._grow()
        slot = self._slot(key)
        if int(self._table[slot]) == key:
            return False
        self._table[slot] = key
        self._count += 1
        return True

    def _slot(self, key: int) -> int:
        """Where `key` is, or the empty slot where it would go (linear probing)."""
        table = self._table
        mask = table.size - 1
        slot = key & mask
        while (found := int(table[slot])) != _EMPTY and found != key:
            slot = (slot + 1) & mask
        return slot

    def _grow(self) -> None:
        keys = self._table[self._table != _EMPTY]
        self._table = np.zeros(self._table.size * 2, dtype=np.uint64)
        for key in keys.tolist():
            self._table[self._slot(key)] = key
