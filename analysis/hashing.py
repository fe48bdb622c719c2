"""Keyed hashes: segment identities and chained block prefix keys (metrics.md sections 2, 6).

BLAKE2b keyed with a per-installation secret, so a stored key cannot be matched against a
guessed document by anyone without the secret. Keys are kept as 64-bit integers: at 10
million distinct blocks the chance of any collision is about 3 in a million.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

KEY_BYTES = 8
KEY_DTYPE = np.dtype("<u8")  # a key: its digest read as a little-endian integer
_MAX_SECRET = 64  # BLAKE2b's key limit


class KeyedHasher:
    def __init__(self, secret: bytes):
        if len(secret) < 16:
            raise ValueError("the hash secret must be at least 16 bytes")
        # Longer secrets are folded so every byte of them still counts.
        key = secret if len(secret) <= _MAX_SECRET else hashlib.sha512(secret).digest()
        self._text = hashlib.blake2b(key=key, digest_size=16, person=b"kvscope-text")
        self._segment = hashlib.blake2b(key=key, digest_size=KEY_BYTES, person=b"kvscope-seg")
        self._block = hashlib.blake2b(key=key, digest_size=KEY_BYTES, person=b"kvscope-blk")
        self._session = hashlib.blake2b(key=key, digest_size=KEY_BYTES, person=b"kvscope-ses")

    def text_digest(self, text: str) -> bytes:
        """A keyed digest of a text: the memo key for its tokens."""
        h = self._text.copy()
        # a MiB of characters at a time: a long text is never copied whole to UTF-8 (the
        # bytes are the same: each character encodes on its own)
        for start in range(0, len(text), 1 << 20):
            h.update(text[start : start + (1 << 20)].encode("utf-8", "surrogatepass"))
        return h.digest()

    def segment_id(self, role: str, text_digest: bytes) -> int:
        """segment_id = H(role, text), as an unsigned 64-bit integer."""
        h = self._segment.copy()
        h.update(role.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        h.update(text_digest)
        return int.from_bytes(h.digest(), "little")

    def session_key(self, session: str) -> int:
        """A session id as a keyed 64-bit key; 0 (no session) for "" (never for an id)."""
        if not session:
            return 0
        h = self._session.copy()
        h.update(session.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "little") or 1

    def block_keys(self, tokens: np.ndarray, block_tokens: int, salt: bytes = b"") -> np.ndarray:
        """Prefix keys of the full blocks of a prompt: key_j = H(key_{j-1}, block j).

        The tail (fewer than block_tokens tokens) is never cached, so it has no key.
        """
        digests, _, _ = self.chain_blocks((token_bytes(tokens),), block_tokens * 4, b"", salt)
        return np.frombuffer(bytearray(digests), dtype=KEY_DTYPE)

    def chain_blocks(
        self, buffers: Iterable[memoryview | bytes], block_bytes: int, carry: bytes, prev: bytes
    ) -> tuple[bytes, bytes, bytes]:
        """The chain of block keys over `carry` and then each buffer, as if they were one
        (a long text is hashed where it lies, never copied into a prompt-sized buffer):
        (the full blocks' digests one after another, the bytes left over after the last
        full block, the last digest: the chain goes on from it; `prev` where none was
        made). A digest read as KEY_DTYPE is its key."""
        base = self._block
        digests: list[bytes] = []
        for buf in buffers:
            pos, size = 0, len(buf)
            if carry:  # the block that carry began
                need = block_bytes - len(carry)
                if size < need:
                    carry += buf
                    continue
                h = base.copy()
                h.update(prev)
                h.update(carry + buf[:need])
                prev = h.digest()
                digests.append(prev)
                pos = need
            end = pos + (size - pos) // block_bytes * block_bytes
            for start in range(pos, end, block_bytes):
                h = base.copy()
                h.update(prev)
                h.update(buf[start : start + block_bytes])
                prev = h.digest()
                digests.append(prev)
            carry = bytes(buf[end:])
        return b"".join(digests), carry, prev


def token_bytes(tokens: np.ndarray) -> memoryview:
    """Token ids as the bytes block keys hash (little-endian uint32), a view where they
    already are such (no copy on a little-endian machine)."""
    return np.ascontiguousarray(tokens, dtype="<u4").data.cast("B")
