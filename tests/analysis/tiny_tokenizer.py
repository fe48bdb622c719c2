"""Tiny Hugging Face tokenizers trained in the test itself: no shipped file, no download.

Two shapes of the models users serve: byte-level BPE with a pre-tokenizer that splits a
word's leading space off the word before it (Llama 3, Qwen, DeepSeek, Mistral's Tekken),
and a SentencePiece conversion that prepends "▁" to whatever it is given and never splits
(Llama 2, Mistral 7B).
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

CORPUS = [
    "You are a careful assistant. Answer from the document.",
    "The prefix cache keeps the key and value tensors of every block it has seen.",
    "A block of tokens is reused when the whole prefix before it is the same.",
    "Clause 12: the supplier shall deliver item 84 within 13 days.",
    "What does clause 7 say? Quote it, then explain it in one sentence.",
]
SPECIAL = "<|endoftext|>"


def byte_level_bpe(vocab_size: int = 400) -> Tokenizer:
    """Byte-level BPE as Llama 3 and Qwen ship it: every byte is in the alphabet, so no
    text is unknown."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok


def sentencepiece_bpe() -> Tokenizer:
    """A Llama 2-style conversion: normalizer Prepend("▁") + Replace(" ", "▁"), no
    pre-tokenizer (trained with Metaspace so that merges stay within words, as in
    SentencePiece)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    alphabet = sorted(set("".join(CORPUS)) | set("abcdefghijklmnopqrstuvwxyz "))
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>"], initial_alphabet=[*alphabet, "▁"]
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    return tok


def save(tok: Tokenizer, folder: Path, name: str = "tokenizer.json") -> Path:
    path = folder / name
    tok.save(str(path))
    return path


def ids(tok: Tokenizer, text: str) -> list[int]:
    """The test's own `enc`: the encoding without special tokens added."""
    return tok.encode(text, add_special_tokens=False).ids


def render(tok: Tokenizer, messages: list[tuple[str, str]]) -> list[int]:
    """The canonical rendering, computed here: enc(role+"\\n") + enc(text) + enc("\\n")
    per message."""
    out: list[int] = []
    for role, text in messages:
        out += ids(tok, role + "\n") + ids(tok, text) + ids(tok, "\n")
    return out
