"""A model's own tokenizer.json instead of cl100k_base (#14): the rendering with its
tokens, its name in the stream and the report, long texts in pieces, bad files refused.

Every tokenizer here is trained in the test (tests/analysis/tiny_tokenizer.py)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import orjson
import pytest
from tokenizers import Tokenizer

from analysis import AnalysisParams, BlockStream, IngestOptions, UnusableInput, analyze, ingest
from analysis.hashing import KeyedHasher
from analysis.hf_tokenizer import load_tokenizer_file
from analysis.tokens import PIECE_CHARS, encode_in_pieces
from tests.analysis import tiny_tokenizer as tiny

SYSTEM = "You are a careful assistant. Answer from the document."
DOCUMENT = " ".join(f"Clause {k}: the supplier shall deliver item {k * 7}." for k in range(40))
QUESTIONS = [f"What does clause {k} say?" for k in range(6)]
BLOCK = 16


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return tiny.byte_level_bpe()


@pytest.fixture
def tok_file(tok, tmp_path):
    return tiny.save(tok, tmp_path)


def _conversations() -> list[list[tuple[str, str]]]:
    return [[("system", SYSTEM), ("user", DOCUMENT), ("user", q)] for q in QUESTIONS]


def _log(tmp_path, conversations) -> Path:
    path = tmp_path / "chat.jsonl"
    rows = [{"timestamp": 1_700_000_000 + i,
             "messages": [{"role": r, "content": t} for r, t in messages]}
            for i, messages in enumerate(conversations)]  # fmt: skip
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def _ingest(log, hash_key, tokenizer_file=None, block_tokens=BLOCK) -> BlockStream:
    own = str(tokenizer_file) if tokenizer_file else None
    options = IngestOptions(hash_key=hash_key, block_tokens=block_tokens, tokenizer_file=own)
    return ingest([log], options)


def test_prompts_are_rendered_with_the_models_tokens(tok, tok_file, tmp_path, hash_key):
    conversations = _conversations()
    stream = _ingest(_log(tmp_path, conversations), hash_key, tok_file)
    # the rendering computed here with the tokenizer itself, message by message
    rendered = [tiny.render(tok, messages) for messages in conversations]
    assert stream.req_prompt_tokens.tolist() == [len(r) for r in rendered]
    assert stream.stats["tokens_rendered"] == sum(len(r) for r in rendered)
    # each distinct text tokenized once: the system prompt, the document, six questions
    distinct = [SYSTEM, DOCUMENT, *QUESTIONS]
    assert stream.stats["tokens_tokenized"] == sum(len(tiny.ids(tok, t)) for t in distinct)
    # a segment's count is its text alone; its offset skips the role header
    assert sorted(stream.seg_tokens.tolist()) == sorted(len(tiny.ids(tok, t)) for t in distinct)
    assert stream.occ_offset[:1].tolist() == [len(tiny.ids(tok, "system\n"))]
    # prefix keys: each request's rendering hashed from scratch
    hasher = KeyedHasher(hash_key)
    start = stream.req_ref_start
    for i, tokens in enumerate(rendered):
        expected = hasher.block_keys(np.asarray(tokens, dtype=np.uint32), BLOCK)
        assert np.array_equal(stream.ref_key[start[i] : start[i + 1]], expected), i


def test_block_keys_are_not_cl100k_s(tok_file, tmp_path, hash_key, render):
    conversations = _conversations()
    log = _log(tmp_path, conversations)
    own = _ingest(log, hash_key, tok_file)
    cl100k = _ingest(log, hash_key)
    # cl100k_base's rendering (conftest's fixture), not the tiny tokenizer's
    assert cl100k.req_prompt_tokens.tolist() == [len(render(m)) for m in conversations]
    assert own.req_prompt_tokens.tolist() != cl100k.req_prompt_tokens.tolist()
    # other token ids, so other prefixes: no block key in common
    assert not set(own.ref_key.tolist()) & set(cl100k.ref_key.tolist())


def test_the_stream_and_the_report_name_the_tokenizer(tok, tok_file, tmp_path, hash_key):
    stream = _ingest(_log(tmp_path, _conversations()), hash_key, tok_file)
    # the file's name, its model and vocabulary size (400 trained): never its folder
    name = f"tokenizer.json (BPE, {tok.get_vocab_size(with_added_tokens=True):,} tokens)"
    assert name == "tokenizer.json (BPE, 400 tokens)"
    assert stream.tokenizer == name
    assert str(tmp_path) not in stream.tokenizer
    assert BlockStream.load(stream.save(tmp_path / "stream")).tokenizer == name
    report = analyze(stream, AnalysisParams(windows_s=(60,)))
    assert report.tokenizer == name
    assert orjson.loads(report.to_json())["tokenizer"] == name
    default = _ingest(_log(tmp_path, _conversations()), hash_key)
    assert analyze(default, AnalysisParams(windows_s=(60,))).tokenizer == "cl100k_base"


def _prose(chars: int, seed: int) -> str:
    """Words, numbers, punctuation, accents, CJK, emoji, tabs, runs of spaces, newlines."""
    rnd = random.Random(seed)
    shapes = ["cache", "Prefix", "don't", "1234567", "3.14", "--", "?!", "café", "日本語", "😀",
              "\t", "  ", "\n", "\n\n", " \n ", "(x)", "a/b", "ÉCOLE", "_id", "..."]  # fmt: skip
    out: list[str] = []
    size = 0
    while size < chars:
        out.append(rnd.choice(shapes) + rnd.choice([" ", " ", " ", "", "  ", "\n"]))
        size += len(out[-1])
    return "".join(out)


def test_a_long_text_in_pieces_has_the_tokens_of_the_whole(tok, tok_file):
    encoder = load_tokenizer_file(tok_file)
    for seed in range(2):
        text = _prose(5 * PIECE_CHARS + seed * 777, seed)
        tokens, inexact = encode_in_pieces(encoder, text, None, encoder.cut_is_exact)
        assert inexact == 0
        assert tokens.tolist() == tiny.ids(tok, text)


def test_a_tokenizer_that_prepends_to_every_piece_has_its_cuts_counted(tmp_path, hash_key):
    tok = tiny.sentencepiece_bpe()
    path = tiny.save(tok, tmp_path)
    encoder = load_tokenizer_file(path)
    # 30,000 "word "s = 150,000 characters: more than 2 * 65,536, so one cut near 65,536;
    # what is left (~84,000) is one piece
    text = "word " * 30_000
    tokens, inexact = encode_in_pieces(encoder, text, None, encoder.cut_is_exact)
    # the piece after the cut starts " word": "▁" + "▁word" where the whole has "▁word"
    assert inexact == 1
    assert 0 < abs(tokens.size - len(tiny.ids(tok, text))) <= 2
    row = {"timestamp": 1_700_000_000, "messages": [{"role": "user", "content": text}]}
    log = tmp_path / "long.jsonl"
    log.write_bytes(orjson.dumps(row) + b"\n")
    stream = _ingest(log, hash_key, path)
    assert stream.seg_tokens.tolist() == [tokens.size]
    assert stream.notes == [
        "1 texts longer than 131,072 characters were tokenized in pieces cut where "
        f"{stream.tokenizer} does not split them on its own, so their token counts may "
        "differ from tokenizing them whole by a token or two per piece"
    ]


def test_special_tokens_text_is_text_and_nothing_is_truncated(tmp_path, hash_key):
    plain = tiny.byte_level_bpe()
    special = Tokenizer.from_str(plain.to_str())
    special.add_special_tokens([tiny.SPECIAL])
    special.enable_truncation(max_length=8)  # a file may ask for this; it must not count
    path = tiny.save(special, tmp_path)
    text = f"{SYSTEM} {tiny.SPECIAL} {SYSTEM}"
    # the special token's text as ordinary text: the tokenizer before it was added
    expected = tiny.ids(plain, text)
    assert len(expected) > 8 and len(tiny.ids(special, text)) == 8
    assert load_tokenizer_file(path).encode_ordinary(text) == expected
    row = {"timestamp": 1_700_000_000, "messages": [{"role": "user", "content": text}]}
    log = tmp_path / "special.jsonl"
    log.write_bytes(orjson.dumps(row) + b"\n")
    stream = _ingest(log, hash_key, path)
    assert stream.seg_tokens.tolist() == [len(expected)]


def test_a_lone_surrogate_is_replaced_as_tiktoken_does(tok, tok_file):
    # a long line's JSON (read by the standard library) may hold "\ud800"
    assert load_tokenizer_file(tok_file).encode_ordinary("a\ud800b") == tiny.ids(tok, "a\ufffdb")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"<html>no JSON</html>", "not a Hugging Face tokenizer.json (expected value at line 1"),
        (b'{"model_type": "llama", "hidden_size": 4096}', "not a Hugging Face tokenizer.json"),
        (b"{}", "not a Hugging Face tokenizer.json"),
    ],
)
def test_a_bad_tokenizer_file_is_refused_by_name(tmp_path, hash_key, content, reason):
    bad = tmp_path / "folder" / "tokenizer.json"
    bad.parent.mkdir()
    bad.write_bytes(content)
    log = _log(tmp_path, _conversations())
    # the user's file that cannot be read: unusable input (not the server's set-up)
    with pytest.raises(UnusableInput, match=r"^tokenizer\.json: ") as caught:
        _ingest(log, hash_key, bad)
    assert reason in str(caught.value)
    assert str(tmp_path) not in str(caught.value)  # the file's name, not the server's path


def test_a_missing_tokenizer_file_is_refused_by_name(tmp_path, hash_key):
    with pytest.raises(UnusableInput, match=r"^tokenizer\.json: no such tokenizer file$"):
        _ingest(_log(tmp_path, _conversations()), hash_key, tmp_path / "tokenizer.json")
