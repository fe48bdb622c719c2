"""manage.py analyze --tokenizer tokenizer.json: the model's own tokenizer counts (#14)."""

from __future__ import annotations

import json

import orjson
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.tokens import load_encoding
from tests.analysis import tiny_tokenizer as tiny

CONVERSATIONS = [
    [("system", "You are a careful assistant."), ("user", f"What does clause {k} say?")]
    for k in range(5)
]


def _log(tmp_path):
    path = tmp_path / "chat.jsonl"
    rows = [{"timestamp": 1_700_000_000 + i,
             "messages": [{"role": r, "content": t} for r, t in messages]}
            for i, messages in enumerate(CONVERSATIONS)]  # fmt: skip
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def test_the_report_counts_and_names_the_tokenizer_json(tmp_path):
    tok = tiny.byte_level_bpe()
    tok_file = tiny.save(tok, tmp_path)
    out = tmp_path / "report.json"
    call_command("analyze", str(_log(tmp_path)), "--json", str(out),
                 "--tokenizer", str(tok_file), "--block-tokens", "4")  # fmt: skip
    report = json.loads(out.read_text())
    # the rendering with the tiny tokenizer, computed here
    assert report["prompt_tokens"] == sum(len(tiny.render(tok, m)) for m in CONVERSATIONS)
    assert report["tokenizer"] == "tokenizer.json (BPE, 400 tokens)"
    assert report["source_format"] == "chat"


def test_without_it_cl100k_base_counts(tmp_path):
    out = tmp_path / "report.json"
    call_command("analyze", str(_log(tmp_path)), "--json", str(out), "--block-tokens", "4")
    report = json.loads(out.read_text())
    assert report["tokenizer"] == "cl100k_base"
    enc = load_encoding("cl100k_base").encode_ordinary
    rendered = sum(len(enc(r + "\n") + enc(t) + enc("\n")) for m in CONVERSATIONS for r, t in m)
    assert report["prompt_tokens"] == rendered


def test_a_bad_tokenizer_json_exits_with_its_name(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"model_type": "llama"}')
    with pytest.raises(CommandError, match=r"^tokenizer\.json: not a Hugging Face tokenizer"):
        call_command("analyze", str(_log(tmp_path)), "--json", str(tmp_path / "r.json"),
                     "--tokenizer", str(bad))  # fmt: skip


def test_an_encoding_and_a_tokenizer_json_are_one_or_the_other(tmp_path):
    tok_file = tiny.save(tiny.byte_level_bpe(), tmp_path)
    with pytest.raises(CommandError, match="not allowed with argument"):
        call_command("analyze", str(_log(tmp_path)), "--json", str(tmp_path / "r.json"),
                     "--tokenizer", str(tok_file), "--encoding", "o200k_base")  # fmt: skip
