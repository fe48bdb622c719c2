"""A model's own tokenizer: a Hugging Face tokenizer.json as the rendering's `enc`.

Llama, Qwen, Mistral and DeepSeek ship their tokenizer as a tokenizer.json; it is read
from the file with the `tokenizers` package, never from the hub. `enc(text)` is the
text's encoding with no special tokens added (no BOS, no template) and the text of a
special token read as text: the analogue of tiktoken's encode_ordinary.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from analysis.tokens import EncodingUnavailable

# characters each side of a cut that its check tokenizes, cut and whole: more than any
# pre-tokenizer piece of prose, and cheap (a check per 64K characters)
CHECK_CHARS = 256


class HFTokenizer:
    """A tokenizer.json as SegmentTokenizer's encoder (analysis.tokens.TextEncoder)."""

    def __init__(self, tokenizer: Tokenizer, file_name: str):
        self._tokenizer = tokenizer
        model = type(tokenizer.model).__name__  # BPE, Unigram, WordPiece, WordLevel
        vocab = tokenizer.get_vocab_size(with_added_tokens=True)
        # what the analysis page shows: the file's own name (no folder of the server),
        # its model and vocabulary size, which tell Llama 3 (128,256) from Qwen (151,665)
        self._name = f"{file_name} ({model}, {vocab:,} tokens)"

    @property
    def name(self) -> str:
        return self._name

    def encode_ordinary(self, text: str) -> list[int]:
        try:
            return self._tokenizer.encode(text, add_special_tokens=False).ids
        except TypeError:
            # a lone surrogate (a long line's JSON may hold one) is no str to Rust:
            # replaced, as tiktoken's encode_ordinary does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return self._tokenizer.encode(text, add_special_tokens=False).ids

    def cut_is_exact(self, text: str, cut: int) -> bool:
        """Whether cutting `text` at `cut` leaves the tokens around it as they are: the
        CHECK_CHARS characters each side tokenized whole equal them tokenized apart. True
        where the pre-tokenizer splits anyway (a word's leading space in Llama 3, Qwen,
        DeepSeek or Tekken); False for one that adds a "▁" to every piece it is given
        (SentencePiece conversions: Llama 2, Mistral 7B) or never splits there."""
        left = text[max(0, cut - CHECK_CHARS) : cut]
        right = text[cut : cut + CHECK_CHARS]
        whole = self.encode_ordinary(left + right)
        return whole == self.encode_ordinary(left) + self.encode_ordinary(right)


def load_tokenizer_file(path: str | Path, shown_name: str | None = None) -> HFTokenizer:
    """The tokenizer.json at `path`; EncodingUnavailable naming the file when it cannot
    be read as one. Errors and the tokenizer's name show `shown_name` (the file's name as
    its user knows it: an upload is stored under a generated one), else the file's name,
    never the server's folders."""
    path = Path(path)
    name = shown_name or path.name
    if not path.is_file():
        raise EncodingUnavailable(f"{name}: no such tokenizer file")
    stat = path.stat()
    return _load(str(path), stat.st_mtime_ns, stat.st_size, name)


def check_tokenizer_json(text: str, shown_name: str) -> None:
    """Refuse (EncodingUnavailable, naming the file) what the tokenizers library cannot
    read as a tokenizer: valid JSON with a "model" entry may still be none."""
    try:
        Tokenizer.from_str(text)
    except Exception as exc:  # the library raises a bare Exception with serde's reason
        raise EncodingUnavailable(f"{shown_name}: not a Hugging Face tokenizer.json "
                                  f"({exc})") from None  # fmt: skip


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int, name: str) -> HFTokenizer:
    """Read once per version of a file (the parts of one ingest share it; a model's file
    is megabytes of JSON): a file rewritten in place is read again."""
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as exc:  # the library raises a bare Exception with serde's reason
        raise EncodingUnavailable(f"{name}: not a Hugging Face tokenizer.json ({exc})") from None
    # a file may ask to truncate or pad every encoding (to 512 tokens, say): a prompt's
    # count must be all of it, unpadded
    tokenizer.no_truncation()
    tokenizer.no_padding()
    tokenizer.encode_special_tokens = True  # "<|endoftext|>" in a prompt is text
    return HFTokenizer(tokenizer, name)
